"""The replay answers file: JSON Lines of ``{"id", "response", "model"?, "set"?}``, one answer per
prompt and set. Read by the replay provider, and by ``evalkit validate`` when it is named."""

from __future__ import annotations

from pathlib import Path

from evalkit.errors import InputError, Issue, SetError
from evalkit.jsonl import json_lines


def read_answers(path: Path) -> dict[tuple[str, str], tuple[str, str | None]]:
    """(set id or '', prompt id) -> (response, reported model). A file read before (checked when
    the run was planned, then served) is read again only when it changed on disk."""
    try:
        stat = path.stat()
    except OSError:
        stat = None
    if stat is not None:
        key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
        if _READ.get(key) is None:
            _READ.clear()  # one file kept: a process reads one or two answers files
            _READ[key] = _read_answers(path)
        return dict(_READ[key])
    return _read_answers(path)


_READ: dict[tuple[str, int, int], dict[tuple[str, str], tuple[str, str | None]]] = {}


def _read_answers(path: Path) -> dict[tuple[str, str], tuple[str, str | None]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(
            f"{path}: cannot read the replay answers file ({exc.strerror}); check the instance's path: in evalkit.yaml"
        ) from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: the replay answers file is not UTF-8 text ({exc.reason}); re-encode it") from exc
    records: dict[tuple[str, str], tuple[str, str | None]] = {}
    first_line: dict[tuple[str, str], int] = {}
    for number, record, unreadable in json_lines(lines):
        if unreadable is not None:
            column, problem = unreadable
            raise _issue(path, number, column, problem)
        if not isinstance(record, dict):
            raise _issue(path, number, 1, "expected a JSON object per line")
        item_id, response = record.get("id"), record.get("response")
        model, set_id = record.get("model"), record.get("set", "")
        for name in ("id", "response"):
            if not isinstance(record.get(name), str):
                problem = (
                    f"field '{name}' must be a string, not {_json_type(record[name])}"
                    if name in record
                    else f"missing string field '{name}'"
                )
                raise _issue(path, number, 1, problem)
        if not isinstance(item_id, str) or not item_id or not isinstance(response, str):
            raise _issue(path, number, 1, "field 'id' must not be empty")
        if model is not None and not isinstance(model, str):
            raise _issue(path, number, 1, "'model' must be a string")
        if not isinstance(set_id, str):
            raise _issue(path, number, 1, "'set' must be a string")
        key = (set_id, item_id)
        if key in first_line:  # which answer was meant? (a corpus refuses a repeated id the same way)
            scope = f" in set '{set_id}'" if set_id else ""
            raise _issue(
                path,
                number,
                1,
                f"a second answer for prompt '{item_id}'{scope} (first at line {first_line[key]}); keep one",
            )
        first_line[key] = number
        records[key] = (response, model or None)
    return records


def _json_type(value: object) -> str:
    """The JSON name of a decoded value's type, for a message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "an array" if isinstance(value, list) else "an object"


def _issue(path: Path, line: int, column: int, problem: str) -> SetError:
    return SetError([Issue(str(path), line, column, "", problem)])
