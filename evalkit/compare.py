"""Regression verdicts: pure functions over a current run and its baseline.

Rates are compared exactly, as fractions, against the tolerance as written (a decimal): a pass
rate or hit rate is the fraction of its counts (passed / samples), a mean score the exact mean of
the per-prompt scores, each score taken as the decimal its float reads as (0.8 is 4/5, as the
tolerance 0.8 is; the way a YAML tolerance is read, records.parse_tolerance). So 8/10 -> 7/10 is a
drop of exactly 1/10, which a tolerance of 0.1 accepts; 3/3 -> 2/3 is a drop of 1/3, which a
tolerance of 0.333333333333 does not; an identical re-run is a drop of exactly 0. Messages show
as many digits as it takes for the shown drop to compare with the shown tolerance as the exact
ones do.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from decimal import Decimal
from fractions import Fraction

from evalkit import stats
from evalkit.records import (
    Comparison,
    Flips,
    Gate,
    OtherScope,
    PairedTest,
    RetrievalRunResult,
    RetrievalTolerances,
    RunResult,
    Tolerances,
)
from evalkit.verdicts import (
    JUDGED,
    BelowMinimum,
    ComparisonState,
    CriticalFailed,
    GateBasis,
    GateFailure,
    GateVerdict,
    NotCompared,
    Regressed,
    Yardstick,
)


@dataclass(frozen=True, slots=True)
class BaselineRun:
    """What the comparison needs of a stored baseline run."""

    run_id: str
    pass_rate: float
    mean_score: float
    passed_count: int = 0
    item_count: int = 0
    set_fingerprint: str | None = None
    source: str = "db"  # db | file (README "Baselines and regressions")
    file: str | None = None  # the baseline file, when the source is a file
    items: Mapping[str, tuple[float, float]] | None = None  # id -> (pass fraction, score); None: not kept
    repeats: int = 1  # samples per prompt behind ``items``


def exact_ratio(numerator: int, denominator: int) -> Fraction:
    """A rate of counts as an exact fraction (0 for no items)."""
    return Fraction(numerator, denominator) if denominator else Fraction(0)


def as_written(value: float) -> Fraction:
    """A float score as the decimal it reads as (its shortest repr), exactly: 0.8 is four fifths,
    as a tolerance of 0.8 is, so scores of 0.8 -> 0.7 drop by exactly 0.1."""
    return Fraction(repr(float(value)))


def exact_mean(values: Iterable[float]) -> Fraction:
    """The exact mean of float values (each as written, see ``as_written``); 0 for none."""
    fractions = [as_written(v) for v in values]
    return sum(fractions, Fraction(0)) / len(fractions) if fractions else Fraction(0)


def mean_scores(run: RunResult, baseline: BaselineRun) -> tuple[Fraction, Fraction]:
    """(current, baseline) mean score, exactly: the mean of the per-prompt scores when the
    baseline kept them, else the stored means as written (the same float formula on both sides,
    so an identical re-run is still a drop of exactly 0)."""
    if baseline.items is None or not run.items:
        return as_written(run.mean_score), as_written(baseline.mean_score)
    now = per_item((i.id, i.passed, i.score) for i in run.items)
    return exact_mean(s for _, s in now.values()), exact_mean(s for _, s in baseline.items.values())


def run_mean_score(run: RunResult) -> Fraction:
    """A run's mean score, exactly (the mean of its per-prompt scores)."""
    if not run.items:
        return as_written(run.mean_score)
    return exact_mean(s for _, s in per_item((i.id, i.passed, i.score) for i in run.items).values())


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
    yardstick = Yardstick.parse(run.grader)
    if yardstick.judged and not yardstick.verified:
        return "the judge reported no model, so its yardstick cannot be verified"
    if not yardstick.shared:  # only a run stored under one full yardstick can be compared
        what = "judgement" if yardstick.kind == JUDGED else "decision"
        if yardstick.judged and yardstick.failed:
            return f"every {what} failed, so the run has no yardstick"
        return f"its gradings do not share one yardstick (some {what}s failed or the judge model changed)"
    return None


# how an application adapter reports the model that answered (README, "Testing your application")
REPORT_MODEL = {
    "http": "an http instance reports it with response.model (a dotted path into its answer) in evalkit.yaml",
    "python": "a python function reports it as `model` in the object it returns",
    "command": "a command reports it as `model` in the JSON object it prints",
}


