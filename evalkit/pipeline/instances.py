"""The instances of model-graded assertions as a run holds them (README "Model-graded
assertions"): each judge seen through the completion cache (``runner.CachedProvider``), each
embeddings instance through the run's embedder (``providers.embedder.open_embedder``: each
distinct text once per run, through the same cache); closed when the run ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalkit.assertions.judged import EMBEDDINGS, JUDGE
from evalkit.config import ProviderConfig
from evalkit.pipeline.plans import JudgedPlan, Target
from evalkit.protocols import Embedder, Grader
from evalkit.providers import ProviderPool, caches_answers

if TYPE_CHECKING:
    from evalkit.store import StoreCache


class JudgedInstances:
    """The judged grader over a plan's instances, and the embedders to close after the run."""

    def __init__(self, judged: JudgedPlan, pool: ProviderPool, cache: StoreCache | None, read_cache: bool) -> None:
        from evalkit.graders import Instance, JudgedGrader
        from evalkit.providers.embedder import open_embedder
        from evalkit.runner import CachedProvider

        judges: dict[str, Instance] = {}
        embedders: dict[str, Instance] = {}
        self.embedders: list[Embedder] = []
        for target in judged.targets:
            instance_id = target.provider.id
            services = judged.services.get(instance_id, frozenset({JUDGE}))
            if JUDGE in services:
                client = CachedProvider(
                    pool.get(instance_id),
                    cache,
                    read_cache,
                    pool.endpoint(instance_id),
                    caches_answers(target.provider),
                )
                judges[instance_id] = Instance(instance_id, client, target.alias)
            if EMBEDDINGS in services:
                embedder = open_embedder(target.provider, cache, read_cache=read_cache)
                self.embedders.append(embedder)
                embedders[instance_id] = Instance(instance_id, embedder, embedder.client.model)
        self.grader: Grader = JudgedGrader(
            judges,
            judged.defaults,
            costs={t.provider.id: t.provider.cost for t in judged.targets},
            limits={t.provider.id: t.provider.max_concurrency for t in judged.targets},
            embedders=embedders,
        )

    async def aclose(self) -> None:
        """Close every embedder (a local model's embedding server stops here)."""
        for embedder in self.embedders:
            await embedder.aclose()


def judges(judged: JudgedPlan) -> list[Target]:
    """The instances serving ``judge`` (an embeddings instance is not a chat model)."""
    return [t for t in judged.targets if JUDGE in judged.services.get(t.provider.id, {JUDGE})]


def probed(judged: JudgedPlan) -> list[tuple[ProviderConfig, str]]:
    """The judges a run probes before its judgements: every judge but those whose requests
    provider batches answered (an embeddings instance's first failing call errors the items it
    serves)."""
    return [(t.provider, t.alias) for t in judges(judged) if t.provider.id not in judged.batched]
