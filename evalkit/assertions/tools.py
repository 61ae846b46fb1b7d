"""Assertions on what the answer did (README, "Tools and tool calls"): its tool calls and the
context an application reported.

- tool_called: some call has that name (and, in the long form ``{name, arguments}``, its
  arguments validate against the JSON Schema given).
- tool_sequence: the calls' names contain the steps in order, others between them allowed
  (``{steps, exact: true}``: the names are exactly the steps).
- valid_tool_calls: there is at least one call, and every call names a tool the call declared
  and its arguments validate against that tool's ``parameters``.
- tool_call_f1: the F1 of the set of called names against the set of expected names (as
  promptfoo's tool-call-f1 computes it) is at least ``min`` (default 1); the score is the F1.
- context_contains: the answer's recorded ``context`` (text, or JSON written out) contains the
  string, ignoring case; an answer without a recorded context is undecided.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalkit.assertions.compiling import compile_json_schema
from evalkit.assertions.excerpt import excerpt
from evalkit.assertions.jsondoc import validate
from evalkit.assertions.registry import HELD, AssertionValueError, Context, Outcome, Where, register
from evalkit.records import ToolCall

_NAME = {"type": "string", "minLength": 1}
_NAMES = {"type": "array", "minItems": 1, "items": _NAME}


@dataclass(frozen=True, slots=True)
class Called:
    """tool_called's value: the name and, when given, a validator of the arguments."""

    name: str
    validator: Any
    source: Any  # as written, for reasons


@dataclass(frozen=True, slots=True)
class Steps:
    steps: tuple[str, ...]
    exact: bool
    source: Any


@dataclass(frozen=True, slots=True)
class Expected:
    names: frozenset[str]
    min: float
    source: Any


def _name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise AssertionValueError(f"{what} must be a tool's name (a non-empty string)")
    return value


