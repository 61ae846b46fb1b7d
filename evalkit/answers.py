"""The replay answers file: JSON Lines of ``{"id", "response", "model"?, "set"?, "tool_calls"?}``,
one answer per prompt and set. Read by the replay provider, and by ``evalkit validate`` when it is
named. ``tool_calls`` (README "Configuration") is the answer's tool calls as the JSON report
writes them, ``[{"name", "arguments"}]``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from evalkit.errors import InputError, Issue, SetError
from evalkit.jsonl import json_lines
from evalkit.records import JsonValue, without_lone_surrogates

Answer = tuple[str, str | None, list[JsonValue] | None]  # (response, reported model, tool calls)


@dataclass(frozen=True, slots=True)
class Answers:
    """An answers file as read (only read from then on): each answer by prompt id, and by
    (set id, prompt id) for those scoped to one set. Responses have lone surrogates as U+FFFD."""

    unscoped: Mapping[str, Answer]
    scoped: Mapping[tuple[str, str], Answer]

    def get(self, set_id: str, item_id: str) -> Answer | None:
        """The answer for prompt ``item_id`` of set ``set_id``: the set's own, else the unscoped one."""
        if self.scoped:
            answer = self.scoped.get((set_id, item_id))
            if answer is not None:
                return answer
        return self.unscoped.get(item_id)


def read_answers(path: Path) -> Answers:
    """The answers file at ``path``. A file read before (checked when the run was planned, then
    served) is read again only when it changed on disk."""
    try:
        stat = path.stat()
    except OSError:
        stat = None
    if stat is not None:
        key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
        if _READ.get(key) is None:
            _READ.clear()  # one file kept: a process reads one or two answers files
            _READ[key] = _read_answers(path)
        return _READ[key]
    return _read_answers(path)


_READ: dict[tuple[str, int, int], Answers] = {}


def _read_answers(path: Path) -> Answers:
    try:
        lines = path.read_text(encoding="utf-8").split("\n")  # not splitlines(): see evalkit.jsonl
    except OSError as exc:
        raise InputError(
            f"{path}: cannot read the replay answers file ({exc.strerror}); check the instance's path: in evalkit.yaml"
        ) from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: the replay answers file is not UTF-8 text ({exc.reason}); re-encode it") from exc
    unscoped: dict[str, Answer] = {}
    scoped: dict[tuple[str, str], Answer] = {}
    first_line: dict[tuple[str, str], int] = {}
    for number, record, unreadable in json_lines(lines):
        if unreadable is not None:
            column, problem = unreadable
            raise _issue(path, number, column, problem)
        item_id, set_id, answer = _answer(path, number, record)
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
        if set_id:
            scoped[key] = answer
        else:
            unscoped[item_id] = answer
    return Answers(unscoped, scoped)


def _answer(path: Path, number: int, record: object) -> tuple[str, str, Answer]:
    """One line's record checked: its prompt id, its set id ("" when unscoped) and its answer."""
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
    calls = record.get("tool_calls")
    if calls is not None:
        _check_tool_calls(path, number, calls)
    return item_id, set_id, (without_lone_surrogates(response), model or None, calls or None)


def _check_tool_calls(path: Path, number: int, calls: object) -> None:
    """``tool_calls``: an array of ``{"name": <non-empty string>, "arguments"?: <any JSON>}``."""
    if not isinstance(calls, list):
        raise _issue(path, number, 1, f"'tool_calls' must be an array of {{name, arguments}}, not {_json_type(calls)}")
    for index, call in enumerate(calls):
        name = call.get("name") if isinstance(call, dict) else None
        if not isinstance(name, str) or not name:
            raise _issue(
                path,
                number,
                1,
                f"tool_calls[{index}]: expected an object with a non-empty string 'name' (and 'arguments')",
            )
        extra = sorted(set(call) - {"name", "arguments"})
        if extra:
            raise _issue(path, number, 1, f"tool_calls[{index}]: unknown key '{extra[0]}' (expected name, arguments)")


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
