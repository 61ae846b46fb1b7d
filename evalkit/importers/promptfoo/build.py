"""The import itself: read the config, convert every test for every prompt, write and check the sets."""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evalkit.errors import InputError, Issue, SetError
from evalkit.importers.promptfoo.config import PromptSpec, read_prompts, read_providers
from evalkit.importers.promptfoo.convert import SetDraft, convert_test
from evalkit.importers.promptfoo.report import ImportReport, WrittenSet
from evalkit.importers.promptfoo.source import FOLDERS, Folders, Loc, read_yaml, shown
from evalkit.importers.promptfoo.tests import TestCase, Unsupported, default_test, merged, read_tests
from evalkit.importers.yamlout import Commented, dump

SET_ID = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)*\Z")
_IGNORED = frozenset(("description", "outputPath", "sharing", "writeLatestResults", "tags", "metadata", "tracing",
                      "commandLineOptions", "evaluateOptions", "$schema"))  # fmt: skip
_TOP_LEVEL = {
    "scenarios": "write each scenario's combinations as tests (or rows of a CSV file)",
    "redteam": "red-team generation has no evalkit equivalent",
    "extensions": "hooks are not run; evalkit has none",
    "nunjucksFilters": "custom filters: the templates using them are listed where they are used",
    "derivedMetrics": "evalkit reports pass rate and mean score; compute others from evalkit run --format json",
    "env": "set these environment variables yourself (their values are not copied)",
}
_TEMPLATE_START = re.compile(r"\{[{%#]")


class ImportBug(RuntimeError):
    """A set the importer wrote does not load as intended: a bug in evalkit, to report."""


class NothingToImport(InputError):
    """No test converts: no set is written. ``report`` says why, test by test."""

    def __init__(self, report: ImportReport) -> None:
        super().__init__(
            f"nothing to write: none of the {report.tests} test{'s' if report.tests != 1 else ''} of {report.config} "
            "converts (see the list above)"
        )
        self.report = report


def import_promptfoo(
    config: Path, out: Path, set_id: str | None = None, force: bool = False, allow_outside: Sequence[Path] = ()
) -> ImportReport:
    """Convert ``config`` into set files in ``out``; InputError (exit 2) for bad input. Files are
    read from the config's folder and the ``allow_outside`` folders only."""
    if set_id is not None and not SET_ID.match(set_id):
        raise InputError(f"--id {set_id!r} is not a set id: lowercase letters, digits and _ in dot-separated parts")
    token = FOLDERS.set(Folders(config.parent, tuple(allow_outside)))
    try:
        return _import(config, out, set_id, force)
    finally:
        FOLDERS.reset(token)


def _import(config: Path, out: Path, set_id: str | None, force: bool) -> ImportReport:
    doc = read_yaml(config)
    loc = Loc(shown(config), doc)
    data = _config_data(doc.data, loc)
    base = config.parent
    report = ImportReport(config=shown(config))
    _top_level(data, loc, report)
    specs = read_prompts(data["prompts"], loc.at("prompts"), base, report)
    read_providers(data.get("providers", data.get("targets")), loc.at("providers" if "providers" in data else "targets"),
                   base, out, report)  # fmt: skip
    default = default_test(data.get("defaultTest"), loc.at("defaultTest"), base)
    skipped: list[Unsupported] = []
    tests = read_tests(data.get("tests"), loc.at("tests"), base, skipped)
    for source in skipped:
        report.add("not_converted", source.loc, source.what, source.hint)
    if not tests and not skipped and data.get("scenarios") is None:
        tests = [TestCase({}, loc, [], "test-1")]  # promptfoo runs the prompts once, with defaultTest
    drafts = [SetDraft(spec) for spec in specs]
    assertions: dict[str, bool] = {}  # by where each is written (a defaultTest one once): converted everywhere?
    types: dict[str, str] = {}
    for test in tests:
        outcome = convert_test(merged(test, default), drafts, base, out, report)
        report.tests += 1
        report.tests_converted += outcome.written > 0
        report.tests_partly += outcome.written > 0 and (outcome.partly or outcome.failed)
        for key, converted in outcome.assertions.items():
            assertions[key] = assertions.get(key, True) and converted
        types.update(outcome.types)
    report.assertions = len(assertions)
    report.assertions_converted = sum(assertions.values())
    report.dropped = Counter(types[key] for key, converted in assertions.items() if not converted)
    written = [d for d in drafts if d.entries]
    if not written:
        raise NothingToImport(report)
    ids = _set_ids(set_id or _base_id(config, data), [d.spec for d in drafts])  # stable whichever prompts convert
    files = {
        out / f"{ident}.yaml": _document(ident, draft, data, report, out)
        for ident, draft in zip(ids, drafts, strict=True)
        if draft.entries
    }
    _refuse_overwrite(report.files, force)
    report.sets = _write(files, force)
    for path, text in report.files.items():
        path.write_text(text, encoding="utf-8")
    return report


