"""Collect: a submission's finished batches graded, compared, gated and stored like ``run``
(README "Batches").

The run is planned again from the options kept at submit (the set files, checked unchanged by
their fingerprints) and executed by the same stages as any run (``execute_plan``: the cache,
the grader, the verdict, persist); only its provider objects differ: they answer from the
batches' results (``providers.batches.BatchAnswers``), so a request the provider refused, or
one an expired or cancelled batch never answered, is an item error like a failed call. Batch
answers are priced at the instance's ``cost.batch_discount`` and the run says what that saved.
The submission is marked collected right after its runs are stored: collecting it again stores
nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from evalkit.config import Config, Cost, ProviderConfig
from evalkit.errors import InputError
from evalkit.pipeline.batches import SubmittedOptions, poll, wait
from evalkit.pipeline.execute import execute_plan
from evalkit.pipeline.plan import load_prompt_sets, plan_run
from evalkit.pipeline.plans import Progress, RunPlan, Target
from evalkit.protocols import Provider
from evalkit.providers import build_provider
from evalkit.providers.batches import BatchAnswer, BatchAnswers, BatchResults, BatchState, BatchStatus, batch_api
from evalkit.records import BatchCost, PendingBatch, PromptSet, RunResult
from evalkit.runner import run_cost, set_fingerprint

if TYPE_CHECKING:
    from evalkit.pipeline.batches import StatusHook


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
    plan = plan_run(
        sets, config, provider=list(kept.providers), model=kept.model, grader=kept.grader, judge=kept.judge,
        db=db, use_cache=kept.read_cache, concurrency=kept.concurrency, tolerance_overrides=tolerance,
        fail_on_regression=kept.fail_on_regression or given.fail_on_regression, repeats=kept.repeats,
        significance=kept.significance, gate_overrides=minimums, baselines=given.baselines,
    )  # fmt: skip
    return batch_priced(plan, batches)


def batch_priced(plan: RunPlan, batches: Sequence[PendingBatch]) -> RunPlan:
    """The plan with each batched instance priced at its batch discount."""
    batched = {b.provider for b in batches}
    targets = tuple(Target(discounted(t.provider), t.alias) if t.provider.id in batched else t for t in plan.targets)
    return replace(plan, targets=targets)


def _check_unchanged(sets: Sequence[PromptSet], batch: PendingBatch) -> None:
    for prompt_set in sets:
        before = batch.set_fingerprints.get(prompt_set.id)
        if before is not None and before != set_fingerprint(prompt_set):
            raise InputError(
                f"{prompt_set.path}: the set changed since batch {batch.batch_id} was submitted; restore it to "
                "collect the batch, or run the set again"
            )


def discounted(config: ProviderConfig) -> ProviderConfig:
    """The instance priced as its batch answers are: ``cost.batch_discount`` of each price."""
    if config.cost is None:
        return config
    cost = config.cost
    factor = cost.batch_discount
    return replace(config, cost=Cost(cost.input_per_mtok * factor, cost.output_per_mtok * factor, factor))


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
) -> list[Collected]:
    """Each submission among ``batches``: collected when every batch of it has ended (after
    waiting, when ``waiting`` gives the poll interval and the longest wait), else left pending.
    ``submitted``: the plan that submitted them, in this process (``run --batch``): not planned again."""
    out = []
    for group in submissions(batches):
        if all(b.state == "collected" for b in group):
            out.append(Collected(group, {}, earlier=True))
            continue
        if waiting is not None:
            statuses = wait(
                config, group, poll_interval=waiting[0], max_wait=waiting[1], on_status=on_status,
                just_submitted=submitted is not None,
            )  # fmt: skip
        else:
            statuses = poll(config, group)
        if not all(s.state.finished for s in statuses.values()):
            out.append(Collected(group, statuses))
            continue
        plan = batch_priced(submitted, group) if submitted is not None else replan(config, db, group, given)
        runs = graded(plan, group, statuses, progress, on_start)
        out.append(Collected(group, statuses, tuple(runs)))
    return out


def graded(
    plan: RunPlan,
    group: Sequence[PendingBatch],
    statuses: Mapping[str, BatchStatus],
    progress: Progress | None = None,
    on_start: Callable[[PromptSet], None] | None = None,
) -> list[RunResult]:
    """The submission's results read, its runs executed from them, stored, and marked collected."""
    from evalkit.store import Store
    from evalkit.store.batches import mark_collected

    assert plan.db is not None
    results = asyncio.run(_read_all(plan, group, statuses))
    answers: dict[str, dict[tuple[str, str], list[BatchAnswer]]] = {}
    for batch in group:
        received = results[batch.batch_id]
        by_item = answers.setdefault(batch.provider, {})
        for custom_id, (set_id, prompt_id, repeat) in sorted(batch.custom_ids.items(), key=lambda kv: kv[1][2]):
            del repeat  # samples of one prompt are answered in turn
            answer = received.answers.get(custom_id) or received.errors.get(custom_id)
            if answer is None:
                answer = _unanswered(batch, statuses[batch.batch_id])
            by_item.setdefault((set_id, prompt_id), []).append(answer)

    def factory(config: ProviderConfig) -> Provider:
        live = build_provider(config)
        if config.id not in answers:
            return live
        return BatchAnswers(config.id, config.adapter, live, answers[config.id])

    standard = {b.provider: plan.config.provider(b.provider).cost for b in group}  # the configured prices
    batch_ids = {p: tuple(b.batch_id for b in group if b.provider == p) for p in standard}

    def amend(run: RunResult) -> RunResult:
        if run.provider not in batch_ids:
            return run
        full = standard[run.provider]
        discount = full.batch_discount if full is not None else Cost().batch_discount
        return replace(run, batch=BatchCost(batch_ids[run.provider], discount, run_cost(run.items, full)))

    runs = execute_plan(plan, progress, on_start, factory=factory, amend=amend)
    with Store.open(plan.db) as store:
        mark_collected(store, group[0].submission_id, [r.run_id for r in runs])
    return runs


def _unanswered(batch: PendingBatch, status: BatchStatus) -> str:
    if status.state is BatchState.FAILED:
        return f"provider '{batch.provider}': batch {batch.batch_id} {status.detail}"
    return f"provider '{batch.provider}': batch {batch.batch_id} ended ({status.detail}) before answering this request"


async def _read_all(
    plan: RunPlan, group: Sequence[PendingBatch], statuses: Mapping[str, BatchStatus]
) -> dict[str, BatchResults]:
    out: dict[str, BatchResults] = {}
    for batch in group:
        if statuses[batch.batch_id].state is BatchState.FAILED:
            out[batch.batch_id] = BatchResults()
            continue
        api = batch_api(plan.config.provider(batch.provider))
        try:
            out[batch.batch_id] = await api.results(batch.batch_id)
        finally:
            await api.aclose()
    return out
