"""Data files of cases (README "Templates, variables, data files and conversations"): the rows a set's ``template`` is made into prompts for.

A cases file is CSV with a header (read with the csv module, UTF-8 with or without a BOM),
JSON Lines (one object per line) or a YAML list of mappings (positions from the node graph).
Each row's columns are its variables; ``id`` is required and unique; a row may add
``critical`` and ``threshold`` (in CSV written ``true``/``false`` and as numbers) and, in JSONL
and YAML, ``assertions`` (a list, appended to the template's). The checks here are the cheap
per-row ones, never a JSON Schema per row; every problem names the data file and the row's
line (and column where known). What the rows render to is checked where they become prompts.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

from evalkit.assertions.judged import MODEL_GRADED
from evalkit.errors import Issue, SetError
from evalkit.jsonl import json_lines
from evalkit.sets.validation import describe, suggest
from evalkit.sets.yamldoc import DataPath, Document, format_path, load_document

CASE_SUFFIXES = {".csv": "CSV", ".jsonl": "JSONL", ".yaml": "YAML", ".yml": "YAML"}
ROW_KEYS = ("id", "assertions", "critical", "threshold")  # what a row sets besides its variables
LONG_FORM_KEYS = frozenset({"type", "value", "weight", "threshold", "min", "provider"})
# a model-graded assertion's long form may set these beside its value (README "Model-graded assertions")
VALUE_KEYS = ("threshold", "min", "provider")
MAX_ROW_ISSUES = 50  # distinct problems listed per data file; the rest are counted


def assertion_form(item: Any) -> tuple[Any, Any, Any, tuple[str, ...]] | None:
    """(type, value, weight, path to the value within the item) of either form, or None when
    the item is neither (the schema says why)."""
    if not isinstance(item, dict):
        return None
    if "type" in item:
        value = item.get("value")
        beside = {key: item[key] for key in VALUE_KEYS if key in item}
        # {type: rubric, value: ..., threshold: 0.8} is rubric: {value: ..., threshold: 0.8}
        if beside and str(item.get("type")).removeprefix("not_") in MODEL_GRADED:
            value = {"value": value, **beside}
        return item.get("type"), value, item.get("weight", 1), ("value",)
    if len(item) != 1:
        return None
    kind, value = next(iter(item.items()))
    return kind, value, 1, (kind,)


class Case(NamedTuple):
    """One row: its id, its variables (every column but ``assertions``) and what it adds
    (a NamedTuple: a 100,000-row file makes as many, and a frozen dataclass costs more)."""

    id: str
    row: int  # its position among the file's rows, 0-based
    line: int
    vars: dict[str, Any]
    assertions: tuple[Any, ...] = ()
    critical: bool | None = None
    threshold: float | None = None


@dataclass(slots=True)
class CaseFile:
    """A read cases file: its good rows, and an issue for each bad one."""

    path: Path
    display: str  # the file as issues name it
    kind: str  # CSV, JSONL or YAML
    cases: list[Case] = field(default_factory=list)
    issues: list[Issue] = field(default_factory=list)
    header: tuple[str, ...] = ()  # CSV
    text: str = ""  # CSV and JSONL, for columns of the rows an issue is about
    doc: Document | None = None  # YAML
    _lines: list[str] | None = None

    def position(self, line: int, index: int, path: DataPath = ()) -> tuple[int, int]:
        """(line, col) of ``path`` (a column, or inside a row's assertions) in a row; col 1 when
        the column cannot be told (a CSV row over several lines)."""
        if self.doc is not None:
            return self.doc.position((index, *path))
        if not path:
            return line, 1
        if self._lines is None:
            self._lines = io.StringIO(self.text, newline="").readlines()
        text = self._lines[line - 1] if 0 < line <= len(self._lines) else ""
        if self.kind == "JSONL":
            found = text.find(f'"{path[0]}"')
            return line, found + 1 if found >= 0 else 1
        if path[0] in self.header:
            starts = _csv_starts(text)
            column = self.header.index(str(path[0]))
            return line, starts[column] if column < len(starts) else 1
        return line, 1

    def issue(self, line: int, index: int, path: DataPath, message: str) -> Issue:
        at_line, col = self.position(line, index, path)
        return Issue(self.display, at_line, col, format_path(path), message)


def read_cases(path: Path, display: str | None = None, doc: Document | None = None) -> CaseFile:
    """Read every row of a cases file (``doc``: the YAML file already parsed); SetError when the
    file as a whole cannot be read."""
    kind = CASE_SUFFIXES.get(path.suffix.lower())
    shown = display or str(path)
    if kind is None:
        raise SetError([Issue(shown, 0, 0, "", f"not a cases file: expected {_suffixes()}")])
    if kind == "YAML":
        doc = doc or load_document(path, shown)
        found = CaseFile(path, shown, kind, doc=doc)
        _yaml_rows(found, doc)
    else:
        found = CaseFile(path, shown, kind, text=_text(path, shown))
        (_csv_rows if kind == "CSV" else _jsonl_rows)(found)
    if not found.cases and not found.issues:
        found.issues.append(Issue(shown, 1, 1, "", "has no rows; add at least one (each row becomes a prompt)"))
    return found


def _suffixes() -> str:
    return ", ".join(CASE_SUFFIXES)


def _text(path: Path, shown: str) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise SetError([Issue(shown, 0, 0, "", "file not found; check the path")]) from None
    except OSError as exc:
        raise SetError([Issue(shown, 0, 0, "", f"cannot read: {exc.strerror}")]) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        col = len(before[before.rfind(b"\n") + 1 :].decode("utf-8", "replace")) + 1
        message = f"not UTF-8 text ({exc.reason}); save the file as UTF-8"
        raise SetError([Issue(shown, before.count(b"\n") + 1, col, "", message)]) from None


def _records(found: CaseFile) -> Iterator[tuple[int, list[str]]]:
    """(first line, fields) of each non-blank CSV record; a record may span lines (quoted)."""
    # strict: an unclosed quote is an error, not a cell holding the rest of the file
    reader = csv.reader(io.StringIO(found.text, newline=""), strict=True)
    before = 0
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:  # the row starting after the last one read
            message = f"not readable as CSV: {exc}; check the quotes of this row"
            found.issues.append(Issue(found.display, before + 1, 1, "", message))
            return
        start, before = before + 1, reader.line_num
        if fields:
            yield start, fields


def _csv_rows(found: CaseFile) -> None:
    records = _records(found)
    first = next(records, None)
    if first is None:
        return
    header_line, names = first
    header = tuple(name.strip() for name in names)
    problem = _header_problem(header)
    if problem:
        found.issues.append(Issue(found.display, header_line, 1, "", problem))
        return
    found.header = header
    width = len(header)
    seen: dict[str, int] = {}
    for index, (line, fields) in enumerate(records):
        if len(fields) != width:
            found.issues.append(
                Issue(
                    found.display,
                    line,
                    1,
                    "",
                    f"has {len(fields)} value{'s' if len(fields) != 1 else ''}, the header has {width} "
                    "columns; quote a value that holds a comma",
                )
            )
            continue
        values = dict(zip(header, fields, strict=True))
        critical, threshold = values.get("critical", ""), values.get("threshold", "")
        if not critical and not threshold:  # the usual row: nothing to parse
            _add(found, seen, values, at=(index, line))
            continue
        flag, flag_ok = _csv_flag(critical)
        number, number_ok = _csv_number(threshold)
        if flag_ok and number_ok:
            _add(found, seen, values, at=(index, line), critical=flag, threshold=number)
            continue
        if not flag_ok:
            found.issues.append(found.issue(line, index, ("critical",), f"expected true or false, got {critical!r}"))
        if not number_ok:
            found.issues.append(
                found.issue(line, index, ("threshold",), f"expected a number in 0..1, got {threshold!r}")
            )
        _add(found, seen, values, at=(index, line), ok=False)


def _csv_flag(text: str) -> tuple[bool | None, bool]:
    """(the value, whether it reads as one): empty is unset; true and false in any case."""
    word = text.strip().lower()
    if not word:
        return None, True
    return word == "true", word in ("true", "false")


def _csv_number(text: str) -> tuple[float | None, bool]:
    if not text.strip():
        return None, True
    try:
        number = float(text)
    except ValueError:
        return None, False
    return number, math.isfinite(number) and 0 <= number <= 1


def _header_problem(header: tuple[str, ...]) -> str | None:
    for position, name in enumerate(header, start=1):
        if not name:
            return f"column {position} of the header has no name; name it or remove the extra comma"
    repeated = next((name for name in header if header.count(name) > 1), None)
    if repeated is not None:
        return f"column {repeated!r} appears twice in the header; rename one"
    if "id" not in header:
        return "the header has no id column; add one (every row needs a unique id, the prompt's id)"
    if "assertions" in header:
        return (
            "a CSV file cannot hold assertions (lists); put them in the template, with a column as a "
            "value (contains: '{{ expected }}'), or use a JSONL or YAML cases file"
        )
    return None


def _jsonl_rows(found: CaseFile) -> None:
    seen: dict[str, int] = {}
    lines = io.StringIO(found.text, newline="")
    for index, (line, record, unreadable) in enumerate(json_lines(lines)):
        if unreadable is not None:
            found.issues.append(Issue(found.display, line, unreadable[0], "", unreadable[1] + "; fix the line"))
        elif not isinstance(record, dict):
            found.issues.append(
                Issue(found.display, line, 1, "", f"expected a JSON object (a row), got {_kind(record)}")
            )
        elif _lone_surrogate(record):
            found.issues.append(
                Issue(found.display, line, 1, "", "holds a lone surrogate escape (half of a UTF-16 pair); remove it")
            )
        else:
            _structured_row(found, seen, index, line, record)


def _yaml_rows(found: CaseFile, doc: Document) -> None:
    if doc.data is None:
        return
    if not isinstance(doc.data, list):
        found.issues.append(Issue(found.display, 1, 1, "", f"expected a list of rows, got {_kind(doc.data)}"))
        return
    seen: dict[str, int] = {}
    for index, record in enumerate(doc.data):
        line, col = doc.position((index,))
        if not isinstance(record, dict):
            found.issues.append(Issue(found.display, line, col, "", f"expected a mapping (a row), got {_kind(record)}"))
        else:
            _structured_row(found, seen, index, line, record)


def _structured_row(found: CaseFile, seen: dict[str, int], index: int, line: int, record: dict[str, Any]) -> None:
    """A JSONL or YAML row: values keep their types, so each is checked for the right one."""
    bad: list[tuple[DataPath, str]] = []
    critical, threshold, assertions = record.get("critical"), record.get("threshold"), record.get("assertions", [])
    if critical is not None and not isinstance(critical, bool):
        bad.append((("critical",), f"expected true or false, got {_kind(critical)}"))
    if threshold is not None and (
        isinstance(threshold, bool)
        or not isinstance(threshold, int | float)
        or not (math.isfinite(threshold) and 0 <= threshold <= 1)
    ):
        bad.append((("threshold",), f"expected a number in 0..1, got {_kind(threshold)}"))
    if not isinstance(assertions, list):
        bad.append((("assertions",), f"expected a list of assertions, got {_kind(assertions)}"))
    else:
        bad.extend(item_problems(assertions))
    found.issues.extend(found.issue(line, index, path, message) for path, message in bad)
    variables = {k: v for k, v in record.items() if k != "assertions"}
    _add(
        found,
        seen,
        variables,
        at=(index, line),
        assertions=tuple(assertions) if not bad else (),
        critical=critical,
        threshold=threshold,
        ok=not bad,
    )


def _add(
    found: CaseFile,
    seen: dict[str, int],
    values: dict[str, Any],
    *,
    at: tuple[int, int],  # (index, line)
    assertions: tuple[Any, ...] = (),
    critical: bool | None = None,
    threshold: float | None = None,
    ok: bool = True,
) -> None:
    index, line = at
    case_id = values.get("id")
    if not isinstance(case_id, str) or not case_id.strip():
        message = (
            "missing id; give every row a unique id (the prompt's id)"
            if case_id is None or case_id == "" or isinstance(case_id, str)
            else f"id must be a string, got {_kind(case_id)}; quote it"
        )
        found.issues.append(found.issue(line, index, ("id",) if case_id is not None else (), message))
        return
    if case_id in seen:
        found.issues.append(
            found.issue(line, index, ("id",), f"duplicate id '{case_id}' (first at line {seen[case_id]})")
        )
        return
    seen[case_id] = line
    if ok:
        number = float(threshold) if threshold is not None else None
        found.cases.append(Case(case_id, index, line, values, assertions, critical, number))


def grouped(issues: list[Issue]) -> list[Issue]:
    """The issues of a data file with each repeated problem (the same path and message, as a
    template without its column gives every row) listed once with how many rows more have it;
    at most MAX_ROW_ISSUES of them, then a count of the rest."""
    first: dict[tuple[str, str, str], Issue] = {}
    more: dict[tuple[str, str, str], list[int]] = {}
    for issue in issues:
        key = (issue.file, issue.path, issue.message)
        if key in first:
            more.setdefault(key, []).append(issue.line)
        else:
            first[key] = issue
    out = []
    for key, issue in first.items():
        lines = more.get(key)
        if lines:
            shown = ", ".join(str(n) for n in lines[:3])
            rest = f" and {len(lines) - 3:,} more" if len(lines) > 3 else ""
            issue = replace(issue, message=f"{issue.message} (also line{'s' if len(lines) > 1 else ''} {shown}{rest})")
        out.append(issue)
    if len(out) > MAX_ROW_ISSUES:
        unlisted = len(out) - MAX_ROW_ISSUES
        out = [
            *out[:MAX_ROW_ISSUES],
            Issue(out[0].file, 0, 0, "", f"{unlisted:,} more problems in this file not listed"),
        ]
    return out


def item_problems(items: list[Any]) -> list[tuple[DataPath, str]]:
    """The shape of a row's assertions, as the schema checks a set's: each item one ``type:
    value`` mapping or the long form, of a known type, with a weight of 0 or more."""
    from evalkit.assertions import registry

    problems: list[tuple[DataPath, str]] = []
    for position, item in enumerate(items):
        where: DataPath = ("assertions", position)
        form = assertion_form(item)
        if form is None or (isinstance(item, dict) and "type" in item and not set(item) <= LONG_FORM_KEYS):
            extra = sorted(set(item) - LONG_FORM_KEYS) if isinstance(item, dict) and "type" in item else []
            said = f" (unknown key{'s' if len(extra) > 1 else ''} {', '.join(extra)})" if extra else ""
            problems.append((where, f"expected one type: value mapping, or {{type, value, weight}}{said}"))
            continue
        kind, _, weight, _ = form
        if isinstance(kind, str) and registry.get(kind) is None:
            errors = registry.from_plugins({kind})
            if kind in errors:
                problems.append((where, errors[kind]))
                continue
        if not isinstance(kind, str) or registry.get(kind) is None:
            close = suggest(str(kind), registry.names())
            hint = f"; did you mean '{close}'?" if close else ""
            problems.append((where, f"unknown assertion type {str(kind)!r}{hint}"))
        elif isinstance(weight, bool) or not isinstance(weight, int | float) or not weight >= 0 or weight == math.inf:
            problems.append(((*where, "weight"), f"must be a finite number of 0 or more, got {_kind(weight)}"))
    return problems


def _kind(value: Any) -> str:
    return describe(value)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return _SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(_lone_surrogate(k) or _lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_lone_surrogate(v) for v in value)
    return False


def _csv_starts(line: str) -> list[int]:
    """1-based columns where each field of a one-line CSV record starts (quotes honoured)."""
    starts, position, quoted, at_start = [1], 0, False, True
    while position < len(line):
        char = line[position]
        if quoted:
            if char == '"':
                if line[position + 1 : position + 2] == '"':
                    position += 1
                else:
                    quoted = False
        elif char == '"' and at_start:
            quoted = True
        elif char == ",":
            starts.append(position + 2)
            at_start = True
            position += 1
            continue
        at_start = False
        position += 1
    return starts
