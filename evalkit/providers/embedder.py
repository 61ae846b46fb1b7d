"""The embeddings instance as a run sees it (``evalkit.protocols.Embedder``; README "Embeddings").

Each distinct text is embedded once per run: a text already embedded, or on its way (another
item asked for it a moment ago), is not sent again, so the expected values of the ``similar``
assertions cost one request each however many items share them. A text not yet known is looked
up in the completion cache first (docs/contract.md "The completion cache"), keyed like a
completion: instance, endpoint identity, alias and the text (``embedding_key``, which can never
equal a completion's key); an entry holds the vector in ``raw["embedding"]``, the serving record
and the text's share of the request's input tokens. ``--no-cache`` skips reading it, not writing.

Vectors of two models are not comparable: ``similarity`` refuses a pair whose models differ
(a cached vector of a model the alias no longer serves), as an ``EmbeddingError``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

from evalkit.config import Cost, ProviderConfig
from evalkit.errors import EmbeddingError
from evalkit.protocols import CompletionCache
from evalkit.providers.embeddings import EmbeddingsClient, build_embeddings, cosine
from evalkit.records import Completion, Embeddings, ServingRecord, Similarity, Usage


@dataclass(frozen=True, slots=True)
class _Known:
    vector: tuple[float, ...]
    reported_model: str | None


def embedding_key(instance_id: str, text: str, *, model: str, endpoint: str | None) -> str:
    """The completion cache's key of one text's embedding: instance, endpoint, alias, the text."""
    body = {"provider": instance_id, "endpoint": endpoint, "model": model, "embedding_input": text}
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class RunEmbedder:
    """One embeddings instance for one run: each text once, the completion cache, the counts
    (``calls``, ``cached``, ``input_tokens``, ``cost``) the run reports apart from the generator's."""

    def __init__(
        self,
        client: EmbeddingsClient,
        *,
        cache: CompletionCache | None = None,
        read_cache: bool = True,
        endpoint: str | None = None,
        price: Cost | None = None,
    ) -> None:
        self.client = client
        self._cache = cache
        self._read_cache = read_cache
        self._endpoint = endpoint
        self._price = price
        self._known: dict[str, _Known] = {}
        self._pending: dict[str, asyncio.Future[_Known]] = {}
        self.calls = 0
        self.cached = 0
        self.input_tokens = 0

    @property
    def instance_id(self) -> str:
        return self.client.instance_id

    @property
    def cost(self) -> float:
        """What the fresh embeddings of the run cost at the instance's price (0 without one)."""
        return self._price.of(self.input_tokens, 0) if self._price is not None else 0.0

    @property
    def reported_models(self) -> frozenset[str]:
        """Every model that embedded a text of the run (README "Embeddings": its identity)."""
        return frozenset(k.reported_model for k in self._known.values() if k.reported_model)

    async def embed(self, texts: Sequence[str]) -> Embeddings:
        """One vector per text, in order; the counts are this call's own (texts from the cache,
        requests sent, input tokens of those requests)."""
        wanted = list(dict.fromkeys(texts))
        waiting = {t: self._pending[t] for t in wanted if t in self._pending}
        unknown = [t for t in wanted if t not in self._known and t not in waiting]
        from_cache = self._from_cache(unknown)
        fetched = await self._fetch([t for t in unknown if t not in self._known])
        for text, future in waiting.items():
            self._known.setdefault(text, await future)
        known = [self._known[t] for t in texts]
        models = {k.reported_model for k in known}
        if len(models) > 1:
            shown = ", ".join(sorted(str(m) for m in models))
            raise EmbeddingError(
                f"embeddings of provider '{self.instance_id}': the texts were embedded by different models "
                f"({shown}), whose vectors are not comparable; run with --no-cache to embed them again"
            )
        return Embeddings(
            tuple(k.vector for k in known),
            known[0].reported_model if known else None,
            fetched.input_tokens,
            cached=from_cache,
            calls=fetched.calls,
        )

    async def similarity(self, answer: str, expected: str) -> Similarity:
        """The cosine of the two texts' embeddings clipped to 0..1; an answer of nothing but
        whitespace is similar to nothing (0.0, nothing sent)."""
        if not answer.strip():
            return Similarity(0.0, None)
        embedded = await self.embed([answer, expected])
        try:
            score = cosine(embedded.vectors[0], embedded.vectors[1])
        except ValueError as exc:
            raise EmbeddingError(f"embeddings of provider '{self.instance_id}': {exc}") from None
        return Similarity(score, embedded.reported_model, embedded.input_tokens, embedded.cached, embedded.calls)

    def _from_cache(self, texts: list[str]) -> int:
        """Known from the completion cache among ``texts``; returns how many."""
        if self._cache is None or not self._read_cache:
            return 0
        found = 0
        for text in texts:
            hit = self._cache.get(self._key(text))
            vector = _cached_vector(hit) if hit is not None else None
            if hit is not None and vector is not None:
                self._known[text] = _Known(vector, hit.serving.reported_model)
                found += 1
        self.cached += found
        return found

    async def _fetch(self, texts: list[str]) -> Embeddings:
        """Embed ``texts`` in one ``embed`` of the client; other callers asking for one of them
        meanwhile wait for this answer."""
        if not texts:
            return Embeddings((), None)
        loop = asyncio.get_running_loop()
        futures = {t: loop.create_future() for t in texts}
        self._pending.update(futures)
        try:
            answered = await self.client.embed(texts)
        except BaseException as exc:
            for text, future in futures.items():
                self._pending.pop(text, None)
                if isinstance(exc, Exception):
                    future.set_exception(exc)
                    future.exception()  # read here: a text nobody else waited for raises no warning
                else:
                    future.cancel()
            raise
        self.calls += answered.calls
        self.input_tokens += answered.input_tokens
        shares = _token_shares(texts, answered.input_tokens)
        for text, vector, tokens in zip(texts, answered.vectors, shares, strict=True):
            known = self._known[text] = _Known(vector, answered.reported_model)
            self._store(text, known, tokens)
            self._pending.pop(text, None)
            futures[text].set_result(known)
        return answered

    def _store(self, text: str, known: _Known, tokens: int) -> None:
        if self._cache is None:
            return
        entry = Completion(
            "",
            ServingRecord(self.instance_id, self.client.model, known.reported_model),
            Usage(tokens, 0),
            adapter=self.client.adapter,
            raw={"embedding": list(known.vector)},
        )
        self._cache.put(self._key(text), entry, self._endpoint)

    def keys(self, texts: Sequence[str]) -> list[str]:
        """The completion cache's keys of ``texts`` (a run preloads its expected values' by them)."""
        return [self._key(text) for text in dict.fromkeys(texts)]

    def _key(self, text: str) -> str:
        return embedding_key(self.instance_id, text, model=self.client.model, endpoint=self._endpoint)

    async def aclose(self) -> None:
        await self.client.aclose()


