"""Statistics a user reads off a comparison: --significance judges a drop only by shared items
that dropped too; the --repeat pass-rate interval is not a point when samples vary; a run kept
without items tells no per-prompt figures; compare sees no change where samples only changed
order."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from evalkit.compare import BaselineRun, compare_run, paired_test
from evalkit.records import ItemResult, RunResult, ServingRecord, Tolerances
from evalkit.report.summary import repeat_summary
from evalkit.runner import new_run_id
from evalkit.store import Store, save_run
from tests.factories import GEN, item

Outcome = tuple[str, bool, float]


def make_run(
    outcomes: Sequence[Outcome],
    *,
    repeats: int = 1,
    serving: ServingRecord = GEN,
    started_at: str = "2026-11-30T12:00:00+00:00",
) -> RunResult:
    items: list[ItemResult] = []
    seen: dict[str, int] = {}
    for item_id, passed, score in outcomes:
        entry = replace(item(item_id, passed, score=score, serving=serving), repeat=seen.get(item_id, 0))
        seen[item_id] = seen.get(item_id, 0) + 1
        items.append(entry)
    return RunResult.create(
        tuple(items),
        run_id=new_run_id(),
        set_id="demo.set",
        set_fingerprint="f" * 16,
        provider=serving.provider,
        model=serving.model,
        grader="deterministic",
        started_at=started_at,
        finished_at=started_at,
        tolerances=Tolerances(Decimal("0.1"), Decimal("0.1")),
        repeats=repeats,
    )


def outcomes_of(run: RunResult) -> list[Outcome]:
    return [(i.id, i.passed, i.score) for i in run.items]


def stored(run: RunResult) -> BaselineRun:
    return BaselineRun(run.run_id, run.pass_rate, run.mean_score, run.passed_count, run.sample_count, "f" * 16)


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


# -- the --significance gate ---------------------------------------------------------------------


def test_a_drop_with_no_paired_items_is_not_called_insignificant() -> None:
    # Every prompt id renamed: 20/20 -> 0/20. Nothing can be paired, so nothing was tested; the
    # gate must not turn a 100 pp drop into "not significant" (with paired=None it stays a regression).
    baseline = make_run([(f"p{i}", True, 1.0) for i in range(20)])
    current = make_run([(f"faq-{i}", False, 0.0) for i in range(20)])
    paired = paired_test(outcomes_of(baseline), outcomes_of(current))
    assert paired.paired == 0
    comparison = compare_run(current, stored(baseline), current.tolerances, paired, significance=0.05)
    assert comparison.regressed


def test_a_significant_gain_is_not_reported_as_a_significant_drop() -> None:
    # Baseline: 20 prompts, 10 pass. Current: the same 20 all pass (10 fail->pass, 0 pass->fail,
    # exact two-sided p = 2/2**10 = 0.00195) and 40 new prompts fail, so the run-level rate drops
    # 50% -> 33.3%. The paired test found an improvement; it cannot make the drop "significant".
    baseline = make_run([(f"p{i}", i < 10, 1.0 if i < 10 else 0.0) for i in range(20)])
    current = make_run([(f"p{i}", True, 1.0) for i in range(20)] + [(f"n{i}", False, 0.0) for i in range(40)])
    paired = paired_test(outcomes_of(baseline), outcomes_of(current))
    assert (paired.lost, paired.gained, paired.p_value) == (0, 10, 2 / 2**10)
    comparison = compare_run(current, stored(baseline), current.tolerances, paired, significance=0.05)
    assert "Significant at 0.05" not in comparison.reason


# -- --repeat N: the 95% interval of the pass rate -----------------------------------------------


def test_repeat_interval_of_one_prompt_is_not_a_point() -> None:
    # One prompt, 5 samples, 2 pass: the Wilson 95% interval is about [0.118, 0.769].
    run = make_run([("p0", o, 1.0 if o else 0.0) for o in (True, True, False, False, False)], repeats=5)
    low, high = repeat_summary(run).pass_rate_ci
    expected = wilson(2, 5)
    assert expected[0] == pytest.approx(0.1176, abs=1e-4)
    assert low < 0.4 < high


def test_repeat_interval_of_equally_flaky_prompts_is_not_a_point() -> None:
    # Four prompts, each passing 5 of 10 samples: 20/40 passes, yet the interval is [0.5, 0.5].
    run = make_run([(f"p{i}", r % 2 == 0, float(r % 2 == 0)) for i in range(4) for r in range(10)], repeats=10)
    low, high = repeat_summary(run).pass_rate_ci
    assert low < 0.5 < high


def test_show_of_a_repeated_run_without_items_does_not_report_zero_rates(cli: Any, db_file: Path) -> None:
    run = make_run([(f"p{i}", True, 1.0) for i in range(4) for _ in range(3)], repeats=3)
    with Store.open(db_file) as store:
        save_run(store, run, "none", "test")
    result = cli("show", run.run_id, "--db", str(db_file), "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["pass_rate"] == 1.0
    # unknown (absent or null) is fine; 0.0 and an interval excluding the pass rate are not
    assert doc.get("pass_at_n_rate") != 0.0
    assert doc.get("pass_all_rate") != 0.0
    assert doc.get("pass_rate_ci95") != [0.0, 0.0]


# -- evalkit compare -----------------------------------------------------------------------------


def test_compare_does_not_list_an_item_whose_samples_only_changed_order(cli: Any, db_file: Path) -> None:
    # p0 has the same three sample scores {1/3, 1, 1} in both runs, in another repeat order:
    # (1/3 + 1 + 1) / 3 and (1 + 1 + 1/3) / 3 differ in the last bit of the float mean.
    first = make_run([("p0", False, 1 / 3), ("p0", True, 1.0), ("p0", True, 1.0), ("p1", True, 1.0)], repeats=3)
    second = make_run(
        [("p0", True, 1.0), ("p0", True, 1.0), ("p0", False, 1 / 3), ("p1", True, 1.0)],
        repeats=3,
        started_at="2026-11-30T12:01:00+00:00",
    )
    with Store.open(db_file) as store:
        for run in (first, second):
            save_run(store, run, "metadata", "test")
    result = cli("compare", first.run_id, second.run_id, "--db", str(db_file), "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["flips"] == []
    assert doc["paired"]["mean_score_delta"] == 0.0


# -- evalkit report ------------------------------------------------------------------------------
