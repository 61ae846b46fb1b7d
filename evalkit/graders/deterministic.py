"""The deterministic grader (no model call), over the assertion registry (evalkit.assertions).

Each assertion's type evaluates the response into an outcome (holds, a score in 0..1, why not).
A prompt's score is the weighted mean, sum(weight x score) / sum(weight), over the assertions of
weight above 0 (weight 0: recorded, not counted). It passes when every counted assertion holds,
or, with ``threshold``, when its score reaches the threshold.

A regex search first runs on the event loop with a 10 ms budget; one that needs longer is
searched again in a thread (the regex engine releases the GIL), so it cannot stall every call in
flight for its whole time limit.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from evalkit.assertions import registry
from evalkit.assertions.patterns import SlowRegex
from evalkit.assertions.registry import Context
from evalkit.records import Assertion, AssertionResult, CallFacts, Grade, Prompt, PromptSet, ServingRecord

IN_LOOP_REGEX_S = 0.01
YARDSTICK = "deterministic"
_PLAIN = Context()
_HERE = registry.Where(Path("."))  # a value checked here, not at load (tests, the Python API)


def check(assertion: Assertion, response: str, context: Context = _PLAIN) -> AssertionResult:
    """One assertion against one response."""
    kind = registry.get(assertion.type)
    if kind is None:
        raise ValueError(f"unknown assertion type {assertion.type!r}")
    compiled = assertion.compiled if assertion.compiled is not None else kind.check(assertion.value, _HERE)
    outcome = kind.evaluate(compiled, response, context)
    score = None if outcome.score == (1.0 if outcome.passed else 0.0) else outcome.score
    return AssertionResult(assertion.type, outcome.passed, outcome.reason, score, assertion.weight)


def grade_assertions(prompt: Prompt, response: str, context: Context = _PLAIN) -> Grade:
    """The deterministic grade of ``response``. With ``context.regex_budget_s``, a regex that
    needs longer raises SlowRegex."""
    if not prompt.assertions:
        return Grade(False, 0.0, "no assertions: a reference-only prompt needs --grader decision", yardstick=YARDSTICK)
    results = tuple(check(a, response, context) for a in prompt.assertions)
    counted = [r for r in results if r.weight > 0]
    total = sum(r.weight for r in counted)
    score = sum(r.weight * r.value for r in counted) / total if total else 0.0
    failed = [r for r in counted if not r.passed]
    if prompt.threshold is not None:
        passed = score >= prompt.threshold - 1e-12
        if passed:
            reason = f"score {score:.2f} reaches the threshold {prompt.threshold:g}"
            reason += f" ({len(failed)} of {len(counted)} assertions failed)" if failed else ""
        else:
            reasons = "; ".join(r.reason for r in failed)
            reason = f"score {score:.2f} is below the threshold {prompt.threshold:g}" + (
                f": {reasons}" if reasons else ""
            )
        return Grade(passed, score, reason, results, YARDSTICK)
    if not failed:
        n = len(counted)
        reason = f"all {n} assertions hold" if n > 1 else "assertion holds"
        return Grade(True, score, reason, results, YARDSTICK)
    return Grade(False, score, "; ".join(r.reason for r in failed), results, YARDSTICK)


class DeterministicGrader:
    """Grades by assertions only; never calls a model."""

    name = YARDSTICK

    def __init__(self) -> None:
        self._slow: asyncio.Lock | None = None  # made in the running loop

    async def grade(
        self,
        prompt_set: PromptSet,
        prompt: Prompt,
        response: str,
        serving: ServingRecord | None,
        call: CallFacts | None = None,
    ) -> Grade:
        """``call``: the facts of the call, for latency_ms and cost."""
        context = _context(prompt, call)
        try:
            return grade_assertions(prompt, response, context)
        except SlowRegex:
            # one slow search at a time: the regex engine's time limit counts the process's CPU
            # time, so searches running side by side would use up each other's second
            if self._slow is None:
                self._slow = asyncio.Lock()
            async with self._slow:
                unbudgeted = replace(context, regex_budget_s=None)
                return await asyncio.to_thread(grade_assertions, prompt, response, unbudgeted)


def _context(prompt: Prompt, call: CallFacts | None) -> Context:
    return Context(
        prompt_id=prompt.id,
        prompt=prompt.prompt,
        reference=prompt.reference,
        latency_ms=call.latency_ms if call else None,
        cost=call.cost if call else None,
        model=call.model if call else None,
        vars=prompt.vars,
        regex_budget_s=IN_LOOP_REGEX_S,
    )
