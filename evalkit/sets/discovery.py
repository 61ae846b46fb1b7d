"""Find and load set files: by path, by folder, or by set id in the configured set folders.

Every file is parsed, schema-validated and semantically checked before a set record exists;
set ids must be unique across every file loaded together (a duplicate names both files).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from evalkit.config import CONFIG_NAME
from evalkit.errors import Issue, SetError, UnknownNameError
from evalkit.records import AnySet
from evalkit.sets.prompts import assertion_form, build_prompt_set, prompt_set_issues, used_types
from evalkit.sets.questions import build_question_set, question_set_issues
from evalkit.sets.validation import schema_issues
from evalkit.sets.yamldoc import Document, load_document

YAML_SUFFIXES = (".yaml", ".yml")


def set_kind(doc: Document) -> str | None:
    """'prompts' or 'questions' by the top-level key, else None."""
    if not isinstance(doc.data, dict):
        return None
    # rows as prompts: README "Templates, variables, data files and conversations"
    if "prompts" in doc.data or "template" in doc.data or "cases" in doc.data:
        return "prompts"
    if "questions" in doc.data:
        return "questions"
    return None


def check_document(doc: Document) -> tuple[list[Issue], object]:
    """Every issue of a set document, and what the builder needs (compiled assertions)."""
    kind = set_kind(doc)
    if kind is None:
        return [Issue(doc.file, 1, 1, "", "not a set file: expected a top-level prompts: or questions: key")], None
    if kind == "prompts":
        plugin_issues = _plugin_issues(doc)
        broken = {i.path for i in plugin_issues}  # a plugin that failed to load is that error, not an unknown type
        issues = [i for i in schema_issues(kind, doc) if i.path not in broken]
        semantic, compiled = prompt_set_issues(doc, frozenset(i.path for i in issues))
        return _ordered(plugin_issues + issues + semantic), compiled
    issues = schema_issues(kind, doc)
    return _ordered(issues + question_set_issues(doc)), None


def _plugin_issues(doc: Document) -> list[Issue]:
    """Register the plugin assertion types the document uses; one issue per plugin that fails to
    load, at its first use. Entry points are read only when a name is not built in."""
    from evalkit.assertions import registry

    unknown = {name for name in used_types(doc) if registry.get(name) is None}
    if not unknown:
        return []
    errors = registry.from_plugins(unknown)
    issues = []
    data = doc.data if isinstance(doc.data, dict) else {}
    for name, message in errors.items():
        path = _first_use(data, name)
        issues.append(doc.issue(path, message) if path else Issue(doc.file, 1, 1, "", message))
    return issues


def _first_use(data: dict[str, object], name: str) -> tuple[str | int, ...] | None:
    prompts = data.get("prompts")
    for index, prompt in enumerate(prompts if isinstance(prompts, list) else []):
        items = prompt.get("assertions") if isinstance(prompt, dict) else None
        for a_index, item in enumerate(items if isinstance(items, list) else []):
            form = assertion_form(item)
            if form is not None and form[0] == name:
                return ("prompts", index, "assertions", a_index)
    return None


def _ordered(issues: list[Issue]) -> list[Issue]:
    unique = list(dict.fromkeys(issues))
    return sorted(unique, key=lambda i: (i.line, i.col))


def load_set(path: str | Path) -> AnySet:
    """Load one set file (a prompt set or a question set); SetError lists every issue."""
    file = Path(path)
    doc = load_document(file)
    issues, extra = check_document(doc)
    if issues:
        raise SetError(issues)
    if set_kind(doc) == "prompts":
        return build_prompt_set(doc, file, extra)  # type: ignore[arg-type]
    return build_question_set(doc, file)


def holds_rows(doc: Document) -> bool:
    """Whether a YAML file is a list of cases rather than a set written as a bare list of
    prompts or questions (which is "not a set file")."""
    if not isinstance(doc.data, list):
        return False
    return not any(isinstance(row, dict) and ({"prompt", "messages", "question"} & set(row)) for row in doc.data)


def yaml_files(folder: Path) -> list[Path]:
    """Set-file candidates under ``folder``, recursively, sorted; hidden folders and files and
    configs skipped. Linked folders are followed, each real folder once (a link loop ends)."""
    found = []
    seen: set[str] = set()
    for root, dirs, files in os.walk(folder, followlinks=True):
        real = os.path.realpath(root)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.endswith(YAML_SUFFIXES) and name != CONFIG_NAME and not name.startswith("."):
                found.append(Path(root) / name)
    return found


def duplicate_id_issue(path: Path, set_id: str, other: Path) -> Issue:
    """The duplicate-id error, located at the ``id:`` of ``path``."""
    try:
        line, col = load_document(path).position(("id",))
    except SetError:
        line, col = 0, 0
    return Issue(str(path), line, col, "id", f"duplicate set id '{set_id}': also in {other}")


def check_unique_ids(sets: Iterable[AnySet]) -> None:
    """Set ids are unique across every file loaded together."""
    seen: dict[str, AnySet] = {}
    for loaded in sets:
        first = seen.get(loaded.id)
        if first is None or first.path is None or loaded.path is None:
            seen.setdefault(loaded.id, loaded)
            continue
        if first.path.resolve() != loaded.path.resolve():
            raise SetError([duplicate_id_issue(loaded.path, loaded.id, first.path)])
        seen.setdefault(loaded.id, loaded)


def _ids_in(folders: Sequence[Path]) -> tuple[dict[str, list[Path]], list[Issue]]:
    """Set ids found in ``folders`` (parse only), with the files declaring each; and the first
    problem of each file that could not be read (it may hold the id looked for)."""
    ids: dict[str, list[Path]] = {}
    unreadable: list[Issue] = []
    for folder in folders:
        if not folder.is_dir():
            continue
        for file in yaml_files(folder):
            try:
                doc = load_document(file)
            except SetError as exc:
                unreadable.append(exc.issues[0])
                continue
            if set_kind(doc) and isinstance(doc.data.get("id"), str):
                ids.setdefault(doc.data["id"], []).append(file)
    return ids, unreadable


def resolve_sets(targets: Sequence[str], set_dirs: Sequence[Path]) -> list[AnySet]:
    """Load the sets named by files, folders or set ids; ids are looked up in ``set_dirs``."""
    loaded: list[AnySet] = []
    issues: list[Issue] = []
    seen: set[Path] = set()
    for target in targets:
        path = Path(target)
        kind = _path_kind(path)
        if kind == "dir":
            files = yaml_files(path)
            if not files:
                raise UnknownNameError(f"{target}: no set files (*.yaml) in this folder")
        elif kind == "file":
            files = [path]
        else:
            files = [_file_for_id(target, set_dirs)]
        for file in files:
            if file.resolve() in seen:  # named twice (by path and id, or by a folder and a path): once
                continue
            seen.add(file.resolve())
            try:
                loaded.append(load_set(file))
            except SetError as exc:
                # a data file beside its sets (README "Templates, variables, data files and conversations")
                if kind == "dir" and _cases_file(file):
                    continue
                issues.extend(exc.issues)
    if issues:
        raise SetError(issues)
    check_unique_ids(loaded)
    return loaded


def _cases_file(file: Path) -> bool:
    try:
        return holds_rows(load_document(file))
    except SetError:
        return False


def _path_kind(path: Path) -> str | None:
    """'dir', 'file' or None (not a path here: a set id, or a name the file system refuses)."""
    try:
        return "dir" if path.is_dir() else "file" if path.is_file() else None
    except OSError:  # a name too long for the file system is no file of ours
        return None


def _file_for_id(set_id: str, set_dirs: Sequence[Path]) -> Path:
    ids, unreadable = _ids_in(set_dirs)
    files = ids.get(set_id)
    if not files:
        where = ", ".join(str(d) for d in set_dirs)
        available = ", ".join(sorted(ids)) or "none"
        hint = ""
        if unreadable:  # the set may be in a file that does not parse: say where, not just "unknown"
            more = f" (and {len(unreadable) - 1} more unreadable)" if len(unreadable) > 1 else ""
            hint = f"; a file there could not be read, and may hold it: {unreadable[0]}{more}"
        raise UnknownNameError(
            f"'{set_id}' is neither a file, a folder nor a set id in {where} (available ids: {available}){hint}"
        )
    if len(files) > 1:
        raise SetError([duplicate_id_issue(files[1], set_id, files[0])])
    return files[0]
