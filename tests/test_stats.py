"""Paired statistics against scipy.stats on fixed data, and the --significance gate simulated.

scipy is a test dependency only: it is the independent oracle for the exact McNemar test
(a two-sided binomial test at p = 1/2 on the discordant pairs), the sign-flip permutation test
and the paired percentile bootstrap.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from decimal import Decimal

import numpy as np
import pytest
import scipy.stats

from evalkit import stats
from evalkit.compare import BaselineRun, compare_run, gate_passed, paired_test
from evalkit.records import ItemResult, RunResult, Tolerances
from tests.factories import item

# Fixed paired outcomes (baseline, current) of 60 prompts: 14 pass->fail, 4 fail->pass.
BEFORE = [True] * 30 + [False] * 12 + [True] * 14 + [False] * 4
AFTER = [True] * 30 + [False] * 12 + [False] * 14 + [True] * 4


# -- exact McNemar ------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 7, 10, 11, 25, 40, 61])
def test_binomial_two_sided_equals_scipy_binomtest(n: int) -> None:
    for k in range(n + 1):
        expected = scipy.stats.binomtest(k, n, 0.5, alternative="two-sided").pvalue
        assert stats.binomial_two_sided(k, n) == pytest.approx(expected, rel=1e-12, abs=1e-300)


def test_binomial_two_sided_of_no_trials_is_one() -> None:
    assert stats.binomial_two_sided(0, 0) == 1.0


def test_mcnemar_exact_on_fixed_data_matches_scipy() -> None:
    lost, gained, p = stats.mcnemar_exact(BEFORE, AFTER)
    assert (lost, gained) == (14, 4)
    expected = scipy.stats.binomtest(4, 18, 0.5, alternative="two-sided").pvalue
    assert p == pytest.approx(expected, rel=1e-12)
    assert p == pytest.approx(0.03088379, abs=1e-8)  # 2 * sum(C(18, i), i <= 4) / 2**18
    # swapping the runs swaps the counts, not the two-sided p
    assert stats.mcnemar_exact(AFTER, BEFORE) == (4, 14, p)


def test_mcnemar_exact_without_discordant_pairs_is_one() -> None:
    assert stats.mcnemar_exact([True, False, True], [True, False, True]) == (0, 0, 1.0)


def test_mcnemar_exact_needs_paired_outcomes() -> None:
    with pytest.raises(ValueError, match="shorter"):
        stats.mcnemar_exact([True, False], [True])


# -- sign-flip permutation test -----------------------------------------------------------------


def test_sign_flip_on_plus_minus_one_is_exact_mcnemar() -> None:
    differences = [-1.0] * 14 + [1.0] * 4 + [0.0] * 42
    assert stats.sign_flip_p(differences) == stats.mcnemar_exact(BEFORE, AFTER)[2]
    assert stats.sign_flip_p([0.0, 0.0]) == 1.0


def test_sign_flip_matches_scipy_exact_permutation_test() -> None:
    # Per-prompt pass-rate differences over repeats (fractions): 11 nonzero values, so scipy
    # enumerates all 2**11 sign flips exactly. evalkit samples 10,000 flips: its p-value has a
    # Monte Carlo standard error of sqrt(p (1 - p) / 10,000) <= 0.005, so 0.02 is four of them.
    differences = [-1 / 3, -2 / 3, -1.0, -1 / 3, 1 / 3, -2 / 3, -1 / 3, 0.0, -1.0, 2 / 3, -1 / 3, -1 / 3]
    exact = scipy.stats.permutation_test(
        (np.array(differences),),
        lambda d, axis: np.mean(d, axis=axis),
        permutation_type="samples",
        alternative="two-sided",
        vectorized=True,
    ).pvalue
    ours = stats.sign_flip_p(differences)
    assert 0.01 < exact < 0.2  # a p-value where a wrong test would show
    assert ours == pytest.approx(exact, abs=0.02)
    assert stats.sign_flip_p(differences) == ours  # seeded: the same every call


# -- paired bootstrap ---------------------------------------------------------------------------


def scipy_paired_ci(first: Sequence[float], second: Sequence[float], confidence: float) -> tuple[float, float]:
    result = scipy.stats.bootstrap(
        (np.asarray(first, dtype=float), np.asarray(second, dtype=float)),
        lambda x, y, axis: np.mean(y - x, axis=axis),
        paired=True,
        vectorized=True,
        method="percentile",
        confidence_level=confidence,
        n_resamples=stats.DEFAULT_RESAMPLES,
        rng=np.random.default_rng(12345),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def monte_carlo_tolerance(differences: Sequence[float], grid: float = 0.0) -> float:
    """How far two percentile-bootstrap endpoints from independent RNG streams may differ.

    An endpoint is the alpha-quantile of B bootstrap means. Its Monte Carlo standard error is
    sqrt(alpha (1 - alpha) / B) / f, with f the density of the bootstrap distribution at that
    quantile; taking that distribution as normal with sd s = sd(d) / sqrt(n), f = phi(1.96) / s,
    so SE = 2.67 s / sqrt(B) at alpha = 0.025. Two independent streams differ by sqrt(2) SE;
    we allow five of those. Pass/fail differences make the bootstrap means a lattice of step
    1/n, and the two quantiles may sit on neighbouring points: ``grid`` adds one step.
    """
    values = np.asarray(differences, dtype=float)
    s = float(values.std(ddof=1)) / math.sqrt(len(values))
    alpha = 0.025
    se = math.sqrt(alpha * (1 - alpha) / stats.DEFAULT_RESAMPLES) / float(scipy.stats.norm.pdf(1.96)) * s
    return 5 * math.sqrt(2) * se + grid


def test_bootstrap_ci_of_score_differences_matches_scipy() -> None:
    rng = np.random.default_rng(3)
    first = rng.uniform(0.3, 1.0, size=80)
    second = np.clip(first - 0.08 + rng.normal(0, 0.15, size=80), 0, 1)
    differences = list(second - first)
    ours = stats.bootstrap_mean_ci(differences)
    expected = scipy_paired_ci(list(first), list(second), 0.95)
    tolerance = monte_carlo_tolerance(differences)
    assert ours.low == pytest.approx(expected[0], abs=tolerance)
    assert ours.high == pytest.approx(expected[1], abs=tolerance)
    # the tolerance is tight enough to tell a 90% interval from a 95% one
    narrower = scipy_paired_ci(list(first), list(second), 0.90)
    assert abs(narrower[0] - expected[0]) > tolerance
    assert abs(narrower[1] - expected[1]) > tolerance
    assert ours.low < float(np.mean(differences)) < ours.high


def test_bootstrap_ci_of_pass_fail_differences_matches_scipy() -> None:
    first = [float(b) for b in BEFORE]
    second = [float(a) for a in AFTER]
    differences = [b - a for a, b in zip(first, second, strict=True)]
    ours = stats.bootstrap_mean_ci(differences)
    expected = scipy_paired_ci(first, second, 0.95)
    tolerance = monte_carlo_tolerance(differences, grid=1 / len(differences))
    assert ours.low == pytest.approx(expected[0], abs=tolerance)
    assert ours.high == pytest.approx(expected[1], abs=tolerance)


def test_bootstrap_ci_confidence_level_matches_scipy() -> None:
    rng = np.random.default_rng(8)
    first, second = rng.uniform(0, 1, size=50), rng.uniform(0, 1, size=50)
    differences = list(second - first)
    ours = stats.bootstrap_mean_ci(differences, confidence=0.8)
    expected = scipy_paired_ci(list(first), list(second), 0.8)
    # at 80% the quantiles sit where the density is higher: the 95% tolerance is conservative
    tolerance = monte_carlo_tolerance(differences)
    assert (ours.low, ours.high) == (
        pytest.approx(expected[0], abs=tolerance),
        pytest.approx(expected[1], abs=tolerance),
    )


def test_seeded_bootstrap_is_identical_across_calls() -> None:
    rng = np.random.default_rng(5)
    differences = list(rng.normal(-0.1, 0.3, size=40))
    first = stats.bootstrap_mean_ci(differences)
    assert stats.bootstrap_mean_ci(differences) == first
    assert stats.bootstrap_mean_ci(list(differences), seed=stats.DEFAULT_SEED) == first
    assert stats.bootstrap_mean_ci(differences, seed=1) != first  # the seed is what fixes it


def test_bootstrap_of_nothing_and_of_a_constant() -> None:
    assert stats.bootstrap_mean_ci([]) == stats.Interval(0.0, 0.0)
    assert stats.bootstrap_mean_ci([0.25] * 9) == stats.Interval(0.25, 0.25)


# -- paired_test: pairing, McNemar and the intervals together -----------------------------------


def samples(outcomes: Sequence[bool], prefix: str = "p") -> list[tuple[str, bool, float]]:
    return [(f"{prefix}{i}", o, 1.0 if o else 0.0) for i, o in enumerate(outcomes)]


def test_paired_test_pairs_only_common_items() -> None:
    first = [*samples(BEFORE), ("only-first", True, 1.0)]
    second = [("only-second-a", False, 0.0), *samples(AFTER), ("only-second-b", True, 1.0)]
    test = paired_test(first, second)
    assert (test.paired, test.only_first, test.only_second) == (60, 1, 2)
    assert (test.lost, test.gained, test.test) == (14, 4, "McNemar exact")
    assert test.p_value == pytest.approx(scipy.stats.binomtest(4, 18, 0.5).pvalue, rel=1e-12)
    assert test.pass_rate_delta == pytest.approx(-10 / 60)
    assert test.mean_score_delta == pytest.approx(-10 / 60)
    differences = [float(a) - float(b) for a, b in zip(AFTER, BEFORE, strict=True)]
    ci = stats.bootstrap_mean_ci(differences)
    assert test.pass_rate_ci == (ci.low, ci.high)
    assert test.pass_rate_ci[0] < -10 / 60 < test.pass_rate_ci[1]
    assert paired_test(first, second) == test  # seeded
    assert test.describe() == (
        f"pass rate -16.7 pp (95% CI {ci.low * 100:+.1f} … {ci.high * 100:+.1f}), two-sided p = 0.031"
    )


def test_paired_test_with_repeats_uses_the_sign_flip_test() -> None:
    first = [(f"p{i}", True, 1.0) for i in range(12)]
    # three samples per prompt: pass rates 1, 2/3, 1/3 ...
    second = [(f"p{i}", r < 3 - i % 3, 1.0 if r < 3 - i % 3 else 0.0) for i in range(12) for r in range(3)]
    test = paired_test(first, second)
    assert test.test == "sign-flip permutation"
    assert (test.paired, test.lost, test.gained) == (12, 8, 0)
    assert test.pass_rate_delta == pytest.approx(-4 / 12)
    assert test.p_value == stats.sign_flip_p([-(i % 3) / 3 for i in range(12)])


# -- the --significance gate, simulated ----------------------------------------------------------


def run_of_outcomes(outcomes: Sequence[bool]) -> RunResult:
    items: tuple[ItemResult, ...] = tuple(item(f"p{i}", bool(o)) for i, o in enumerate(outcomes))
    stamp = "2026-11-30T12:00:00.000+00:00"
    return RunResult.create(
        items,
        run_id="current",
        set_id="sim.set",
        set_fingerprint="f" * 16,
        provider="fake",
        model="alias-1",
        grader="deterministic",
        started_at=stamp,
        finished_at=stamp,
        tolerances=Tolerances(Decimal(0), Decimal(0)),
    )


def gate_fails(baseline_outcomes: np.ndarray, current_outcomes: np.ndarray, alpha: float) -> bool:
    baseline = run_of_outcomes(list(baseline_outcomes))
    current = run_of_outcomes(list(current_outcomes))
    paired = paired_test(
        [(i.id, i.passed, i.score) for i in baseline.items], [(i.id, i.passed, i.score) for i in current.items]
    )
    stored = BaselineRun(
        "baseline", baseline.pass_rate, baseline.mean_score, baseline.passed_count, baseline.sample_count
    )
    comparison = compare_run(current, stored, current.tolerances, paired, significance=alpha)
    return not gate_passed(comparison, fail_on_regression=True)


def simulate(baseline_p: np.ndarray, current_p: np.ndarray, runs: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    failures = 0
    for _ in range(runs):
        baseline = rng.random(len(baseline_p)) < baseline_p
        current = rng.random(len(current_p)) < current_p
        failures += gate_fails(baseline, current, alpha=0.05)
    return failures / runs


PROMPT_P = np.linspace(0.1, 0.9, 200)  # 200 prompts of spread difficulty, mean 0.5


@pytest.fixture
def quick_bootstrap(monkeypatch: pytest.MonkeyPatch) -> None:
    # Only the McNemar p-value decides the gate; the bootstrap intervals are reported, not used.
    # 100 resamples instead of 10,000 keep 2,000 simulated comparisons to a few seconds.
    # (DEFAULT_RESAMPLES is bound as a default argument, so the function itself is wrapped.)
    monkeypatch.setattr(stats, "bootstrap_mean_ci", functools.partial(stats.bootstrap_mean_ci, resamples=100))


@pytest.mark.slow
def test_significance_false_alarm_rate_stays_under_seven_percent(quick_bootstrap: None) -> None:
    # Same per-prompt probabilities in baseline and current: every failed gate is a false alarm.
    # With tolerance 0 the gate alone would fail about half of these runs; --significance 0.05
    # must bring that under 0.07 (the one-sided test at 0.05 calls at most 5% of them a drop).
    rate = simulate(PROMPT_P, PROMPT_P, runs=1000, seed=20261130)
    print(f"false-alarm rate at alpha 0.05 over 1000 identical-quality runs: {rate:.3f}")
    assert rate < 0.07


@pytest.mark.slow
def test_significance_catches_a_real_15_point_drop(quick_bootstrap: None) -> None:
    # Every prompt's probability scaled down so the expected pass rate drops by exactly 15 pp.
    lowered = PROMPT_P * (1 - 0.15 / PROMPT_P.mean())
    assert PROMPT_P.mean() - lowered.mean() == pytest.approx(0.15)
    rate = simulate(PROMPT_P, lowered, runs=1000, seed=20261201)
    print(f"power against a 15 pp drop on 200 prompts at alpha 0.05: {rate:.3f}")
    assert rate >= 0.80


def test_gate_without_significance_fails_on_any_drop_beyond_the_tolerance() -> None:
    # The control for the simulation: the same decision path without --significance.
    # 7/10 -> 6/10: four items lost, three gained; one-sided McNemar p = P(X >= 4 | 7) = 0.5.
    baseline = run_of_outcomes([True] * 7 + [False] * 3)
    current = run_of_outcomes([True] * 3 + [False] * 4 + [True] * 3)
    stored = BaselineRun("baseline", baseline.pass_rate, baseline.mean_score, baseline.passed_count, 10)
    paired = paired_test(
        [(i.id, i.passed, i.score) for i in baseline.items], [(i.id, i.passed, i.score) for i in current.items]
    )
    plain = compare_run(current, stored, current.tolerances, paired)
    assert plain.regressed
    tested = compare_run(current, stored, current.tolerances, paired, significance=0.05)
    assert not tested.regressed
    assert tested.reason.startswith("Drop not significant: pass rate dropped 10.0 pp")
    assert tested.reason.endswith(
        "The drop is not significant at 0.05 (pass rate one-sided p = 0.500; a drop of at least 70.0 pp over the "
        "10 paired items (7 of the 7 changed items failing now) would have been significant; mean score one-sided p = 0.500)."
    )
    assert tested.significance == 0.05
    assert tested.paired == paired


def score_run(scores: Sequence[float], passed: Sequence[bool]) -> RunResult:
    items = tuple(item(f"p{i}", p, score=s) for i, (s, p) in enumerate(zip(scores, passed, strict=True)))
    stamp = "2026-11-30T12:00:00.000+00:00"
    return RunResult.create(
        items,
        run_id="current",
        set_id="sim.set",
        set_fingerprint="f" * 16,
        provider="fake",
        model="alias-1",
        grader="deterministic",
        started_at=stamp,
        finished_at=stamp,
        tolerances=Tolerances(Decimal("0.1"), Decimal("0.1")),
    )


def test_a_significant_mean_score_drop_stays_a_regression() -> None:
    # 100 prompts; the 50 failing ones each lose half a point (0.5 -> 0.0), nothing flips.
    # Mean score drops 0.25 (tolerance 0.1) in 50 of 50 changed items, all one way: the paired
    # bootstrap interval of the mean-score difference is far below zero. The pass/fail outcomes
    # are identical, so McNemar's p is 1 - but that test says nothing about scores.
    passed = [True] * 50 + [False] * 50
    baseline = score_run([1.0] * 50 + [0.5] * 50, passed)
    current = score_run([1.0] * 50 + [0.0] * 50, passed)
    paired = paired_test(
        [(i.id, i.passed, i.score) for i in baseline.items], [(i.id, i.passed, i.score) for i in current.items]
    )
    assert paired.mean_score_ci[1] < 0  # the score drop is plainly real
    stored = BaselineRun("baseline", baseline.pass_rate, baseline.mean_score, baseline.passed_count, 100)
    comparison = compare_run(current, stored, current.tolerances, paired, significance=0.05)
    assert comparison.regressed
    assert not gate_passed(comparison, fail_on_regression=True)


@pytest.mark.parametrize(("drop", "rate", "expected"), [(0.1, 0.8, 198), (0.1, 0.5, 310), (0.05, 0.8, 792)])
def test_prompts_needed_is_the_two_proportion_power_formula(drop: float, rate: float, expected: int) -> None:
    z = scipy.stats.norm.ppf(0.95) + scipy.stats.norm.ppf(0.8)
    assert math.ceil(z**2 * 2 * rate * (1 - rate) / drop**2) == expected
    assert stats.prompts_needed(drop, rate) == expected


def test_prompts_needed_keeps_the_pass_rate_off_zero_and_one() -> None:
    assert stats.prompts_needed(0.1, 1.0) == stats.prompts_needed(0.1, 0.9) == 112
    assert stats.prompts_needed(0.1, 0.0) == 112
    with pytest.raises(ValueError, match="above 0"):
        stats.prompts_needed(0, 0.5)
