"""promptfoo's test cases: inline, from files (CSV, JSON, JSONL, YAML, globs), and defaultTest.

Files are read as promptfoo's readTests reads them: a ``.yaml``/``.json``/``.jsonl`` file listed
in ``tests`` holds test cases; a CSV file (and a YAML file given as ``{path: ...}``) holds rows,
whose ``__expected``/``__expected1``... columns are assertion shorthands (``contains: x``,
``icontains:``, ``regex:``, ``not-``..., ``levenshtein(3): x``; no known prefix: equals),
``__description``, ``__prefix``, ``__suffix``, ``__metric``, ``__threshold`` and
``__config:__expectedN:threshold`` set the rest, and every other column is a var.
Test-level ``vars`` naming files (``vars: file://vars.yaml``) are read and merged.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.importers.promptfoo.source import (
    JS_EXTENSIONS,
    Loc,
    expand,
    file_reference,
    read_csv,
    read_jsonl,
    read_yaml,
    shown,
    split_function,
)

TEST_KEYS = ("assert", "vars", "options", "metadata", "provider", "providerOutput", "threshold")
_PROMPTFOO_TYPES = (  # promptfoo's BaseAssertionTypesSchema
    "agent-rubric", "answer-relevance", "bleu", "classifier", "contains", "contains-all", "contains-any",
    "contains-html", "contains-json", "contains-sql", "contains-xml", "context-faithfulness", "context-recall",
    "context-relevance", "conversation-relevance", "cost", "equals", "factuality", "finish-reason", "g-eval", "gleu",
    "guardrails", "icontains", "icontains-all", "icontains-any", "is-html", "is-json", "is-refusal", "is-sql",
    "is-valid-function-call", "is-valid-openai-function-call", "is-valid-openai-tools-call", "is-xml", "javascript",
    "latency", "levenshtein", "llm-rubric", "pi", "meteor", "model-graded-closedqa", "model-graded-factuality",
    "moderation", "perplexity", "perplexity-score", "python", "regex", "rouge-n", "ruby", "similar",
    "similar:cosine", "similar:dot", "similar:euclidean", "starts-with", "tool-call-f1", "skill-used",
    "trajectory:goal-success", "trajectory:tool-args-match", "trajectory:step-count", "trajectory:tool-sequence",
    "trajectory:tool-used", "trace-error-spans", "trace-span-count", "trace-span-duration", "search-rubric",
    "webhook", "word-count",
)  # fmt: skip
_SHORTHAND = re.compile(
    rf"^(not-)?({'|'.join(re.escape(t) for t in _PROMPTFOO_TYPES)})(?:\((\d+(?:\.\d+)?)\))?(?::([\s\S]*))?$"
)
_THRESHOLD_DEFAULT = frozenset(
    ("answer-relevance", "classifier", "context-faithfulness", "context-recall", "context-relevance", "cost",
     "latency", "levenshtein", "perplexity-score", "perplexity", "rouge-n", "similar", "starts-with")
)  # fmt: skip
_FINITE = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$")


@dataclass
class Assertion:
    value: Any  # the assertion mapping as promptfoo has it
    loc: Loc
    label: str = ""  # the CSV column it came from


@dataclass
class TestCase:
    data: dict[str, Any]  # the test as promptfoo has it, its assertions apart
    loc: Loc
    asserts: list[Assertion] = field(default_factory=list)
    default_id: str = ""  # the id when it has no description: test-N, or <file>-N for a file's rows
    from_default: int = 0  # how many of ``asserts`` come from defaultTest
    vars_from_file_url: bool = False  # ``vars: file://...``: read as documented (promptfoo 0.121 reads nothing)
    inherited: dict[str, Loc] = field(default_factory=dict)  # "options.X", "threshold"...: where defaultTest set it


class Unsupported(Exception):
    """A test source evalkit does not read (a script, a spreadsheet, a remote dataset)."""

    def __init__(self, loc: Loc, what: str, hint: str) -> None:
        super().__init__(what)
        self.loc, self.what, self.hint = loc, what, hint


def read_tests(value: Any, loc: Loc, base: Path, skipped: list[Unsupported]) -> list[TestCase]:
    """Every test case ``tests:`` names, in promptfoo's order; sources evalkit cannot read are
    appended to ``skipped``."""
    if value is None:
        return []
    entries: list[tuple[Any, Loc]] = (
        list(zip(value, (loc.at(i) for i in range(len(value))), strict=True))
        if isinstance(value, list)
        else [(value, loc)]
    )
    cases: list[TestCase] = []
    for entry, where in entries:
        try:
            cases.extend(_read_entry(entry, where, base, top=not isinstance(value, list)))
        except Unsupported as exc:
            skipped.append(exc)
    for number, case in enumerate(cases, start=1):
        case.default_id = case.default_id or f"test-{number}"
    return cases


def _read_entry(entry: Any, where: Loc, base: Path, top: bool) -> list[TestCase]:
    if isinstance(entry, str):
        reference = file_reference(entry)
        _refuse_remote(reference, where)
        path_part = reference.split("#")[0]
        if top and reference.endswith((".yaml", ".yml")):
            return _glob(reference, where, base)
        if top or path_part.endswith((*JS_EXTENSIONS, ".py", ".xlsx", ".xls")) or ":" in reference:
            return _standalone(reference, where, base)
        return _glob(reference, where, base)
    if (
        isinstance(entry, Mapping)
        and isinstance(entry.get("path"), str)
        and "vars" not in entry
        and "assert" not in entry
    ):
        return _standalone(file_reference(entry["path"]), where.at("path"), base)
    if isinstance(entry, Mapping):
        return [test_case(entry, where, base)]
    raise where.error("a test must be a mapping or a file path")


def _refuse_remote(reference: str, where: Loc) -> None:
    if re.match(r"^[a-z][a-z0-9+.-]*://", reference):
        raise Unsupported(
            where, f"tests from {reference.partition('://')[0]}://", "download the rows into a CSV or JSONL file"
        )


def _refuse_script(path: Path, where: Loc) -> None:
    if path.suffix in (*JS_EXTENSIONS, ".py"):
        raise Unsupported(where, "tests generated by code", f"write the tests {path.name} makes to a JSONL file")
    if path.suffix in (".xlsx", ".xls"):
        raise Unsupported(where, "tests from a spreadsheet", f"save {path.name} as CSV")


def _glob(pattern: str, where: Loc, base: Path) -> list[TestCase]:
    """promptfoo's loadTestsFromGlob: CSV rows, or files of test cases."""
    cases: list[TestCase] = []
    for path in expand(base, pattern.partition("#")[0] if pattern.endswith((".xlsx", ".xls")) else pattern, where):
        _refuse_script(path, where)
        if path.suffix == ".csv":
            cases.extend(_rows(read_csv(path, where), path))
            continue
        if path.suffix in (".yaml", ".yml", ".json"):
            found = _cases_in_document(path, where)
        elif path.suffix == ".jsonl":
            found = [test_case(row.data, row.loc, path.parent) for row in read_jsonl(path, where)]
        else:
            raise where.error(f"unsupported test file {shown(path)} (promptfoo reads .csv, .json, .jsonl, .yaml)")
        cases.extend(_numbered(found, path))
    return cases