def _config_data(data: Any, loc: Loc) -> Mapping[str, Any]:
    hint = "expected a promptfoo config: a mapping with prompts:, providers: and tests:"
    if not isinstance(data, Mapping):
        raise SetError([Issue(loc.file, 1, 1, "", f"not a promptfoo config: {hint}")])
    if not {"prompts", "providers", "targets", "tests"} & set(data):
        raise SetError(
            [Issue(loc.file, 1, 1, "", f"not a promptfoo config: no prompts:, providers: or tests: ({hint})")]
        )
    if "prompts" not in data:
        raise SetError(
            [Issue(loc.file, 1, 1, "", "no prompts: promptfoo needs the prompts to send, and so does evalkit")]
        )
    return data


def _top_level(data: Mapping[str, Any], loc: Loc, report: ImportReport) -> None:
    known = _IGNORED | set(_TOP_LEVEL) | {"prompts", "providers", "targets", "tests", "defaultTest"}
    for key in data:
        if key in _TOP_LEVEL:
            report.add("not_converted", loc.key_of(key), key, _TOP_LEVEL[key])
        elif key not in known:
            report.add("not_converted", loc.key_of(key), key, "not a promptfoo config key")
    repeat = (
        (data.get("evaluateOptions") or {}).get("repeat") if isinstance(data.get("evaluateOptions"), Mapping) else None
    )
    if repeat is not None:
        report.add(
            "not_converted",
            loc.key_of("evaluateOptions", "repeat"),
            "evaluateOptions.repeat",
            "use evalkit run --repeat N",
        )


def _base_id(config: Path, data: Mapping[str, Any]) -> str:
    name = config.resolve().parent.name if config.stem.startswith("promptfooconfig") else config.stem
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "promptfoo"


def _set_ids(base: str, specs: list[PromptSpec]) -> list[str]:
    if len(specs) == 1:
        return [base]
    ids, used = [], set()
    for spec in specs:
        ident, n = f"{base}.{spec.name}", 2
        while ident in used:
            ident, n = f"{base}.{spec.name}_{n}", n + 1
        used.add(ident)
        ids.append(ident)
    return ids


def literal(value: Any) -> Any:
    """``value`` with every ``{{``, ``{%`` and ``{#`` written so evalkit's template rendering
    (README "Templates, variables, data files and conversations") gives the text back as it is."""
    if isinstance(value, str):
        return _TEMPLATE_START.sub(lambda m: "{{ '" + m.group() + "' }}", value)
    if isinstance(value, list):
        return [literal(v) for v in value]
    if isinstance(value, Commented):
        return Commented(literal(value.value), value.comment)
    if isinstance(value, Mapping):
        return {k: literal(v) for k, v in value.items()}
    return value


def _literal_entry(entry: Commented) -> Commented:
    fields = dict(entry.value)
    for key in ("prompt", "system", "messages", "assertions"):
        if key in fields:
            fields[key] = literal(fields[key])
    return Commented(fields, entry.comment)