def open_embedder(
    config: ProviderConfig, cache: CompletionCache | None = None, *, read_cache: bool = True
) -> RunEmbedder:
    """The run's embedder for the instance ``embeddings: {provider: ID}`` names (checked first
    with ``embeddings.check_embeddings``); ``cache: false`` on the instance keeps it out of the cache."""
    from evalkit.providers import caches_answers, endpoint_identity

    return RunEmbedder(
        build_embeddings(config),
        cache=cache if caches_answers(config) else None,
        read_cache=read_cache,
        endpoint=endpoint_identity(config),
        price=config.cost,
    )


def _cached_vector(entry: Completion) -> tuple[float, ...] | None:
    """The vector an entry holds, or None when it holds none (a completion's entry, a damaged row)."""
    values = entry.raw.get("embedding") if entry.raw else None
    if not isinstance(values, list) or not values:
        return None
    if not all(type(x) in (int, float) and math.isfinite(x) for x in values):
        return None
    return tuple(float(x) for x in values)


def _token_shares(texts: list[str], total: int) -> list[int]:
    """A request's input tokens shared among its texts by length, summing to ``total``."""
    lengths = [max(1, len(t)) for t in texts]
    whole = sum(lengths)
    shares = [total * n // whole for n in lengths]
    shares[-1] += total - sum(shares)
    return shares