def _numbered(cases: list[TestCase], path: Path) -> list[TestCase]:
    """A file's test cases, named ``<file>-N`` when they have no description."""
    for number, case in enumerate(cases, start=1):
        case.default_id = f"{_stem(path)}-{number}"
    return cases


def _cases_in_document(path: Path, where: Loc) -> list[TestCase]:
    doc = read_yaml(path)
    top = Loc(shown(path), doc)
    items = doc.data if isinstance(doc.data, list) else [doc.data] if isinstance(doc.data, Mapping) else None
    if items is None:
        raise top.error("a tests file holds a list of test cases")
    locs = [top.at(i) for i in range(len(items))] if isinstance(doc.data, list) else [top]
    return [test_case(item, loc, path.parent) for item, loc in zip(items, locs, strict=True)]


def _standalone(reference: str, where: Loc, base: Path) -> list[TestCase]:
    """promptfoo's readStandaloneTestsFile: CSV and YAML rows, JSON and JSONL test cases."""
    path = base / split_function(reference)[0].split("#")[0]
    _refuse_script(path, where)
    if path.suffix == ".csv":
        return list(_rows(read_csv(expand(base, reference, where)[0], where), path))
    if path.suffix in (".yaml", ".yml"):
        doc = read_yaml(expand(base, reference, where)[0])
        top = Loc(shown(path), doc)
        rows = doc.data if isinstance(doc.data, list) else None
        if rows is None:
            raise top.error("a rows file holds a list of rows")
        return list(_rows([_Row(row, top.at(i)) for i, row in enumerate(rows)], path))
    if path.suffix == ".json":
        cases = _cases_in_document(expand(base, reference, where)[0], where)
    elif path.suffix == ".jsonl":
        cases = [
            test_case(row.data, row.loc, path.parent) for row in read_jsonl(expand(base, reference, where)[0], where)
        ]
    else:
        raise where.error(f"unsupported test file {reference!r} (promptfoo reads .csv, .json, .jsonl, .yaml)")
    return _numbered(cases, path)


