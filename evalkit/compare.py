"""Regression verdicts: pure functions over a current run and its baseline.

Rates are compared in exact decimal arithmetic. A rate is a ratio of small integers (passed /
prompts) or a mean of such ratios; it is quantised to 12 decimal places, which keeps distinct
rates distinct and makes equal drops equal: 8/10 -> 7/10 is a drop of exactly 0.1, which a
tolerance of 0.1 accepts, and an identical re-run of 2/3 is a drop of exactly 0.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from decimal import Decimal
from fractions import Fraction
from typing import Any

from evalkit import stats
from evalkit.records import (
    Comparison,
    Flips,
    Gate,
    PairedTest,
    RetrievalRunResult,
    RetrievalTolerances,
    RunResult,
    Tolerances,
)

QUANTUM = Decimal("1e-12")
COMPARABLE_PREFIXES = ("deterministic", "decision:", "retrieval_hit_rate")


@dataclass(frozen=True, slots=True)
class BaselineRun:
    """What the comparison needs of a stored baseline run."""

    run_id: str
    pass_rate: float
    mean_score: float
    passed_count: int = 0
    item_count: int = 0
    set_fingerprint: str | None = None
    source: str = "db"  # db | file (DESIGN 5.2)
    file: str | None = None  # the baseline file, when the source is a file
    items: Mapping[str, tuple[float, float]] | None = None  # id -> (pass fraction, score); None: not kept


def exact_rate(value: float) -> Decimal:
    """A stored or computed rate as an exact decimal (quantised, see the module docstring)."""
    return Decimal(value).quantize(QUANTUM)


def exact_ratio(numerator: int, denominator: int) -> Decimal:
    if denominator == 0:
        return Decimal(0).quantize(QUANTUM)
    return (Decimal(numerator) / Decimal(denominator)).quantize(QUANTUM)


def comparable_grader(grader: str) -> bool:
    """Only a run stored under one full yardstick can be compared."""
    if grader in ("decision", "decision:failed"):
        return False
    return grader.startswith(COMPARABLE_PREFIXES)


def describe_scope(run: RunResult) -> str:
    """The baseline scope in words: the generator that answered (a fallback names itself)."""
    gen = run.generator
    if gen is None:
        return f"{run.set_id} on {run.provider}/{run.model} (reported unknown), graded by {run.grader}"
    return f"{run.set_id} on {gen.provider}/{gen.model} (reported {gen.reported_model}), graded by {run.grader}"


def not_comparable_reason(run: RunResult) -> str | None:
    """Why this run can be neither compared nor used as a baseline; None when it can."""
    if run.error_count:
        return f"{run.error_count} of {run.sample_count} items errored; a run with errors is stored but not compared"
    if run.generator is None:
        return "no single verified serving generator: " + generator_problem(run)
    if run.grader.startswith("decision:") and run.grader.endswith("?:v1"):
        return "the judge reported no model, so its yardstick cannot be verified"
    if not comparable_grader(run.grader):
        if run.grader == "decision:failed":
            return "every decision failed, so the run has no yardstick"
        return "its gradings do not share one yardstick (some decisions failed or the judge model changed)"
    return None


def generator_problem(run: RunResult) -> str:
    records = {i.serving for i in run.items if i.serving is not None}
    if not records:
        return "no item was answered"
    unverified = sorted({r.provider for r in records if not r.verified})
    if unverified:
        return (
            f"responses from {', '.join(unverified)} did not report their model, so the model that answered is unknown"
        )
    described = sorted(f"{r.provider}/{r.model} ({r.reported_model})" for r in records)
    return f"answers came from {len(records)} different generators ({'; '.join(described)}), so the model is unknown"


def pp(delta: Decimal) -> str:
    """A rate delta in percentage points with a sign: ``+0.0 pp``, ``-30.0 pp``."""
    return f"{float(delta) * 100:+.1f} pp"


def compare_run(
    run: RunResult,
    baseline: BaselineRun | None,
    tolerances: Tolerances,
    paired: PairedTest | None = None,
    significance: float | None = None,
) -> Comparison:
    """The verdict for a prompt run against its baseline (None: this run becomes the baseline).

    With ``significance``, a drop beyond the tolerance is a regression only when the paired test
    (``paired``) also finds it significant at that level; an insignificant drop is reported as such.
    """
    verdict, breaches = _tolerance_verdict(run, baseline, tolerances)
    if verdict.state == "compared" and baseline is not None:
        verdict = _with_flips(verdict, run, baseline)
    if verdict.state != "compared" or (paired is None and significance is None):
        return verdict
    verdict = replace(verdict, paired=paired, significance=significance)
    if paired is not None:
        verdict = replace(
            verdict, reason=f"{verdict.reason} Paired test over {paired.paired} items: {paired.describe()}."
        )
    if significance is None or not verdict.regressed:
        return verdict
    if paired is None or not paired.paired:
        why = "No item rows to pair with the baseline" if paired is None else "No item is in both runs"
        return replace(verdict, reason=f"{verdict.reason} ({why}: significance not tested.)")
    # Each breached tolerance is judged by its own paired test, and only where the paired items
    # dropped too: a drop that comes from other items, or a paired gain, is no evidence either way.
    p_values = {"pass_rate": paired.p_value, "mean_score": paired.score_p_value}
    deltas = {"pass_rate": paired.pass_rate_delta, "mean_score": paired.mean_score_delta}
    untested = [b for b in breaches if deltas[b] >= 0]
    if untested:
        shown = " and ".join(b.replace("_", " ") for b in untested)
        return replace(
            verdict,
            reason=f"{verdict.reason} (The items in both runs did not drop in {shown}: significance not tested.)",
        )
    if all(p_values[b] >= significance for b in breaches):
        shown = "; ".join(f"{b.replace('_', ' ')} p = {format_p(p_values[b])}" for b in breaches)
        return replace(
            verdict,
            regressed=False,
            reason=verdict.reason.replace("Regression:", "Drop not significant:", 1)
            + f" Not a regression at significance {significance:g} ({shown}).",
        )
    return replace(verdict, reason=f"{verdict.reason} Significant at {significance:g}.")


def _with_flips(verdict: Comparison, run: RunResult, baseline: BaselineRun) -> Comparison:
    """The comparison with where its baseline came from, the per-prompt flips, and a note when
    the set changed since the baseline (which prompts were added or removed)."""
    reason = verdict.reason
    if baseline.source == "file":
        reason = reason.replace(f"against run {baseline.run_id}", f"against run {baseline.run_id} ({baseline.file})")
    flips = flips_of(baseline.items, run) if baseline.items is not None else None
    if baseline.set_fingerprint not in (None, run.set_fingerprint):
        changed = []
        if flips is not None and flips.added:
            changed.append("added: " + ", ".join(flips.added))
        if flips is not None and flips.removed:
            changed.append("removed: " + ", ".join(flips.removed))
        detail = f" ({'; '.join(changed)})" if changed else ""
        reason += f" Note: the set's prompts or assertions changed since that run{detail}."
    return replace(verdict, reason=reason, baseline_source=baseline.source, baseline_file=baseline.file, flips=flips)


def flips_of(before: Mapping[str, tuple[float, float]], run: RunResult) -> Flips:
    """Prompts that passed in the baseline and fail now (every sample, with --repeat), and the
    reverse; prompts only in this run or only in the baseline."""
    now = per_item((i.id, i.passed, i.score) for i in run.items)
    regressed = [i for i, (rate, _) in now.items() if i in before and before[i][0] == 1.0 and rate < 1.0]
    fixed = [i for i, (rate, _) in now.items() if i in before and before[i][0] < 1.0 and rate == 1.0]
    added = [i for i in now if i not in before]
    removed = [i for i in before if i not in now]
    return Flips(tuple(regressed), tuple(fixed), tuple(added), tuple(removed))


def _tolerance_verdict(
    run: RunResult, baseline: BaselineRun | None, tolerances: Tolerances
) -> tuple[Comparison, list[str]]:
    """The verdict by tolerances alone, and which tolerances were breached."""
    reason = not_comparable_reason(run)
    if reason is not None:
        return Comparison("not_compared", f"Not compared: {reason}."), []
    if baseline is None:
        return Comparison("baseline", f"Recorded as the baseline for {describe_scope(run)}."), []
    pass_delta = exact_ratio(run.passed_count, run.sample_count) - exact_ratio(
        baseline.passed_count, baseline.item_count
    )
    score_delta = exact_rate(run.mean_score) - exact_rate(baseline.mean_score)
    breaches, problems = _breaches(
        ("pass_rate", "pass rate", pass_delta, tolerances.max_pass_rate_drop, True),
        ("mean_score", "mean score", score_delta, tolerances.max_mean_score_drop, False),
    )
    if problems:
        text = "Regression: " + "; ".join(problems) + f" (against run {baseline.run_id})."
    else:
        text = f"No regression: pass rate {pp(pass_delta)}, mean score {float(score_delta):+.3f} against run {baseline.run_id}."
    comparison = Comparison(
        "compared",
        text,
        regressed=bool(problems),
        baseline_run_id=baseline.run_id,
        pass_rate_delta=float(pass_delta),
        mean_score_delta=float(score_delta),
    )
    return comparison, breaches


def _breaches(*checks: tuple[str, str, Decimal, Decimal, bool]) -> tuple[list[str], list[str]]:
    """Names and sentences of the drops beyond their tolerance; a check is (name, label, delta,
    tolerance, as_rate) where a rate is shown in percentage points and a score in units."""
    names, sentences = [], []
    for name, label, delta, tolerance, as_rate in checks:
        if -delta > tolerance:
            names.append(name)
            shown = (pp(-delta)[1:], pp(tolerance)[1:]) if as_rate else (f"{-delta:.3f}", f"{tolerance:.3f}")
            sentences.append(f"{label} dropped {shown[0]}, beyond the tolerance of {shown[1]}")
    return names, sentences


def gate_of(
    run: RunResult | RetrievalRunResult,
    fail_on_regression: bool,
    minimums: Gate | None = None,
    critical: Collection[str] = (),
) -> dict[str, Any]:
    """The gate block of the JSON output (and of the stored run): the regression gate when it
    was asked for, and the absolute gates (DESIGN 5.8), which hold for every run with or without
    a baseline. ``failures`` says each failure in words."""
    failures: list[str] = []
    comparison = run.comparison
    if fail_on_regression and (comparison is None or not gate_passed(comparison, True)):
        if comparison is not None and comparison.regressed:
            failures.append(f"regression against the baseline (run {comparison.baseline_run_id})")
        else:
            why = comparison.reason.removeprefix("Not compared: ").rstrip(".") if comparison else "no comparison"
            failures.append(f"not compared with a baseline ({why})")
    if isinstance(run, RunResult):
        failures.extend(absolute_failures(run, minimums or Gate(), critical))
    return {"fail_on_regression": fail_on_regression, "passed": not failures, "failures": failures}


def absolute_failures(run: RunResult, minimums: Gate, critical: Collection[str] = ()) -> list[str]:
    """Each minimum the run falls short of, and each critical prompt that failed, in words.
    The pass rate is compared as the exact fraction of its counts."""
    failures = []
    if minimums.min_pass_rate is not None:
        rate = Fraction(run.passed_count, run.sample_count) if run.sample_count else Fraction(0)
        if rate < minimums.min_pass_rate:
            failures.append(
                f"pass rate {shown_below(rate, minimums.min_pass_rate)} ({run.passed_count}/{run.sample_count}) "
                f"is below the minimum {minimums.min_pass_rate}"
            )
    if minimums.min_mean_score is not None:
        score = exact_rate(run.mean_score)
        if score < minimums.min_mean_score:
            failures.append(
                f"mean score {shown_below(Fraction(score), minimums.min_mean_score)} "
                f"is below the minimum {minimums.min_mean_score}"
            )
    wanted = set(critical)
    failed: dict[str, str] = {}
    for item in run.items:
        if item.id in wanted and not item.passed:
            failed.setdefault(item.id, "errored" if item.errored else "failed")
    failures.extend(f"critical prompt '{printable_id(i)}' {how}" for i, how in failed.items())
    return failures


def shown_below(value: Fraction, minimum: Decimal) -> str:
    """``value`` with as few decimals (two at least) as show it below ``minimum``: 0.7999 against
    0.8 reads 0.7999, not 0.80."""
    for places in range(2, 13):
        text = f"{float(value):.{places}f}"
        if Fraction(Decimal(text)) < Fraction(minimum):
            return text
    return repr(float(value))


def printable_id(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def gate_passed(comparison: Comparison, fail_on_regression: bool) -> bool:
    """Whether a requested gate held: regressed and not-compared runs fail it."""
    if not fail_on_regression:
        return True
    return comparison.state in ("baseline", "compared") and not comparison.regressed


@dataclass(frozen=True, slots=True)
class PreviousRetrieval:
    """What the comparison needs of the newest earlier retrieval run of a set and retriever."""

    run_id: str
    top1_hits: int
    top3_hits: int
    question_count: int
    benchmark_fingerprint: str | None
    variant_fingerprint: str | None
    provenance: dict[str, str | None]


def treatment_changes(before: dict[str, str | None], after: Mapping[str, str | None]) -> list[str]:
    return [
        f"{name} {before.get(name) or 'unknown'} -> {after.get(name) or 'unknown'}"
        for name in ("model_revision", "chunking", "pipeline")
        if before.get(name) != after.get(name)
    ]


def compare_retrieval(
    run: RetrievalRunResult, previous: PreviousRetrieval | None, tolerances: RetrievalTolerances
) -> Comparison:
    """baseline | compared | mismatch | unknown, per DESIGN 6."""
    if run.error_count:
        return Comparison(
            "unknown",
            f"Not compared: {run.error_count} of {run.question_count} questions errored; a run with errors is stored but not compared.",
        )
    if run.benchmark_fingerprint is None:
        return Comparison(
            "unknown",
            f"Not compared: the benchmark fingerprint is unknown because retriever '{run.retriever}' declared no corpus "
            "revision (declare provenance: {corpus_revision: ...} for it in evalkit.yaml, or return it).",
        )
    if previous is None:
        return Comparison(
            "baseline",
            f"Recorded as the baseline for {run.set_id} with retriever '{run.retriever}' "
            f"(benchmark {run.benchmark_fingerprint}).",
        )
    treatment_changed = previous.variant_fingerprint != run.variant_fingerprint
    if previous.benchmark_fingerprint is None:
        return Comparison(
            "unknown",
            f"Not compared: the benchmark fingerprint of run {previous.run_id} is unknown.",
            baseline_run_id=previous.run_id,
            treatment_changed=treatment_changed,
        )
    if previous.benchmark_fingerprint != run.benchmark_fingerprint:
        return Comparison(
            "mismatch",
            f"Not compared: the benchmark changed since run {previous.run_id} (corpus or labels differ: "
            f"{previous.benchmark_fingerprint} -> {run.benchmark_fingerprint}).",
            baseline_run_id=previous.run_id,
            treatment_changed=treatment_changed,
        )
    top1 = exact_ratio(run.top1_hits, run.question_count) - exact_ratio(previous.top1_hits, previous.question_count)
    top3 = exact_ratio(run.top3_hits, run.question_count) - exact_ratio(previous.top3_hits, previous.question_count)
    _, problems = _breaches(
        ("top1", "top-1 hit rate", top1, tolerances.max_top1_drop, True),
        ("top3", "top-3 hit rate", top3, tolerances.max_top3_drop, True),
    )
    if problems:
        text = "Regression: " + "; ".join(problems) + f" (against run {previous.run_id})."
    else:
        text = f"No regression: top-1 {pp(top1)}, top-3 {pp(top3)} against run {previous.run_id}."
    changes = treatment_changes(previous.provenance, run.provenance)
    if changes:
        text += " Treatment changed: " + "; ".join(changes) + "."
    return Comparison(
        "compared",
        text,
        regressed=bool(problems),
        baseline_run_id=previous.run_id,
        pass_rate_delta=float(top1),
        mean_score_delta=float(top3),
        treatment_changed=treatment_changed,
    )


def per_item(samples: Iterable[tuple[str, bool, float]]) -> dict[str, tuple[float, float]]:
    """item id -> (fraction of samples passed, mean score): repeats collapse to one outcome."""
    grouped: dict[str, list[tuple[bool, float]]] = {}
    for item_id, passed, value in samples:
        grouped.setdefault(item_id, []).append((passed, value))
    # fsum: exact, so the order of the samples (repeat 1, 2, 3 or 3, 1, 2) never shows as a change
    return {
        item_id: (math.fsum(p for p, _ in rows) / len(rows), math.fsum(v for _, v in rows) / len(rows))
        for item_id, rows in grouped.items()
    }


def paired_test(
    first: Iterable[tuple[str, bool, float]], second: Iterable[tuple[str, bool, float]], seed: int = stats.DEFAULT_SEED
) -> PairedTest:
    """Pair two runs' items by id; test the pass-rate change and bound both deltas.

    One sample per item: exact McNemar on the pass/fail flips. Repeated samples: a sign-flip
    permutation test on the per-item pass-rate differences. The 95% intervals are a seeded
    paired bootstrap over items.
    """
    a, b = per_item(first), per_item(second)
    common = [i for i in a if i in b]
    pass_diff = [b[i][0] - a[i][0] for i in common]
    score_diff = [b[i][1] - a[i][1] for i in common]
    binary = all(a[i][0] in (0.0, 1.0) and b[i][0] in (0.0, 1.0) for i in common)
    if binary:
        lost, gained, p_value = stats.mcnemar_exact([a[i][0] == 1.0 for i in common], [b[i][0] == 1.0 for i in common])
        test = "McNemar exact"
    else:
        lost = sum(1 for d in pass_diff if d < 0)
        gained = sum(1 for d in pass_diff if d > 0)
        p_value, test = stats.sign_flip_p(pass_diff, seed), "sign-flip permutation"
    n = len(common)
    score_p = stats.sign_flip_p(score_diff, seed)
    pass_ci = stats.bootstrap_mean_ci(pass_diff, seed=seed)
    score_ci = stats.bootstrap_mean_ci(score_diff, seed=seed)
    return PairedTest(
        paired=n,
        only_first=len(a) - n,
        only_second=len(b) - n,
        pass_rate_delta=sum(pass_diff) / n if n else 0.0,
        mean_score_delta=sum(score_diff) / n if n else 0.0,
        pass_rate_ci=(pass_ci.low, pass_ci.high),
        mean_score_ci=(score_ci.low, score_ci.high),
        p_value=p_value,
        score_p_value=score_p,
        test=test,
        lost=lost,
        gained=gained,
    )


def format_p(p: float) -> str:
    return "< 0.001" if p < 0.001 else f"{p:.3f}"