def _names(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise AssertionValueError(f"{what} must be a non-empty list of tool names")
    return tuple(_name(v, f"each of {what}") for v in value)


def _schema(value: Any) -> Any:
    try:
        return compile_json_schema(value)
    except AssertionValueError as exc:
        raise AssertionValueError(f"arguments: {exc}") from None


def _called_value(value: Any, where: Where) -> Called:
    if isinstance(value, dict):
        unknown = sorted(set(value) - {"name", "arguments"})
        if unknown or "name" not in value:
            raise AssertionValueError("must be a tool name, or {name: N, arguments: <JSON Schema>}")
        validator = _schema(value["arguments"]) if "arguments" in value else None
        return Called(_name(value["name"], "name"), validator, value)
    return Called(_name(value, "tool_called"), None, value)


def _steps_value(value: Any, where: Where) -> Steps:
    if isinstance(value, dict):
        if set(value) - {"steps", "exact"} or "steps" not in value or not isinstance(value.get("exact", False), bool):
            raise AssertionValueError("must be a list of tool names, or {steps: [names], exact: true|false}")
        return Steps(_names(value["steps"], "steps"), bool(value.get("exact", False)), value)
    return Steps(_names(value, "tool_sequence"), False, value)


def _true(value: Any, where: Where) -> bool:
    if value is not True:
        raise AssertionValueError("must be true (the calls are checked against the declared tools)")
    return True


def _f1_value(value: Any, where: Where) -> Expected:
    if not isinstance(value, dict) or "expected" not in value or set(value) - {"expected", "min"}:
        raise AssertionValueError("must be {expected: [tool names], min: 0..1}")
    low = value.get("min", 1.0)
    if isinstance(low, bool) or not isinstance(low, int | float) or not 0 <= low <= 1:
        raise AssertionValueError(f"min must be a number in 0..1, got {low!r}")
    return Expected(frozenset(_names(value["expected"], "expected")), float(low), value)


def _text_value(value: Any, where: Where) -> str:
    if not isinstance(value, str) or not value:
        raise AssertionValueError("must be a non-empty string")
    return value


def _listed(calls: Sequence[ToolCall]) -> str:
    if not calls:
        return "no tool calls"
    names = [c.name for c in calls[:8]]
    return "calls: " + ", ".join(names) + (", ..." if len(calls) > 8 else "")


def tool_called(value: Called, response: str, context: Context) -> Outcome:
    calls = [c for c in context.tool_calls if c.name == value.name]
    if not calls:
        return Outcome(False, 0.0, f"tool_called: no call of '{value.name}' ({_listed(context.tool_calls)})")
    if value.validator is None:
        return HELD
    outcome = HELD
    for call in calls:
        outcome = validate(value.validator, call.arguments, f"tool_called: '{value.name}' arguments", context)
        if outcome.passed:
            return HELD
    return outcome


def in_order(names: Sequence[str], steps: Sequence[str]) -> bool:
    """Whether ``steps`` occur in ``names`` in order (others between them allowed)."""
    remaining = iter(names)
    return all(any(name == step for name in remaining) for step in steps)


def tool_sequence(value: Steps, response: str, context: Context) -> Outcome:
    names = [c.name for c in context.tool_calls]
    held = list(value.steps) == names if value.exact else in_order(names, value.steps)
    if held:
        return HELD
    want = " -> ".join(value.steps)
    how = "exactly" if value.exact else "in order"
    got = " -> ".join(names[:20]) + (" -> ..." if len(names) > 20 else "")
    return Outcome(False, 0.0, f"tool_sequence: expected {how} {want}; got {got or 'no tool calls'}")


def valid_tool_calls(value: bool, response: str, context: Context) -> Outcome:
    if not context.tool_calls:
        return Outcome(False, 0.0, "valid_tool_calls: the answer made no tool calls")
    declared: dict[str, Mapping[str, Any]] = {str(t.get("name")): t for t in context.tools}
    for k, call in enumerate(context.tool_calls):
        tool = declared.get(call.name)
        if tool is None:
            known = ", ".join(declared) or "none"
            return Outcome(
                False, 0.0, f"valid_tool_calls: call {k + 1} names '{call.name}', not a declared tool ({known})"
            )
        if isinstance(call.arguments, str):
            shown = excerpt(call.arguments, 40)
            return Outcome(
                False, 0.0, f"valid_tool_calls: call {k + 1} ('{call.name}'): arguments are not JSON ({shown})"
            )
        try:  # checked at load for a set file's tools; a set built in Python may hold anything
            validator = compile_json_schema(tool.get("parameters", True))
        except AssertionValueError as exc:
            return Outcome(False, 0.0, f"valid_tool_calls: tool '{call.name}': parameters: {exc}", undecided=True)
        outcome = validate(
            validator, call.arguments, f"valid_tool_calls: call {k + 1} ('{call.name}') arguments", context
        )
        if not outcome.passed:
            return outcome
    return HELD


def f1(called: Collection[str], expected: Collection[str]) -> float:
    """The F1 of the set of called names against the set of expected names (1.0 when both are empty)."""
    got, want = set(called), set(expected)
    if not got and not want:
        return 1.0
    both = len(got & want)
    if not both:
        return 0.0
    precision, recall = both / len(got), both / len(want)
    return 2 * precision * recall / (precision + recall)


def tool_call_f1(value: Expected, response: str, context: Context) -> Outcome:
    called = {c.name for c in context.tool_calls}
    score = f1(called, value.names)
    if score >= value.min - 1e-12:
        return HELD if score == 1.0 else Outcome(True, score)
    shown = ", ".join(sorted(called)) or "none"
    expected = ", ".join(sorted(value.names))
    return Outcome(
        False, score, f"tool_call_f1: {score:.2f} below {value.min:g} (called: {shown}; expected: {expected})"
    )


def context_text(recorded: Any) -> str | None:
    """The recorded context as text: a string as it is, a list of strings a line each, anything else as JSON."""
    if recorded is None:
        return None
    if isinstance(recorded, str):
        return recorded
    if isinstance(recorded, list) and all(isinstance(v, str) for v in recorded):
        return "\n".join(recorded)
    return json.dumps(recorded, ensure_ascii=False)


def context_contains(value: str, response: str, context: Context) -> Outcome:
    text = context_text(context.recorded_context)
    if text is None:
        reason = "context_contains: the answer recorded no context (an application reports it as 'context')"
        return Outcome(False, 0.0, reason, undecided=True)
    if value.casefold() in text.casefold():
        return HELD
    return Outcome(False, 0.0, f"context_contains: {excerpt(value, 40)} is not in the recorded context")


register("tool_called", check=_called_value, evaluate=tool_called, schema={"type": ["string", "object"]},
         description="Some tool call has this name ({name, arguments: <JSON Schema>}: and its arguments validate).")  # fmt: skip
register("tool_sequence", check=_steps_value, evaluate=tool_sequence, schema={"type": ["array", "object"]},
         description="The calls' names contain these steps in order ({steps, exact: true}: are exactly them).")  # fmt: skip
register("valid_tool_calls", check=_true, evaluate=valid_tool_calls, schema={"const": True},
         description="At least one call, each naming a declared tool with arguments valid against its parameters.")  # fmt: skip
register(
    "tool_call_f1", check=_f1_value, evaluate=tool_call_f1,
    schema={"type": "object", "required": ["expected"], "additionalProperties": False,
            "properties": {"expected": _NAMES, "min": {"type": "number", "minimum": 0, "maximum": 1}}},
    description="F1 of the called tool names against the expected names is at least min (default 1); score = the F1.",
)  # fmt: skip
register("context_contains", check=_text_value, evaluate=context_contains, schema={"type": "string", "minLength": 1},
         description="The answer's recorded context contains this, ignoring case.")  # fmt: skip
