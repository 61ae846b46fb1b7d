"""Plain-text helpers shared by the rich tables and the markdown (no rich here)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from evalkit.verdicts import ComparisonState

if TYPE_CHECKING:  # the records' import is ~0.15 s that `evalkit --help` need not pay
    from evalkit.rows import RunComparison

SPARKS = "▁▂▃▄▅▆▇█"


# Characters a terminal acts on or hides: C0 and C1 controls (escape sequences, carriage return,
# backspace), DEL, bidirectional overrides and zero-width characters. Newline and tab stay.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")


def printable(text: str) -> str:
    """``text`` safe to show: what a terminal would act on or hide is written as an escape
    (``\\x1b``, ``\\u202e``). Answers, ids, models and error texts come from users and endpoints."""
    return _UNSAFE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def sparkline(values: Sequence[float | None]) -> str:
    """Rates in 0..1 as block characters (oldest first)."""
    out = []
    for value in values:
        if value is None:
            out.append(" ")
        else:
            out.append(SPARKS[min(len(SPARKS) - 1, max(0, int(value * (len(SPARKS) - 1) + 0.5)))])
    return "".join(out)


def instance(provider: str, model: str | None) -> str:
    """``provider/model``; a retriever without a model revision shows ``provider/—``."""
    return f"{provider}/{model or '—'}"


def percent(rate: float | None) -> str:
    return "—" if rate is None else f"{rate * 100:.1f}%"


def verdict_label(state: str | None, regressed: bool | None) -> str:
    """A stored run's verdict in the history: ``regressed``, ``no regression`` for a run compared
    without regressing, else its comparison state (``baseline``, ``not_compared`` ...)."""
    if regressed:
        return "regressed"
    known = ComparisonState.read(state)
    return "no regression" if known is not None and known.is_compared else (state or "—")


def outcome_label(rate: float, retrieval: bool = False) -> str:
    """An item's outcome in ``evalkit compare``: ``pass`` / ``fail`` (a retrieval question: ``hit`` /
    ``miss``) when every sample agreed, else the share that passed (shared by table and markdown)."""
    if rate in (0.0, 1.0):
        held, missed = ("hit", "miss") if retrieval else ("pass", "fail")
        return held if rate else missed
    return percent(rate)


def clip(text: str | None, limit: int = 120) -> str:
    if text is None:
        return ""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def comparison_lines(result: RunComparison) -> list[str]:
    """The verdict of ``evalkit compare`` in words (shared by table and markdown)."""
    test = result.test
    first, second = result.first, result.second
    if first.kind == "retrieval":
        return _retrieval_comparison_lines(result)
    lines = [
        f"Paired items: {test.paired} ({test.only_first} only in the first run, {test.only_second} only in the second)",
        f"{test.describe()} ({test.test}: {test.lost} pass->fail, {test.gained} fail->pass)",
        f"pass rate {test.p_text(one_sided=True)} of a drop (what run --significance gates on)",
        f"mean score {test.mean_score_delta:+.3f} ({test.score_interval()})",
        f"Whole runs: pass rate {percent(first.pass_rate)} -> {percent(second.pass_rate)}, "
        f"mean score {first.mean_score:.3f} -> {second.mean_score:.3f}",
    ]
    return lines


def _retrieval_comparison_lines(result: RunComparison) -> list[str]:
    """The same verdict for two retrieval runs, in their terms: a stored retrieval item "passed"
    when its top-1 id was expected and "scored" 1 when one of its top three was."""
    test = result.test
    first, second = result.first, result.second
    low, high = test.mean_score_ci
    top3 = f"95% CI {low * 100:+.1f} … {high * 100:+.1f}" if low != high else test.score_interval()
    return [
        f"Paired questions: {test.paired} ({test.only_first} only in the first run, {test.only_second} only in the second)",
        # the paired test of the stored "pass" (here: the top-1 hit)
        f"{test.describe(measure='top-1 hit rate')} ({test.test}: {test.lost} hit->miss, {test.gained} miss->hit)",
        f"top-3 hit rate {test.mean_score_delta * 100:+.1f} pp ({top3})",
        f"Whole runs: top-1 hit rate {percent(first.pass_rate)} -> {percent(second.pass_rate)}, "
        f"top-3 hit rate {percent(first.mean_score)} -> {percent(second.mean_score)}",
    ]
