"""Typed verdicts: what a comparison, a grader's yardstick and a gate decided, as values.

A verdict is data first and a sentence only where it is shown: the comparison state is an enum
with predicates (as httpx's status codes are), its explanation kept apart from the value (as
inspect_ai's ``Score`` keeps ``explanation`` apart from ``value``). The enum values are the strings
of the JSON output and the database's ``comparison_state`` column (README "JSON output"), so a
state serialises to what it always did. Nothing here imports the rest of evalkit.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class ComparisonState(StrEnum):
    """How a run stands against its baseline (README "Baselines and regressions")."""

    BASELINE = "baseline"  # recorded as the baseline of its scope
    COMPARED = "compared"  # compared with the baseline (regressed or not)
    NOT_COMPARED = "not_compared"  # a prompt run that could not be compared
    MISMATCH = "mismatch"  # a retrieval run whose benchmark changed since the previous run
    UNKNOWN = "unknown"  # a retrieval run whose comparison could not be decided

    @property
    def is_baseline(self) -> bool:
        return self is ComparisonState.BASELINE

    @property
    def is_compared(self) -> bool:
        return self is ComparisonState.COMPARED

    @property
    def comparable(self) -> bool:
        """A run in this state has a verdict a regression gate can pass: it became the baseline
        or was compared with one; any other state fails a requested gate."""
        return self in (ComparisonState.BASELINE, ComparisonState.COMPARED)


class GateBasis(StrEnum):
    """How a regression under ``--significance`` was decided (README "Baselines and regressions")."""

    SIGNIFICANT = "significant"  # the one-sided paired test found the drop significant
    UNDECIDED = "undecided"  # the paired test cannot decide: the tolerance verdict stands
    UNTESTED = "untested"  # significance was not tested: the tolerance verdict stands

    def describe(self, alpha: float | None) -> str:
        """The clause the gate's failure adds for a regression decided this way."""
        shown = f"{alpha:g}" if alpha is not None else ""
        if self is GateBasis.SIGNIFICANT:
            return f": significant at {shown} (one-sided paired test)"
        if self is GateBasis.UNDECIDED:
            return (
                f": decided by the tolerance, since the paired test cannot decide at {shown} "
                "(too few changed items), not found significant"
            )
        return ": decided by the tolerance (significance not tested), not found significant"


@dataclass(frozen=True, slots=True)
class Yardstick:
    """What measured a grading or a run, parsed once from the string the database and the JSON
    keep (README "Graders"): ``deterministic``, ``retrieval_hit_rate``, a judge's
    ``decision:<judge instance>:<reported model>:v<version>`` (the reported model ends ``?``
    when the judge reported none), ``decision`` for a run whose gradings do not share one, and
    ``<kind>:failed`` when every grading failed. ``str()`` gives the stored string back."""

    kind: str
    instance: str | None = None  # the judge's provider instance
    reported_model: str | None = None  # the model the judge reported
    version: int | None = None
    failed: bool = False

    @classmethod
    def parse(cls, text: str) -> Yardstick:
        kind, _, rest = text.partition(":")
        if rest == "failed":
            return cls(kind, failed=True)
        instance, _, tail = rest.partition(":")
        reported, _, version = tail.rpartition(":v")
        numbered = version.isascii() and version.isdigit() and str(int(version)) == version
        if kind != DECISION or not (instance and reported and numbered):
            return cls(text)  # a whole name: deterministic, retrieval_hit_rate, decision, a plugin's
        return cls(kind, instance, reported, int(version))

    @classmethod
    def decision(cls, instance: str, reported_model: str, version: int) -> Yardstick:
        return cls(DECISION, instance, reported_model, version)

    def __str__(self) -> str:
        if self.failed:
            return f"{self.kind}:failed"
        if self.version is None:
            return self.kind
        return f"{self.kind}:{self.instance}:{self.reported_model}:v{self.version}"

    @property
    def judged(self) -> bool:
        """Measured by the decision grader (the judge), in full or in part."""
        return self.kind == DECISION

    @property
    def shared(self) -> bool:
        """One full yardstick: a deterministic or retrieval scoring, or one judge's decisions."""
        if self.failed:
            return False
        return self.kind in WHOLE_YARDSTICKS or (self.judged and self.version is not None)

    @property
    def verified(self) -> bool:
        """The judge reported the model that graded (a deterministic yardstick needs none)."""
        return not (self.reported_model or "").endswith("?")


DECISION = "decision"
WHOLE_YARDSTICKS = ("deterministic", "retrieval_hit_rate")
