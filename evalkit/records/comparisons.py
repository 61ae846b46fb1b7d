"""Comparison records: the verdict against a baseline, the paired test behind it, per-prompt flips,
and the baseline files they are read from (README "Baselines and regressions")."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalkit.records.base import JsonValue, record
from evalkit.verdicts import ComparisonState, GateBasis


@record
class PairedTest:
    """A paired comparison of two runs over the items present in both.

    ``p_value`` and ``score_p_value`` are two-sided (has it changed?); the ``drop_`` figures are
    one-sided (has it dropped?), which is what the regression gate asks, with the smallest
    p-value the changed items could have given at all (``_floor``).
    """

    paired: int
    only_first: int
    only_second: int
    pass_rate_delta: float  # second - first, over the paired items
    mean_score_delta: float
    pass_rate_ci: tuple[float, float]
    mean_score_ci: tuple[float, float]
    p_value: float
    test: str  # "McNemar exact" | "sign-flip permutation"
    lost: int = 0  # items that passed in the first and fail in the second
    gained: int = 0
    score_p_value: float = 1.0  # sign-flip permutation test of the mean-score difference
    drop_p_value: float = 1.0
    drop_p_floor: float = 1.0
    score_drop_p_value: float = 1.0
    score_drop_p_floor: float = 1.0
    score_changed: int = 0  # paired items whose mean score changed

    def describe(self, one_sided: bool = False, measure: str = "pass rate") -> str:
        """``pass rate -12.0 pp (95% CI -20.1 … -3.9), two-sided p = 0.008`` (has it changed?);
        with ``one_sided`` the p-value of a drop, which ``--significance`` gates on
        (``one-sided p = 0.004``). Each is labelled: both can be seen side by side. ``measure``
        names what the stored pass is (a retrieval run's: the top-1 hit)."""
        return f"{measure} {self.pass_rate_delta * 100:+.1f} pp ({self.pass_interval()}), {self.p_text(one_sided)}"

    def p_text(self, one_sided: bool = False) -> str:
        """``two-sided p = 0.008``, or the one-sided p of a drop: ``one-sided p < 0.001``."""
        p = self.drop_p_value if one_sided else self.p_value
        label = "one-sided p" if one_sided else "two-sided p"
        return f"{label} < 0.001" if p < 0.001 else f"{label} = {p:.3f}"

    def pass_interval(self) -> str:
        """``95% CI -20.1 … -3.9``, or why there is no interval: a bootstrap over items that all
        changed alike (or not at all) is a single point, which is no interval."""
        return _interval_text(self.pass_rate_ci, self.pass_rate_delta, 100, "{:+.1f}")

    def score_interval(self) -> str:
        return _interval_text(self.mean_score_ci, self.mean_score_delta, 1, "{:+.3f}")

    @classmethod
    def from_dict(cls, data: Mapping[str, JsonValue]) -> PairedTest:
        return cls(
            paired=data["paired_items"],
            only_first=data["only_in_first"],
            only_second=data["only_in_second"],
            pass_rate_delta=data["pass_rate_delta"],
            mean_score_delta=data["mean_score_delta"],
            pass_rate_ci=tuple(data["pass_rate_ci95"]),
            mean_score_ci=tuple(data["mean_score_ci95"]),
            p_value=data["p_value"],
            test=data["test"],
            lost=data["pass_to_fail"],
            gained=data["fail_to_pass"],
            score_p_value=data.get("mean_score_p_value", 1.0),
            drop_p_value=data.get("one_sided_p_value", 1.0),
            drop_p_floor=data.get("one_sided_p_floor", 1.0),
            score_drop_p_value=data.get("mean_score_one_sided_p_value", 1.0),
            score_drop_p_floor=data.get("mean_score_one_sided_p_floor", 1.0),
            score_changed=data.get("mean_score_changed", 0),
        )

    def as_dict(self) -> dict[str, JsonValue]:
        return {
            "paired_items": self.paired,
            "only_in_first": self.only_first,
            "only_in_second": self.only_second,
            "pass_rate_delta": self.pass_rate_delta,
            "pass_rate_ci95": list(self.pass_rate_ci),
            "mean_score_delta": self.mean_score_delta,
            "mean_score_ci95": list(self.mean_score_ci),
            "p_value": self.p_value,
            "mean_score_p_value": self.score_p_value,
            "one_sided_p_value": self.drop_p_value,
            "one_sided_p_floor": self.drop_p_floor,
            "mean_score_one_sided_p_value": self.score_drop_p_value,
            "mean_score_one_sided_p_floor": self.score_drop_p_floor,
            "mean_score_changed": self.score_changed,
            "test": self.test,
            "pass_to_fail": self.lost,
            "fail_to_pass": self.gained,
        }


def _interval_text(interval: tuple[float, float], delta: float, scale: int, fmt: str) -> str:
    low, high = interval
    if low != high:
        return f"95% CI {fmt.format(low * scale)} … {fmt.format(high * scale)}"
    if delta == 0:
        return "no paired item changed"
    return "every paired item changed by the same amount: no interval"


@record
class Flips:
    """Prompts whose outcome changed against the baseline, by id (README "Baselines kept in the repository")."""

    regressed: tuple[str, ...] = ()  # passed in the baseline, fail now
    fixed: tuple[str, ...] = ()  # failed in the baseline, pass now
    added: tuple[str, ...] = ()  # not in the baseline
    removed: tuple[str, ...] = ()  # in the baseline, not in this run

    def as_dict(self) -> dict[str, JsonValue]:
        return {
            "regressed": list(self.regressed),
            "fixed": list(self.fixed),
            "added": list(self.added),
            "removed": list(self.removed),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, JsonValue]) -> Flips:
        return cls(*(tuple(data.get(k) or ()) for k in ("regressed", "fixed", "added", "removed")))