def generator_problem(run: RunResult) -> str:
    records = {i.serving for i in run.items if i.serving is not None}
    if not records:
        return "no item was answered"
    unverified = sorted({r.provider for r in records if not r.verified})
    if unverified:
        apps = sorted({i.adapter for i in run.items if i.adapter in REPORT_MODEL and i.serving is not None
                       and not i.serving.verified})  # fmt: skip
        how = "".join(f"; {REPORT_MODEL[a]}" for a in apps)
        return (
            f"responses from {', '.join(unverified)} did not report their model, so the model that answered is unknown"
            f"{how}"
        )
    described = sorted(f"{r.provider}/{r.model} ({r.reported_model})" for r in records)
    return f"answers came from {len(records)} different generators ({'; '.join(described)}), so the model is unknown"


def fixed(value: Fraction, places: int) -> str:
    """``value`` rounded (half to even) to ``places`` decimals, exactly: no float in between."""
    scaled = round(value * 10**places)
    sign = "-" if scaled < 0 else ""
    whole, part = divmod(abs(scaled), 10**places)
    return f"{sign}{whole}.{part:0{places}d}" if places else f"{sign}{whole}"


def written(tolerance: Decimal, scale: int, places: int) -> str:
    """A tolerance as written, scaled (to percentage points for rates), with every digit it has."""
    value = tolerance * scale
    exponent = value.normalize().as_tuple().exponent
    digits = max(places, -exponent if isinstance(exponent, int) else 0)
    return f"{value:.{digits}f}"


def shown_against(value: Fraction, tolerance: Decimal, scale: int, places: int) -> str:
    """``value`` (a drop, scaled) with the fewest decimals (at least ``places``) at which it
    compares with the tolerance as the exact value does: a drop of 1/3 against 0.333333333333
    reads 33.33333333333 pp, beyond 33.3333333333 pp, never 33.3 beyond 33.3."""
    exact = value * scale
    limit = Fraction(tolerance) * scale
    relation = (exact > limit) - (exact < limit)
    text = fixed(exact, places)
    for digits in range(places, places + 60):
        text = fixed(exact, digits)
        shown = Fraction(Decimal(text))
        if (shown > limit) - (shown < limit) == relation:
            return text
    return text


def pp(delta: Fraction, tolerance: Decimal | None = None) -> str:
    """A rate delta in percentage points with a sign: ``+0.0 pp``, ``-30.0 pp``; a drop shown
    with enough digits not to look beyond (or within) ``tolerance`` when it is not."""
    if delta >= 0:
        return f"+{fixed(delta * 100, 1)} pp"
    drop = fixed(-delta * 100, 1) if tolerance is None else shown_against(-delta, tolerance, 100, 1)
    return f"-{drop} pp"


def units(delta: Fraction, tolerance: Decimal) -> str:
    """A mean-score delta with a sign and at least three decimals (see ``pp``)."""
    if delta >= 0:
        return "+" + fixed(delta, 3)
    return "-" + shown_against(-delta, tolerance, 1, 3)


def compare_run(
    run: RunResult,
    baseline: BaselineRun | None,
    tolerances: Tolerances,
    paired: PairedTest | None = None,
    significance: float | None = None,
) -> Comparison:
    """The verdict for a prompt run against its baseline (None: this run becomes the baseline).

    With ``significance`` (ALPHA), a drop beyond the tolerance is judged by the paired test
    (``paired``), one-sided, since a regression gate asks whether the run got worse: significant
    (p <= ALPHA), it stays a regression; not significant, it is reported as a drop that is not
    significant, with the drop that would have been; where the changed items could not give a
    p-value as small as ALPHA whatever they did, the test cannot decide and the tolerance verdict
    stands. The reason is composed once, from the parts decided here.
    """
    verdict, measured = _tolerance_verdict(run, baseline, tolerances)
    if not verdict.state.is_compared or baseline is None or measured is None:
        return verdict
    flips = flips_of(baseline.items, run) if baseline.items is not None else None
    verdict = replace(verdict, baseline_source=baseline.source, baseline_file=baseline.file, flips=flips)
    tail = [_set_changed_note(run, baseline, flips)]
    if paired is not None or significance is not None:
        verdict = replace(verdict, paired=paired, significance=significance)
    if paired is not None:
        tail.append(f" Paired test over {paired.paired} items: {paired.describe(one_sided=significance is not None)}.")
    judgement = _significance(verdict, measured, run, baseline) if significance is not None else None
    if judgement is None:
        return replace(verdict, reason=verdict.reason + "".join(tail))
    tail.append(judgement.sentence)
    head = verdict.reason if judgement.regressed else measured.sentence("Drop not significant")
    return replace(verdict, reason=head + "".join(tail), regressed=judgement.regressed, gate_basis=judgement.basis)


