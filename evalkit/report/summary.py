"""Summaries derived from a run's items: per-prompt outcomes over repeats (pass@N, pass^N, flaky)
and the aggregate's confidence interval."""

from __future__ import annotations

from dataclasses import dataclass

from evalkit import stats
from evalkit.records import ItemResult, RunResult


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
    pass_rate_ci: tuple[float, float]  # 95%, bootstrap over prompts and their samples

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
    interval = stats.clustered_rate_ci([[float(s.passed) for s in p.samples] for p in outcomes])
    return RepeatSummary(run.repeats, tuple(outcomes), (interval.low, interval.high))
