"""The regex assertion: ``/pattern/flags`` (flags from imsxu) or a bare pattern, searched
anywhere with the ``regex`` engine under a time limit, so catastrophic backtracking fails the
assertion with a reason instead of hanging the run. Given the grader's in-loop budget
(``Context.regex_budget_s``) a search that outlives it raises ``SlowRegex``: the grader searches
again off the event loop, so it does not hold up the calls in flight. There a prompt's searches
share REGEX_TIMEOUT_S and a run's share RUN_REGEX_S (``Context.regex_clock``, README "Set files"):
once they are spent a search still gets ``compiling.MIN_SEARCH_S``, so a hostile prompt costs a
run milliseconds, not a second each. A schema's patterns are searched the same way."""

from __future__ import annotations

from typing import Any

from evalkit.assertions.compiling import CompiledRegex, RegexGaveUp, SlowRegex, compile_regex, search_slowly
from evalkit.assertions.registry import HELD, AssertionValueError, Context, Outcome, Where, register

REGEX_TIMEOUT_S = 1.0  # a prompt's slow searches together (a schema's patterns included)
RUN_REGEX_S = 10.0  # a run's

__all__ = ["REGEX_TIMEOUT_S", "RUN_REGEX_S", "SlowRegex", "search"]


def _check(value: Any, where: Where) -> CompiledRegex:
    if not isinstance(value, str) or not value:
        raise AssertionValueError("must be a non-empty string: /pattern/flags or a bare pattern")
    return compile_regex(value)


def search(compiled: CompiledRegex, response: str, context: Context) -> Outcome:
    budget_s = context.regex_budget_s
    try:
        if budget_s is not None:
            found = compiled.pattern.search(response, timeout=budget_s) is not None
        else:
            found = search_slowly(compiled.pattern, response, context.regex_clock, REGEX_TIMEOUT_S)
    except TimeoutError:
        raise SlowRegex from None
    except RegexGaveUp as exc:
        reason = f"regex {compiled.source}: {exc.why} (catastrophic backtracking?)"
        return Outcome(False, 0.0, reason, undecided=True)  # not_regex does not hold either
    if found:
        return HELD
    return Outcome(False, 0.0, f"regex {compiled.source}: no match")


register("regex", check=_check, evaluate=search, schema={"type": "string", "minLength": 1},
         description="/pattern/flags (flags from imsxu) or a bare pattern; searches anywhere.")  # fmt: skip
