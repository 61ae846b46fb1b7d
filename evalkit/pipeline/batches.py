"""Submit and wait: a checked plan's uncached requests sent as provider batches (README "Batches").

``submit`` builds every request of the plan the way ``execute`` would, leaves out the ones the
completion cache already answers, sends the rest per target instance as provider batches split
at the provider's limits (``providers.batches``), and keeps the submission in the database
(``store.batches``) before it returns: a later process collects it. ``wait`` polls with backoff
(1 s, doubling up to the poll interval) until every batch has ended or ``max_wait`` runs out;
time is injected so tests never wait on the wall clock.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from evalkit.errors import InputError, ProviderError
from evalkit.pipeline.plans import RunPlan, Target
from evalkit.providers import endpoint_identity
from evalkit.providers.batches import BatchApi, BatchState, BatchStatus, batch_api, check_adapter, custom_ids, split
from evalkit.records import CompletionRequest, PendingBatch, Prompt
from evalkit.records.batches import PHASE_ANSWERS
from evalkit.runner import build_request, cache_key, new_run_id, set_fingerprint

if TYPE_CHECKING:
    from evalkit.config import Config

StatusHook = Callable[[PendingBatch, BatchStatus, float], None]  # a batch's status, seconds waited


@dataclass(frozen=True, slots=True)
class SubmittedOptions:
    """The run's options kept with its batches, so a later ``evalkit collect`` plans the same run."""

    sets: tuple[str, ...]  # the set files
    providers: tuple[str, ...]
    model: str | None
    grader: str
    judge: str | None
    read_cache: bool
    concurrency: int | None
    repeats: int
    significance: float | None
    fail_on_regression: bool
    tolerance_overrides: dict[str, str]
    gate_overrides: dict[str, str]

    @classmethod
    def of(cls, plan: RunPlan) -> SubmittedOptions:
        return cls(
            sets=tuple(str(s.path) for s in plan.sets if s.path is not None),
            providers=tuple(t.provider.id for t in plan.targets),
            model=plan.targets[0].alias if len(plan.targets) == 1 else None,
            grader=plan.grader,
            judge=plan.judge.id if plan.judge is not None else None,
            read_cache=plan.read_cache,
            concurrency=plan.concurrency,
            repeats=plan.repeats,
            significance=plan.significance,
            fail_on_regression=plan.fail_on_regression,
            tolerance_overrides={k: str(v) for k, v in plan.tolerance_overrides.items()},
            gate_overrides={k: str(v) for k, v in plan.gate_overrides.items()},
        )


@dataclass(frozen=True, slots=True)
class Queued:
    """One request to send: where its answer goes back (set, prompt, repeat) and what it is."""

    set_id: str
    prompt_id: str
    repeat: int
    request: CompletionRequest


def check_batchable(plan: RunPlan) -> None:
    """``--batch`` needs a database (the batch waits there) and openai or anthropic targets."""
    if plan.db is None:
        raise InputError("--batch keeps the submitted batch in the database: it cannot run without one")
    for target in plan.targets:
        check_adapter(target.provider)
    if any(s.path is None for s in plan.sets):
        raise InputError("--batch runs set files (evalkit collect reads them again)")


def queued(plan: RunPlan, target: Target, cached: Callable[[str], bool]) -> list[Queued]:
    """Every request of the plan on one target that the cache does not answer, in set order."""
    endpoint = endpoint_identity(target.provider)
    out = []
    for prompt_set in plan.sets:
        for prompt in prompt_set.prompts:
            request = build_request(prompt_set, prompt, target.alias)
            for repeat in range(plan.repeats):
                key = cache_key(target.provider.id, request, repeat, endpoint=endpoint)
                if not cached(key):
                    out.append(Queued(prompt_set.id, prompt.id, repeat, request))
    return out


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One request for a batch: its custom id and what the id maps back to (``PendingBatch.custom_ids``)."""

    custom_id: str
    request: CompletionRequest
    maps_to: list[str | int]


@dataclass(frozen=True, slots=True)
class Submission:
    """What every batch of one submission keeps: its id, the sets' fingerprints, the run's options."""

    id: str
    set_fingerprints: dict[str, str]
    plan: dict[str, object]

    @classmethod
    def new(cls, plan: RunPlan) -> Submission:
        return cls(new_run_id(), {s.id: set_fingerprint(s) for s in plan.sets}, asdict(SubmittedOptions.of(plan)))

    @classmethod
    def of(cls, batch: PendingBatch) -> Submission:
        return cls(batch.submission_id, batch.set_fingerprints, batch.plan)


def answer_keys(plan: RunPlan, target: Target, prompts: Callable[[Prompt], bool] | None = None) -> list[str]:
    """The cache key of every request of the plan on one target (of the ``prompts`` chosen)."""
    endpoint = endpoint_identity(target.provider)
    return [
        cache_key(target.provider.id, build_request(s, p, target.alias), r, endpoint=endpoint)
        for s in plan.sets
        for p in s.prompts
        if prompts is None or prompts(p)
        for r in range(plan.repeats)
    ]


def submit(plan: RunPlan) -> list[PendingBatch]:
    """Send the plan's uncached requests as provider batches and keep them in the database.
    Returns the batches (none: the cache answers everything, and the run needs no batch)."""
    from evalkit.store import Store
    from evalkit.store.cache import read_entries

    check_batchable(plan)
    assert plan.db is not None
    with Store.open(plan.db) as store:
        work: list[tuple[Target, list[Outgoing]]] = []
        for target in plan.targets:
            if plan.read_cache and plan.use_cache:
                found = set(read_entries(store, answer_keys(plan, target), plan.config.cache_ttl_days))
            else:
                found = set()
            work.append((target, _named(queued(plan, target, found.__contains__), single_set=len(plan.sets) == 1)))
    return send(plan.db, work, Submission.new(plan), PHASE_ANSWERS)


def _named(requests: Sequence[Queued], *, single_set: bool) -> list[Outgoing]:
    names = [
        (q.prompt_id if single_set else f"{q.set_id}__{q.prompt_id}") + (f"__r{q.repeat}" if q.repeat else "")
        for q in requests
    ]
    return [
        Outgoing(cid, q.request, [q.set_id, q.prompt_id, q.repeat])
        for cid, q in zip(custom_ids(names), requests, strict=True)
    ]


def send(
    db: Path,
    work: Sequence[tuple[Target, Sequence[Outgoing]]],
    submission: Submission,
    phase: str,
    pending: Sequence[str] = (),
) -> list[PendingBatch]:
    """Each target's requests sent as batches of ``phase`` (split at the provider's limits) and
    kept in the database, even when a later one is refused: what was sent costs money.
    ``pending``: the submission's batches already waiting (named when sending fails)."""
    from evalkit.store import Store
    from evalkit.store.batches import save_batches

    batches: list[PendingBatch] = []
    try:
        asyncio.run(_send_all(work, submission, phase, batches))
    except ProviderError as exc:
        if not batches and not pending:
            raise
        ids = " ".join([*pending, *(b.batch_id for b in batches)])
        raise ProviderError(f"{exc}; the batches sent before it stay pending: evalkit collect {ids}") from None
    finally:
        if batches:
            with Store.open(db) as store:
                save_batches(store, batches)
    return batches


