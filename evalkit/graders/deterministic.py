"""The deterministic grader (no model call), over the assertion registry (evalkit.assertions).

Each assertion's type evaluates the response into an outcome (holds, a score in 0..1, why not).
A prompt's score is the weighted mean, sum(weight x score) / sum(weight), over the assertions of
weight above 0 (weight 0: recorded, not counted; all weights 0: score 1). It passes when every
counted assertion holds, or, with ``threshold``, when its score reaches the threshold. Its reason
counts the counted assertions and gives the failed ones' reasons, and the reasons those that held
gave (README "Score and pass").

A regex search first runs on the event loop with a 10 ms budget; one that needs longer is
searched again in a thread (the regex engine releases the GIL), so it cannot stall every call in
flight for its whole time limit. There the prompt's searches share a second and the run's (this
grader's) ten seconds (``patterns.REGEX_TIMEOUT_S``, ``RUN_REGEX_S``; README "Set files").
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from evalkit.assertions import patterns, registry
from evalkit.assertions.patterns import SlowRegex
from evalkit.assertions.registry import HELD, Context, Outcome, RegexClock
from evalkit.records import (
    Assertion,
    AssertionResult,
    CallFacts,
    Grade,
    Prompt,
    PromptSet,
    ServingRecord,
    assertions_reason,
)

IN_LOOP_REGEX_S = 0.01
YARDSTICK = "deterministic"
_PLAIN = Context()
_HERE = registry.Where(Path("."))  # a value checked here, not at load (tests, the Python API)


def check(assertion: Assertion, response: str, context: Context = _PLAIN) -> AssertionResult:
    """One assertion against one response."""
    return grade_assertions(Prompt("", "", (assertion,)), response, context).assertions[0]


def grade_assertions(prompt: Prompt, response: str, context: Context = _PLAIN) -> Grade:
    """The deterministic grade of ``response``. With ``context.regex_budget_s``, a regex that
    needs longer raises SlowRegex."""
    assertions = prompt.assertions
    if not assertions:
        return Grade(False, 0.0, "no assertions: a reference-only prompt needs --grader decision", yardstick=YARDSTICK)
    results: list[AssertionResult] = []
    failed: list[str] = []
    notes: list[str] = []  # the reasons given by counted assertions that held (a python check's)
    total = weighted = 0.0
    counted = 0
    for assertion in assertions:  # one loop, no call per assertion: it runs 300,000 times a run
        kind = registry.get(assertion.type)
        if kind is None:
            raise ValueError(f"unknown assertion type {assertion.type!r}")
        compiled = assertion.compiled
        if compiled is None:
            compiled = kind.check(assertion.value, _HERE)
        outcome = kind.evaluate(compiled, response, context)
        weight = assertion.weight
        if outcome is HELD or (outcome.passed and outcome.score == 1.0 and not outcome.reason):
            # the common case: one shared record per type and weight
            result = _HELD.get((assertion.type, weight))
            if result is None:
                result = _HELD[assertion.type, weight] = AssertionResult(assertion.type, True, "", None, weight)
            if weight > 0:
                counted += 1
                total += weight
                weighted += weight
        else:
            score = None if outcome.score == (1.0 if outcome.passed else 0.0) else outcome.score
            result = AssertionResult(assertion.type, outcome.passed, outcome.reason, score, weight)
            if weight > 0:
                counted += 1
                total += weight
                weighted += weight * outcome.score
                if not outcome.passed:
                    failed.append(outcome.reason)
                elif outcome.reason:
                    notes.append(outcome.reason)
        results.append(result)
    score = weighted / total if total else 1.0  # every weight 0: nothing counted fails (README "Score and pass")
    return _graded(prompt, score, (failed, counted, notes), tuple(results))


def _graded(
    prompt: Prompt, score: float, tally: tuple[list[str], int, list[str]], results: tuple[AssertionResult, ...]
) -> Grade:
    """The grade from the loop's tally (the failed reasons, the counted assertions, the notes)."""
    failed, counted, notes = tally
    if prompt.threshold is not None:
        passed = score >= prompt.threshold - 1e-12
        reason = assertions_reason(failed, counted, notes, (score, prompt.threshold, passed))
        return Grade(passed, score, reason, results, YARDSTICK)
    if not counted:
        return Grade(True, 1.0, "every weight is 0: recorded, none counted", results, YARDSTICK)
    if not failed and not notes:
        held = _ALL_HOLD[counted] if counted < 64 else assertions_reason((), counted)
        return Grade(True, score, held, results, YARDSTICK)
    return Grade(not failed, score, assertions_reason(failed, counted, notes), results, YARDSTICK)