@dataclass
class _Row:
    data: Any
    loc: Loc


def _stem(path: Path) -> str:
    return re.sub(r"[^a-z0-9]+", "-", path.stem.lower()).strip("-") or "row"


def _rows(rows: Any, path: Path) -> Iterator[TestCase]:
    for number, row in enumerate(rows, start=1):
        if not isinstance(row.data, Mapping):
            raise row.loc.error("a row must be a mapping of column names to values")
        case = row_case(row.data, row.loc)
        case.default_id = f"{_stem(path)}-{number}"
        yield case


def row_case(row: Mapping[str, Any], loc: Loc) -> TestCase:
    """promptfoo's testCaseFromCsvRow."""
    parts = _RowParts({"vars": {}, "options": {}})
    for raw_key, raw_value in row.items():
        key = str(raw_key).strip()
        value = raw_value if isinstance(raw_value, str) else "" if raw_value is None else str(raw_value)
        if not _special_column(key, value, loc, parts) and not key.startswith("__metadata"):
            parts.data["vars"][key] = raw_value
    for index, assertion in enumerate(parts.asserts):
        assertion.value["metric"] = parts.metric
        if index in parts.configs:
            assertion.value["threshold"] = parts.configs[index]
    return TestCase(parts.data, loc, parts.asserts)


@dataclass
class _RowParts:
    """A CSV row's test case as its columns are read: the case's data, its assertions (from the
    ``__expected`` columns), their metric and their thresholds by index (``__config:`` columns)."""

    data: dict[str, Any]
    asserts: list[Assertion] = field(default_factory=list)
    configs: dict[int, float] = field(default_factory=dict)
    metric: str | None = None


def _special_column(key: str, value: str, loc: Loc, parts: _RowParts) -> bool:
    """Reads one of promptfoo's special columns into ``parts``; False when ``key`` is none of them."""
    if key.startswith("__expected"):
        if value.strip():
            parts.asserts.append(Assertion(shorthand(value.strip()), loc, key))
    elif key in ("__prefix", "__suffix"):
        parts.data["options"][key[2:]] = value
    elif key == "__description":
        parts.data["description"] = value
    elif key == "__providerOutput":
        parts.data["providerOutput"] = value
    elif key == "__metric":
        parts.metric = value
    elif key == "__threshold":
        if _FINITE.match(value.strip()):
            parts.data["threshold"] = float(value)
    elif key.startswith("__config:"):
        found = re.fullmatch(r"__config:__expected(\d*):threshold", key)
        if found is None or found.group(1) == "0" or not _FINITE.match(value.strip()):
            raise loc.error(f"column {key!r}: use __config:__expected<N>:threshold with a number")
        parts.configs[int(found.group(1) or 1) - 1] = float(value)
    else:
        return False
    return True


def shorthand(text: str) -> dict[str, Any]:
    """promptfoo's assertionFromString: a CSV cell as an assertion."""
    for prefix, kind in (("javascript:", "javascript"), ("fn:", "javascript"), ("eval:", "javascript")):
        if text.startswith(prefix):
            return {"type": kind, "value": text[len(prefix) :].strip()}
    if text.startswith("file://") and text[7:].partition(":")[0].endswith(JS_EXTENSIONS):
        return {"type": "javascript", "value": text}
    for prefix in ("grade:", "llm-rubric:"):
        if text.startswith(prefix):
            return {"type": "llm-rubric", "value": text[len(prefix) :]}
    if text.startswith("python:") or (text.startswith("file://") and (text.endswith(".py") or ".py:" in text)):
        return {"type": "python", "value": text[7:].strip()}
    found = _SHORTHAND.match(text)
    if found is None:
        return {"type": "equals", "value": text}
    negated, kind, threshold, value = found.groups()
    full = f"not-{kind}" if negated else kind
    if kind in ("contains-all", "contains-any", "icontains-all", "icontains-any", "contains-json", "is-json"):
        return {"type": full, "value": value}  # lists are split when converted, as promptfoo's check does
    out: dict[str, Any] = {"type": full, "value": value.strip() if value is not None else None}
    if kind in _THRESHOLD_DEFAULT:
        out["threshold"] = float(threshold) if threshold is not None else 0.75
    return out


