"""Provider batches (README "Batches"): a submitted batch waiting in the database, and what a
collected run's batch saved."""

from __future__ import annotations

from evalkit.records.base import JsonValue, record

PHASE_ANSWERS = "answers"  # a batch of the prompts' requests
PHASE_JUDGE = "judge"  # a batch of the judge's requests, sent once the answers are in


@record
class PendingBatch:
    """One provider batch of a ``run --batch`` submission, as the database keeps it until collected.

    ``plan`` holds the run's options (sets, scope, grader, gates). ``phase`` says what it holds:
    ``answers`` (``custom_ids`` maps each request's custom id to ``[set id, prompt id, repeat]``)
    or ``judge`` (each custom id is the judge request's cache key, mapped to ``[set id, prompt id,
    repeat, instance]`` of the first answer whose grading asks it). A submission's batches are
    collected together."""

    batch_id: str  # the provider's id, as printed at submit (batch_..., msgbatch_...)
    submission_id: str
    provider: str  # the instance id
    model: str  # the alias sent
    adapter: str
    state: str  # pending | collected
    submitted_at: str
    request_count: int
    set_fingerprints: dict[str, str]  # set id -> fingerprint at submit
    plan: dict[str, JsonValue]
    custom_ids: dict[str, list[JsonValue]]
    run_ids: tuple[str, ...] = ()
    collected_at: str | None = None
    phase: str = PHASE_ANSWERS  # answers | judge


@record
class JudgeBatchCost:
    """The judge's answers a run's grading took from provider batches, at both prices."""

    batch_ids: tuple[str, ...]
    standard_cost: float | None  # their tokens at the judge's standard price (None: unpriced)
    cost: float | None  # at its batch price

    def as_dict(self) -> dict[str, JsonValue]:
        saving = None if self.standard_cost is None or self.cost is None else self.standard_cost - self.cost
        return {
            "batch_ids": list(self.batch_ids),
            "standard_cost": self.standard_cost,
            "cost": self.cost,
            "saving": saving,
        }


@record
class BatchCost:
    """What a run answered (and graded) through provider batches saved against the standard price."""

    batch_ids: tuple[str, ...]  # the answers' batches
    discount: float  # the instance's cost.batch_discount
    standard_cost: float | None  # the answers' and the judge's batched tokens at the standard price (None: unpriced)
    judge: JudgeBatchCost | None = None  # the judge's batched answers, when a judge batch served the run

    def saving(self, cost: float | None) -> float | None:
        """The standard price less what was paid: ``cost`` (the answers') and the judge's batch cost."""
        if self.standard_cost is None:
            return None
        judged = self.judge.cost if self.judge is not None and self.judge.cost is not None else 0.0
        return self.standard_cost - (cost or 0.0) - judged

    def as_dict(self, cost: float | None) -> dict[str, JsonValue]:
        return {
            "batch_ids": list(self.batch_ids),
            "discount": self.discount,
            "standard_cost": self.standard_cost,
            "saving": self.saving(cost),
        } | ({"judge": self.judge.as_dict()} if self.judge is not None else {})
