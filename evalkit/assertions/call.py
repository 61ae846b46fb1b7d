"""Assertions on the call rather than the text: latency_ms and cost.

- latency_ms: the call took at most that many milliseconds (an answer replayed from the cache
  keeps its original latency; a recorded answer without one fails, saying so, and so does
  not_latency_ms: it is undecided).
- cost: the call's priced cost in USD is at most that. It needs a priced instance (``cost:`` in
  evalkit.yaml): a set asking it of an unpriced one is a load error (the plan checks it).
"""

from __future__ import annotations

import math
from typing import Any

from evalkit.assertions.registry import HELD, AssertionValueError, Context, Outcome, Where, register

_NUMBER = {"type": "number", "minimum": 0}


def _bound(value: Any, where: Where) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise AssertionValueError(f"must be a finite number, 0 or more, got {value!r}")
    return float(value)


def latency_ms(limit: float, response: str, context: Context) -> Outcome:
    took = context.latency_ms
    if took is None:
        return Outcome(False, 0.0, "latency_ms: the answer has no recorded latency", undecided=True)
    if took <= limit:
        return HELD
    return Outcome(False, 0.0, f"latency_ms: took {took:.0f} ms, more than {limit:g} ms")


def cost(limit: float, response: str, context: Context) -> Outcome:
    spent = context.cost
    if spent is None:
        reason = "cost: the call has no priced cost (set cost: on the instance in evalkit.yaml)"
        return Outcome(False, 0.0, reason, undecided=True)
    if spent <= limit:
        return HELD
    return Outcome(False, 0.0, f"cost: ${spent:.6f}, more than ${limit:g}")


register("latency_ms", check=_bound, evaluate=latency_ms, schema=_NUMBER,
         description="The call took at most this many milliseconds (cached answers: their original latency).")  # fmt: skip
register("cost", check=_bound, evaluate=cost, schema=_NUMBER, needs=frozenset({"cost"}),
         description="The call's priced cost in USD is at most this (the instance must set cost: in evalkit.yaml).")  # fmt: skip