@record
class OtherScope:
    """For information only: how a run that has no baseline of its own compares with another
    model's baseline of the same set and grader (README, "Baselines and regressions"). Never a
    verdict: a run on another model is not compared."""

    run_id: str
    provider: str
    model: str
    reported_model: str
    grader: str
    source: str  # file | db: where that baseline came from
    pass_rate_delta: float  # this run minus that baseline
    mean_score_delta: float

    def as_dict(self) -> dict[str, JsonValue]:
        return {
            "note": "another model's (or provider instance's) baseline: for information only, not a verdict",
            "run_id": self.run_id,
            "provider": self.provider,
            "model": self.model,
            "reported_model": self.reported_model,
            "grader": self.grader,
            "source": self.source,
            "pass_rate_delta": self.pass_rate_delta,
            "mean_score_delta": self.mean_score_delta,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, JsonValue]) -> OtherScope:
        return cls(
            run_id=data["run_id"],
            provider=data["provider"],
            model=data["model"],
            reported_model=data["reported_model"],
            grader=data["grader"],
            source=data["source"],
            pass_rate_delta=data["pass_rate_delta"],
            mean_score_delta=data["mean_score_delta"],
        )


@record
class BaselineEntry:
    """One accepted baseline in a set's baseline file: a scope and what its run measured."""

    provider: str
    model: str
    reported_model: str
    grader: str
    run_id: str
    accepted_at: str
    evalkit_version: str
    set_fingerprint: str
    prompt_count: int
    passed_count: int
    pass_rate: float
    mean_score: float
    items: Mapping[str, tuple[float, float]]  # prompt id -> (fraction of its samples passed, mean score)
    repeats: int = 1

    @property
    def scope(self) -> tuple[str, str, str, str]:
        return (self.provider, self.model, self.reported_model, self.grader)


@record
class BaselineFile:
    """A set's baseline file (``baselines/<set id>.json``), as read."""

    path: Path
    set_id: str
    entries: tuple[BaselineEntry, ...] = ()

    def entry_for(self, provider: str, model: str, reported_model: str, grader: str) -> BaselineEntry | None:
        wanted = (provider, model, reported_model, grader)
        return next((e for e in self.entries if e.scope == wanted), None)


@record
class Comparison:
    """The verdict against the baseline."""

    state: ComparisonState
    reason: str  # the verdict in words, as shown and stored (README "JSON output")
    regressed: bool = False
    baseline_run_id: str | None = None
    pass_rate_delta: float | None = None
    mean_score_delta: float | None = None
    treatment_changed: bool | None = None
    paired: PairedTest | None = None  # the paired test against the baseline, when one was run
    significance: float | None = None  # --significance ALPHA, when given
    baseline_source: str | None = None  # file | db: where the baseline came from (README "Baselines and regressions")
    baseline_file: str | None = None  # the baseline file's path, when the source is a file
    flips: Flips | None = None  # per-prompt flips against the baseline (README "Baselines kept in the repository")
    gate_basis: GateBasis | None = None  # how a regression under --significance was decided
    other_scope: OtherScope | None = None  # another model's baseline, for information (not compared)
    cause: str | None = None  # why a run was not compared, apart from the reason's sentence

    def as_dict(self) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = {
            "state": self.state.value,
            "regressed": self.regressed,
            "baseline_run_id": self.baseline_run_id,
            "pass_rate_delta": self.pass_rate_delta,
            "mean_score_delta": self.mean_score_delta,
            "reason": self.reason,
        }
        if self.treatment_changed is not None:
            out["treatment_changed"] = self.treatment_changed
        if self.paired is not None:
            out["paired_test"] = self.paired.as_dict()
        if self.significance is not None:
            out["significance"] = self.significance
        if self.baseline_source is not None:
            out["baseline_source"] = self.baseline_source
            out["baseline_file"] = self.baseline_file
        if self.flips is not None:
            out["flips"] = self.flips.as_dict()
        if self.gate_basis is not None:
            out["gate_basis"] = self.gate_basis.value
        if self.other_scope is not None:
            out["other_scope"] = self.other_scope.as_dict()
        return out

    @classmethod
    def not_compared(
        cls, cause: str, state: ComparisonState = ComparisonState.NOT_COMPARED, **kwargs: Any
    ) -> Comparison:
        """A run that was not compared, and why: the sentence is made from ``cause`` here, and
        ``cause`` stays apart for the gate's failure (README "Baselines and regressions")."""
        return cls(state, f"Not compared: {cause}.", cause=cause, **kwargs)

    @classmethod
    def from_dict(cls, data: Mapping[str, JsonValue]) -> Comparison:
        """The inverse of ``as_dict`` (a stored comparison)."""
        paired = data.get("paired_test")
        return cls(
            # a state or basis no version wrote (a damaged or hostile database) reads as unknown
            state=ComparisonState.read(data.get("state")) or ComparisonState.UNKNOWN,
            reason=data["reason"],
            regressed=bool(data.get("regressed")),
            baseline_run_id=data.get("baseline_run_id"),
            pass_rate_delta=data.get("pass_rate_delta"),
            mean_score_delta=data.get("mean_score_delta"),
            treatment_changed=data.get("treatment_changed"),
            paired=PairedTest.from_dict(paired) if isinstance(paired, Mapping) else None,
            significance=data.get("significance"),
            baseline_source=data.get("baseline_source"),
            baseline_file=data.get("baseline_file"),
            flips=Flips.from_dict(flips) if isinstance(flips := data.get("flips"), Mapping) else None,
            gate_basis=GateBasis.read(data.get("gate_basis")),
            other_scope=OtherScope.from_dict(other) if isinstance(other := data.get("other_scope"), Mapping) else None,
        )
