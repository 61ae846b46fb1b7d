"""Run records: a prompt run and a retrieval run with their items and aggregates. Aggregates are
derived from the items when a run is made, so they can never disagree with them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any, Literal

from evalkit.records.base import record
from evalkit.records.batches import BatchCost
from evalkit.records.calls import ServingRecord, Usage
from evalkit.records.comparisons import Comparison
from evalkit.records.grades import ItemResult
from evalkit.records.sets import Gate, RetrievalTolerances, Tolerances
from evalkit.verdicts import GateVerdict


def shared_generator(serving: list[ServingRecord | None]) -> ServingRecord | None:
    """The one verified serving record every answered item reports, else None."""
    answered = [s for s in serving if s is not None]
    if not answered or not all(s.verified for s in answered):
        return None
    first = answered[0]
    return first if all(s == first for s in answered) else None


@record
class Aggregates:
    """A run's counts and rates; both rates are 0.0 for a run with no items."""

    item_count: int = 0
    passed_count: int = 0
    error_count: int = 0
    pass_rate: float = 0.0
    mean_score: float = 0.0

    @classmethod
    def of(cls, items: tuple[ItemResult, ...]) -> Aggregates:
        n = len(items)
        passed = sum(1 for i in items if i.passed)
        return cls(
            item_count=n,
            passed_count=passed,
            error_count=sum(1 for i in items if i.errored),
            pass_rate=passed / n if n else 0.0,
            mean_score=sum(i.score for i in items) / n if n else 0.0,
        )


@record
class Shard:
    """Where a run stands in a sharded run (README "Larger suites: shards and batches"): shard
    ``index`` of ``count`` in run ``group``; ``index`` None for the run ``evalkit gate`` assembled
    from all of them."""

    index: int | None
    count: int
    group: str
    # a part's facts of its whole set, so evalkit gate needs no set file to assemble and gate it
    set_prompts: int = 0  # the whole set's prompt count
    positions: tuple[int, ...] = ()  # each of the part's prompts' position in the whole set
    critical: tuple[str, ...] = ()  # the part's critical prompts
    minimums: Gate = Gate()  # the set's own gate: minimums

    @property
    def is_part(self) -> bool:
        return self.index is not None

    def as_dict(self) -> dict[str, int | str | None]:
        return {"index": self.index, "count": self.count, "group": self.group}


@record
class RunResult:
    """A prompt run: what ran, on which generator, each item, and the aggregates.

    Built by ``RunResult.create`` from items (aggregates and generator derived from them), or
    read back from the store (where items may be absent under the ``none`` privacy level).
    """

    run_id: str
    set_id: str
    set_fingerprint: str
    provider: str
    model: str
    grader: str  # the stored grader: deterministic, a decision yardstick, decision, decision:failed
    items: tuple[ItemResult, ...]
    started_at: str
    finished_at: str
    generator: ServingRecord | None
    totals: Aggregates
    tolerances: Tolerances = Tolerances()
    comparison: Comparison | None = None
    set_name: str = ""
    set_path: str | None = None
    adapter: str = ""
    usage: Usage = Usage()
    grader_usage: Usage = Usage()
    cost: float | None = None
    grader_cost: float | None = None
    judge_calls: int = 0  # judge and embedding calls (README "Model-graded assertions"), cached ones included
    judge_cached: int = 0  # of them, answered by the completion cache
    repeats: int = 1
    gate: GateVerdict | None = None  # the gate verdict, once decided (evalkit.compare.gate_of)
    kind: Literal["prompts"] = "prompts"
    shard: Shard | None = None  # a shard's part, or a run assembled from a group's shards
    batch: BatchCost | None = None  # answered through provider batches (README "Batches")

    @classmethod
    def create(cls, items: tuple[ItemResult, ...], **fields: Any) -> RunResult:
        usage, grader_usage = Usage(), Usage()
        for item in items:
            if not item.cached:
                usage = usage + item.usage
            grader_usage = grader_usage + item.grader_usage
        return cls(
            judge_calls=sum(i.judge_calls for i in items),
            judge_cached=sum(i.judge_cached for i in items),
            items=items,
            generator=shared_generator([i.serving for i in items]),
            totals=Aggregates.of(items),
            usage=usage,
            grader_usage=grader_usage,
            **fields,
        )

    @property
    def sample_count(self) -> int:
        """Answers graded: prompts x repeats."""
        return self.totals.item_count

    @property
    def prompt_count(self) -> int:
        return self.totals.item_count // max(1, self.repeats)

    @property
    def passed_count(self) -> int:
        return self.totals.passed_count

    @property
    def error_count(self) -> int:
        return self.totals.error_count

    @property
    def pass_rate(self) -> float:
        return self.totals.pass_rate

    @property
    def mean_score(self) -> float:
        return self.totals.mean_score


@record
class Ranking:
    """What a retriever returns for one question: ranked ids and any provenance it declares."""

    ids: tuple[str, ...]
    provenance: Mapping[str, object] = field(default_factory=dict)
    latency_ms: float = 0.0


@record
class RetrievalItem:
    """One labelled question's outcome: hits, and the first three distinct ids retrieved."""

    id: str
    form: str
    hard_class: str | None
    top1_hit: bool
    top3_hit: bool
    retrieved: tuple[str, ...]
    question: str = ""
    error: str | None = None
    latency_ms: float | None = None

    @property
    def errored(self) -> bool:
        return self.error is not None


@record
class RetrievalRunResult:
    """A retrieval run: rates, breakdowns, ranking metrics, provenance and fingerprints."""

    run_id: str
    set_id: str
    retriever: str
    items: tuple[RetrievalItem, ...]
    started_at: str
    finished_at: str
    question_count: int
    top1_hit_rate: float
    top3_hit_rate: float
    by_form: Mapping[str, Mapping[str, float | int]]
    by_hard_class: Mapping[str, Mapping[str, float | int]]
    metrics: Mapping[str, float]
    scored: int
    left_out: int
    provenance: Mapping[str, str | None]
    benchmark_fingerprint: str | None
    variant_fingerprint: str
    top1_hits: int = 0
    top3_hits: int = 0
    tolerances: RetrievalTolerances = RetrievalTolerances()
    comparison: Comparison | None = None
    set_name: str = ""
    set_path: str | None = None
    error_count: int = 0
    gate: GateVerdict | None = None  # the gate verdict, once decided (evalkit.compare.gate_of)
    kind: Literal["retrieval"] = "retrieval"
    grader: str = "retrieval_hit_rate"
