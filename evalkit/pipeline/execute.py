"""Execute: a checked plan called and graded, then handed to the shared end (verdict, persist).

The database is opened (created, migrated) before the first call, so one that cannot be opened
costs no call; the cache crosses typed (``StoreCache``), preloaded with every entry the run may
ask for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, TypeVar

from evalkit.config import ProviderConfig
from evalkit.memory import running, storing
from evalkit.pipeline.instances import JudgedInstances, probed
from evalkit.pipeline.persist import interrupted, persist
from evalkit.pipeline.plan import fallback_chain
from evalkit.pipeline.plans import Progress, RetrievalPlan, RunPlan
from evalkit.pipeline.shards import as_part
from evalkit.pipeline.verdict import prompt_ending, retrieval_ending
from evalkit.protocols import Grader, Provider
from evalkit.providers import ProviderPool, caches_answers, default_alias, endpoint_identity
from evalkit.records import PromptSet, RetrievalRunResult, RunResult, Tolerances
from evalkit.runner import build_request, cache_key, first_error, run_prompt_set

if TYPE_CHECKING:
    from evalkit.store import StoreCache

T = TypeVar("T")


def run_async(coro: Coroutine[object, object, T]) -> T:
    """``asyncio.run(coro)`` with the result kept out of the main task. Python 3.11's runner
    leaves the finished task inside its SIGINT handler, and restoring the handler looks the
    handler up in ``signal.Handlers``, whose failed lookup formats it with ``repr``: the task, and
    so the repr of every result of the run (1.0 s of a 100,000-answer replay, bench_scale.py)."""
    box: list[T] = []

    async def main() -> None:
        box.append(await coro)

    try:
        asyncio.run(main())
    finally:
        coro.close()  # a no-op once it ran; spares a never-started one the "never awaited" warning
    return box[0]


def execute_plan(
    plan: RunPlan,
    progress: Progress | None = None,
    on_start: Callable[[PromptSet], None] | None = None,
    *,
    factory: Callable[[ProviderConfig], Provider] | None = None,
    amend: Callable[[RunResult], RunResult] | None = None,
) -> list[RunResult]:
    """Run every set of the plan on every target; then compare each run with its baseline and
    store it (one transaction per run). An interrupted or aborted plan stores no run; the answers
    it received stay in the cache.

    The database is opened (created, migrated) before the first call, so one that cannot be
    opened costs no call (opening it alongside the calls was tried: bench/README.md, session 2).
    ``factory`` builds the provider objects (``evalkit collect`` answers from a batch's results),
    ``amend`` completes each run before its verdict (a batch's cost)."""
    from evalkit.store import StoreCache

    cache = StoreCache(plan.db, plan.config.cache_ttl_days) if plan.db is not None and plan.use_cache else None
    # the collector policy, when the caller asked for it (evalkit/memory.py): paused while the
    # database is opened and the runs stored, on with what is loaded frozen while they run
    with storing():
        if plan.db is not None:
            _prepare_database(plan, cache)
        try:
            with running():
                runs = run_async(_run_all(plan, cache, progress, on_start, factory))
        except KeyboardInterrupt:
            raise interrupted(0, [], cache) from None
        except BaseException:
            if cache is not None:
                cache.flush()
            raise
        # each run is the shard's part of its set (README "Larger suites: shards and batches")
        if plan.shard is not None:
            runs = [as_part(run, plan.set_shards, plan.fingerprints) for run in runs]
        if amend is not None:
            runs = [amend(run) for run in runs]
        return persist(plan.db, runs, prompt_ending(plan), cache)


def _lookup(plan: RunPlan) -> Callable[[str], ProviderConfig]:
    chosen = {t.provider.id: t.provider for t in plan.targets}

    def lookup(instance_id: str) -> ProviderConfig:
        return chosen.get(instance_id) or plan.config.provider(instance_id)

    return lookup


def _make_grader(plan: RunPlan, pool: ProviderPool, cache: StoreCache | None) -> tuple[Grader, JudgedInstances | None]:
    """The run's grader; for model-graded assertions also its instances, closed when the run ends."""
    from evalkit.graders import DecisionGrader, DeterministicGrader
    from evalkit.runner import CachedProvider

    if plan.judged is not None:
        instances = JudgedInstances(plan.judged, pool, cache, plan.read_cache)
        return instances.grader, instances
    if plan.judge is None or plan.judge_alias is None:
        return DeterministicGrader(), None
    judge = CachedProvider(pool.get(plan.judge.id), cache, plan.read_cache, pool.endpoint(plan.judge.id))
    return DecisionGrader(judge, plan.judge_alias), None


async def _probe(judges: Sequence[tuple[ProviderConfig, str]], pool: ProviderPool) -> None:
    """One tiny call to each judge (exit 3 when one fails)."""
    from evalkit.graders import probe

    for judge, alias in judges:
        if judge.adapter != "replay":
            await probe(pool.get(judge.id), alias)


async def _run_all(
    plan: RunPlan,
    cache: StoreCache | None,
    progress: Progress | None,
    on_start: Callable[[PromptSet], None] | None,
    factory: Callable[[ProviderConfig], Provider] | None = None,
) -> list[RunResult]:
    pool = ProviderPool(_lookup(plan), factory) if factory is not None else ProviderPool(_lookup(plan))
    grader, instances = _make_grader(plan, pool, cache)
    try:
        if plan.judge is not None and plan.judge_alias is not None and not plan.judge_batched:  # before any is paid for
            await _probe([(plan.judge, plan.judge_alias)], pool)
        if plan.judged is None:
            return await _run_sets(plan, pool, grader, cache, progress=progress, on_start=on_start)
        # the judges of model-graded assertions are probed beside the first calls: a failing
        # probe stops the run (the answers received stay in the cache), a working one costs no wait
        judges = probed(plan.judged)
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(_probe(judges, pool))
                ran = group.create_task(_run_sets(plan, pool, grader, cache, progress=progress, on_start=on_start))
        except BaseExceptionGroup as failure:
            raise first_error(failure) from None
        return ran.result()
    finally:
        if instances is not None:
            await instances.aclose()
        await pool.aclose()


async def _run_sets(
    plan: RunPlan,
    pool: ProviderPool,
    grader: Grader,
    cache: StoreCache | None,
    *,
    progress: Progress | None,
    on_start: Callable[[PromptSet], None] | None,
) -> list[RunResult]:
    runs: list[RunResult] = []
    for prompt_set in plan.sets:
        if on_start is not None:
            on_start(prompt_set)
        try:
            async with asyncio.TaskGroup() as group:
                tasks = [
                    group.create_task(
                        run_prompt_set(
                            prompt_set,
                            pool=pool,
                            provider=target.provider,
                            grader=grader,
                            alias=target.alias,
                            cache=cache,
                            read_cache=plan.read_cache,
                            concurrency=plan.concurrency or max(1, target.provider.max_concurrency),
                            tolerances=_tolerances(prompt_set, plan.tolerance_overrides),
                            progress=progress,
                            grader_cost=plan.judge.cost if plan.judge else None,
                            repeats=plan.repeats,
                        )
                    )
                    for target in plan.targets
                ]
        except BaseExceptionGroup as failure:
            raise first_error(failure) from None
        runs.extend(task.result() for task in tasks)
    return runs


def _prepare_database(plan: RunPlan, cache: StoreCache | None) -> None:
    """Open (create, migrate) the database before any call, and preload the cache with every
    entry the run may ask for: each prompt and repeat on every target and its fallbacks."""
    from evalkit.store import Store

    assert plan.db is not None
    with Store.open(plan.db) as store:
        if cache is None or not plan.read_cache:
            return
        aliases: dict[str, str] = {}
        endpoints: dict[str, str] = {}
        for target in plan.targets:
            chain = [c for c in fallback_chain(plan.config, target.provider) if caches_answers(c)]
            # recorded answers, and applications without cache: true, are never cached: nothing to preload
            aliases |= {c.id: target.alias if c is target.provider else default_alias(c) for c in chain}
            endpoints |= {c.id: endpoint_identity(c) for c in chain}
        keys = [
            cache_key(instance, build_request(s, p, alias), repeat, endpoint=endpoints[instance])
            for instance, alias in aliases.items()
            for s in plan.sets
            for p in s.prompts
            for repeat in range(plan.repeats)
        ]
        cache.preload(store, keys)
        if plan.judge is not None and plan.judge_alias is not None:
            cache.preload_instance(store, plan.judge.id, plan.judge_alias)
        for judge in plan.judged.targets if plan.judged is not None else ():
            cache.preload_instance(store, judge.provider.id, judge.alias)


def _tolerances(prompt_set: PromptSet, overrides: Mapping[str, Decimal]) -> Tolerances:
    base = prompt_set.tolerances
    return Tolerances(
        max_pass_rate_drop=overrides.get("max_pass_rate_drop", base.max_pass_rate_drop),
        max_mean_score_drop=overrides.get("max_mean_score_drop", base.max_mean_score_drop),
    )


def execute_retrieval(plan: RetrievalPlan) -> RetrievalRunResult:
    """Run the question set against the retriever, compare with the previous run, store."""
    from evalkit.retrieval.evaluate import evaluate
    from evalkit.runner import new_run_id, utc_now
    from evalkit.store import Store

    if plan.db is not None:
        Store.open(plan.db).close()  # create or migrate before any call; a bad database fails here
    cache_dir = plan.db.parent / "index" if plan.db is not None else None
    started = datetime.now(UTC)
    run = run_async(
        evaluate(
            plan.question_set,
            plan.retriever,
            run_id=new_run_id(started),
            started_at=utc_now(started),  # the run id's time and the stored start are one instant
            finished=utc_now,
            limit=plan.limit,
            corpus=plan.corpus,
            cache_dir=cache_dir,
            tolerances=plan.tolerances,
        )
    )
    return persist(plan.db, [run], retrieval_ending(plan))[0]
