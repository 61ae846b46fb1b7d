"""A submission's finished batches read, and the providers that answer from them (README "Batches").

The answers' batches give each prompt's answers, per repeat in order; the judge's batches give each
judge request's answer by its cache key (its custom id). A request the provider refused is its
error; one that an expired, cancelled or failed batch never answered is an error naming the batch.
``Answering`` makes a run's provider objects over them: ``providers.batches.BatchAnswers`` for each
instance the batches answered for (parsed by the instance's own adapter), the plain adapter for
any other. Each provider gets its own copy of the answers, so the judge's requests can be worked
out over them and the run graded over them again in one process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from evalkit.config import Config, ProviderConfig
from evalkit.protocols import Provider
from evalkit.providers import build_provider, endpoint_identity
from evalkit.providers.batches import BatchAnswer, BatchAnswers, BatchResults, BatchState, BatchStatus, batch_api
from evalkit.records import CompletionRequest, PendingBatch
from evalkit.records.batches import PHASE_JUDGE
from evalkit.runner import cache_key


@dataclass(frozen=True, slots=True)
class Received:
    """What a submission's batches answered, by instance."""

    prompts: dict[str, dict[tuple[str, str], list[BatchAnswer]]] = field(default_factory=dict)  # (set, prompt)
    judged: dict[str, dict[str, BatchAnswer]] = field(default_factory=dict)  # the judge's, by cache key


def read_results(
    config: Config, group: Sequence[PendingBatch], statuses: Mapping[str, BatchStatus]
) -> dict[str, BatchResults]:
    """Each finished batch's results (a failed batch has none: its requests are all unanswered)."""
    return asyncio.run(_read_all(config, group, statuses))


async def _read_all(
    config: Config, group: Sequence[PendingBatch], statuses: Mapping[str, BatchStatus]
) -> dict[str, BatchResults]:
    out: dict[str, BatchResults] = {}
    for batch in group:
        if statuses[batch.batch_id].state is BatchState.FAILED:
            out[batch.batch_id] = BatchResults()
            continue
        api = batch_api(config.provider(batch.provider))
        try:
            out[batch.batch_id] = await api.results(batch.batch_id)
        finally:
            await api.aclose()
    return out


def received(
    group: Sequence[PendingBatch], results: Mapping[str, BatchResults], statuses: Mapping[str, BatchStatus]
) -> Received:
    """The batches' answers and errors laid out for the providers that answer from them."""
    out = Received()
    for batch in group:
        got = results[batch.batch_id]

        def answer(custom_id: str, batch: PendingBatch = batch, got: BatchResults = got) -> BatchAnswer:
            return (
                got.answers.get(custom_id) or got.errors.get(custom_id) or unanswered(batch, statuses[batch.batch_id])
            )

        if batch.phase == PHASE_JUDGE:
            judged = out.judged.setdefault(batch.provider, {})
            for key in batch.custom_ids:
                judged[key] = answer(key)
            continue
        by_item = out.prompts.setdefault(batch.provider, {})
        for custom_id, (set_id, prompt_id, _) in sorted(batch.custom_ids.items(), key=lambda kv: kv[1][2]):
            by_item.setdefault((str(set_id), str(prompt_id)), []).append(answer(custom_id))  # repeats in turn
    return out


def unanswered(batch: PendingBatch, status: BatchStatus) -> str:
    """Why a request of ``batch`` has no answer: the batch failed, or ended before answering it."""
    if status.state is BatchState.FAILED:
        return f"provider '{batch.provider}': batch {batch.batch_id} {status.detail}"
    return f"provider '{batch.provider}': batch {batch.batch_id} ended ({status.detail}) before answering this request"


class Answering:
    """The provider factory of a run answered from batches; ``made`` keeps what it built, by
    instance (their ``served`` judge answers price the run's batch saving). ``calls=False``:
    an instance no batch answered for answers no prompt either (it is never called)."""

    def __init__(self, answers: Received, *, calls: bool = True) -> None:
        self.answers = answers
        self.calls = calls
        self.made: dict[str, BatchAnswers] = {}

    def __call__(self, config: ProviderConfig) -> Provider:
        live = build_provider(config)
        prompts = self.answers.prompts.get(config.id)
        judged = self.answers.judged.get(config.id)
        if self.calls and prompts is None and judged is None:
            return live
        endpoint = endpoint_identity(config)

        def key(request: CompletionRequest) -> str:
            return cache_key(config.id, request, endpoint=endpoint)  # as runner.CachedProvider keys a judge's call

        made = BatchAnswers(
            config.id, config.adapter, live, {k: list(v) for k, v in (prompts or {}).items()}, judged or {}, key
        )
        self.made[config.id] = made
        return made
