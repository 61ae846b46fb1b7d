"""Summaries derived from a run's items: per-prompt outcomes over repeats (pass@N, pass^N, flaky)
and the aggregate's confidence interval.

With N samples per prompt, pass@N is the share of prompts that passed in at least one of their N
samples and pass^N the share that passed in all N: the observed values, which are the unbiased
estimates of "at least one of N attempts passes" and "all N attempts pass" for these prompts.

The pass-rate interval is about this set's prompts asked again on the same generator: the
expected share of passing samples (the mean, over these prompts, of each prompt's probability to
pass). It is the Clopper-Pearson interval over all samples, exact for prompts of equal
difficulty and conservative for prompts of different difficulty (a sum of trials with different
probabilities is less spread than a binomial of the same mean); it never has zero width. It is
not an interval for other prompts of the same kind: those would add the spread between prompts.
"""

from __future__ import annotations

from dataclasses import dataclass

from evalkit import stats
from evalkit.records import ItemResult, RunResult
from evalkit.verdicts import GateVerdict, Yardstick


@dataclass(frozen=True, slots=True)
class PromptOutcome:
    """One prompt over its repeated samples."""

    id: str
    samples: tuple[ItemResult, ...]

    @property
    def passed(self) -> int:
        return sum(1 for s in self.samples if s.passed)

    @property
    def pass_rate(self) -> float:
        return self.passed / len(self.samples)

    @property
    def mean_score(self) -> float:
        return sum(s.score for s in self.samples) / len(self.samples)

    @property
    def pass_at_n(self) -> bool:
        """Passed in at least one sample."""
        return self.passed > 0

    @property
    def pass_all(self) -> bool:
        """Passed in every sample (pass^N)."""
        return self.passed == len(self.samples)

    @property
    def flaky(self) -> bool:
        return 0 < self.passed < len(self.samples)

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "samples": len(self.samples),
            "passed": self.passed,
            "pass_rate": self.pass_rate,
            "mean_score": self.mean_score,
            "pass_at_n": self.pass_at_n,
            "pass_all": self.pass_all,
            "flaky": self.flaky,
        }


def prompt_outcomes(run: RunResult) -> list[PromptOutcome]:
    grouped: dict[str, list[ItemResult]] = {}
    for item in run.items:
        grouped.setdefault(item.id, []).append(item)
    return [PromptOutcome(item_id, tuple(samples)) for item_id, samples in grouped.items()]


@dataclass(frozen=True, slots=True)
class RepeatSummary:
    repeats: int
    prompts: tuple[PromptOutcome, ...]
    pass_rate_ci: tuple[float, float]  # 95%, Clopper-Pearson over every sample (the module docstring)

    @property
    def pass_at_n_rate(self) -> float:
        return sum(p.pass_at_n for p in self.prompts) / len(self.prompts) if self.prompts else 0.0

    @property
    def pass_all_rate(self) -> float:
        return sum(p.pass_all for p in self.prompts) / len(self.prompts) if self.prompts else 0.0

    @property
    def flaky(self) -> int:
        return sum(p.flaky for p in self.prompts)

    def as_dict(self) -> dict[str, object]:
        return {
            "repeats": self.repeats,
            "pass_rate_ci95": list(self.pass_rate_ci),
            "pass_at_n_rate": self.pass_at_n_rate,
            "pass_all_rate": self.pass_all_rate,
            "flaky_count": self.flaky,
            "prompts": [p.as_dict() for p in self.prompts],
        }


def repeat_summary(run: RunResult) -> RepeatSummary:
    outcomes = prompt_outcomes(run)
    samples = [s for p in outcomes for s in p.samples]
    interval = stats.clopper_pearson(sum(1 for s in samples if s.passed), len(samples))
    return RepeatSummary(run.repeats, tuple(outcomes), (interval.low, interval.high))


def cached_counts(run: RunResult) -> tuple[int, int | None]:
    """(answers replayed from the cache, judge gradings replayed from it; None without a judge)."""
    answers = sum(1 for i in run.items if i.cached)
    if not Yardstick.parse(run.grader).judged:
        return answers, None
    return answers, sum(1 for i in run.items if i.grader_cached)


def cache_note(run: RunResult) -> str:
    """``answers from the cache: 2 of 3`` (and the judge's gradings), so that a gate decided on
    replayed answers is visible (docs/contract.md "The completion cache"); empty for a run without items."""
    if not run.items:
        return ""
    answers, gradings = cached_counts(run)
    note = f"answers from the cache: {answers} of {len(run.items)}"
    return note + (f", judge gradings from the cache: {gradings} of {len(run.items)}" if gradings is not None else "")


def judge_calls_note(run: RunResult) -> str:
    """``judge calls 12 (4 cached)``: the model-graded assertions' calls, apart from the
    generator's (README "Model-graded assertions"); empty when no judge was called."""
    if not run.judge_calls:
        return ""
    return f"judge calls {run.judge_calls:,} ({run.judge_cached:,} cached)"


def cached_before_run(run: RunResult) -> tuple[int, str | None]:
    """(answers replayed from cache entries stored before this run, when the oldest was written):
    a restored or committed cache, not the endpoint as it answers now (README "JSON output")."""
    written = [i.cached_at for i in run.items if i.cached_at is not None]
    return len(written), min(written, default=None)


def stale_cache_note(run: RunResult, gate: GateVerdict | None = None) -> str:
    """Under --fail-on-regression, ``on 3 of 3 answers cached before this run (the oldest
    2026-11-20 10:00 UTC), not on the endpoint now: gate with --no-cache`` when the verdict
    rests on such answers; empty otherwise."""
    count, oldest = cached_before_run(run)
    decided = gate if gate is not None else run.gate
    if not count or decided is None or not decided.fail_on_regression:
        return ""
    when = f" (the oldest {oldest[:10]} {oldest[11:16]} UTC)" if oldest else ""
    return (
        f"on {count} of {len(run.items)} answers cached before this run{when}, not on the endpoint now: "
        "gate with --no-cache"
    )
