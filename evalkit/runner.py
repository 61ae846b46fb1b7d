"""Run a prompt set: every prompt to its provider, every answer to the grader -> RunResult.

Async with bounded concurrency: ``concurrency`` workers pull prompts in order (no task per
prompt, so 100,000 recorded answers cost no more memory than the results). Each call goes
through the completion cache first; a fresh answer is put in the cache as soon as it arrives,
so an interrupted run keeps what it paid for. An item whose call fails after retries tries the
instance's ``fallback`` chain, then becomes an item with an error; the run goes on. A refusal
(auth, unknown model) aborts the whole run.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from evalkit.config import APPLICATION_ADAPTERS, Cost, ProviderConfig
from evalkit.errors import ProviderError, ProviderRefused
from evalkit.graders.decision import prompt_text
from evalkit.graders.judged import JudgedGrader
from evalkit.graders.judged import stored_grader as judged_grader
from evalkit.protocols import CompletionCache, Grader, Provider
from evalkit.providers import ProviderPool, caches_answers, default_alias
from evalkit.records import (
    CallFacts,
    Completion,
    CompletionRequest,
    Grade,
    ItemResult,
    Message,
    Prompt,
    PromptSet,
    RunResult,
    ServingRecord,
    Tolerances,
    without_lone_surrogates,
)
from evalkit.verdicts import JUDGED, Yardstick

Progress = Callable[[ItemResult], None]


def new_run_id(now: datetime | None = None) -> str:
    """Sortable and short enough to type: ``20261130-131502-3fa9c1``."""
    moment = now or datetime.now(UTC)
    return f"{moment:%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def utc_now(moment: datetime | None = None) -> str:
    return (moment or datetime.now(UTC)).isoformat(timespec="milliseconds")


def set_fingerprint(prompt_set: PromptSet) -> str:
    """A hash of what the set asks and checks (prompts, systems, params, tools, assertions, references)."""
    body: dict[str, Any] = {
        "system": prompt_set.system,
        "params": dict(prompt_set.params),
        **_tooling(prompt_set.tools, prompt_set.tool_choice),  # only when declared: older sets keep theirs
        "prompts": [
            {
                "id": p.id,
                "prompt": p.prompt,
                "system": p.system,
                "params": dict(p.params),
                # weights and thresholds only when set, so a set without them keeps its fingerprint
                "assertions": [[a.type, a.value] + ([a.weight] if a.weight != 1 else []) for a in p.assertions],
                "reference": p.reference,
                **({"threshold": p.threshold} if p.threshold is not None else {}),
                **({"messages": [[m.role, m.content] for m in p.messages]} if p.messages else {}),
                # what the gate reads: only when set, so older sets keep their fingerprint (vars are
                # not hashed: what is sent counts, however it was written; README "Templates, variables, data files and conversations")
                **({"critical": True} if p.critical else {}),
                **_tooling(p.tools or (), p.tool_choice),
                **({"tools": []} if p.tools == () else {}),  # declared none: not the set's
            }
            for p in prompt_set.prompts
        ],
    }
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def _tooling(tools: Sequence[Any], choice: Any) -> dict[str, Any]:
    """``tools`` and ``tool_choice`` for a hash, each only when declared."""
    return {
        **({"tools": [dict(t) for t in tools]} if tools else {}),
        **({"tool_choice": choice} if choice is not None else {}),
    }


def build_request(prompt_set: PromptSet, prompt: Prompt, alias: str) -> CompletionRequest:
    system = prompt_set.system_for(prompt)
    messages = (Message("system", system),) if system else ()
    turns = prompt.messages or (Message("user", prompt.prompt),)
    return CompletionRequest(
        messages=(*messages, *turns),
        model=alias,
        params=prompt_set.params_for(prompt),
        item_id=prompt.id,
        set_id=prompt_set.id,
        vars=prompt.vars,
        tools=prompt_set.tools_for(prompt),
        tool_choice=prompt_set.tool_choice_for(prompt),
    )


def cache_key(instance_id: str, request: CompletionRequest, repeat: int = 0, *, endpoint: str | None = None) -> str:
    """Completions are cached by provider instance, the endpoint it points at (``endpoint_identity``:
    adapter and base URL, or the local model file's hash), alias, messages, params and declared
    tools (and repeat)."""
    body: dict[str, Any] = {
        "provider": instance_id,
        "endpoint": endpoint,
        "model": request.model,
        "messages": [[m.role, m.content] for m in request.messages],
        "params": dict(request.params),
    }
    if request.response_schema is not None:
        body["response_schema"] = dict(request.response_schema)
    if request.top_logprobs:
        body["top_logprobs"] = request.top_logprobs
    body.update(_tooling(request.tools, request.tool_choice))  # part of what is sent
    if request.vars and endpoint is not None and endpoint.split(" ", 1)[0] in APPLICATION_ADAPTERS:
        body["vars"] = dict(request.vars)  # an application is given the prompt's variables too
    if repeat:
        body["repeat"] = repeat
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def clean_completion(completion: Completion) -> Completion:
    """Lone surrogates (a JSON body may escape them) become U+FFFD: they cannot be stored or printed.
    Implausible token counts are dropped (noted in ``usage.dropped``): they would make the run
    unstorable and its cost absurd."""
    text = completion.text
    cleaned = without_lone_surrogates(text)
    usage = completion.usage.checked()
    if cleaned == text and usage is completion.usage:
        return completion
    return replace(completion, text=cleaned, usage=usage)


@dataclass(slots=True)
class CachedProvider:
    """A provider seen through the completion cache; the judge is wired through one too."""

    provider: Provider
    cache: CompletionCache | None
    read_cache: bool = True
    endpoint: str | None = None  # the instance's endpoint_identity: part of the key, kept beside it
    cached: bool = True  # the adapter keeps its answers in the cache (providers.caches_answers)

    @property
    def instance_id(self) -> str:
        return self.provider.instance_id

    @property
    def adapter(self) -> str:
        return self.provider.adapter

    async def complete(self, request: CompletionRequest, repeat: int = 0) -> Completion:
        if self.provider.adapter == "replay":
            # answers by prompt id from a local file: nothing to cache, and nothing to clean (its
            # texts were cleaned when the file was read; it reports no token counts)
            return await self.provider.complete(request)
        if not self.cached:  # an application, unless it asked for the cache: the point is to see it change
            return clean_completion(await self.provider.complete(request))
        key = cache_key(self.provider.instance_id, request, repeat, endpoint=self.endpoint)
        if self.cache is not None and self.read_cache:
            hit = self.cache.get(key)
            if hit is not None:
                return hit
        completion = clean_completion(await self.provider.complete(request))
        if self.cache is not None:
            self.cache.put(key, completion, self.endpoint)
        return completion

    async def aclose(self) -> None:
        return None  # the pool that opened the provider closes it


@dataclass(slots=True)
class Caller:
    """Gets one completion: cache, primary instance, then its fallback chain."""

    pool: ProviderPool
    cache: CompletionCache | None
    read_cache: bool
    _providers: dict[str, CachedProvider] = field(default_factory=dict)  # by instance, made on first use
    _prices: dict[str, Cost | None] = field(default_factory=dict)
    replayed_facts: dict[int, tuple[ServingRecord, CallFacts]] = field(default_factory=dict)  # see call_facts

    def price(self, instance_id: str) -> Cost | None:
        """The instance's cost: configuration (looked up once)."""
        if instance_id not in self._prices:
            self._prices[instance_id] = self.pool.config(instance_id).cost
        return self._prices[instance_id]

    async def complete(self, instance_id: str, request: CompletionRequest, repeat: int = 0) -> Completion:
        tried: list[str] = []
        errors: list[str] = []
        current: str | None = instance_id
        while current is not None and current not in tried:
            tried.append(current)
            attempt = (
                request if current == instance_id else replace(request, model=default_alias(self.pool.config(current)))
            )
            try:
                provider = self._providers.get(current)
                if provider is None:
                    provider = self._providers[current] = CachedProvider(
                        self.pool.get(current),
                        self.cache,
                        self.read_cache,
                        self.pool.endpoint(current),
                        caches_answers(self.pool.config(current)),
                    )
                return await provider.complete(attempt, repeat)
            except ProviderRefused:
                raise
            except ProviderError as exc:
                errors.append(str(exc))
            current = self.pool.config(current).fallback
        raise ProviderError("; then ".join(errors))


async def run_items(
    prompt_set: PromptSet,
    *,
    caller: Caller,
    instance_id: str,
    alias: str,
    grader: Grader,
    concurrency: int,
    progress: Progress | None = None,
    repeats: int = 1,
) -> list[ItemResult]:
    """Every prompt of the set (``repeats`` samples each), called and graded, in set order."""
    prompts = prompt_set.prompts
    total = len(prompts) * repeats
    results: list[ItemResult | None] = [None] * total
    queue: Iterator[int] = iter(range(total))

    def record(index: int, result: ItemResult) -> None:
        results[index] = result
        if progress is not None:
            progress(result)

    async def graded(index: int, prompt: Prompt, request: CompletionRequest, completion: Completion) -> None:
        facts = call_facts(caller, completion)
        grade = await grader.grade(prompt_set, prompt, completion.text, completion.serving, facts)
        record(index, graded_item(prompt, request, completion, grade, index % repeats))

    async def worker(group: asyncio.TaskGroup) -> None:
        for index in queue:
            prompt, repeat = prompts[index // repeats], index % repeats
            request = build_request(prompt_set, prompt, alias)
            if judging is not None and judging.judges(prompt):
                # a judge's call starts when the answer arrives, and the worker takes the next
                # prompt meanwhile (README "Model-graded assertions": judged beside generation)
                answered = await answer(prompt, request, caller, instance_id, repeat)
                if isinstance(answered, ItemResult):
                    record(index, answered)
                else:
                    group.create_task(graded(index, prompt, request, answered))
                continue
            result = await run_one(
                prompt_set,
                prompt=prompt,
                request=request,
                caller=caller,
                instance_id=instance_id,
                grader=grader,
                repeat=repeat,
            )
            record(index, result)

    judging = grader if isinstance(grader, JudgedGrader) else None
    workers = max(1, min(concurrency, total))
    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(workers):
                group.create_task(worker(group))
    except BaseExceptionGroup as group_error:
        raise first_error(group_error) from None
    return [r for r in results if r is not None]


def first_error(group: BaseExceptionGroup[Any]) -> BaseException:
    """The exception to surface from a task group: a refusal first, else the first one."""
    leaves: list[BaseException] = []

    def collect(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                collect(inner)
        else:
            leaves.append(exc)

    collect(group)
    return next((e for e in leaves if isinstance(e, ProviderRefused)), leaves[0])


async def run_one(
    prompt_set: PromptSet,
    *,
    prompt: Prompt,
    request: CompletionRequest,
    caller: Caller,
    instance_id: str,
    grader: Grader,
    repeat: int = 0,
) -> ItemResult:
    completion = await answer(prompt, request, caller, instance_id, repeat)
    if isinstance(completion, ItemResult):
        return completion
    grade = await grader.grade(prompt_set, prompt, completion.text, completion.serving, call_facts(caller, completion))
    return graded_item(prompt, request, completion, grade, repeat)


async def answer(
    prompt: Prompt, request: CompletionRequest, caller: Caller, instance_id: str, repeat: int
) -> Completion | ItemResult:
    """The prompt's answer, or its item when the call failed after retries and fallbacks."""
    try:
        return await caller.complete(instance_id, request, repeat)
    except ProviderRefused:
        raise
    except ProviderError as exc:
        return ItemResult(
            id=prompt.id, passed=False, score=0.0, reason=f"error: {exc}", error=str(exc), prompt=prompt_text(prompt),
            system=request.system, repeat=repeat,
        )  # fmt: skip


def graded_item(
    prompt: Prompt, request: CompletionRequest, completion: Completion, grade: Grade, repeat: int
) -> ItemResult:
    """The item of an answer and its grade; a failed judgement of a model-graded assertion errors it."""
    reason = grade.reason
    if not grade.passed and completion.truncated:  # else it reads as a wrong answer, not a short one
        reason += " (the answer was cut off at max_tokens; raise it in the set's params)"
    if completion.usage.dropped:
        reason += f" (implausible token counts from the endpoint not counted: {', '.join(completion.usage.dropped)})"
    return ItemResult(  # built whole: dataclasses.replace costs more than the grading of three assertions
        id=prompt.id,
        passed=grade.passed and grade.error is None,
        score=grade.score,
        reason=reason,
        latency_ms=completion.latency_ms,
        assertions=grade.assertions,
        prompt=prompt_text(prompt),  # a conversation: every turn with its role
        system=request.system,
        response=completion.text,
        serving=completion.serving,
        adapter=completion.adapter,
        usage=completion.usage,
        yardstick=grade.yardstick,
        grader_usage=grade.usage,
        cached=completion.cached,
        repeat=repeat,
        grader_cached=grade.cached,
        threshold=prompt.threshold,
        cached_at=completion.cached_at,
        tool_calls=completion.tool_calls,
        context=completion.context,
        error=grade.error,
        judge_calls=grade.judge_calls,
        judge_cached=grade.judge_cached,
        grader_cost=grade.cost,
    )


def call_facts(caller: Caller, completion: Completion) -> CallFacts:
    """The latency, priced cost (of the instance that answered) and reported model of a call."""
    serving = completion.serving
    usage = completion.usage
    replayed = (
        completion.adapter == "replay"
        and serving is not None
        and not (usage.input_tokens or usage.output_tokens or completion.raw)
    )
    if replayed:  # every answer recorded for one model has the same facts: one record for them
        known = caller.replayed_facts.get(id(serving))
        if known is not None and known[0] is serving:
            return known[1]
    cost = None
    if serving is not None:
        priced = caller.price(serving.provider)
        if priced is not None:
            cost = priced.of(usage.input_tokens, usage.output_tokens)
    # a recorded answer (replay) took no call: it has no latency to check
    latency = None if completion.adapter == "replay" else completion.latency_ms
    model = serving.reported_model if serving else None
    facts = CallFacts(latency, cost, model, completion.tool_calls, completion.context)
    if replayed:
        caller.replayed_facts[id(serving)] = (serving, facts)  # the record kept: its id stays its own
    return facts


def stored_grader(grader_name: str, items: Sequence[ItemResult]) -> str:
    """The grader a run is stored under: the shared yardstick, else what README "Graders" prescribes."""
    if grader_name == JUDGED:  # README "Model-graded assertions"
        return judged_grader(items) or JUDGED
    graded = [i for i in items if not i.errored]
    yardsticks = {i.yardstick for i in graded}
    if grader_name != "decision":
        return grader_name
    failed = [i for i in graded if i.yardstick is None or Yardstick.parse(i.yardstick).failed]
    if graded and len(failed) == len(graded):
        return str(Yardstick(grader_name, failed=True))
    if len(yardsticks) == 1 and not failed:
        only = next(iter(yardsticks))
        return only if only else "decision"
    return "decision"


def run_cost(items: Sequence[ItemResult], cost: Cost | None) -> float | None:
    if cost is None:
        return None
    return sum(cost.of(i.usage.input_tokens, i.usage.output_tokens) for i in items if not i.cached)


async def run_prompt_set(
    prompt_set: PromptSet,
    *,
    pool: ProviderPool,
    provider: ProviderConfig,
    grader: Grader,
    alias: str | None = None,
    cache: CompletionCache | None = None,
    read_cache: bool = True,
    concurrency: int = 8,
    tolerances: Tolerances | None = None,
    progress: Progress | None = None,
    grader_cost: Cost | None = None,
    repeats: int = 1,
) -> RunResult:
    """Run one set on one provider instance; nothing is stored here."""
    sent_alias = alias or default_alias(provider)
    fingerprint = set_fingerprint(prompt_set)  # what the set is, worked out before its run starts
    start = datetime.now(UTC)  # one instant: the run id's time is the stored and reported start
    caller = Caller(pool, cache, read_cache)
    items = await run_items(
        prompt_set,
        caller=caller,
        instance_id=provider.id,
        alias=sent_alias,
        grader=grader,
        concurrency=concurrency,
        progress=progress,
        repeats=repeats,
    )
    return RunResult.create(
        tuple(items),
        run_id=new_run_id(start),
        set_id=prompt_set.id,
        set_fingerprint=fingerprint,
        provider=provider.id,
        model=sent_alias,
        grader=stored_grader(grader.name_for(prompt_set) if isinstance(grader, JudgedGrader) else grader.name, items),
        started_at=utc_now(start),
        finished_at=utc_now(),
        tolerances=tolerances or prompt_set.tolerances,
        set_name=prompt_set.name,
        set_path=str(prompt_set.path) if prompt_set.path else None,
        adapter=provider.adapter,
        cost=run_cost(items, provider.cost),
        grader_cost=_grader_cost(items, grader_cost),
        repeats=repeats,
    )


def _grader_cost(items: Sequence[ItemResult], decision_cost: Cost | None) -> float | None:
    """The judge's priced cost: the decision judge's tokens at its price, or the sum of the
    model-graded assertions' priced calls (None when no judge is priced)."""
    if decision_cost is not None:
        return decision_cost.of(*_judge_tokens(items))
    priced = [i.grader_cost for i in items if i.grader_cost is not None]
    return sum(priced) if priced else None


def _judge_tokens(items: Sequence[ItemResult]) -> tuple[int, int]:
    return sum(i.grader_usage.input_tokens for i in items), sum(i.grader_usage.output_tokens for i in items)
