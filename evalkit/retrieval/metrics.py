"""Retrieval scoring (docs/contract.md "Retrieval evaluation"): pure functions over labelled questions and rankings.

A ranking is first reduced to its distinct, non-empty ids in order. Top-1 hit: the first is
expected; top-3 hit: any of the first three is expected. A question with no expected ids is a
hit only when the retriever returns nothing. MRR@10, recall@3, recall@10 and nDCG@10 use binary
relevance over the distinct ranking (ideal DCG from the expected ids) and are averaged over the
questions that have expected ids; the others are counted as left out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from evalkit.records import Question

SCORING_VERSION = "evalkit.retrieval_hit_rate.v1"


def distinct(ranking: Iterable[str]) -> list[str]:
    """Distinct, non-blank ids in first-seen order."""
    seen: dict[str, None] = {}
    for doc_id in ranking:
        if isinstance(doc_id, str) and doc_id.strip() and doc_id not in seen:
            seen[doc_id] = None
    return list(seen)


def hits(expected: Sequence[str], ranking: Sequence[str]) -> tuple[bool, bool]:
    """(top-1 hit, top-3 hit) of a distinct ranking."""
    if not expected:
        empty = not ranking
        return empty, empty
    wanted = set(expected)
    return bool(ranking) and ranking[0] in wanted, any(d in wanted for d in ranking[:3])


def reciprocal_rank(expected: Sequence[str], ranking: Sequence[str], k: int = 10) -> float:
    wanted = set(expected)
    return next((1.0 / (i + 1) for i, d in enumerate(ranking[:k]) if d in wanted), 0.0)


def recall(expected: Sequence[str], ranking: Sequence[str], k: int) -> float:
    wanted = set(expected)
    return sum(1 for d in ranking[:k] if d in wanted) / len(wanted)


def ndcg(expected: Sequence[str], ranking: Sequence[str], k: int = 10) -> float:
    wanted = set(expected)
    dcg = sum(1.0 / math.log2(i + 2) for i, d in enumerate(ranking[:k]) if d in wanted)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(wanted), k)))
    return dcg / ideal


@dataclass(frozen=True, slots=True)
class Rates:
    questions: int
    top1_hit_rate: float
    top3_hit_rate: float

    def as_dict(self) -> dict[str, float | int]:
        return {"questions": self.questions, "top1_hit_rate": self.top1_hit_rate, "top3_hit_rate": self.top3_hit_rate}


@dataclass(frozen=True, slots=True)
class Scores:
    rates: Rates
    by_form: dict[str, Rates]
    by_hard_class: dict[str, Rates]
    metrics: dict[str, float]
    scored: int  # questions with expected ids (the ranking metrics' denominator)
    left_out: int  # questions without expected ids
    top1_hits: int = 0
    top3_hits: int = 0
    per_question: tuple[tuple[bool, bool], ...] = field(default=())


def _rates(flags: Sequence[tuple[bool, bool]]) -> Rates:
    n = len(flags)
    return Rates(n, sum(t1 for t1, _ in flags) / n if n else 0.0, sum(t3 for _, t3 in flags) / n if n else 0.0)


def score(
    questions: Sequence[Question], rankings: Sequence[Sequence[str]], failed: Sequence[bool] | None = None
) -> Scores:
    """Hit rates, breakdowns and ranking metrics for ``rankings`` (already distinct).

    A question whose retrieval ``failed`` is a miss, even one that expects nothing.
    """
    failures = failed or [False] * len(questions)
    flags = [
        (False, False) if bad else hits(q.expected, r) for q, r, bad in zip(questions, rankings, failures, strict=True)
    ]
    by_form: dict[str, list[tuple[bool, bool]]] = {}
    by_class: dict[str, list[tuple[bool, bool]]] = {}
    for question, flag in zip(questions, flags, strict=True):
        by_form.setdefault(question.form, []).append(flag)
        if question.hard_class:
            by_class.setdefault(question.hard_class, []).append(flag)
    labelled = [(q, r) for q, r in zip(questions, rankings, strict=True) if q.expected]
    n = len(labelled)

    def mean(values: Iterable[float]) -> float:
        return sum(values) / n if n else 0.0

    metrics = {
        "mrr@10": mean(reciprocal_rank(q.expected, r) for q, r in labelled),
        "recall@3": mean(recall(q.expected, r, 3) for q, r in labelled),
        "recall@10": mean(recall(q.expected, r, 10) for q, r in labelled),
        "ndcg@10": mean(ndcg(q.expected, r) for q, r in labelled),
    }
    return Scores(
        rates=_rates(flags),
        by_form={k: _rates(v) for k, v in sorted(by_form.items())},
        by_hard_class={k: _rates(v) for k, v in sorted(by_class.items())},
        metrics=metrics,
        scored=n,
        left_out=len(questions) - n,
        top1_hits=sum(t1 for t1, _ in flags),
        top3_hits=sum(t3 for _, t3 in flags),
        per_question=tuple(flags),
    )
