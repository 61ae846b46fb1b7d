"""The regex assertion: ``/pattern/flags`` (flags from imsxu) or a bare pattern, searched
anywhere with the ``regex`` engine under a time limit, so catastrophic backtracking fails the
assertion with a reason instead of hanging the run. Given the grader's in-loop budget
(``Context.regex_budget_s``) a search that outlives it raises ``SlowRegex``: the grader searches
again off the event loop, so it does not hold up the calls in flight. There a prompt's searches
share REGEX_TIMEOUT_S and a run's share RUN_REGEX_S (``Context.regex_clock``, README, Set files):
once they are spent a search still gets MIN_SEARCH_S, so a hostile prompt costs a run
milliseconds, not a second each."""

from __future__ import annotations

import time
from typing import Any

from evalkit.assertions.compiling import CompiledRegex, compile_regex
from evalkit.assertions.registry import HELD, AssertionValueError, Context, Outcome, RegexClock, Where, register

REGEX_TIMEOUT_S = 1.0  # a prompt's slow searches together
RUN_REGEX_S = 10.0  # a run's
MIN_SEARCH_S = 0.01  # a search's time once both are spent


class SlowRegex(Exception):
    """A regex outlived the in-loop budget: grade again off the event loop."""


def _check(value: Any, where: Where) -> CompiledRegex:
    if not isinstance(value, str) or not value:
        raise AssertionValueError("must be a non-empty string: /pattern/flags or a bare pattern")
    return compile_regex(value)


def search(compiled: CompiledRegex, response: str, context: Context) -> Outcome:
    budget_s = context.regex_budget_s
    if budget_s is None:
        return _search_slowly(compiled, response, context.regex_clock)
    try:
        found = compiled.pattern.search(response, timeout=budget_s)
    except TimeoutError:
        raise SlowRegex from None
    if found is not None:
        return HELD
    return Outcome(False, 0.0, f"regex {compiled.source}: no match")


def _search_slowly(compiled: CompiledRegex, response: str, clock: RegexClock | None) -> Outcome:
    """A search under the time the clock allows (REGEX_TIMEOUT_S without one)."""
    spent = None if clock is None else clock.spent()
    timeout = REGEX_TIMEOUT_S if clock is None else max(clock.allowance(), MIN_SEARCH_S)
    started = time.perf_counter()
    try:
        found = compiled.pattern.search(response, timeout=timeout, concurrent=True)
    except TimeoutError:
        why = f"gave up after {timeout:g} s" if spent is None else f"gave up: {spent}"
        reason = f"regex {compiled.source}: {why} (catastrophic backtracking?)"
        return Outcome(False, 0.0, reason, undecided=True)  # not_regex does not hold either
    finally:
        if clock is not None:
            clock.spend(time.perf_counter() - started)
    if found is not None:
        return HELD
    return Outcome(False, 0.0, f"regex {compiled.source}: no match")


register("regex", check=_check, evaluate=search, schema={"type": "string", "minLength": 1},
         description="/pattern/flags (flags from imsxu) or a bare pattern; searches anywhere.")  # fmt: skip
