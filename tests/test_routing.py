"""Quality-aware ranking (docs/contract.md "Model ranking"): the four policies as pure functions, and the measured quality
read from a real DuckDB history through ``evalkit.rank_models`` / ``evalkit.select_by_quality``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import evalkit
from evalkit.config import Cost, ProviderConfig
from evalkit.errors import UnknownNameError
from evalkit.records import ServingRecord
from evalkit.routing import Measured, order, rank
from evalkit.store import Store, save_run
from tests.factories import run_of


def measured(
    instance: str,
    *,
    priority: int = 0,
    quality: float | None = None,
    price: tuple[float, float] | None = None,
    sets: int | None = None,
) -> Measured:
    cost = Cost(*price) if price is not None else None
    config = ProviderConfig(id=instance, adapter="openai", model=f"{instance}-alias", priority=priority, cost=cost)
    return Measured(config, f"{instance}-alias", quality, (0 if quality is None else 1) if sets is None else sets)


def ids(ranked: list[Measured]) -> list[str]:
    return [m.config.id for m in ranked]


# -- policies as pure functions ---------------------------------------------------------------


def test_priority_orders_by_priority_then_id() -> None:
    pool = [
        measured("c", priority=5, quality=1.0),
        measured("b", priority=10),
        measured("a", priority=5, quality=0.0),
        measured("d", priority=-1, quality=0.9),
    ]
    assert ids(order(pool, "priority")) == ["b", "a", "c", "d"]


def test_quality_puts_unknown_last_and_keeps_a_measured_zero() -> None:
    pool = [
        measured("unknown-high", priority=100),
        measured("zero", priority=0, quality=0.0),
        measured("best", priority=0, quality=0.9),
        measured("unknown-low", priority=1),
        measured("mid", priority=0, quality=0.4),
    ]
    # A measured 0 is a signal (it ranks before every unknown); unknown is not 0.
    assert ids(order(pool, "quality")) == ["best", "mid", "zero", "unknown-high", "unknown-low"]


def test_quality_ties_are_broken_by_priority_then_id() -> None:
    pool = [
        measured("z", priority=1, quality=0.5),
        measured("y", priority=3, quality=0.5),
        measured("x", priority=1, quality=0.5),
        measured("w", priority=2),
        measured("v", priority=2),
    ]
    assert ids(order(pool, "quality")) == ["y", "x", "z", "v", "w"]


def test_balanced_mixes_quality_and_scaled_priority() -> None:
    # priorities 0..100 scale to 0..1; unknown quality counts 0.5.
    pool = [
        measured("top-priority-zero-quality", priority=100, quality=0.0),  # (0.0 + 1.0) / 2 = 0.50
        measured("good-mid", priority=50, quality=0.9),  # (0.9 + 0.5) / 2 = 0.70
        measured("unknown-mid", priority=50),  # (0.5 + 0.5) / 2 = 0.50
        measured("perfect-low", priority=0, quality=1.0),  # (1.0 + 0.0) / 2 = 0.50
        measured("unknown-low", priority=0),  # (0.5 + 0.0) / 2 = 0.25
        measured("bad-mid", priority=50, quality=0.1),  # (0.1 + 0.5) / 2 = 0.30
    ]
    assert ids(order(pool, "balanced")) == [
        "good-mid",
        # three at 0.50: priority breaks the tie
        "top-priority-zero-quality",
        "unknown-mid",
        "perfect-low",
        "bad-mid",
        "unknown-low",
    ]


def test_balanced_with_equal_priorities_is_quality_with_unknown_as_half() -> None:
    pool = [measured("b", priority=7), measured("a", priority=7, quality=0.6), measured("c", priority=7, quality=0.4)]
    assert ids(order(pool, "balanced")) == ["a", "b", "c"]
    tie = [measured("b", priority=7), measured("a", priority=7, quality=0.5)]
    assert ids(order(tie, "balanced")) == ["a", "b"]


def test_balanced_ties_survive_floating_point() -> None:
    # priorities 0..10: x scales to 0.5, y to 0.4. x: (0.1 + 0.5) / 2 = 0.3; y: (0.2 + 0.4) / 2 = 0.3.
    # An exact tie, so the higher priority (x) must come first.
    pool = [
        measured("anchor-low", priority=0, quality=0.0),
        measured("y", priority=4, quality=0.2),
        measured("x", priority=5, quality=0.1),
        measured("anchor-high", priority=10, quality=0.0),
    ]
    assert ids(order(pool, "balanced")) == ["anchor-high", "x", "y", "anchor-low"]


def test_economy_is_cheapest_first_and_priced_before_unpriced() -> None:
    pool = [
        measured("unpriced-high", priority=100, quality=1.0),
        measured("dear", price=(5.0, 15.0)),
        measured("free", price=(0.0, 0.0)),  # priced at zero: still priced
        measured("cheap-b", priority=1, price=(0.1, 0.4)),  # blended 0.5
        measured("cheap-a", priority=1, price=(0.25, 0.25)),  # blended 0.5: tie, id decides
        measured("cheap-high", priority=9, price=(0.4, 0.1)),  # blended 0.5: tie, priority decides
        measured("unpriced-low", priority=0),
    ]
    assert ids(order(pool, "economy")) == [
        "free",
        "cheap-high",
        "cheap-a",
        "cheap-b",
        "dear",
        "unpriced-high",
        "unpriced-low",
    ]


def test_economy_ties_survive_floating_point() -> None:
    pool = [measured("q", priority=1, price=(0.3, 0.0)), measured("p", priority=9, price=(0.1, 0.2))]
    # both blend to 0.30 per million tokens: the higher priority (p) first
    assert ids(order(pool, "economy")) == ["p", "q"]


def test_unknown_policy_is_refused() -> None:
    with pytest.raises(UnknownNameError, match=r"unknown policy 'cheapest' \(expected one of: priority, quality"):
        order([measured("a")], "cheapest")


def test_an_empty_pool_ranks_to_nothing() -> None:
    for policy in ("priority", "quality", "balanced", "economy"):
        assert rank([], policy) == []


def test_rank_numbers_from_one_and_min_quality_drops_unknown_and_below() -> None:
    pool = [
        measured("unknown", priority=50),
        measured("zero", quality=0.0),
        measured("edge", quality=0.5),
        measured("high", quality=0.75, price=(1.0, 2.0), sets=3),
        measured("low", quality=0.49),
    ]
    ranked = rank(pool, "quality", min_quality=0.5)
    assert [(r.rank, r.provider, r.quality) for r in ranked] == [(1, "high", 0.75), (2, "edge", 0.5)]
    assert ranked[0].as_dict() == {
        "rank": 1,
        "provider": "high",
        "model": "high-alias",
        "priority": 0,
        "quality": 0.75,
        "sets": 3,
        "cost": {"input_per_mtok": 1.0, "output_per_mtok": 2.0},
    }
    # min_quality 0 keeps a measured zero but still drops the unknown
    assert [r.provider for r in rank(pool, "priority", min_quality=0.0)] == ["edge", "high", "low", "zero"]
    # no threshold: everyone, the unknown included, with quality None (not 0)
    everyone = rank(pool, "priority")
    assert [r.rank for r in everyone] == [1, 2, 3, 4, 5]
    assert (everyone[0].provider, everyone[0].quality, everyone[0].sets) == ("unknown", None, 0)
    assert everyone[0].as_dict()["cost"] is None


# -- measured quality from a real DuckDB history ------------------------------------------------


def at(day: int) -> str:
    return f"2026-11-{day:02d}T10:00:00+00:00"


def save(db: Path, *runs: Any) -> None:
    with Store.open(db) as store:
        for run in runs:
            save_run(store, run, "metadata", "test")


ALPHA = ServingRecord("alpha", "shared", "model-a")
BETA = ServingRecord("beta", "shared", "model-b")


@pytest.fixture
def history(ranked_instances: Path, db_file: Path) -> None:
    """alpha: set one latest 1/2 (an older 2/2 is superseded), set two 4/4 -> quality 0.75 over 2 sets.

    Everything else stored for alpha must not count: a newer unverified run, a newer run with an
    errored item, a newer decision-graded run, a run under another alias. beta (the same alias on
    another instance) measured 0/3: a real zero, which must not leak into alpha. gamma: no data.
    """
    save(
        db_file,
        run_of(2, 2, set_id="q.one", serving=ALPHA, started_at=at(1)),
        run_of(1, 2, set_id="q.one", serving=ALPHA, started_at=at(2)),
        run_of(4, 4, set_id="q.two", serving=ALPHA, started_at=at(2)),
        run_of(0, 2, set_id="q.one", serving=ServingRecord("alpha", "shared", None), started_at=at(3)),
        run_of(0, 3, set_id="q.one", serving=ALPHA, errors=1, started_at=at(4)),
        run_of(0, 2, set_id="q.one", serving=ALPHA, grader="decision:judge:judge-1:v1", started_at=at(5)),
        run_of(0, 2, set_id="q.two", serving=ServingRecord("alpha", "override", "model-a"), started_at=at(6)),
        run_of(0, 3, set_id="q.one", serving=BETA, started_at=at(7)),
        run_of(0, 3, set_id="q.three", serving=BETA, started_at=at(1)),
    )


def test_rank_models_reads_measured_quality_per_instance(history: None, db_file: Path) -> None:
    ranked = evalkit.rank_models("quality", db=db_file)
    assert [(r.rank, r.provider, r.model, r.quality, r.sets) for r in ranked] == [
        (1, "alpha", "shared", 0.75, 2),
        (2, "beta", "shared", 0.0, 2),
        (3, "gamma", "other", None, 0),
    ]


def test_rank_models_under_every_policy(history: None, db_file: Path) -> None:
    def providers(policy: str) -> list[str]:
        return [r.provider for r in evalkit.rank_models(policy, db=db_file)]

    assert providers("priority") == ["gamma", "beta", "alpha"]
    assert providers("quality") == ["alpha", "beta", "gamma"]
    # alpha (0.75 + 0.0) / 2 = 0.375; beta (0.0 + 0.5) / 2 = 0.25; gamma (0.5 unknown + 1.0) / 2 = 0.75
    assert providers("balanced") == ["gamma", "alpha", "beta"]
    assert providers("economy") == ["beta", "alpha", "gamma"]


def test_rank_models_min_quality(history: None, db_file: Path) -> None:
    assert [r.provider for r in evalkit.rank_models("priority", 0.0, db=db_file)] == ["beta", "alpha"]
    assert [r.provider for r in evalkit.rank_models("priority", 0.75, db=db_file)] == ["alpha"]
    assert evalkit.rank_models("priority", 0.8, db=db_file) == []


def test_select_by_quality_returns_the_best_instance_or_none(history: None, db_file: Path) -> None:
    best = evalkit.select_by_quality(db=db_file)
    assert best is not None
    assert (best.provider, best.quality, best.sets) == ("alpha", 0.75, 2)
    assert evalkit.select_by_quality(0.8, db=db_file) is None


def test_select_by_quality_can_choose_a_measured_zero_but_never_an_unknown(
    ranked_instances: Path, db_file: Path
) -> None:
    save(db_file, run_of(0, 2, set_id="q.one", serving=BETA))
    best = evalkit.select_by_quality(db=db_file)
    assert best is not None
    assert (best.provider, best.quality) == ("beta", 0.0)


def test_select_by_quality_breaks_ties_by_priority(ranked_instances: Path, db_file: Path) -> None:
    save(db_file, run_of(1, 2, set_id="q.one", serving=ALPHA), run_of(1, 2, set_id="q.one", serving=BETA))
    best = evalkit.select_by_quality(db=db_file)
    assert best is not None
    assert best.provider == "beta"  # both 0.5; beta has the higher priority


def test_without_a_database_every_quality_is_unknown(ranked_instances: Path, db_file: Path) -> None:
    ranked = evalkit.rank_models("quality", db=db_file)
    assert [(r.provider, r.quality, r.sets) for r in ranked] == [
        ("gamma", None, 0),
        ("beta", None, 0),
        ("alpha", None, 0),
    ]
    assert evalkit.select_by_quality(db=db_file) is None
    assert not db_file.exists()  # ranking only reads: it never creates the database


def test_rank_models_refuses_an_unknown_policy(ranked_instances: Path, db_file: Path) -> None:
    with pytest.raises(UnknownNameError, match="unknown policy 'fastest'"):
        evalkit.rank_models("fastest", db=db_file)