def _document(
    ident: str, draft: SetDraft, data: Mapping[str, Any], report: ImportReport, out: Path
) -> tuple[str, list[dict[str, Any]]]:
    """The set file's text, and the prompts as intended (to check the loaded set against)."""
    description = data.get("description") if isinstance(data.get("description"), str) else None
    document: dict[str, Any] = {
        "id": ident,
        "name": f"{description or report.config} ({draft.spec.name})",
        "description": f"Imported from promptfoo: {report.config}, prompt {draft.spec.name} ({draft.spec.loc}).",
    }
    if report.params:
        document["params"] = dict(report.params)
    if report.tools:
        document["tools"] = report.tools
    document["prompts"] = [_literal_entry(e) for e in draft.entries]
    header = [
        *_schema_hint(out),
        f"Imported by: evalkit import promptfoo {report.config}",
        "Re-run the import after changing the promptfoo config.",
    ]
    return dump(document, header=header), [e.value for e in draft.entries]


def _schema_hint(out: Path) -> list[str]:
    """The editor hint of ``evalkit init``'s schemas (.evalkit/schemas/), when a project has them."""
    folder = out.resolve()
    for parent in (folder, *folder.parents):
        schema = parent / ".evalkit" / "schemas" / "prompt-set.schema.json"
        if schema.is_file():
            return [f"yaml-language-server: $schema={Path(os.path.relpath(schema, folder)).as_posix()}"]
    return []


def _refuse_overwrite(files: Mapping[Path, str], force: bool) -> None:
    for path, text in files.items():
        if path.is_file() and path.read_text(encoding="utf-8") != text and not force:
            raise InputError(f"{shown(path)} exists and differs from the import; pass --force to overwrite it")


def _write(files: dict[Path, tuple[str, list[dict[str, Any]]]], force: bool) -> list[WrittenSet]:
    """Write every file (none when one would overwrite a different file without ``force``), then
    load each with evalkit's set loader; a refusal restores what was there and is a bug."""
    previous: dict[Path, str | None] = {}
    for path, (text, _) in files.items():
        old = path.read_text(encoding="utf-8") if path.is_file() else None
        if old is not None and old != text and not force:
            raise InputError(f"{shown(path)} exists and differs from the import; pass --force to overwrite it")
        previous[path] = old
    for path, (text, _) in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    try:
        return [_check(path, intended, previous[path] == text) for path, (text, intended) in files.items()]
    except (SetError, ImportBug):
        for path, old in previous.items():
            if old is None:
                path.unlink(missing_ok=True)
            else:
                path.write_text(old, encoding="utf-8")
        raise


def _check(path: Path, intended: list[dict[str, Any]], unchanged: bool) -> WrittenSet:
    from evalkit.records import PromptSet
    from evalkit.sets import load_set

    try:
        loaded = load_set(path)
    except SetError as exc:
        raise ImportBug(f"the set written to {shown(path)} does not load ({exc}); please report this bug") from None
    assert isinstance(loaded, PromptSet)
    for prompt, entry in zip(loaded.prompts, intended, strict=True):
        turns = [(m.role, m.content) for m in prompt.messages] if prompt.messages else None
        wanted = [(m["role"], m["content"]) for m in entry["messages"]] if "messages" in entry else None
        text_differs = wanted is None and (prompt.prompt, prompt.system) != (entry["prompt"], entry.get("system"))
        if prompt.id != entry["id"] or turns != wanted or text_differs:
            raise ImportBug(
                f"{shown(path)}: prompt {entry['id']!r} loads as other text than imported; please report this bug"
            )
        if len(prompt.assertions) != len(entry["assertions"]):
            raise ImportBug(
                f"{shown(path)}: prompt {entry['id']!r} loads with other assertions; please report this bug"
            )
    return WrittenSet(path, loaded.id, len(loaded.prompts), unchanged)
