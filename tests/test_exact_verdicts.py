"""The statistics a gate decides by.

- The --significance gate's test is one-sided, and where no outcome of the changed items could
  reach ALPHA it cannot decide: the tolerance verdict stands, and the output never calls an
  untestable drop "not a regression".
- Every tolerance compares exact fractions (counts; per-prompt scores) with the tolerance as
  written, and messages show the digits that explain the verdict.
- The --repeat pass-rate interval keeps nominal coverage and never has zero width; compare's
  bootstrap never prints a point as an interval.
- pass@N and pass^N are defined where users read (the README) and are the unbiased estimates.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Sequence
from dataclasses import replace
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
import scipy.stats
from hypothesis import given
from hypothesis import strategies as st

from evalkit import stats
from evalkit.compare import (
    BaselineRun,
    PreviousRetrieval,
    compare_retrieval,
    compare_run,
    gate_of,
    gate_passed,
    paired_test,
    per_item,
)
from evalkit.records import Comparison, Gate, ItemResult, RetrievalTolerances, RunResult, Tolerances
from evalkit.report.summary import repeat_summary
from evalkit.store import Store, save_run
from tests.conftest import REPO, write, wrong_answers
from tests.factories import item
from tests.fakeserver import FakeServer

Outcome = tuple[str, bool, float]


def make_run(
    outcomes: Sequence[Outcome],
    *,
    tolerance: str = "0.1",
    repeats: int = 1,
    started_at: str = "2026-11-30T12:00:00+00:00",
) -> RunResult:
    from dataclasses import replace

    items: list[ItemResult] = []
    seen: dict[str, int] = {}
    for item_id, passed, score in outcomes:
        items.append(replace(item(item_id, passed, score=score), repeat=seen.get(item_id, 0)))
        seen[item_id] = seen.get(item_id, 0) + 1
    from evalkit.runner import new_run_id

    return RunResult.create(
        tuple(items),
        run_id=new_run_id(),
        set_id="demo.set",
        set_fingerprint="f" * 16,
        provider="fake",
        model="alias-1",
        grader="deterministic",
        started_at=started_at,
        finished_at=started_at,
        tolerances=Tolerances(Decimal(tolerance), Decimal(tolerance)),
        repeats=repeats,
    )


def passes(outcomes: Sequence[bool], **kwargs: Any) -> RunResult:
    return make_run([(f"p{i}", o, 1.0 if o else 0.0) for i, o in enumerate(outcomes)], **kwargs)


def outcomes_of(run: RunResult) -> list[Outcome]:
    return [(i.id, i.passed, i.score) for i in run.items]


def kept(run: RunResult, *, with_items: bool = True) -> BaselineRun:
    """The run as the store gives it back as a baseline (with its per-prompt outcomes)."""
    items = per_item(outcomes_of(run)) if with_items else None
    return BaselineRun(
        run.run_id, run.pass_rate, run.mean_score, run.passed_count, run.sample_count, "f" * 16, items=items
    )


def judged(before: RunResult, after: RunResult, alpha: float = 0.05) -> Any:
    paired = paired_test(outcomes_of(before), outcomes_of(after))
    return compare_run(after, kept(before), after.tolerances, paired, significance=alpha)


# -- the --significance gate -----------------------------------------------------------------


def test_five_of_five_lost_is_a_significant_regression() -> None:
    # Two-sided, the smallest p of five changes is 2/32 = 0.0625: a 5/5 -> 0/5 could never fail.
    # One-sided, all five lost is p = 1/32.
    verdict = judged(passes([True] * 5), passes([False] * 5))
    assert verdict.regressed
    assert not gate_passed(verdict, fail_on_regression=True)
    assert verdict.paired.drop_p_value == 1 / 32
    assert verdict.paired.p_value == 2 / 32  # the two-sided figure compare reports is unchanged
    assert verdict.reason.endswith(
        "Significant at 0.05 (pass rate one-sided p = 0.031; mean score one-sided p = 0.031)."
    )


def test_a_test_that_cannot_reach_alpha_leaves_the_tolerance_verdict_standing() -> None:
    # Four changed items: even all four lost is p = 1/16 > 0.05, so the test cannot decide.
    verdict = judged(passes([True] * 4), passes([False] * 4))
    assert verdict.regressed
    assert not gate_passed(verdict, fail_on_regression=True)
    assert verdict.reason.startswith("Regression: pass rate dropped 100.0 pp, beyond the tolerance of 10.0 pp")
    assert verdict.reason.endswith(
        "The paired test cannot decide at 0.05 (pass rate: with 4 items changed, the smallest one-sided p any "
        "outcome could give is 0.062; mean score: with 4 items changed, the smallest one-sided p any outcome "
        "could give is 0.062), so the tolerance verdict stands."
    )


def test_one_lost_prompt_of_twenty_cannot_be_called_insignificant() -> None:
    verdict = judged(passes([True] * 20, tolerance="0"), passes([False] + [True] * 19, tolerance="0"))
    assert verdict.regressed
    assert "with 1 item changed, the smallest one-sided p any outcome could give is 0.500" in verdict.reason


def test_a_drop_not_significant_says_what_drop_would_have_been() -> None:
    # 7/10 -> 6/10: four lost, three gained; one-sided p = P(X >= 4 | 7) = 1/2. Only all seven
    # lost (p = 1/128) would be significant: a drop of (7 - 0) / 10 = 70 pp over the paired items.
    before = passes([True] * 7 + [False] * 3, tolerance="0")
    after = passes([True] * 3 + [False] * 4 + [True] * 3, tolerance="0")
    verdict = judged(before, after)
    assert not verdict.regressed
    assert verdict.reason.startswith("Drop not significant: pass rate dropped 10.0 pp, beyond the tolerance of 0.0 pp")
    assert "The drop is not significant at 0.05 (pass rate one-sided p = 0.500; a drop of at least 70.0 pp over " \
        "the 10 paired items (7 of the 7 changed items failing now) would have been significant" in verdict.reason  # fmt: skip
    assert "not a regression" not in verdict.reason.lower()


@pytest.fixture
def quick_bootstrap(monkeypatch: pytest.MonkeyPatch) -> None:
    # The intervals are reported, never decide: 100 resamples keep thousands of verdicts quick.
    monkeypatch.setattr(stats, "bootstrap_mean_ci", functools.partial(stats.bootstrap_mean_ci, resamples=100))


@pytest.mark.slow
@pytest.mark.parametrize("size", [3, 4, 5])
def test_no_verdict_ever_calls_an_untestable_drop_not_a_regression(size: int, quick_bootstrap: None) -> None:
    # Every baseline/current pair of pass/fail outcomes on a small set, tolerance 0.
    for before_bits in range(2**size):
        for after_bits in range(2**size):
            before = passes([bool(before_bits >> i & 1) for i in range(size)], tolerance="0")
            after = passes([bool(after_bits >> i & 1) for i in range(size)], tolerance="0")
            verdict = judged(before, after)
            assert "not a regression" not in verdict.reason.lower()
            if verdict.regressed or not verdict.reason.startswith("Drop not significant"):
                continue
            # the gate let a drop through: only when the test could have called it significant
            assert verdict.paired.drop_p_floor <= 0.05 < verdict.paired.drop_p_value


def test_the_one_sided_p_values_match_scipy() -> None:
    for n in (1, 4, 5, 12, 40):
        for lost in range(n + 1):
            expected = scipy.stats.binomtest(lost, n, 0.5, alternative="greater").pvalue
            assert stats.binomial_upper_tail(lost, n) == pytest.approx(expected, rel=1e-12)
    # repeats: per-prompt pass-rate differences; 11 nonzero values, enumerated exactly by both
    differences = [-1 / 3, -2 / 3, -1.0, -1 / 3, 1 / 3, -2 / 3, -1 / 3, 0.0, -1.0, 2 / 3, -1 / 3, -1 / 3]
    exact = scipy.stats.permutation_test(
        (np.array(differences),),
        lambda d, axis: np.mean(d, axis=axis),
        permutation_type="samples",
        alternative="less",
        vectorized=True,
    ).pvalue
    test = stats.drop_test(differences)
    assert test.p_value == pytest.approx(exact, rel=1e-12)
    assert (test.floor, test.changed) == (2.0**-11, 11)
    assert stats.drop_test([0.0, 0.0]) == stats.DropTest(1.0, 1.0, 0)


@pytest.mark.parametrize(
    "differences",
    [
        [-1.0] * 3 + [1.0] * 4 + [0.0] * 13,
        [-1.0] * 9 + [0.0] * 11,
        [-0.3, -0.1, 0.2, -0.5, -0.25, 0.05, 0.0],
    ],
)
def test_the_detectable_drop_is_the_threshold_of_the_test(differences: list[float]) -> None:
    need = stats.detectable_drop(differences, 0.05)
    assert need is not None
    nonzero = [d for d in differences if d != 0]
    null = stats._SignFlipNull([abs(d) for d in nonzero], stats.DEFAULT_SEED, stats.DEFAULT_RESAMPLES)
    # a sum of exactly -need * n is significant; the next attainable sum above it is not
    assert null.lower_tail(-need * len(differences)) <= 0.05
    assert null.lower_tail(-need * len(differences) + 1e-6) >= null.lower_tail(-need * len(differences))
    if null.sums is not None:
        above = null.sums[null.sums > -need * len(differences) + 1e-9]
        assert null.lower_tail(float(above[0])) > 0.05
    else:
        assert null.lower_tail(-need * len(differences) + 2 * null.unit) > 0.05


GATE_SET = "id: sig.small\nname: Small\nprompts:\n" + "".join(
    f"  - {{id: q{i}, prompt: 'question {i}', assertions: [{{contains: right}}]}}\n" for i in range(5)
)


@pytest.fixture
def small_gate(isolated: Path, fake_llm: FakeServer) -> FakeServer:
    """Five prompts; ``fake_llm.wrong`` says which are answered wrong."""
    return wrong_answers(isolated, fake_llm, "sets/small.yaml", GATE_SET)


def test_cli_five_of_five_lost_fails_the_significance_gate(cli: Any, small_gate: FakeServer) -> None:
    args = (
        "run",
        "sets/small.yaml",
        "--format",
        "json",
        "--no-cache",
        "--fail-on-regression",
        "--significance",
        "0.05",
    )
    assert cli(*args).exit_code == 0  # the baseline
    small_gate.wrong = set(range(5))  # type: ignore[attr-defined]
    result = cli(*args)
    assert result.exit_code == 1, result.stderr
    comparison = json.loads(result.stdout)["comparison"]
    assert comparison["regressed"] is True
    assert comparison["paired_test"]["one_sided_p_value"] == 1 / 32
    assert comparison["reason"].endswith(
        "Significant at 0.05 (pass rate one-sided p = 0.031; mean score one-sided p = 0.031)."
    )


def test_cli_four_of_five_lost_cannot_be_decided_and_fails_the_gate(cli: Any, small_gate: FakeServer) -> None:
    args = ("run", "sets/small.yaml", "--no-cache", "--fail-on-regression", "--significance", "0.05")
    assert cli(*args).exit_code == 0
    small_gate.wrong = {0, 1, 2, 3}  # type: ignore[attr-defined]
    result = cli(*args)
    assert result.exit_code == 1
    flat = " ".join(result.stdout.split())
    assert "The paired test cannot decide at 0.05 (pass rate: with 4 items changed" in flat
    assert "so the tolerance verdict stands." in flat
    assert "Not a regression" not in flat


def test_the_gate_failure_says_a_regression_was_found_significant() -> None:
    before, after = passes([True] * 5), passes([False] * 5)
    verdict = judged(before, after)
    assert verdict.gate_basis == "significant"
    failures = gate_of(replace(after, comparison=verdict), fail_on_regression=True).reasons()
    assert failures == [
        f"regression against the baseline (run {before.run_id}): significant at 0.05 (one-sided paired test)"
    ]


def test_the_gate_failure_says_the_tolerance_decided_when_the_test_cannot() -> None:
    before, after = passes([True] * 5), passes([False] * 4 + [True])
    verdict = judged(before, after)
    assert (verdict.regressed, verdict.gate_basis) == (True, "undecided")
    assert Comparison.from_dict(verdict.as_dict()).gate_basis == "undecided"  # kept in the stored run
    failures = gate_of(replace(after, comparison=verdict), fail_on_regression=True).reasons()
    assert failures == [
        f"regression against the baseline (run {before.run_id}): decided by the tolerance, since the paired test "
        "cannot decide at 0.05 (too few changed items), not found significant"
    ]


def test_without_significance_the_gate_failure_names_no_test() -> None:
    before, after = passes([True] * 5), passes([False] * 5)
    verdict = compare_run(after, kept(before), after.tolerances)
    assert verdict.gate_basis is None
    failures = gate_of(replace(after, comparison=verdict), fail_on_regression=True).reasons()
    assert failures == [f"regression against the baseline (run {before.run_id})"]


def test_cli_the_gate_says_how_it_decided_in_json_markdown_and_junit(
    cli: Any, small_gate: FakeServer, isolated: Path
) -> None:
    args = ("run", "sets/small.yaml", "--no-cache", "--fail-on-regression", "--significance", "0.05")
    assert cli(*args).exit_code == 0
    small_gate.wrong = {0, 1, 2, 3}  # type: ignore[attr-defined]
    result = cli(*args, "--format", "json", "--junit", "out.xml", "--markdown", "out.md")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    said = "decided by the tolerance, since the paired test cannot decide at 0.05 (too few changed items)"
    assert doc["comparison"]["gate_basis"] == "undecided"
    assert len(doc["gate"]["failures"]) == 1
    assert said in doc["gate"]["failures"][0]
    assert said in " ".join((isolated / "out.md").read_text(encoding="utf-8").split())
    assert said in (isolated / "out.xml").read_text(encoding="utf-8")


# -- exact verdicts and the digits that explain them -----------------------------------------


def test_a_third_lost_at_a_tolerance_just_below_a_third_is_a_regression() -> None:
    tolerances = Tolerances(Decimal("0.333333333333"), Decimal(1))
    verdict = compare_run(passes([True, True, False]), kept(passes([True] * 3)), tolerances)
    assert verdict.regressed
    # never "dropped 33.3 pp, beyond the tolerance of 33.3 pp"
    assert verdict.reason.startswith(
        "Regression: pass rate dropped 33.33333333333 pp, beyond the tolerance of 33.3333333333 pp (against run"
    )


def test_a_third_lost_at_a_tolerance_just_above_a_third_is_not() -> None:
    tolerance = Decimal("0.3333333333335")
    verdict = compare_run(
        passes([True, False, False]), kept(passes([True, True, False])), Tolerances(tolerance, tolerance)
    )
    assert not verdict.regressed
    assert verdict.reason.startswith("No regression: pass rate -33.3 pp, mean score -0.333 against run")


def test_scores_compare_as_written() -> None:
    # Ten prompts scoring 0.8 -> 0.7: the exact fractions of those floats differ by more than
    # 0.1, the scores as written by exactly 0.1, which a tolerance of 0.1 accepts.
    before = make_run([(f"p{i}", True, 0.8) for i in range(10)])
    after = make_run([(f"p{i}", True, 0.7) for i in range(10)])
    assert Fraction(0.8) - Fraction(0.7) > Fraction(1, 10)
    assert not compare_run(after, kept(before), Tolerances(Decimal(0), Decimal("0.1"))).regressed
    assert compare_run(after, kept(before), Tolerances(Decimal(0), Decimal("0.0999999999999999"))).regressed
    # the same without per-prompt outcomes (a baseline kept at privacy none): the stored means
    assert not compare_run(after, kept(before, with_items=False), Tolerances(Decimal(0), Decimal("0.1"))).regressed


def test_a_mean_score_of_two_thirds_to_one_third_is_exact() -> None:
    # Quantised to 12 decimals, 2/3 -> 1/3 "drops" 0.333333333334 and breached 0.3333333333335.
    before = make_run([("a", True, 1.0), ("b", True, 1.0), ("c", False, 0.0)])
    after = make_run([("a", True, 1.0), ("b", False, 0.0), ("c", False, 0.0)])
    tolerances = Tolerances(Decimal(1), Decimal("0.3333333333335"))
    for baseline in (kept(before), kept(before, with_items=False)):
        assert not compare_run(after, baseline, tolerances).regressed
    tighter = Tolerances(Decimal(1), Decimal("0.333333333333"))
    assert "mean score dropped 0.3333333333333, beyond the tolerance of 0.333333333333" in (
        compare_run(after, kept(before), tighter).reason
    )


def test_an_identical_rerun_of_awkward_scores_is_no_drop_at_tolerance_zero() -> None:
    outcomes = [(f"p{i}", False, s) for i, s in enumerate([1 / 3, 0.1, 0.7, 2 / 3, 0.2])]
    run = make_run(outcomes, tolerance="0")
    # per-prompt outcomes: exact sums, so even another order of the items is no change
    verdict = compare_run(make_run(list(reversed(outcomes)), tolerance="0"), kept(run), run.tolerances)
    assert (verdict.regressed, verdict.mean_score_delta, verdict.pass_rate_delta) == (False, 0.0, 0.0)
    # no per-prompt outcomes (privacy none): the stored means, the same float formula both sides
    verdict = compare_run(make_run(outcomes, tolerance="0"), kept(run, with_items=False), run.tolerances)
    assert (verdict.regressed, verdict.mean_score_delta, verdict.pass_rate_delta) == (False, 0.0, 0.0)


def test_a_baseline_from_a_file_keeps_working_exactly() -> None:
    # What pipeline.baseline.file_baseline builds from a baseline file entry: per prompt (passed, score).
    before = passes([True] * 3)
    entry = BaselineRun(
        "base", 1.0, 1.0, 3, 3, "f" * 16, source="file", file="baselines/demo.set.json",
        items={f"p{i}": (1.0, 1.0) for i in range(3)},
    )  # fmt: skip
    verdict = compare_run(passes([True, True, False]), entry, Tolerances(Decimal("0.333333333333"), Decimal(1)))
    assert verdict.regressed
    assert "(against run base (baselines/demo.set.json))" in verdict.reason
    assert verdict.flips is not None
    assert verdict.flips.regressed == ("p2",)
    assert compare_run(passes([True] * 3), entry, before.tolerances).reason.startswith("No regression")


def test_cli_a_third_lost_against_a_committed_baseline_file(cli: Any, small_gate: FakeServer, tmp_path: Path) -> None:
    three = "".join(f"  - {{id: q{i}, prompt: 'question {i}', assertions: [{{contains: right}}]}}\n" for i in range(3))
    write(Path("sets/small.yaml"), f"id: sig.small\nname: Small\nprompts:\n{three}")
    assert cli("run", "sets/small.yaml", "--no-cache").exit_code == 0
    accepted = cli("baseline", "accept")
    assert accepted.exit_code == 0, accepted.stderr
    small_gate.wrong = {2}  # type: ignore[attr-defined]
    fresh = str(tmp_path / "fresh.duckdb")  # a CI runner: no history, only the file
    base = ("run", "sets/small.yaml", "--no-cache", "--fail-on-regression", "--db", fresh, "--format", "json")
    result = cli(*base, "--max-pass-rate-drop", "0.333333333333", "--max-mean-score-drop", "1")
    assert result.exit_code == 1, result.stderr
    comparison = json.loads(result.stdout)["comparison"]
    assert comparison["baseline_source"] == "file"
    assert comparison["reason"].startswith(
        "Regression: pass rate dropped 33.33333333333 pp, beyond the tolerance of 33.3333333333 pp"
    )
    result = cli(*base, "--max-pass-rate-drop", "0.3333333333334", "--max-mean-score-drop", "1")
    assert result.exit_code == 0, result.stdout
    assert json.loads(result.stdout)["comparison"]["regressed"] is False


def shown_numbers(reason: str) -> list[tuple[Fraction, Fraction]]:
    """(drop, tolerance) pairs of every breach sentence in a reason, as the decimals shown."""
    found = re.findall(r"dropped ([0-9.]+)(?: pp)?, beyond the tolerance of ([0-9.]+)", reason)
    return [(Fraction(Decimal(d)), Fraction(Decimal(t))) for d, t in found]


tolerances = st.decimals(min_value=0, max_value=1, places=14, allow_nan=False, allow_infinity=False)


@pytest.mark.slow
@given(
    total=st.integers(min_value=1, max_value=40),
    data=st.data(),
    tolerance=tolerances,
    score_tolerance=tolerances,
)
def test_prompt_verdicts_are_exact_and_their_messages_agree(
    total: int, data: st.DataObject, tolerance: Decimal, score_tolerance: Decimal
) -> None:
    before = data.draw(st.integers(min_value=0, max_value=total))
    after = data.draw(st.integers(min_value=0, max_value=total))
    scores = data.draw(
        st.lists(st.sampled_from([0.0, 0.1, 0.25, 1 / 3, 0.5, 0.7, 0.8, 1.0]), min_size=total, max_size=total)
    )
    baseline = make_run([(f"p{i}", i < before, s) for i, s in enumerate(scores)])
    current = make_run([(f"p{i}", i < after, s / 2) for i, s in enumerate(scores)])
    verdict = compare_run(current, kept(baseline), Tolerances(tolerance, score_tolerance))
    pass_drop = Fraction(before - after, total)
    score_drop = sum((Fraction(repr(s)) - Fraction(repr(s / 2)) for s in scores), Fraction(0)) / total
    breaches = [pass_drop > Fraction(tolerance), score_drop > Fraction(score_tolerance)]
    assert verdict.regressed is any(breaches)
    for drop, limit in shown_numbers(verdict.reason):
        assert drop > limit  # the shown figures say "beyond" truthfully
    limits = [Fraction(tolerance) * 100, Fraction(score_tolerance)]
    assert [limit for _, limit in shown_numbers(verdict.reason)] == [
        limit for limit, breached in zip(limits, breaches, strict=True) if breached
    ]  # the tolerance as written, every digit of it


@given(
    total=st.integers(min_value=1, max_value=40),
    data=st.data(),
    top1=tolerances,
    top3=tolerances,
)
def test_retrieval_verdicts_are_exact(total: int, data: st.DataObject, top1: Decimal, top3: Decimal) -> None:
    counts = [data.draw(st.integers(min_value=0, max_value=total)) for _ in range(4)]
    previous = PreviousRetrieval("prev", counts[0], counts[1], total, "bench", "variant", {})

    class Run:  # what compare_retrieval reads of a retrieval run
        error_count = 0
        benchmark_fingerprint = "bench"
        variant_fingerprint = "variant"
        retriever = "lexical"
        set_id = "demo.docs"
        question_count = total
        top1_hits, top3_hits = counts[2], counts[3]
        provenance: ClassVar[dict[str, str]] = {}

    verdict = compare_retrieval(Run(), previous, RetrievalTolerances(top1, top3))  # type: ignore[arg-type]
    drops = [Fraction(counts[0] - counts[2], total), Fraction(counts[1] - counts[3], total)]
    assert verdict.regressed is (drops[0] > Fraction(top1) or drops[1] > Fraction(top3))
    for drop, limit in shown_numbers(verdict.reason):
        assert drop > limit


def test_a_retrieval_third_lost_at_just_below_a_third() -> None:
    previous = PreviousRetrieval("prev", 3, 3, 3, "bench", "variant", {})

    class Run:
        error_count = 0
        benchmark_fingerprint = "bench"
        variant_fingerprint = "variant"
        retriever = "lexical"
        set_id = "demo.docs"
        question_count = 3
        top1_hits = top3_hits = 2
        provenance: ClassVar[dict[str, str]] = {}

    limit = Decimal("0.333333333333")
    verdict = compare_retrieval(Run(), previous, RetrievalTolerances(limit, Decimal(1)))  # type: ignore[arg-type]
    assert verdict.regressed
    assert verdict.reason.startswith(
        "Regression: top-1 hit rate dropped 33.33333333333 pp, beyond the tolerance of 33.3333333333 pp"
    )
    assert not compare_retrieval(Run(), previous, RetrievalTolerances(Decimal("0.3333333333334"), Decimal(1))).regressed  # type: ignore[arg-type]


def test_the_minimum_mean_score_is_exact() -> None:
    # Quantised to 12 decimals, 0.7999999999999 read as 0.8 and passed a minimum of 0.8.
    run = make_run([("a", True, 0.7999999999999)])
    gate = gate_of(run, False, Gate(min_mean_score=Decimal("0.8")))
    assert gate.reasons() == ["mean score 0.7999999999999 is below the minimum 0.8"]


# -- intervals --------------------------------------------------------------------------------


@pytest.mark.parametrize("trials", [1, 2, 5, 9, 30, 100, 1000])
def test_clopper_pearson_matches_scipy(trials: int) -> None:
    for successes in sorted({0, 1, trials // 3, trials // 2, trials - 1, trials}):
        ours = stats.clopper_pearson(successes, trials)
        exact = scipy.stats.binomtest(successes, trials).proportion_ci(0.95, method="exact")
        assert (ours.low, ours.high) == (pytest.approx(exact.low, abs=1e-12), pytest.approx(exact.high, abs=1e-12))
        assert ours.high > ours.low


def exact_coverage(p: float, trials: int) -> float:
    covered = 0.0
    for k in range(trials + 1):
        interval = stats.clopper_pearson(k, trials)
        if interval.low <= p <= interval.high:
            covered += float(scipy.stats.binom.pmf(k, trials, p))
    return covered


@pytest.mark.parametrize("p", [0.98, 0.9, 0.5])
def test_repeat_interval_coverage_of_a_homogeneous_set_is_at_least_nominal(p: float) -> None:
    # 20 prompts x 5 repeats of one difficulty: the count of passes is binomial, so the coverage
    # is a finite sum. The old bootstrap gave [100%, 100%] whenever all passed: 87% at p = 0.98.
    coverage = exact_coverage(p, 100)
    assert 0.95 <= coverage < 0.99


def test_repeat_interval_coverage_by_simulation() -> None:
    # Prompts of spread difficulty, and a set of almost-always-passing prompts, each asked 5
    # times: the interval must hold this set's expected pass rate in at least 95% of reruns.
    rng = np.random.default_rng(20261130)
    for probabilities in (np.linspace(0.1, 0.9, 20), np.full(20, 0.98), np.r_[np.ones(10), np.full(10, 0.6)]):
        truth = float(probabilities.mean())
        passes_per_run = rng.binomial(5, probabilities, size=(4000, len(probabilities))).sum(axis=1)
        intervals = {k: stats.clopper_pearson(int(k), 100) for k in set(passes_per_run.tolist())}
        covered = np.mean([intervals[k].low <= truth <= intervals[k].high for k in passes_per_run.tolist()])
        assert covered >= 0.95, (probabilities, covered)
        # not needlessly wide for "this set run again": within 1.3x of the reruns' own 95% spread
        width = np.mean([intervals[k].high - intervals[k].low for k in passes_per_run.tolist()])
        spread = 2 * 1.959964 * math.sqrt(float((5 * probabilities * (1 - probabilities)).sum())) / 100
        if spread > 0.05:
            assert width < 1.3 * spread, (probabilities, width, spread)


def test_repeat_summary_of_all_passing_samples_is_not_a_point() -> None:
    run = make_run([(f"p{i}", True, 1.0) for i in range(4) for _ in range(5)], repeats=5)
    low, high = repeat_summary(run).pass_rate_ci
    assert (low, high) == (stats.clopper_pearson(20, 20).low, 1.0)
    assert low == pytest.approx(0.025 ** (1 / 20))  # the exact bound for 20 of 20
    assert low < 1.0


def test_compare_of_five_unchanged_items_prints_no_zero_width_interval(cli: Any, db_file: Path) -> None:
    first = passes([True, True, True, False, False])
    second = passes([True, True, True, False, False], started_at="2026-11-30T12:01:00+00:00")
    with Store.open(db_file) as store:
        for run in (first, second):
            save_run(store, run, "metadata", "test")
    result = cli("compare", first.run_id, second.run_id)
    assert result.exit_code == 0, result.stderr
    assert "pass rate +0.0 pp (no paired item changed), two-sided p = 1.000" in result.stdout
    assert "mean score +0.000 (no paired item changed)" in result.stdout
    assert "95% CI" not in result.stdout


def test_an_interval_of_items_that_all_changed_alike_is_not_printed_as_one() -> None:
    test = paired_test(outcomes_of(passes([True] * 5)), outcomes_of(passes([False] * 5)))
    assert test.pass_rate_ci == (-1.0, -1.0)
    assert test.describe() == (
        "pass rate -100.0 pp (every paired item changed by the same amount: no interval), two-sided p = 0.062"
    )
    spread = paired_test(outcomes_of(passes([True] * 5)), outcomes_of(passes([False] * 2 + [True] * 3)))
    assert "(95% CI -" in spread.describe()


# -- pass@N and pass^N -------------------------------------------------------------------------


def unbiased_pass_at_k(samples: int, passed: int, k: int) -> float:
    """Chen et al. (2021): 1 - C(n - c, k) / C(n, k)."""
    return 1.0 - math.comb(samples - passed, k) / math.comb(samples, k)


def unbiased_pass_hat_k(samples: int, passed: int, k: int) -> float:
    """pass^k: C(c, k) / C(n, k)."""
    return math.comb(passed, k) / math.comb(samples, k)


def test_pass_at_n_and_pass_hat_n_are_the_unbiased_estimates_at_k_equal_n() -> None:
    counts = [0, 1, 3, 4, 4, 2]  # passes of 4 samples per prompt
    run = make_run([(f"p{i}", r < c, float(r < c)) for i, c in enumerate(counts) for r in range(4)], repeats=4)
    summary = repeat_summary(run)
    assert summary.pass_at_n_rate == pytest.approx(np.mean([unbiased_pass_at_k(4, c, 4) for c in counts]))
    assert summary.pass_all_rate == pytest.approx(np.mean([unbiased_pass_hat_k(4, c, 4) for c in counts]))


def test_the_readme_defines_pass_at_n_pass_hat_n_and_the_interval() -> None:
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    section = readme[readme.index("## Baselines and regressions") :]
    assert (
        "**pass@N** is the share of prompts that passed in at least one of their N samples and **pass^N** the "
        "share that passed in all N"
    ) in section
    assert "pass@k for k < N is not offered" in section
    assert "**one-sided**" in section
    assert "about **this set's prompts asked again**" in section
