"""Typed verdicts: what a comparison, a grader's yardstick and a gate decided, as values.

A verdict is data first and a sentence only where it is shown: the comparison state is an enum
with predicates (as httpx's status codes are), its explanation kept apart from the value (as
inspect_ai's ``Score`` keeps ``explanation`` apart from ``value``). The enum values are the strings
of the JSON output and the database's ``comparison_state`` column (README "JSON output"), so a
state serialises to what it always did. Nothing here imports the rest of evalkit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum


class ComparisonState(StrEnum):
    """How a run stands against its baseline (README "Baselines and regressions")."""

    BASELINE = "baseline"  # recorded as the baseline of its scope
    COMPARED = "compared"  # compared with the baseline (regressed or not)
    NOT_COMPARED = "not_compared"  # a prompt run that could not be compared
    MISMATCH = "mismatch"  # a retrieval run whose benchmark changed since the previous run
    UNKNOWN = "unknown"  # a retrieval run whose comparison could not be decided
    SHARD = "shard"  # one shard's part of a run: compared and gated once assembled (evalkit gate)

    @classmethod
    def read(cls, stored: object) -> ComparisonState | None:
        """A state read back from a database row; None for none, or for a value no version wrote."""
        return next((state for state in cls if state.value == stored), None)

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

    @classmethod
    def read(cls, stored: object) -> GateBasis | None:
        """A basis read back from a stored comparison; None for none, or for a value no version wrote."""
        return next((basis for basis in cls if basis.value == stored), None)

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
    ``<kind>:failed`` when every grading failed; and a run with model-graded assertions
    ``judged:<identities>`` (README "Model-graded assertions"): the ``<instance>:<reported model>``
    of each judge and embeddings instance that served it, sorted and joined by ``+``, plain
    ``judged`` when its judgements do not share them. ``str()`` gives the stored string back."""

    kind: str
    instance: str | None = None  # the judge's provider instance
    reported_model: str | None = None  # the model the judge reported
    version: int | None = None
    failed: bool = False
    identities: tuple[str, ...] = ()  # judged: each serving instance's ``<instance>:<reported model>``

    @classmethod
    def parse(cls, text: str) -> Yardstick:
        kind, _, rest = text.partition(":")
        if rest == "failed":
            return cls(kind, failed=True)
        if kind == JUDGED:
            served = tuple(rest.split("+")) if rest else ()
            if all(_identity(i) for i in served):
                return cls(kind, identities=served)
            return cls(text)
        instance, _, tail = rest.partition(":")
        reported, _, version = tail.rpartition(":v")
        numbered = version.isascii() and version.isdigit() and str(int(version)) == version
        if kind != DECISION or not (instance and reported and numbered):
            return cls(text)  # a whole name: deterministic, retrieval_hit_rate, decision, a plugin's
        return cls(kind, instance, reported, int(version))

    @classmethod
    def decision(cls, instance: str, reported_model: str, version: int) -> Yardstick:
        return cls(DECISION, instance, reported_model, version)

    @classmethod
    def judged_by(cls, identities: Iterable[str]) -> Yardstick:
        """A run's or an item's judged yardstick from the identities that served it."""
        return cls(JUDGED, identities=tuple(sorted(set(identities))))

    def __str__(self) -> str:
        if self.failed:
            return f"{self.kind}:failed"
        if self.identities:
            return f"{self.kind}:{'+'.join(self.identities)}"
        if self.version is None:
            return self.kind
        return f"{self.kind}:{self.instance}:{self.reported_model}:v{self.version}"

    @property
    def judged(self) -> bool:
        """Measured by a model: the decision grader (the judge), or model-graded assertions, in full or in part."""
        return self.kind in (DECISION, JUDGED)

    @property
    def shared(self) -> bool:
        """One full yardstick: a deterministic or retrieval scoring, or one judge's decisions."""
        if self.failed:
            return False
        if self.kind == JUDGED:
            return bool(self.identities)
        return self.kind in WHOLE_YARDSTICKS or (self.judged and self.version is not None)

    @property
    def verified(self) -> bool:
        """The judge reported the model that graded (a deterministic yardstick needs none)."""
        if self.identities:
            return not any(i.endswith("?") for i in self.identities)
        return not (self.reported_model or "").endswith("?")


def _identity(text: str) -> bool:
    """``<instance>:<reported model>``, both present."""
    instance, _, model = text.partition(":")
    return bool(instance and model)


DECISION = "decision"
JUDGED = "judged"
WHOLE_YARDSTICKS = ("deterministic", "retrieval_hit_rate")


@dataclass(frozen=True, slots=True)
class Regressed:
    """A requested regression gate failed: the run regressed against its baseline."""

    baseline_run_id: str | None
    basis: GateBasis | None = None  # how --significance decided it, when given
    significance: float | None = None

    def describe(self) -> str:
        how = "" if self.basis is None else self.basis.describe(self.significance)
        return f"regression against the baseline (run {self.baseline_run_id}){how}"


@dataclass(frozen=True, slots=True)
class NotCompared:
    """A requested regression gate failed: the run was not compared, for ``cause``."""

    cause: str

    def describe(self) -> str:
        return f"not compared with a baseline ({self.cause})"


@dataclass(frozen=True, slots=True)
class BelowMinimum:
    """An absolute gate failed (README "Absolute gates"): ``measure`` is below its minimum."""

    measure: str  # pass rate | mean score
    shown: str  # the value, with the decimals that show it below the minimum
    minimum: Decimal
    counts: str | None = None  # passed/samples, for a pass rate

    def describe(self) -> str:
        counts = f" ({self.counts})" if self.counts is not None else ""
        return f"{self.measure} {self.shown}{counts} is below the minimum {self.minimum}"


@dataclass(frozen=True, slots=True)
class CriticalFailed:
    """A critical prompt failed or errored (README "Absolute gates")."""

    prompt_id: str  # as printed (a long id shortened)
    how: str  # failed | errored

    def describe(self) -> str:
        return f"critical prompt '{self.prompt_id}' {self.how}"


@dataclass(frozen=True, slots=True)
class StoredFailure:
    """A failure read back from the database, as it was said when the gate was decided."""

    text: str

    def describe(self) -> str:
        return self.text


GateFailure = Regressed | NotCompared | BelowMinimum | CriticalFailed | StoredFailure


@dataclass(frozen=True, slots=True)
class GateVerdict:
    """What the gates decided for a run: the ``gate`` block of the JSON output and of the stored
    run (README "JSON output"), its failures typed and put in words only where shown."""

    fail_on_regression: bool
    failures: tuple[GateFailure, ...] = ()

    @property
    def passed(self) -> bool:
        return not self.failures

    def reasons(self) -> list[str]:
        """Each failure in words."""
        return [f.describe() for f in self.failures]

    def as_dict(self) -> dict[str, bool | list[str]]:
        return {"fail_on_regression": self.fail_on_regression, "passed": self.passed, "failures": self.reasons()}

    @classmethod
    def stored(cls, data: object) -> GateVerdict | None:
        """The inverse of ``as_dict`` for a gate block read back (None: no gate was decided)."""
        if not isinstance(data, Mapping):
            return None
        failures = data.get("failures")
        said = [str(f) for f in failures] if isinstance(failures, list) else []
        return cls(bool(data.get("fail_on_regression")), tuple(StoredFailure(f) for f in said))