@dataclass(frozen=True, slots=True)
class _Measured:
    """The tolerance verdict's parts: the breached tolerances (names and words) and the baseline
    they were measured against, from which the verdict's sentence is made."""

    breaches: tuple[str, ...]
    problems: tuple[str, ...]
    against: str  # ``against run ID`` (with the baseline file when it came from one)

    def sentence(self, lead: str) -> str:
        """``Regression: pass rate dropped ... (against run ID).`` with ``lead`` first."""
        return f"{lead}: {'; '.join(self.problems)} ({self.against})."


@dataclass(frozen=True, slots=True)
class _Judgement:
    """How the paired test judged a regression: whether it stands, on what basis, and the
    sentence the reason adds."""

    regressed: bool
    basis: GateBasis | None
    sentence: str


def _significance(verdict: Comparison, measured: _Measured, run: RunResult, baseline: BaselineRun) -> _Judgement | None:
    """The paired test's judgement of a regression under ``--significance``; None when there is none to judge."""
    paired, alpha = verdict.paired, verdict.significance
    if alpha is None or not verdict.regressed:
        return None
    if paired is None or not paired.paired:
        why = "No item rows to pair with the baseline" if paired is None else "No item is in both runs"
        return _Judgement(True, GateBasis.UNTESTED, f" ({why}: significance not tested.)")
    # Each breached tolerance is judged by its own paired test, and only where the paired items
    # dropped too: a drop that comes from other items, or a paired gain, is no evidence either way.
    deltas = {"pass_rate": paired.pass_rate_delta, "mean_score": paired.mean_score_delta}
    untested = [b for b in measured.breaches if deltas[b] >= 0]
    if untested:
        shown = " and ".join(b.replace("_", " ") for b in untested)
        return _Judgement(
            True, GateBasis.UNTESTED, f" (The items in both runs did not drop in {shown}: significance not tested.)"
        )
    return _judged(list(measured.breaches), paired, alpha, _paired_differences(run, baseline, paired))


_LABELS = {"pass_rate": "pass rate", "mean_score": "mean score"}


def _judged(
    breaches: list[str],
    paired: PairedTest,
    alpha: float,
    differences: Mapping[str, list[float]],
) -> _Judgement:
    """A regression judged by the one-sided paired tests of its breached tolerances."""
    tests = {
        "pass_rate": (paired.drop_p_value, paired.drop_p_floor, paired.lost + paired.gained),
        "mean_score": (paired.score_drop_p_value, paired.score_drop_p_floor, paired.score_changed),
    }
    significant = [b for b in breaches if tests[b][0] <= alpha]
    if significant:
        shown = "; ".join(f"{_LABELS[b]} {p_clause(tests[b][0], alpha)}" for b in significant)
        return _Judgement(True, GateBasis.SIGNIFICANT, f" Significant at {alpha:g} ({shown}).")
    undecided = [b for b in breaches if tests[b][1] > alpha]
    if undecided:
        shown = "; ".join(
            f"{_LABELS[b]}: with {_count(tests[b][2], 'item')} changed, the smallest one-sided p any outcome "
            f"could give is {format_p(tests[b][1], alpha)}"
            for b in undecided
        )
        return _Judgement(
            True,
            GateBasis.UNDECIDED,
            f" The paired test cannot decide at {alpha:g} ({shown}), so the tolerance verdict stands.",
        )
    shown = "; ".join(_not_significant(b, tests[b][0], paired, alpha, differences.get(b)) for b in breaches)
    return _Judgement(False, None, f" The drop is not significant at {alpha:g} ({shown}).")


