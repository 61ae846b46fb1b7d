"""Typed verdicts: what a comparison, a grader's yardstick and a gate decided, as values.

A verdict is data first and a sentence only where it is shown: the comparison state is an enum
with predicates (as httpx's status codes are), its explanation kept apart from the value (as
inspect_ai's ``Score`` keeps ``explanation`` apart from ``value``). The enum values are the strings
of the JSON output and the database's ``comparison_state`` column (README "JSON output"), so a
state serialises to what it always did. Nothing here imports the rest of evalkit.
"""

from __future__ import annotations

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