def test_case(entry: Any, where: Loc, base: Path) -> TestCase:
    """An inline test (or one from a tests file) with its vars files read."""
    if not isinstance(entry, Mapping):
        raise where.error("a test case must be a mapping (vars:, assert:, ...)")
    data = {k: v for k, v in entry.items() if k != "assert"}
    from_url = False
    if isinstance(data.get("vars"), str | list):
        from_url = any(isinstance(v, str) and v.startswith("file://") for v in _as_list(data["vars"]))
        data["vars"] = _vars_files(data["vars"], where.at("vars"), base)
    if "vars" in data and not isinstance(data["vars"], Mapping):
        raise where.at("vars").error("vars must be a mapping of names to values")
    raw = entry.get("assert")
    if raw is not None and not isinstance(raw, list):
        raise where.at("assert").error("assert must be a list of assertions")
    if not any(k in entry for k in TEST_KEYS):
        raise where.error(f"a test case needs one of {', '.join(TEST_KEYS)}")
    asserts = [Assertion(a, where.at("assert", i)) for i, a in enumerate(raw or [])]
    return TestCase(data, where, asserts, vars_from_file_url=from_url)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _vars_files(value: str | list[Any], where: Loc, base: Path) -> dict[str, Any]:
    """promptfoo's readTestFiles: YAML files of vars, merged in order."""
    merged: dict[str, Any] = {}
    for pattern in [value] if isinstance(value, str) else value:
        if not isinstance(pattern, str):
            raise where.error("vars files are named by paths")
        for path in expand(base, file_reference(pattern), where):
            data = read_yaml(path).data
            if isinstance(data, Mapping):
                merged.update(data)
    return merged


def default_test(value: Any, loc: Loc, base: Path) -> TestCase | None:
    if value is None:
        return None
    if isinstance(value, str):
        path = expand(base, file_reference(value), loc)[0]
        doc = read_yaml(path)
        return _default(doc.data, Loc(shown(path), doc), path.parent)
    return _default(value, loc, base)


def _default(value: Any, loc: Loc, base: Path) -> TestCase:
    if not isinstance(value, Mapping):
        raise loc.error("defaultTest must be a mapping (vars:, assert:, options:, ...)")
    data = {k: v for k, v in value.items() if k != "assert"}
    if isinstance(data.get("vars"), str | list):
        data["vars"] = _vars_files(data["vars"], loc.at("vars"), base)
    raw = value.get("assert")
    if raw is not None and not isinstance(raw, list):
        raise loc.at("assert").error("assert must be a list of assertions")
    return TestCase(data, loc, [Assertion(a, loc.at("assert", i)) for i, a in enumerate(raw or [])])


def merged(test: TestCase, default: TestCase | None) -> TestCase:
    """The test as promptfoo runs it: defaultTest's vars, assertions, options and threshold merged in."""
    if default is None:
        return test
    data = dict(test.data)
    data["vars"] = {**dict(default.data.get("vars") or {}), **dict(test.data.get("vars") or {})}
    data["options"] = {**dict(default.data.get("options") or {}), **dict(test.data.get("options") or {})}
    if data.get("threshold") is None and default.data.get("threshold") is not None:
        data["threshold"] = default.data["threshold"]
    for key in ("prompts", "provider", "providers"):
        if data.get(key) is None and default.data.get(key) is not None:
            data[key] = default.data[key]
    origins = {f"options.{k}": default.loc.key_of("options", k) for k in default.data.get("options") or {}
               if k not in (test.data.get("options") or {})}  # fmt: skip
    origins.update({k: default.loc.key_of(k) for k in ("threshold", "prompts", "provider", "providers")
                    if test.data.get(k) is None and default.data.get(k) is not None})  # fmt: skip
    inherited = [] if data["options"].get("disableDefaultAsserts") is True else default.asserts
    return TestCase(data, test.loc, [*inherited, *test.asserts], test.default_id, len(inherited),
                    test.vars_from_file_url, origins)  # fmt: skip
