"""Typed rows of the stored history: what the store returns and the API and the report read.

A ``RunRow`` is one row of the ``runs`` table (README "Database schema"); the commands print it as JSON
in the key order each one has always used (``history_dict`` for ``evalkit report --format json``,
``summary_dict`` for ``evalkit compare``). ``RunFilter`` holds ``report``'s filters;
``RunComparison``, ``Flip`` and ``RankedModel`` are what ``compare`` and ``models`` print. They live
below the report layer, so the report types its parameters without importing upward.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Generic, TypeVar

from evalkit.records import PairedTest

Config = TypeVar("Config")


@dataclass(frozen=True, slots=True)
class RunFilter:
    """``evalkit report``'s filters (README "Commands"): a set, a provider instance, a model alias, a
    grader, and how many runs (the newest; per set in the HTML report)."""

    set_id: str | None = None
    provider: str | None = None
    model: str | None = None
    grader: str | None = None
    limit: int | None = None

    def columns(self) -> dict[str, str | None]:
        """The filtered columns of ``runs`` and their wanted values (None: any)."""
        return {"set_id": self.set_id, "provider": self.provider, "model": self.model, "grader": self.grader}


EVERY_RUN = RunFilter()


def iso_time(moment: object) -> str | None:
    """A stored (naive UTC) timestamp as the JSON prints it: ``2026-11-01T00:00:00+00:00``."""
    if isinstance(moment, datetime):
        return moment.replace(tzinfo=UTC).isoformat(timespec="seconds")
    return None if moment is None else str(moment)


@dataclass(frozen=True, slots=True)
class RunRow:
    """One stored run without its items (a row of ``runs``). A retrieval run's ``pass_rate`` is its
    top-1 hit rate and ``mean_score`` its top-3 hit rate; ``started_at`` is ISO 8601 in UTC."""

    run_id: str
    set_id: str
    kind: str
    grader: str
    provider: str
    model: str | None
    reported_model: str | None
    pass_rate: float
    mean_score: float
    item_count: int
    error_count: int
    started_at: str
    comparison_state: str | None = None
    regressed: bool | None = None
    baseline_run_id: str | None = None
    accepted_at: str | None = None
    privacy: str | None = None
    set_name: str | None = None

    def history_dict(self) -> dict[str, object]:
        """The row as ``evalkit report --format json`` lists it (README "JSON output")."""
        return {
            "run_id": self.run_id, "set": self.set_id, "kind": self.kind, "grader": self.grader,
            "provider": self.provider, "model": self.model, "reported_model": self.reported_model,
            "pass_rate": self.pass_rate, "mean_score": self.mean_score, "item_count": self.item_count,
            "error_count": self.error_count, "started_at": self.started_at,
            "comparison_state": self.comparison_state, "regressed": self.regressed,
        }  # fmt: skip

    def summary_dict(self) -> dict[str, object]:
        """The row as ``evalkit compare --format json`` shows each run."""
        return {
            "run_id": self.run_id, "set_id": self.set_id, "kind": self.kind, "provider": self.provider,
            "model": self.model, "reported_model": self.reported_model, "grader": self.grader,
            "pass_rate": self.pass_rate, "mean_score": self.mean_score, "item_count": self.item_count,
            "started_at": self.started_at, "privacy": self.privacy,
        }  # fmt: skip


@dataclass(frozen=True, slots=True)
class SetSummary:
    """A set's line of the ``evalkit report`` summary: its latest run, the recent pass-rate trend of
    that run's scope, and how many runs of the set are stored."""

    latest: RunRow
    trend: tuple[float, ...]
    total_runs: int


@dataclass(frozen=True, slots=True)
class Flip:
    """An item whose pass rate or score changed between two compared runs."""

    id: str
    first_pass_rate: float
    second_pass_rate: float
    first_score: float
    second_score: float

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "first_pass_rate": self.first_pass_rate,
            "second_pass_rate": self.second_pass_rate,
            "first_score": self.first_score,
            "second_score": self.second_score,
            "score_delta": self.second_score - self.first_score,
        }


@dataclass(frozen=True, slots=True)
class RunComparison:
    """Two stored runs compared item by item (README "Commands", evalkit compare)."""

    first: RunRow
    second: RunRow
    test: PairedTest
    flips: tuple[Flip, ...]  # items whose pass rate or score changed

    def as_dict(self) -> dict[str, object]:
        return {
            "first": self.first.summary_dict(),
            "second": self.second.summary_dict(),
            "pass_rate_delta": self.second.pass_rate - self.first.pass_rate,
            "mean_score_delta": self.second.mean_score - self.first.mean_score,
            "paired": self.test.as_dict(),
            "flips": [f.as_dict() for f in self.flips],
        }


@dataclass(frozen=True, slots=True)
class RankedModel(Generic[Config]):
    """One provider instance in ``evalkit models`` (docs/contract.md "Model ranking"); ``config`` is
    the instance's configuration (a ``ProviderConfig``)."""

    rank: int
    provider: str
    model: str
    priority: int
    quality: float | None
    sets: int
    cost: dict[str, float] | None
    config: Config

    def as_dict(self) -> dict[str, object]:
        return {
            "rank": self.rank,
            "provider": self.provider,
            "model": self.model,
            "priority": self.priority,
            "quality": self.quality,
            "sets": self.sets,
            "cost": self.cost,
        }


def trend_of(values: Sequence[float] | None) -> tuple[float, ...]:
    """A stored trend list as a tuple (an empty one when the set has none)."""
    return tuple(float(v) for v in values or ())
