"""The judge's requests sent as provider batches once a submission's answers are in (README "Batches").

When every batch of answers of a submission has ended and its model-graded assertions (or the
decision grader) are served by judges whose adapter has batches (openai, anthropic), the
submission is not graded yet:
``submit_judging`` works out every request the grading will ask of those judges and sends them
as batches of phase ``judge`` under the same submission. It runs each judged kind's
``judge(value, task, instance)`` (or the decision grader's ``grade``) on each answer with a
recording client: the judge's
``runner.CachedProvider`` (a request the cache answers is not sent) over a ``Recorder``, whose
``complete`` keeps the request and raises ``Deferred``, no ``ProviderError``, so a kind's own retry
does not fire and what is kept is exactly the request it asks first. The answers are the ones the
grading will see: the answers' batches parsed by their instance's adapter (``batchanswers``) and
the completion cache for the requests it answered at submit; nothing here calls a model or
writes the cache. Each custom id is the request's cache key, so grading finds each answer by the
request it builds again (``providers.batches.BatchAnswers``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from evalkit.errors import ProviderError
from evalkit.graders.judging import Instance, Task
from evalkit.pipeline.batchanswers import Answering, Received
from evalkit.pipeline.batches import Outgoing, Submission, answer_keys, send, submit
from evalkit.pipeline.execute import run_async
from evalkit.pipeline.instances import judges
from evalkit.pipeline.plans import RunPlan, Target
from evalkit.providers import caches_answers, endpoint_identity
from evalkit.providers.batches import BATCH_ADAPTERS
from evalkit.records import Completion, CompletionRequest, PendingBatch, Prompt, ServingRecord
from evalkit.records.batches import PHASE_JUDGE
from evalkit.runner import CachedProvider, build_request, cache_key

if TYPE_CHECKING:
    from evalkit.protocols import CompletionCache


class Deferred(Exception):
    """A judge's request kept for a batch: its judgement waits for the batch's answer."""


@dataclass(slots=True)
class Recorder:
    """A judge instance that keeps each request asked of it, by its cache key, and defers it."""

    instance_id: str
    adapter: str
    endpoint: str
    asked: dict[str, Outgoing] = field(default_factory=dict)
    owner: list[str | int] = field(default_factory=list)  # the answer judged now: [set, prompt, repeat, instance]

    async def complete(self, request: CompletionRequest) -> Completion:
        key = cache_key(self.instance_id, request, endpoint=self.endpoint)  # as CachedProvider keys it
        self.asked.setdefault(key, Outgoing(key, request, list(self.owner)))
        raise Deferred(key)

    async def aclose(self) -> None:
        return None


@dataclass(slots=True)
class ReadOnly:
    """The completion cache read, never written: the grading stores what it is given, once."""

    cache: CompletionCache | None

    def get(self, key: str) -> Completion | None:
        return self.cache.get(key) if self.cache is not None else None

    def put(self, key: str, completion: Completion, endpoint: str | None = None) -> None:
        return None


def batched_judges(plan: RunPlan) -> list[Target]:
    """The plan's judges whose adapter has batches (the others are called when grading, as in
    ``run``): those of its model-graded assertions, or the judge of ``--grader decision``."""
    if plan.judged is not None:
        chosen = judges(plan.judged)
    elif plan.judge is not None and plan.judge_alias is not None:
        chosen = [Target(plan.judge, plan.judge_alias)]
    else:
        return []
    return [t for t in chosen if t.provider.adapter in BATCH_ADAPTERS]


def submit_run(plan: RunPlan) -> list[PendingBatch]:
    """``run --batch``: the answers' batches; when the cache answers every prompt, the judge's
    batches at once (none: the cache answers the judge too, and the run needs no batch)."""
    return submit(plan) or submit_judging(plan, (), Received())


def submit_judging(plan: RunPlan, group: Sequence[PendingBatch], answers: Received) -> list[PendingBatch]:
    """The judge's requests of the submission ``group`` (its answers ``answers``) sent as batches
    and kept in the database; none when the cache answers them all or no judge has batches.
    ``group`` empty: a new submission (``run --batch`` whose answers were all cached)."""
    chosen = batched_judges(plan)
    if not chosen or plan.db is None:
        return []
    cache = _preloaded(plan, chosen)
    work = run_async(_worked_out(plan, chosen, Answering(answers, calls=False), ReadOnly(cache)))
    if not work:
        return []
    submission = Submission.of(group[0]) if group else Submission.new(plan)
    return send(plan.db, work, submission, PHASE_JUDGE, pending=[b.batch_id for b in group])


def _preloaded(plan: RunPlan, chosen: Sequence[Target]) -> CompletionCache | None:
    """The cache entries the work may read: the judged prompts' answers and the judges' entries."""
    from evalkit.store import Store, StoreCache

    if plan.db is None or not plan.use_cache or not plan.read_cache:
        return None
    cache = StoreCache(plan.db, plan.config.cache_ttl_days)
    with Store.open(plan.db) as store:
        for target in plan.targets:
            cache.preload(store, answer_keys(plan, target, lambda p: _judged(plan, p)))
        for judge in chosen:
            cache.preload_instance(store, judge.provider.id, judge.alias)
    return cache


def _judged(plan: RunPlan, prompt: Prompt) -> bool:
    """Whether grading ``prompt`` asks a judge: every prompt under ``--grader decision``, else
    those with model-graded assertions."""
    from evalkit.graders.judged import judged_values

    return plan.judged is None or bool(judged_values(prompt.assertions))


async def _worked_out(
    plan: RunPlan, chosen: Sequence[Target], answering: Answering, cache: ReadOnly
) -> list[tuple[Target, list[Outgoing]]]:
    """Every judge request the grading will ask and the cache does not answer, per judge."""
    recorders = {
        t.provider.id: Recorder(t.provider.id, t.provider.adapter, endpoint_identity(t.provider)) for t in chosen
    }
    clients = {i: CachedProvider(r, cache, plan.read_cache, r.endpoint) for i, r in recorders.items()}
    ask = _asker(plan, chosen, clients, recorders)
    try:
        for target in plan.targets:
            await _judge_target(plan, target, answering=answering, cache=cache, ask=ask)
    finally:
        for made in answering.made.values():
            await made.aclose()
    return [(t, list(recorders[t.provider.id].asked.values())) for t in chosen if recorders[t.provider.id].asked]


Ask = Callable[[Task, ServingRecord, list[str | int]], Awaitable[None]]


def _asker(
    plan: RunPlan, chosen: Sequence[Target], clients: Mapping[str, CachedProvider], recorders: Mapping[str, Recorder]
) -> Ask:
    """How one answer is judged with the recorders: by each model-graded assertion's kind, or by
    the decision grader (its first request is what it would ask)."""
    from evalkit.graders import DecisionGrader, JudgedGrader

    if plan.judged is None:
        (decider,) = chosen
        decision = DecisionGrader(clients[decider.provider.id], decider.alias)
        recorder = recorders[decider.provider.id]

        async def decide(task: Task, serving: ServingRecord, owner: list[str | int]) -> None:
            recorder.owner = owner
            with contextlib.suppress(Deferred):
                await decision.grade(task.prompt_set, task.prompt, task.response, serving)

        return decide
    grader = JudgedGrader(
        {t.provider.id: Instance(t.provider.id, clients[t.provider.id], t.alias) for t in chosen}, plan.judged.defaults
    )

    async def judge(task: Task, serving: ServingRecord, owner: list[str | int]) -> None:
        from evalkit.graders.judged import judged_values

        for value in judged_values(task.prompt.assertions):
            found = grader.judge_of(value)
            if found is None:  # an embeddings instance, or a judge without batches: asked when grading
                continue
            kind, instance = found
            recorders[instance.id].owner = owner
            with contextlib.suppress(Deferred):
                await kind.judge(value, task, instance)

    return judge


async def _judge_target(plan: RunPlan, target: Target, *, answering: Answering, cache: ReadOnly, ask: Ask) -> None:
    """Each answer of ``target`` that grading will judge, judged with the recorders."""
    config = target.provider
    answers = CachedProvider(
        answering(config), cache, plan.read_cache, endpoint_identity(config), caches_answers(config)
    )
    for prompt_set in plan.sets:
        for prompt in prompt_set.prompts:
            if not _judged(plan, prompt):
                continue
            request = build_request(prompt_set, prompt, target.alias)
            for repeat in range(plan.repeats):
                try:
                    answer = await answers.complete(request, repeat)
                except ProviderError:
                    continue  # an item error: nothing to judge
                task = Task(prompt_set, prompt, answer.text, answer.tool_calls)
                await ask(task, answer.serving, [prompt_set.id, prompt.id, repeat, config.id])
