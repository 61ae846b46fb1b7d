"""``evalkit gate``: a run group's merged shards assembled into runs, then compared, gated, stored
and reported exactly as ``run`` does (README "Larger suites: shards and batches").

Planning finds the group in the database and checks the gate options as ``run`` does: a mistake
is exit 2 with nothing stored. Gating loads the parts, refuses an incomplete or inconsistent group
(exit 3, naming every gap; nothing gated, nothing stored), assembles each (set, instance, alias)
into one run and hands the runs to the same verdict and persist stages as ``run`` (``finish``),
gated by the set's own minimums and critical prompts as its parts kept them: no set file is read,
which at 20,000 prompts would cost more than the rest of the gate (bench/README.md). The
assembled run's id is derived from the group, so gating twice stores it once and says the same.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from evalkit.compare import gate_of
from evalkit.config import Config, db_path
from evalkit.errors import InputError, ShardsIncomplete
from evalkit.pipeline.assembly import Parts, assemble, problems, set_gate
from evalkit.pipeline.persist import persist
from evalkit.pipeline.plan import check_significance, read_baselines
from evalkit.pipeline.plans import RunPlan
from evalkit.pipeline.shards import run_group
from evalkit.pipeline.verdict import Ending, compare_prompt_run, prompt_ending
from evalkit.records import Comparison, Gate, RunResult, Tolerances

if TYPE_CHECKING:
    from evalkit.store import ShardPart, Store


@dataclass(frozen=True, slots=True)
class GatePlan:
    """A run group to gate: its parts as found, and the plan its assembled runs are judged by."""

    group: str
    parts: tuple[ShardPart, ...]
    plan: RunPlan  # the whole sets, the gate options and the baselines; no target is called


def plan_gate(
    config: Config,
    *,
    group: str | None = None,
    db: str | Path | None = None,
    fail_on_regression: bool = False,
    tolerance_overrides: Mapping[str, Decimal] | None = None,
    gate_overrides: Mapping[str, Decimal] | None = None,
    significance: float | None = None,
    baselines: str | Path | None = None,
) -> GatePlan:
    """The group found and every gate input checked; exit 2 for an unknown group or a set not here."""
    from evalkit.store import Store, group_parts, run_groups

    name = run_group(group, "evalkit gate")
    check_significance(significance)
    path = db_path(config, db)
    if not path.exists():
        raise InputError(f"{path}: no database; merge the shards' databases first (evalkit merge shard-*.duckdb)")
    with Store.open(path) as store:
        parts = group_parts(store, name)
        if not parts:
            known = run_groups(store)
            held = f"groups here: {', '.join(known)}" if known else "no sharded run is stored here"
            raise InputError(
                f"{path}: no shard of run group '{name}' ({held}); merge the shards' databases "
                "(evalkit merge shard-*.duckdb) or give --run-group"
            )
    plan = RunPlan(
        sets=(),
        config=config,
        targets=(),
        grader="deterministic",
        judge=None,
        judge_alias=None,
        db=path,
        use_cache=False,
        read_cache=False,
        concurrency=None,
        tolerance_overrides=dict(tolerance_overrides or {}),
        fail_on_regression=fail_on_regression,
        significance=significance,
        gate_overrides=dict(gate_overrides or {}),
        baselines=read_baselines(sorted({p.set_id for p in parts}), config, baselines),
    )
    return GatePlan(name, tuple(parts), plan)


def gate_group(gate: GatePlan) -> list[RunResult]:
    """The group assembled, one run per (set, instance, alias), compared, gated and stored."""
    from evalkit.store import Store, load_run

    plan = gate.plan
    assert plan.db is not None
    grouped: dict[tuple[str, str, str], list[RunResult]] = {}
    with Store.open(plan.db) as store:
        for part in gate.parts:
            grouped.setdefault((part.set_id, part.provider, part.model), []).append(load_run(store, part.run_id)[0])
    all_parts = [Parts(set_id, provider, model, tuple(runs)) for (set_id, provider, model), runs in grouped.items()]
    found = [f"{parts.name}: {'; '.join(p)}" for parts in all_parts if (p := problems(parts))]
    if found:
        raise ShardsIncomplete(
            f"run group {gate.group} is incomplete, so nothing was gated: {' | '.join(found)}; merge every shard's "
            f"database (evalkit merge shard-*.duckdb) and gate again, or rerun a shard with --run-group {gate.group}"
        )
    runs, gates = [], {}
    for parts in all_parts:
        run = assemble(parts, gate.group, _tolerances(parts.runs[0].tolerances, plan.tolerance_overrides))
        runs.append(run)
        gates[run.run_id] = set_gate(parts)
    return finish(plan, runs, gate=lambda run: _gated(plan, run, *gates[run.run_id]))


def _gated(plan: RunPlan, run: RunResult, own: Gate, critical: list[str]) -> RunResult:
    """The assembled run gated as ``run`` gates a run of its set (``verdict.gated``)."""
    minimums = Gate(
        min_pass_rate=plan.gate_overrides.get("min_pass_rate", own.min_pass_rate),
        min_mean_score=plan.gate_overrides.get("min_mean_score", own.min_mean_score),
    )
    return replace(run, gate=gate_of(run, plan.fail_on_regression, minimums, critical))


def finish(
    plan: RunPlan, runs: Sequence[RunResult], gate: Callable[[RunResult], RunResult] | None = None
) -> list[RunResult]:
    """Runs carried out elsewhere (assembled shards; a collected batch) compared, gated, stored
    and returned for the report exactly as ``run`` does (``gate``: instead of the gate of the
    plan's sets, for runs whose sets the plan does not hold); a run already stored (the same id)
    is not stored again and keeps the comparison it was stored with."""
    ending = prompt_ending(plan)
    if gate is not None:
        ending = replace(ending, gate=gate)
    return persist(plan.db, runs, stored_once(ending, plan))


def stored_once(ending: Ending[RunResult], plan: RunPlan) -> Ending[RunResult]:
    """``ending``, except that a run already in the database keeps its stored comparison and is
    not saved twice (README "Larger suites: shards and batches": gating twice stores once)."""
    from evalkit.store import load_run, run_exists

    def compare(store: Store | None, run: RunResult) -> Comparison:
        if store is not None and run_exists(store, run.run_id):
            stored = load_run(store, run.run_id)[0].comparison
            if stored is not None:
                return stored
        return compare_prompt_run(plan, store, run)

    def save(store: Store, run: RunResult) -> None:
        if not run_exists(store, run.run_id):
            ending.save(store, run)

    return replace(ending, compare=compare, save=save)


def _tolerances(stored: Tolerances, overrides: Mapping[str, Decimal]) -> Tolerances:
    return Tolerances(
        max_pass_rate_drop=overrides.get("max_pass_rate_drop", stored.max_pass_rate_drop),
        max_mean_score_drop=overrides.get("max_mean_score_drop", stored.max_mean_score_drop),
    )
