"""Regression verdicts (README "Baselines and regressions"): exact arithmetic, states and gates."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalkit.compare import BaselineRun, compare_run, exact_ratio, gate_passed
from evalkit.records import Comparison, ServingRecord, Tolerances
from evalkit.verdicts import ComparisonState
from tests.factories import item, run_of


def baseline_of(passed: int, total: int, mean: float | None = None) -> BaselineRun:
    return BaselineRun("base-1", passed / total, passed / total if mean is None else mean, passed, total)


def tol(x: str) -> Tolerances:
    return Tolerances(Decimal(x), Decimal(x))


def test_drop_equal_to_tolerance_is_not_a_regression() -> None:
    result = compare_run(run_of(7, 10), baseline_of(8, 10), tol("0.1"))
    assert result.state == "compared"
    assert not result.regressed
    assert result.reason.startswith("No regression: pass rate -10.0 pp")


def test_drop_beyond_tolerance_is_a_regression() -> None:
    result = compare_run(run_of(7, 10), baseline_of(10, 10), tol("0.1"))
    assert result.regressed
    assert result.reason.startswith("Regression: pass rate dropped 30.0 pp, beyond the tolerance of 10.0 pp")
    assert result.pass_rate_delta == pytest.approx(-0.3)


def test_identical_two_thirds_at_tolerance_zero_is_not_a_regression() -> None:
    current = run_of(2, 3)
    baseline = BaselineRun("b", current.pass_rate, current.mean_score, 2, 3)
    result = compare_run(current, baseline, tol("0"))
    assert not result.regressed
    assert result.pass_rate_delta == 0.0
    assert result.mean_score_delta == 0.0
    assert result.reason == "No regression: pass rate +0.0 pp, mean score +0.000 against run b."


def test_raw_float_subtraction_would_get_the_boundary_wrong() -> None:
    # The reason for exact arithmetic: 0.8 - 0.7 > 0.1 in binary floating point.
    assert 0.8 - 0.7 > 0.1
    assert exact_ratio(8, 10) - exact_ratio(7, 10) == Decimal("0.1")


def test_mean_score_regression_reported_separately() -> None:
    current = run_of(10, 10)
    current_items = tuple(item(f"p{i}", True, score=0.5) for i in range(10))
    current = type(current).create(
        current_items,
        **{
            k: getattr(current, k)
            for k in (
                "run_id",
                "set_id",
                "set_fingerprint",
                "provider",
                "model",
                "grader",
                "started_at",
                "finished_at",
                "tolerances",
            )
        },
    )
    result = compare_run(current, BaselineRun("b", 1.0, 0.9, 10, 10), tol("0.1"))
    assert result.regressed
    assert "mean score dropped 0.400, beyond the tolerance of 0.100" in result.reason


def test_first_verified_run_is_the_baseline() -> None:
    result = compare_run(run_of(3, 4), None, tol("0.1"))
    assert result.state == "baseline"
    assert result.reason.startswith("Recorded as the baseline for demo.set on fake/alias-1 (reported model-1)")


@pytest.mark.parametrize(
    ("run", "reason"),
    [
        (run_of(3, 4, errors=1), "Not compared: 1 of 4 items errored"),
        (
            run_of(3, 4, serving=ServingRecord("fake", "alias-1", None)),
            "Not compared: no single verified serving generator",
        ),
        (run_of(3, 4, grader="decision"), "Not compared: its gradings do not share one yardstick"),
        (run_of(3, 4, grader="decision:failed"), "Not compared: every decision failed"),
    ],
)
def test_runs_that_cannot_be_compared(run, reason: str) -> None:
    result = compare_run(run, baseline_of(4, 4), tol("0.1"))
    assert result.state == "not_compared"
    assert result.reason.startswith(reason)
    assert not gate_passed(result, fail_on_regression=True)
    assert gate_passed(result, fail_on_regression=False)


def test_mixed_generators_are_not_compared() -> None:
    base = run_of(2, 2)
    other = ServingRecord("fake", "alias-1", "model-2")
    items = (*base.items[:1], item("x", True, serving=other))
    mixed = type(base).create(
        items,
        **{
            k: getattr(base, k)
            for k in (
                "run_id",
                "set_id",
                "set_fingerprint",
                "provider",
                "model",
                "grader",
                "started_at",
                "finished_at",
                "tolerances",
            )
        },
    )
    assert mixed.generator is None
    result = compare_run(mixed, baseline_of(2, 2), tol("0.1"))
    assert result.state == "not_compared"
    assert "2 different generators" in result.reason


@pytest.mark.parametrize(
    ("comparison", "flag", "passed"),
    [
        (Comparison(ComparisonState.BASELINE, "r"), True, True),
        (Comparison(ComparisonState.COMPARED, "r", regressed=False), True, True),
        (Comparison(ComparisonState.COMPARED, "r", regressed=True), True, False),
        (Comparison(ComparisonState.COMPARED, "r", regressed=True), False, True),
        (Comparison(ComparisonState.NOT_COMPARED, "r"), True, False),
    ],
)
def test_gate(comparison: Comparison, flag: bool, passed: bool) -> None:
    assert gate_passed(comparison, flag) is passed


@given(
    total=st.integers(min_value=1, max_value=60),
    data=st.data(),
    tolerance=st.sampled_from(["0", "0.05", "0.1", "0.25", "0.5", "1"]),
)
def test_verdict_matches_rational_arithmetic(total: int, data: st.DataObject, tolerance: str) -> None:
    from fractions import Fraction

    before = data.draw(st.integers(min_value=0, max_value=total))
    after = data.draw(st.integers(min_value=0, max_value=total))
    result = compare_run(run_of(after, total), baseline_of(before, total), tol(tolerance))
    drop = Fraction(before, total) - Fraction(after, total)
    assert result.regressed is (drop > Fraction(tolerance))