_HELD: dict[tuple[str, float], AssertionResult] = {}
_ALL_HOLD = ["", *(assertions_reason((), n) for n in range(1, 64))]


class DeterministicGrader:
    """Grades by assertions only; never calls a model."""

    name = YARDSTICK

    def __init__(self) -> None:
        self._slow: asyncio.Lock | None = None  # made in the running loop
        self._regex_left_s = patterns.RUN_REGEX_S  # the run's slow regex searches still may take

    async def grade(
        self,
        prompt_set: PromptSet,
        prompt: Prompt,
        response: str,
        serving: ServingRecord | None,
        call: CallFacts | None = None,
        *,
        judgements: Mapping[Any, Outcome] | None = None,
    ) -> Grade:
        """``call``: the facts of the call, for latency_ms and cost; ``judgements``: the outcomes
        of the prompt's model-graded assertions (``evalkit.graders.judged``)."""
        # evalkit's own types but latency_ms and cost read only the regex budget of the context
        context = _context(prompt_set, prompt, call) if _reads_context(prompt) else _BUDGETED
        if judgements:
            context = replace(context, judgements=judgements)
        try:
            return grade_assertions(prompt, response, context)
        except SlowRegex:
            # one slow search at a time: the regex engine's time limit counts the process's CPU
            # time, so searches running side by side would use up each other's second
            if self._slow is None:
                self._slow = asyncio.Lock()
            async with self._slow:
                clock = RegexClock(patterns.REGEX_TIMEOUT_S, patterns.RUN_REGEX_S, self._regex_left_s)
                unbudgeted = replace(context, regex_budget_s=None, regex_clock=clock)
                try:
                    return await asyncio.to_thread(grade_assertions, prompt, response, unbudgeted)
                finally:
                    self._regex_left_s = clock.run_left_s


_CALL_FREE: dict[str, bool] = {}
# evalkit's types that read the call's facts, or the whole context
CONTEXT_READERS = frozenset(
    {
        "latency_ms",
        "cost",
        "python",
        "tool_called",
        "tool_sequence",
        "valid_tool_calls",
        "tool_call_f1",
        "context_contains",
    }
)
_BUDGETED = Context(regex_budget_s=IN_LOOP_REGEX_S)


def _reads_context(prompt: Prompt) -> bool:
    """Whether an assertion of ``prompt`` reads more of the context than the regex budget: the
    call's facts (latency_ms, cost), or all of it (python and plugin checks)."""
    for assertion in prompt.assertions:
        free = _CALL_FREE.get(assertion.type)
        if free is None:
            kind = registry.get(assertion.type)
            free = _CALL_FREE[assertion.type] = (
                kind is not None
                and kind.origin == "evalkit"
                and (assertion.type.removeprefix("not_") not in CONTEXT_READERS)
            )
        if not free:
            return True
    return False


def _context(prompt_set: PromptSet, prompt: Prompt, call: CallFacts | None) -> Context:
    return Context(
        prompt_id=prompt.id,
        prompt=prompt.prompt,
        reference=prompt.reference,
        latency_ms=call.latency_ms if call else None,
        cost=call.cost if call else None,
        model=call.model if call else None,
        vars=prompt.vars,
        regex_budget_s=IN_LOOP_REGEX_S,
        tool_calls=call.tool_calls if call else (),
        tools=prompt_set.tools_for(prompt),
        recorded_context=call.context if call else None,
    )
