"""Collect: a submission's finished batches graded, compared, gated and stored like ``run``
(README "Batches").

The run is planned again from the options kept at submit (the set files, checked unchanged by
their fingerprints) and executed by the same stages as any run (``execute_plan``: the cache,
the grader, the verdict, persist); only its provider objects differ: they answer from the
batches' results (``batchanswers``), so a request the provider refused, or one an expired or
cancelled batch never answered, is an item error like a failed call. A batched submission is
graded in two phases: once its answers are in, the requests its judges will be asked go as
batches of their own (``judgebatches``), and it is graded when those have ended too. Batch
answers are priced at the instance's ``cost.batch_discount`` (the judge's at the judge's) and the
run says what that saved. The submission is marked collected right after its runs are stored:
collecting it again stores nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from evalkit.config import Config
from evalkit.errors import InputError
from evalkit.pipeline.batchanswers import Answering, read_results, received
from evalkit.pipeline.batchcost import batch_priced, priced
from evalkit.pipeline.batches import SubmittedOptions, poll, submitted_statuses, wait
from evalkit.pipeline.execute import execute_plan
from evalkit.pipeline.judgebatches import submit_judging
from evalkit.pipeline.plan import load_prompt_sets, plan_run
from evalkit.pipeline.plans import Progress, RunPlan
from evalkit.providers.batches import BatchResults, BatchStatus
from evalkit.records import PendingBatch, PromptSet, RunResult
from evalkit.records.batches import PHASE_JUDGE
from evalkit.runner import set_fingerprint

if TYPE_CHECKING:
    from evalkit.pipeline.batches import StatusHook

SubmitHook = Callable[[Sequence[PendingBatch]], None]  # the judge's batches, just submitted


@dataclass(frozen=True, slots=True)
class Hooks:
    """What a collect tells its caller as it goes."""

    on_status: StatusHook | None = None
    on_submit: SubmitHook | None = None
    progress: Progress | None = None
    on_start: Callable[[PromptSet], None] | None = None


@dataclass(frozen=True, slots=True)
class CollectOptions:
    """Gate options given to ``evalkit collect``; what is not given comes from the submitted run."""

    fail_on_regression: bool = False
    tolerance_overrides: Mapping[str, Decimal] | None = None
    gate_overrides: Mapping[str, Decimal] | None = None
    baselines: str | None = None


@dataclass(frozen=True, slots=True)
class Collected:
    """One submission: its batches, their last status, and its runs once collected."""

    batches: tuple[PendingBatch, ...]
    statuses: Mapping[str, BatchStatus]
    runs: tuple[RunResult, ...] = ()
    earlier: bool = False  # collected by an earlier command: nothing was stored now

    @property
    def pending(self) -> bool:
        return not self.earlier and not self.runs


def submissions(batches: Sequence[PendingBatch]) -> list[tuple[PendingBatch, ...]]:
    groups: dict[str, list[PendingBatch]] = {}
    for batch in batches:
        groups.setdefault(batch.submission_id, []).append(batch)
    return [tuple(group) for group in groups.values()]


def find(db: Path, batch_ids: Sequence[str]) -> list[PendingBatch]:
    """The batches named (with the other batches of their submissions), else every pending one;
    an id the database does not hold is exit 2."""
    from evalkit.store import Store
    from evalkit.store.batches import known_batch_ids, load_batches

    if not db.exists():
        if batch_ids:
            raise InputError(f"no batch {batch_ids[0]} in {db}: it holds no database yet")
        return []
    with Store.open(db) as store:
        if batch_ids:
            known = known_batch_ids(store, batch_ids)
            unknown = [b for b in batch_ids if b not in known]
            if unknown:
                raise InputError(
                    f"no batch {', '.join(unknown)} in {db}; evalkit collect without ids collects every pending batch"
                )
            return load_batches(store, batch_ids, pending_only=False)
        return load_batches(store)


def replan(config: Config, db: Path, batches: Sequence[PendingBatch], given: CollectOptions) -> RunPlan:
    """The submitted run planned again: its set files (unchanged since submit), scope and
    grader, with the gate options given now added to those given then."""
    kept = SubmittedOptions(**batches[0].plan)
    sets = load_prompt_sets(list(kept.sets), config)
    _check_unchanged(sets, batches[0])
    tolerance = {k: Decimal(v) for k, v in kept.tolerance_overrides.items()} | dict(given.tolerance_overrides or {})
    minimums = {k: Decimal(v) for k, v in kept.gate_overrides.items()} | dict(given.gate_overrides or {})
    return plan_run(
        sets, config, provider=list(kept.providers), model=kept.model, grader=kept.grader, judge=kept.judge,
        db=db, use_cache=kept.read_cache, concurrency=kept.concurrency, tolerance_overrides=tolerance,
        fail_on_regression=kept.fail_on_regression or given.fail_on_regression, repeats=kept.repeats,
        significance=kept.significance, gate_overrides=minimums, baselines=given.baselines,
    )  # fmt: skip


def _check_unchanged(sets: Sequence[PromptSet], batch: PendingBatch) -> None:
    for prompt_set in sets:
        before = batch.set_fingerprints.get(prompt_set.id)
        if before is not None and before != set_fingerprint(prompt_set):
            raise InputError(
                f"{prompt_set.path}: the set changed since batch {batch.batch_id} was submitted; restore it to "
                "collect the batch, or run the set again"
            )


def collect(
    config: Config,
    db: Path,
    batches: Sequence[PendingBatch],
    given: CollectOptions,
    *,
    waiting: tuple[float, float | None] | None = None,
    on_status: StatusHook | None = None,
    progress: Progress | None = None,
    on_start: Callable[[PromptSet], None] | None = None,
    submitted: RunPlan | None = None,
    on_submit: SubmitHook | None = None,
) -> list[Collected]:
    """Each submission among ``batches``: collected when every batch of it has ended (after
    waiting, when ``waiting`` gives the poll interval and the longest wait), else left pending.
    A submission whose answers are in and whose judges have batches sends the judge's requests
    first (``on_submit`` is told), then waits for them within the same longest wait, or, not
    waiting, stays pending. ``submitted``: the plan that submitted them, in this process
    (``run --batch``): not planned again."""
    hooks = Hooks(on_status, on_submit, progress, on_start)
    out = []
    for group in submissions(batches):
        if all(b.state == "collected" for b in group):
            out.append(Collected(group, {}, earlier=True))
        else:
            out.append(_collect_one(config, db, group, given=given, waiting=waiting, hooks=hooks, submitted=submitted))
    return out


def _collect_one(
    config: Config,
    db: Path,
    group: tuple[PendingBatch, ...],
    *,
    given: CollectOptions,
    waiting: tuple[float, float | None] | None,
    hooks: Hooks,
    submitted: RunPlan | None,
) -> Collected:
    started = time.monotonic()
    statuses = _statuses(config, group, waiting, hooks, just_submitted=submitted is not None)
    if not _ended(statuses):
        return Collected(group, statuses)
    plan = submitted if submitted is not None else replan(config, db, group, given)
    results = read_results(config, group, statuses)
    if not any(b.phase == PHASE_JUDGE for b in group):
        judging = submit_judging(plan, group, received(group, results, statuses))
        if judging:
            if hooks.on_submit is not None:
                hooks.on_submit(judging)
            group = (*group, *judging)
            if waiting is None:
                return Collected(group, statuses | submitted_statuses(judging))
            left = None if waiting[1] is None else max(0.0, waiting[1] - (time.monotonic() - started))
            statuses = statuses | _statuses(config, judging, (waiting[0], left), hooks, just_submitted=True)
            if not _ended(statuses):
                return Collected(group, statuses)
            results |= read_results(config, judging, statuses)
    runs = graded(batch_priced(plan, group), group, statuses, results, hooks)
    return Collected(group, statuses, tuple(runs))


def _statuses(
    config: Config,
    batches: Sequence[PendingBatch],
    waiting: tuple[float, float | None] | None,
    hooks: Hooks,
    *,
    just_submitted: bool,
) -> dict[str, BatchStatus]:
    if waiting is None:
        return poll(config, batches)
    return wait(
        config, batches, poll_interval=waiting[0], max_wait=waiting[1], on_status=hooks.on_status,
        just_submitted=just_submitted,
    )  # fmt: skip


def _ended(statuses: Mapping[str, BatchStatus]) -> bool:
    return all(s.state.finished for s in statuses.values())


def graded(
    plan: RunPlan,
    group: Sequence[PendingBatch],
    statuses: Mapping[str, BatchStatus],
    results: Mapping[str, BatchResults],
    hooks: Hooks | None = None,
) -> list[RunResult]:
    """The submission's runs executed from its batches' results, stored, and marked collected."""
    from evalkit.store import Store
    from evalkit.store.batches import mark_collected

    assert plan.db is not None
    answering = Answering(received(group, results, statuses))
    hooks = hooks or Hooks()
    runs = execute_plan(plan, hooks.progress, hooks.on_start, factory=answering, amend=priced(plan, group, answering))
    with Store.open(plan.db) as store:
        mark_collected(store, group[0].submission_id, [r.run_id for r in runs])
    return runs
