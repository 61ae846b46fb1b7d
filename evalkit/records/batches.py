"""Provider batches (README "Batches"): a submitted batch waiting in the database, and what a
collected run's batch saved."""

from __future__ import annotations

from evalkit.records.base import JsonValue, record


@record
class PendingBatch:
    """One provider batch of a ``run --batch`` submission, as the database keeps it until collected.

    ``plan`` holds the run's options (sets, scope, grader, gates), ``custom_ids`` maps each
    request's custom id to ``[set id, prompt id, repeat]``; a submission's batches are collected
    together."""

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


@record
class BatchCost:
    """What a run answered through provider batches saved against the standard price."""

    batch_ids: tuple[str, ...]
    discount: float  # the instance's cost.batch_discount
    standard_cost: float | None  # the same tokens at the standard price (None: unpriced)

    def saving(self, cost: float | None) -> float | None:
        return None if cost is None or self.standard_cost is None else self.standard_cost - cost

    def as_dict(self, cost: float | None) -> dict[str, JsonValue]:
        return {
            "batch_ids": list(self.batch_ids),
            "discount": self.discount,
            "standard_cost": self.standard_cost,
            "saving": self.saving(cost),
        }