async def _send_all(
    work: Sequence[tuple[Target, Sequence[Outgoing]]], submission: Submission, phase: str, out: list[PendingBatch]
) -> None:
    for target, requests in work:
        if not requests:
            continue
        api = batch_api(target.provider)
        try:
            entries = [api.entry(o.custom_id, o.request) for o in requests]
            for chunk in split([len(e) + 1 for e in entries], *api.limits):
                batch_id = await api.submit([entries[i] for i in chunk])
                out.append(
                    PendingBatch(
                        batch_id=batch_id,
                        submission_id=submission.id,
                        provider=target.provider.id,
                        model=target.alias,
                        adapter=target.provider.adapter,
                        state="pending",
                        submitted_at=datetime.now(UTC).isoformat(timespec="milliseconds"),
                        request_count=len(chunk),
                        set_fingerprints=submission.set_fingerprints,
                        plan=submission.plan,
                        custom_ids={requests[i].custom_id: requests[i].maps_to for i in chunk},
                        phase=phase,
                    )
                )
        finally:
            await api.aclose()


def wait(
    config: Config,
    batches: Sequence[PendingBatch],
    *,
    poll_interval: float,
    max_wait: float | None,
    on_status: StatusHook | None = None,
    just_submitted: bool = False,
    sleep: Callable[[float], None] | None = None,
    clock: Callable[[], float] | None = None,
) -> dict[str, BatchStatus]:
    """Poll until every batch has ended or ``max_wait`` seconds ran out (None: no limit): asked
    at once (batches ``just_submitted``: not before the first pause), then after 1 s (or the poll
    interval, when shorter), each next pause twice as long, up to the poll interval. Returns each
    batch's last status."""
    pause, clock = sleep or time.sleep, clock or time.monotonic  # looked up now: a test may replace them
    started = clock()
    statuses = submitted_statuses(batches) if just_submitted else poll(config, batches)
    delay = min(1.0, poll_interval)
    while not all(s.state.finished for s in statuses.values()):
        waited = clock() - started
        if on_status is not None:
            for batch in batches:
                on_status(batch, statuses[batch.batch_id], waited)
        if max_wait is not None and waited + delay > max_wait:
            remaining = max_wait - waited
            if remaining <= 0:
                break
            delay = remaining
        pause(delay)
        delay = min(delay * 2, poll_interval)
        unfinished = [b for b in batches if not statuses[b.batch_id].state.finished]
        statuses |= poll(config, unfinished)
    return statuses


def submitted_statuses(batches: Sequence[PendingBatch]) -> dict[str, BatchStatus]:
    """The status of batches just submitted, before anyone asks: in progress, nothing done."""
    return {b.batch_id: BatchStatus(BatchState.IN_PROGRESS, 0, b.request_count, "submitted") for b in batches}


def poll(config: Config, batches: Sequence[PendingBatch]) -> dict[str, BatchStatus]:
    """Each batch's status, asked once."""
    return asyncio.run(_statuses(config, batches))


async def _statuses(config: Config, batches: Sequence[PendingBatch]) -> dict[str, BatchStatus]:
    out: dict[str, BatchStatus] = {}
    apis: dict[str, BatchApi] = {}
    try:
        for batch in batches:
            api = apis.get(batch.provider)
            if api is None:
                api = apis[batch.provider] = batch_api(config.provider(batch.provider))
            out[batch.batch_id] = await api.status(batch.batch_id)
    except ProviderError as exc:
        raise ProviderError(f"{exc}; the batches stay pending (evalkit collect asks again)") from None
    finally:
        for api in apis.values():
            await api.aclose()
    return out