def _not_significant(
    breach: str, p_value: float, paired: PairedTest, alpha: float, differences: list[float] | None
) -> str:
    """``pass rate one-sided p = 0.500; a drop of at least 35.0 pp ... would have been significant``."""
    text = f"{_LABELS[breach]} {p_clause(p_value, alpha)}"
    need = None if differences is None else stats.detectable_drop(differences, alpha)
    if need is None:
        return text
    if breach == "mean_score":
        return (
            f"{text}; with the same items changed, a mean-score drop of at least {need:.3f} would have been significant"
        )
    if paired.test == "McNemar exact":
        changed = paired.lost + paired.gained
        failing = round((need * paired.paired + changed) / 2)
        return (
            f"{text}; a drop of at least {need * 100:.1f} pp over the {paired.paired} paired items ({failing} of the "
            f"{_count(changed, 'changed item')} failing now) would have been significant"
        )
    return f"{text}; with the same items changed, a drop of at least {need * 100:.1f} pp would have been significant"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _paired_differences(run: RunResult, baseline: BaselineRun, paired: PairedTest) -> dict[str, list[float]]:
    """The per-item differences the paired test saw, as far as they can be known: from the
    baseline's per-prompt outcomes, or (pass/fail only) from the McNemar counts."""
    if baseline.items is not None:
        now = per_item((i.id, i.passed, i.score) for i in run.items)
        common = [i for i in baseline.items if i in now]
        if len(common) == paired.paired:
            return {
                "pass_rate": [now[i][0] - baseline.items[i][0] for i in common],
                "mean_score": [now[i][1] - baseline.items[i][1] for i in common],
            }
    if paired.test == "McNemar exact":
        unchanged = paired.paired - paired.lost - paired.gained
        return {"pass_rate": [-1.0] * paired.lost + [1.0] * paired.gained + [0.0] * unchanged}
    return {}


def _against(baseline: BaselineRun) -> str:
    """``against run ID``, with the baseline file when the baseline came from one (README
    "Baselines kept in the repository")."""
    return f"against run {baseline.run_id}" + (f" ({baseline.file})" if baseline.source == "file" else "")


def _set_changed_note(run: RunResult, baseline: BaselineRun, flips: Flips | None) -> str:
    """A note when the set changed since the baseline (which prompts were added or removed); empty when it did not."""
    if baseline.set_fingerprint in (None, run.set_fingerprint):
        return ""
    changed = []
    if flips is not None and flips.added:
        changed.append("added: " + ", ".join(flips.added))
    if flips is not None and flips.removed:
        changed.append("removed: " + ", ".join(flips.removed))
    detail = f" ({'; '.join(changed)})" if changed else ""
    return f" Note: the set's prompts or assertions changed since that run{detail}."


def with_other_scope(comparison: Comparison, run: RunResult, other: BaselineRun, scope: tuple[str, ...]) -> Comparison:
    """``comparison`` (a run with no baseline of its own scope) with its delta against another
    model's baseline of the set, ``scope`` = (provider, model, reported model, grader): for
    information only, the verdict and the gate stay as they are (README, "Baselines and
    regressions")."""
    pass_delta = exact_ratio(run.passed_count, run.sample_count) - exact_ratio(other.passed_count, other.item_count)
    score_now, score_before = mean_scores(run, other)
    provider, model, reported, grader = scope
    info = OtherScope(
        other.run_id,
        provider,
        model,
        reported,
        grader,
        other.source,
        float(pass_delta),
        float(score_now - score_before),
    )
    where = f"run {other.run_id}" + (f" ({other.file})" if other.file else "")
    gen = run.generator
    same_model = gen is not None and (gen.model, gen.reported_model) == (model, reported)
    whose = "another provider instance's" if same_model else "another model's"
    text = (
        f" For information only, against {whose} baseline ({provider}/{model} (reported {reported}), "
        f"graded by {grader}; {where}): pass rate {pp(pass_delta)}, mean score {_signed(score_now - score_before)}; "
        "not a verdict."
    )
    return replace(comparison, reason=comparison.reason + text, other_scope=info)


def _signed(delta: Fraction) -> str:
    return ("+" if delta >= 0 else "-") + fixed(abs(delta), 3)


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
) -> tuple[Comparison, _Measured | None]:
    """The verdict by tolerances alone, and (for a compared run) the parts its sentence is made of."""
    reason = not_comparable_reason(run)
    if reason is not None:
        return Comparison.not_compared(reason), None
    if baseline is None:
        return Comparison(ComparisonState.BASELINE, f"Recorded as the baseline for {describe_scope(run)}."), None
    pass_delta = exact_ratio(run.passed_count, run.sample_count) - exact_ratio(
        baseline.passed_count, baseline.item_count
    )
    score_now, score_before = mean_scores(run, baseline)
    score_delta = score_now - score_before
    pass_tolerance, score_tolerance = tolerances.max_pass_rate_drop, tolerances.max_mean_score_drop
    breaches, problems = _breaches(
        ("pass_rate", "pass rate", pass_delta, pass_tolerance, True),
        ("mean_score", "mean score", score_delta, score_tolerance, False),
    )
    measured = _Measured(tuple(breaches), tuple(problems), _against(baseline))
    if problems:
        text = measured.sentence("Regression")
    else:
        text = (
            f"No regression: pass rate {pp(pass_delta, pass_tolerance)}, "
            f"mean score {units(score_delta, score_tolerance)} {measured.against}."
        )
    comparison = Comparison(
        ComparisonState.COMPARED,
        text,
        regressed=bool(problems),
        baseline_run_id=baseline.run_id,
        pass_rate_delta=float(pass_delta),
        mean_score_delta=float(score_delta),
    )
    return comparison, measured


