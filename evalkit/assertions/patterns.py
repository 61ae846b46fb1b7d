"""The regex assertion: ``/pattern/flags`` (flags from imsxu) or a bare pattern, searched
anywhere with the ``regex`` engine under a time limit, so catastrophic backtracking fails the
assertion with a reason instead of hanging the run. Given the grader's in-loop budget
(``Context.regex_budget_s``) a search that outlives it raises ``SlowRegex``: the grader searches
again off the event loop, so it does not hold up the calls in flight."""

from __future__ import annotations

from typing import Any

from evalkit.assertions.compiling import CompiledRegex, compile_regex
from evalkit.assertions.registry import HELD, AssertionValueError, Context, Outcome, Where, register

REGEX_TIMEOUT_S = 1.0


class SlowRegex(Exception):
    """A regex outlived the in-loop budget: grade again off the event loop."""


def _check(value: Any, where: Where) -> CompiledRegex:
    if not isinstance(value, str) or not value:
        raise AssertionValueError("must be a non-empty string: /pattern/flags or a bare pattern")
    return compile_regex(value)


def search(compiled: CompiledRegex, response: str, context: Context) -> Outcome:
    budget_s = context.regex_budget_s
    try:
        if budget_s is not None:
            found = compiled.pattern.search(response, timeout=budget_s)
        else:
            found = compiled.pattern.search(response, timeout=REGEX_TIMEOUT_S, concurrent=True)
    except TimeoutError:
        if budget_s is not None:
            raise SlowRegex from None
        reason = f"regex {compiled.source}: gave up after {REGEX_TIMEOUT_S:g} s (catastrophic backtracking?)"
        return Outcome(False, 0.0, reason, undecided=True)  # not_regex does not hold either
    if found is not None:
        return HELD
    return Outcome(False, 0.0, f"regex {compiled.source}: no match")


register("regex", check=_check, evaluate=search, schema={"type": "string", "minLength": 1},
         description="/pattern/flags (flags from imsxu) or a bare pattern; searches anywhere.")  # fmt: skip
