"""The four assertions and the deterministic grader (no model call).

- exact: equal after stripping space, \\t, \\n, \\r, \\0 and \\x0b from both ends; case-sensitive.
- contains: case-sensitive substring of the raw response.
- regex: searched anywhere with the ``regex`` engine under a time limit, so catastrophic
  backtracking fails the assertion with a reason instead of hanging the run; the grader moves a
  search that outlives 10 ms off the event loop, so it does not hold up the calls in flight.
- json_schema: the trimmed response parses as strict JSON (no NaN/Infinity, no code fences) and
  validates against a Draft 2020-12 schema (its patterns matched by the ``regex`` engine under a
  time limit; it resolves references without retrieving anything).

A prompt passes when every assertion holds; its score is the fraction that hold.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from evalkit.graders.excerpt import excerpt
from evalkit.records import Assertion, AssertionResult, Grade, Prompt, PromptSet, ServingRecord

WHITESPACE = " \t\n\r\0\x0b"
REGEX_TIMEOUT_S = 1.0
# The grader first matches on the event loop with this budget; a regex that needs longer is
# matched again in a thread (GIL released), so it cannot stall every call in flight for 1 s.
IN_LOOP_REGEX_S = 0.01
YARDSTICK = "deterministic"


class _SlowRegex(Exception):
    """A regex outlived the in-loop budget: grade again off the event loop."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def check_exact(expected: str, response: str) -> AssertionResult:
    got = response.strip(WHITESPACE)
    if got == expected.strip(WHITESPACE):
        return AssertionResult("exact", True)
    return AssertionResult("exact", False, f"exact: expected {excerpt(expected, 60)}, got {excerpt(got, 60)}")


def check_contains(needle: str, response: str) -> AssertionResult:
    if needle in response:
        return AssertionResult("contains", True)
    return AssertionResult("contains", False, f"contains {excerpt(needle, 60)}: not found")


def check_regex(compiled: Any, response: str, budget_s: float | None = None) -> AssertionResult:
    """``budget_s``: a first, shorter limit; running out of it raises _SlowRegex."""
    try:
        if budget_s is not None:
            found = compiled.pattern.search(response, timeout=budget_s)
        else:
            found = compiled.pattern.search(response, timeout=REGEX_TIMEOUT_S, concurrent=True)
    except TimeoutError:
        if budget_s is not None:
            raise _SlowRegex from None
        return AssertionResult(
            "regex",
            False,
            f"regex {compiled.source}: gave up after {REGEX_TIMEOUT_S:g} s (catastrophic backtracking?)",
        )
    if found is not None:
        return AssertionResult("regex", True)
    return AssertionResult("regex", False, f"regex {compiled.source}: no match")


def check_json_schema(validator: Any, response: str) -> AssertionResult:
    try:
        document = json.loads(response.strip(WHITESPACE), parse_constant=_reject_constant)
    except ValueError as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        return AssertionResult("json_schema", False, f"json_schema: response is not JSON ({reason})")
    except RecursionError:
        return AssertionResult("json_schema", False, "json_schema: response is not JSON (nested too deeply)")
    from referencing.exceptions import Unresolvable

    try:
        error = next(iter(validator.iter_errors(document)), None)
    except Unresolvable as exc:
        return AssertionResult("json_schema", False, f"json_schema: the schema cannot be applied ({exc})")
    except RecursionError:
        return AssertionResult("json_schema", False, "json_schema: the response is nested too deeply to validate")
    except TimeoutError:  # a pattern of the schema outlived its time limit (the regex engine's)
        return AssertionResult(
            "json_schema", False, "json_schema: a pattern of the schema gave up (catastrophic backtracking?)"
        )
    if error is None:
        return AssertionResult("json_schema", True)
    where = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return AssertionResult("json_schema", False, f"json_schema: {where}: {error.message}")


def check(assertion: Assertion, response: str, regex_budget_s: float | None = None) -> AssertionResult:
    """One assertion against one response."""
    if assertion.type == "exact":
        return check_exact(assertion.value, response)
    if assertion.type == "contains":
        return check_contains(assertion.value, response)
    if assertion.type == "regex":
        return check_regex(assertion.compiled, response, regex_budget_s)
    if assertion.type == "json_schema":
        return check_json_schema(assertion.compiled, response)
    raise ValueError(f"unknown assertion type {assertion.type!r}")


def grade_assertions(prompt: Prompt, response: str, regex_budget_s: float | None = None) -> Grade:
    """The deterministic grade of ``response``: all assertions must hold; score = fraction held.
    With ``regex_budget_s``, a regex that needs longer raises _SlowRegex."""
    if not prompt.assertions:
        return Grade(
            False,
            0.0,
            "no assertions: a reference-only prompt needs --grader decision",
            yardstick=YARDSTICK,
        )
    results = tuple(check(a, response, regex_budget_s) for a in prompt.assertions)
    held = sum(1 for r in results if r.passed)
    total = len(results)
    if held == total:
        reason = f"all {total} assertion{'s' if total > 1 else ''} hold" if total > 1 else "assertion holds"
    else:
        reason = "; ".join(r.reason for r in results if not r.passed)
    return Grade(held == total, held / total, reason, results, YARDSTICK)


class DeterministicGrader:
    """Grades by assertions only; never calls a model."""

    name = YARDSTICK

    def __init__(self) -> None:
        self._slow: asyncio.Lock | None = None  # made in the running loop

    async def grade(self, prompt_set: PromptSet, prompt: Prompt, response: str, serving: ServingRecord | None) -> Grade:
        try:
            return grade_assertions(prompt, response, IN_LOOP_REGEX_S)
        except _SlowRegex:
            # one slow search at a time: the regex engine's time limit counts the process's CPU
            # time, so searches running side by side would use up each other's second
            if self._slow is None:
                self._slow = asyncio.Lock()
            async with self._slow:
                return await asyncio.to_thread(grade_assertions, prompt, response)