def _breaches(*checks: tuple[str, str, Fraction, Decimal, bool]) -> tuple[list[str], list[str]]:
    """Names and sentences of the drops beyond their tolerance; a check is (name, label, delta,
    tolerance, as_rate) where a rate is shown in percentage points and a score in units. The
    exact drop is compared with the exact tolerance."""
    names, sentences = [], []
    for name, label, delta, tolerance, as_rate in checks:
        if -delta > Fraction(tolerance):
            names.append(name)
            scale, places, unit = (100, 1, " pp") if as_rate else (1, 3, "")
            drop = shown_against(-delta, tolerance, scale, places)
            limit = written(tolerance, scale, places)
            sentences.append(f"{label} dropped {drop}{unit}, beyond the tolerance of {limit}{unit}")
    return names, sentences


def gate_of(
    run: RunResult | RetrievalRunResult,
    fail_on_regression: bool,
    minimums: Gate | None = None,
    critical: Collection[str] = (),
) -> GateVerdict:
    """The gate verdict (the JSON output's and the stored run's ``gate`` block): the regression
    gate when it was asked for, and the absolute gates (README "Absolute gates"), which hold for
    every run with or without a baseline."""
    failures: list[GateFailure] = []
    comparison = run.comparison
    if fail_on_regression and (comparison is None or not gate_passed(comparison, True)):
        if comparison is not None and comparison.regressed:
            failures.append(Regressed(comparison.baseline_run_id, comparison.gate_basis, comparison.significance))
        else:
            failures.append(NotCompared((comparison.cause or comparison.reason) if comparison else "no comparison"))
    if isinstance(run, RunResult):
        failures.extend(absolute_failures(run, minimums or Gate(), critical))
    return GateVerdict(fail_on_regression, tuple(failures))


def power_note(run: RunResult) -> str | None:
    """A note when the set is too small to tell the drop its pass-rate tolerance allows from
    noise, with how many prompts it would take (``stats.prompts_needed``; README, "Choosing a
    gate"); None when it is large enough, the tolerance is 0 or 1, prompts were repeated or
    items errored."""
    tolerance = run.tolerances.max_pass_rate_drop
    if run.repeats > 1 or run.error_count or not 0 < tolerance < 1 or not run.items:
        return None
    prompts = len(run.items)
    rate = float(exact_ratio(run.passed_count, run.sample_count))
    needed = stats.prompts_needed(float(tolerance), rate)
    if prompts >= needed:
        return None
    shown = written(tolerance, 100, 1)
    return (
        f"Note: {run.set_id}: {prompts} prompt{'' if prompts == 1 else 's'} are too few for the gate to tell a "
        f"{shown} pp pass-rate drop (its tolerance) from noise: at a pass rate of {fixed(Fraction(rate) * 100, 0)}% "
        f'that takes about {needed} prompts (80% of such drops found at one-sided 5%; README, "Choosing a gate")'
    )


