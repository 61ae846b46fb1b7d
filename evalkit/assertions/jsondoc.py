"""JSON assertions: json_schema, equals_json, contains_json.

- json_schema: the trimmed response parses as strict JSON (no NaN/Infinity, no code fences) and
  validates against a Draft 2020-12 schema (its patterns matched by the ``regex`` engine under a
  time limit; it resolves references without retrieving anything).
- equals_json: the trimmed response parses as JSON equal to the value: objects unordered,
  ``1 == 1.0``, but ``true`` is not ``1`` and ``"1"`` is not ``1``.
- contains_json: some JSON value inside the text parses: the first fenced block (```json or a
  bare ```), else the first ``{`` or ``[`` from which a whole object or array parses; with a
  schema (rather than ``true``) it must also validate.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from evalkit.assertions.compiling import SEARCHING, RegexGaveUp, compile_json_schema
from evalkit.assertions.excerpt import excerpt
from evalkit.assertions.registry import HELD, AssertionValueError, Context, Outcome, Where, register
from evalkit.assertions.text import WHITESPACE

_FENCE = re.compile(r"```[ \t]*(?:json[ \t]*)?\r?\n(.*?)```", re.DOTALL | re.IGNORECASE)
_OPENERS = re.compile(r"[\[{]")
MAX_CANDIDATES = 64  # opening brackets tried before contains_json gives up


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_decoder = json.JSONDecoder(parse_constant=_reject_constant)


def _strict_loads(text: str) -> Any:
    """``text`` as one JSON value (what json.loads reads, NaN and Infinity refused). ``text`` is
    trimmed of WHITESPACE, which holds JSON's whitespace: the value must span it whole."""
    value, end = _decoder.raw_decode(text)  # decode() would look for whitespace at both ends first
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return value


def _schema_check(value: Any, where: Where) -> Any:
    if not isinstance(value, dict | bool | str):
        raise AssertionValueError("json_schema must be a JSON Schema: a mapping or true/false")
    return compile_json_schema(value)


def validate(validator: Any, document: Any, name: str, context: Context) -> Outcome:
    """``document`` against the schema; its patterns searched under the time limits of ``context``
    (SlowRegex past the grader's in-loop budget)."""
    from referencing.exceptions import Unresolvable

    token = SEARCHING.set(context)
    try:
        error = next(iter(validator.iter_errors(document)), None)
    except Unresolvable as exc:
        return Outcome(False, 0.0, f"{name}: the schema cannot be applied ({exc})", undecided=True)
    except RecursionError:
        return Outcome(False, 0.0, f"{name}: the response is nested too deeply to validate", undecided=True)
    except RegexGaveUp as exc:  # a pattern of the schema outlived its time limit
        reason = f"{name}: a pattern of the schema {exc.why} (catastrophic backtracking?)"
        return Outcome(False, 0.0, reason, undecided=True)
    finally:
        SEARCHING.reset(token)
    if error is None:
        return HELD
    where = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return Outcome(False, 0.0, f"{name}: {where}: {error.message}")


def parse_response(response: str, name: str) -> tuple[Any, Outcome | None]:
    """The trimmed response as strict JSON, or the failed outcome saying why it is not. The
    last response read is remembered: an answer checked by several JSON assertions is parsed
    once (the document is only read)."""
    document, why = _read(response)
    return (document, None) if why is None else (None, Outcome(False, 0.0, f"{name}: response is not JSON ({why})"))


def _read(response: str) -> tuple[Any, str | None]:
    """(document, why not) of the trimmed response, remembered for the last response read."""
    last = _LAST[0]
    if last[0] is not response:
        last = _LAST[0] = (response, *_parsed(response))
    return last[1], last[2]


_LAST: list[tuple[str | None, Any, str | None]] = [(None, None, None)]  # (response, document, why not)


def _parsed(response: str) -> tuple[Any, str | None]:
    try:
        return _strict_loads(response.strip(WHITESPACE)), None
    except ValueError as exc:
        return None, exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
    except RecursionError:
        return None, "nested too deeply"


def json_schema(validator: Any, response: str, context: Context) -> Outcome:
    document, failed = parse_response(response, "json_schema")
    return failed or validate(validator, document, "json_schema", context)


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: objects unordered, numbers by value (1 == 1.0), booleans only equal booleans."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _json_value(value: Any, where: Where) -> Any:
    _check_finite(value)
    return value


def _check_finite(value: Any) -> None:
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            raise AssertionValueError(f"equals_json: {node!r} is not a JSON value")
        if isinstance(node, dict):
            if not all(isinstance(k, str) for k in node):
                raise AssertionValueError("equals_json: JSON object keys are strings")
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif not isinstance(node, str | int | float | bool) and node is not None:
            raise AssertionValueError(f"equals_json: {type(node).__name__} is not a JSON value")


def equals_json(expected: Any, response: str, context: Context) -> Outcome:
    document, failed = parse_response(response, "equals_json")
    if failed is not None:
        return failed
    if json_equal(document, expected):
        return HELD
    shown = json.dumps(expected, ensure_ascii=False)
    return Outcome(
        False,
        0.0,
        f"equals_json: expected {excerpt(shown, 60)}, got {excerpt(json.dumps(document, ensure_ascii=False), 60)}",
    )


def find_json(text: str) -> tuple[bool, Any]:
    """(found, value): the first fenced block that parses, else the first whole object or array."""
    if "```" not in text and text.lstrip(WHITESPACE)[:1] in ("{", "["):
        # no fence, and the text starts as an object or array: when the whole text is one, it is
        # the first that parses (the response's parse, shared with the other JSON assertions;
        # tests/assertions/test_vocabulary_properties.py checks it against the plain scan)
        document, why = _read(text)
        if why is None and isinstance(document, dict | list):
            return True, document
    for block in _FENCE.finditer(text):
        try:
            return True, _strict_loads(block.group(1).strip(WHITESPACE))
        except (ValueError, RecursionError):
            continue
    for tried, opener in enumerate(_OPENERS.finditer(text)):
        if tried >= MAX_CANDIDATES:
            break
        try:
            value, _ = _decoder.raw_decode(text, opener.start())
        except (ValueError, RecursionError):
            continue
        return True, value
    return False, None


def _contains_json_value(value: Any, where: Where) -> Any:
    if value is True:
        return None
    if value is False or not isinstance(value, dict | str):
        raise AssertionValueError("contains_json is true (any JSON) or a JSON Schema the JSON must meet")
    return compile_json_schema(value)


def contains_json(validator: Any, response: str, context: Context) -> Outcome:
    found, value = find_json(response)
    if not found:
        return Outcome(False, 0.0, "contains_json: no JSON object or array in the response")
    if validator is None:
        return HELD
    return validate(validator, value, "contains_json", context)


register(
    "json_schema", check=_schema_check, evaluate=json_schema, schema={"type": ["object", "boolean", "string"]},
    description="The trimmed response must be JSON valid against this JSON Schema (Draft 2020-12), as YAML or a JSON string.",
)  # fmt: skip
register("equals_json", check=_json_value, evaluate=equals_json, schema={},
         description="The trimmed response parses as JSON equal to this value (objects unordered, 1 == 1.0).")  # fmt: skip
register(
    "contains_json", check=_contains_json_value, evaluate=contains_json, schema={"type": ["object", "boolean", "string"]},
    description="Some JSON inside the text (a fenced block or the first whole object/array) parses; validates when a schema is given (true: any JSON).",
)  # fmt: skip
