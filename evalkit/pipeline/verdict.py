"""Verdict: a run compared with its baseline and gated, by one path for prompt and retrieval runs.

Each kind says how it compares, gates and saves (an ``Ending``); ``verdict`` and the persist
stage do the rest the same way for both (README "Baselines and regressions", "Gates").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Generic, TypeVar

from evalkit._version import __version__
from evalkit.compare import (
    compare_retrieval,
    compare_run,
    gate_of,
    not_comparable_reason,
    paired_test,
    with_other_scope,
)
from evalkit.pipeline.baseline import baseline_of, baseline_outcomes, other_baseline, previous_retrieval, scope_missing
from evalkit.pipeline.plans import RetrievalPlan, RunPlan
from evalkit.pipeline.shards import part_comparison
from evalkit.records import Comparison, Gate, RetrievalRunResult, RunResult
from evalkit.verdicts import ComparisonState, GateVerdict

if TYPE_CHECKING:
    from evalkit.store import Store

R = TypeVar("R", RunResult, RetrievalRunResult)


@dataclass(frozen=True, slots=True)
class Ending(Generic[R]):
    """How one kind of run is compared, gated and saved; the end of the pipeline is shared."""

    compare: Callable[[Store | None, R], Comparison]  # None: no database, nothing to compare with
    gate: Callable[[R], R]
    save: Callable[[Store, R], None]  # one transaction
    unstored: ComparisonState  # the state of a run the database refused (README "JSON output")
    counted: bool  # the failure counts the runs of the command ("1 of 2 runs"), else "the run"


def verdict(ending: Ending[R], store: Store | None, run: R) -> R:
    """The run compared with its baseline (none without a database) and gated."""
    return ending.gate(replace(run, comparison=ending.compare(store, run)))


def refused(ending: Ending[R], run: R, cause: str) -> R:
    """A run the database refused: not compared, saying why, and gated (README "Commands")."""
    comparison = Comparison.not_compared(f"the run could not be stored ({cause})", ending.unstored)
    return ending.gate(replace(run, comparison=comparison))


def prompt_ending(plan: RunPlan) -> Ending[RunResult]:
    from evalkit.store import save_run

    def save(store: Store, run: RunResult) -> None:
        save_run(store, run, plan.config.privacy, __version__, run.gate)

    # a shard's part: never compared or gated alone (README "Larger suites: shards and batches")
    if plan.shard is not None:
        shard = plan.shard
        return Ending(
            compare=lambda store, run: part_comparison(shard),
            gate=lambda run: replace(run, gate=GateVerdict(fail_on_regression=False)),
            save=save,
            unstored=ComparisonState.SHARD,
            counted=True,
        )
    return Ending(
        compare=lambda store, run: compare_prompt_run(plan, store, run),
        gate=lambda run: gated(plan, run),
        save=save,
        unstored=ComparisonState.NOT_COMPARED,
        counted=True,
    )


def retrieval_ending(plan: RetrievalPlan) -> Ending[RetrievalRunResult]:
    from evalkit.store import save_retrieval_run

    def compare(store: Store | None, run: RetrievalRunResult) -> Comparison:
        previous = previous_retrieval(store, run) if store is not None else None
        return compare_retrieval(run, previous, plan.tolerances)

    def save(store: Store, run: RetrievalRunResult) -> None:
        save_retrieval_run(store, run, plan.config.privacy, __version__, run.gate)

    return Ending(
        compare=compare,
        gate=lambda run: replace(run, gate=gate_of(run, plan.fail_on_regression)),
        save=save,
        unstored=ComparisonState.UNKNOWN,
        counted=False,
    )


def compare_prompt_run(plan: RunPlan, store: Store | None, run: RunResult) -> Comparison:
    """The prompt run against its scope's baseline; the other scope's numbers for information."""
    if store is None:
        return Comparison.not_compared(not_comparable_reason(run) or "no store (the run was not stored)")
    baseline = baseline_of(plan, store, run)
    paired = None
    if baseline is not None and (plan.repeats > 1 or plan.significance is not None):
        before = baseline_outcomes(store, baseline)
        if before:
            paired = paired_test(before, [(i.id, i.passed, i.score) for i in run.items])
    comparison = compare_run(run, baseline, run.tolerances, paired, plan.significance)
    missing = scope_missing(plan, run) if comparison.state.is_baseline else None
    if missing is not None:  # a committed baseline exists, just not for what answered: say so, never pass
        comparison = Comparison.not_compared(missing)
    if comparison.state.is_baseline or missing is not None:
        other = other_baseline(plan, store, run)
        if other is not None:  # another model's baseline: numbers for information, the verdict stands
            comparison = with_other_scope(comparison, run, *other)
    return comparison


def gated(plan: RunPlan, run: RunResult) -> RunResult:
    """The run with its gate decided: the regression gate when asked, and the absolute gates."""
    prompt_set = next(s for s in plan.sets if s.id == run.set_id)
    minimums = Gate(
        min_pass_rate=plan.gate_overrides.get("min_pass_rate", prompt_set.gate.min_pass_rate),
        min_mean_score=plan.gate_overrides.get("min_mean_score", prompt_set.gate.min_mean_score),
    )
    critical = [p.id for p in prompt_set.prompts if p.critical]
    return replace(run, gate=gate_of(run, plan.fail_on_regression, minimums, critical))