def absolute_failures(run: RunResult, minimums: Gate, critical: Collection[str] = ()) -> list[GateFailure]:
    """Each minimum the run falls short of, and each critical prompt that failed.
    The pass rate is compared as the exact fraction of its counts."""
    failures: list[GateFailure] = []
    if minimums.min_pass_rate is not None:
        rate = Fraction(run.passed_count, run.sample_count) if run.sample_count else Fraction(0)
        if rate < minimums.min_pass_rate:
            shown = shown_below(rate, minimums.min_pass_rate)
            counts = f"{run.passed_count}/{run.sample_count}"
            failures.append(BelowMinimum("pass rate", shown, minimums.min_pass_rate, counts))
    if minimums.min_mean_score is not None:
        score = run_mean_score(run)
        if score < minimums.min_mean_score:
            failures.append(
                BelowMinimum("mean score", shown_below(score, minimums.min_mean_score), minimums.min_mean_score)
            )
    wanted = set(critical)
    failed: dict[str, str] = {}
    for item in run.items:
        if item.id in wanted and not item.passed:
            failed.setdefault(item.id, "errored" if item.errored else "failed")
    failures.extend(CriticalFailed(printable_id(i), how) for i, how in failed.items())
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
    return comparison.state.comparable and not comparison.regressed


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
    """baseline | compared | mismatch | unknown, per docs/contract.md "Retrieval evaluation"."""
    if run.error_count:
        return Comparison.not_compared(
            f"{run.error_count} of {run.question_count} questions errored; a run with errors is stored but not compared",
            ComparisonState.UNKNOWN,
        )
    if run.benchmark_fingerprint is None:
        return Comparison.not_compared(
            f"the benchmark fingerprint is unknown because retriever '{run.retriever}' declared no corpus "
            "revision (declare provenance: {corpus_revision: ...} for it in evalkit.yaml, or return it)",
            ComparisonState.UNKNOWN,
        )
    if previous is None:
        return Comparison(
            ComparisonState.BASELINE,
            f"Recorded as the baseline for {run.set_id} with retriever '{run.retriever}' "
            f"(benchmark {run.benchmark_fingerprint}).",
        )
    treatment_changed = previous.variant_fingerprint != run.variant_fingerprint
    if previous.benchmark_fingerprint is None:
        return Comparison.not_compared(
            f"the benchmark fingerprint of run {previous.run_id} is unknown",
            ComparisonState.UNKNOWN,
            baseline_run_id=previous.run_id,
            treatment_changed=treatment_changed,
        )
    if previous.benchmark_fingerprint != run.benchmark_fingerprint:
        return Comparison.not_compared(
            f"the benchmark changed since run {previous.run_id} (corpus or labels differ: "
            f"{previous.benchmark_fingerprint} -> {run.benchmark_fingerprint})",
            ComparisonState.MISMATCH,
            baseline_run_id=previous.run_id,
            treatment_changed=treatment_changed,
        )
    top1 = exact_ratio(run.top1_hits, run.question_count) - exact_ratio(previous.top1_hits, previous.question_count)
    top3 = exact_ratio(run.top3_hits, run.question_count) - exact_ratio(previous.top3_hits, previous.question_count)
    breaches, problems = _breaches(
        ("top1", "top-1 hit rate", top1, tolerances.max_top1_drop, True),
        ("top3", "top-3 hit rate", top3, tolerances.max_top3_drop, True),
    )
    if problems:
        text = _Measured(tuple(breaches), tuple(problems), f"against run {previous.run_id}").sentence("Regression")
    else:
        text = (
            f"No regression: top-1 {pp(top1, tolerances.max_top1_drop)}, "
            f"top-3 {pp(top3, tolerances.max_top3_drop)} against run {previous.run_id}."
        )
    changes = treatment_changes(previous.provenance, run.provenance)
    if changes:
        text += " Treatment changed: " + "; ".join(changes) + "."
    return Comparison(
        ComparisonState.COMPARED,
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
    permutation test on the per-item pass-rate differences. Both two-sided (has it changed?) and
    one-sided (has it dropped? what the regression gate asks), and likewise for the mean score.
    The 95% intervals are a seeded paired bootstrap over items.
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
    pass_drop, score_drop = stats.drop_test(pass_diff, seed), stats.drop_test(score_diff, seed)
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
        drop_p_value=pass_drop.p_value,
        drop_p_floor=pass_drop.floor,
        score_drop_p_value=score_drop.p_value,
        score_drop_p_floor=score_drop.floor,
        score_changed=score_drop.changed,
    )


def p_clause(p: float, alpha: float) -> str:
    """``one-sided p = 0.031`` or ``one-sided p < 0.001``."""
    shown = format_p(p, alpha)
    return f"one-sided p {shown}" if shown.startswith("<") else f"one-sided p = {shown}"


def format_p(p: float, alpha: float | None = None) -> str:
    """A p-value to three decimals, with more where three would put it on the wrong side of
    ``alpha`` (a floor of 0.0500001 against 0.05 does not read 0.050)."""
    if p < 0.001 and (alpha is None or alpha >= 0.001):
        return "< 0.001"
    for digits in range(3, 18):
        text = f"{p:.{digits}g}" if p < 0.001 else f"{p:.{digits}f}"
        if alpha is None or (float(text) <= alpha) == (p <= alpha):
            return text
    return repr(p)
