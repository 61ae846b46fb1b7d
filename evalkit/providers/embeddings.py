"""Embeddings of texts from one provider instance, for the ``similar`` assertion (README "Embeddings").

Two adapters embed: ``openai`` (any OpenAI-compatible ``POST {base_url}/embeddings``) and
``local`` (the embedded model: llama.cpp's server started in its embedding mode on loopback,
``local.LocalServer``). Both speak one wire format, ``{"model", "input": [...]}`` answered by
``data[i].embedding``, ``model`` and ``usage.prompt_tokens``, through the instance's JSON client
(``http.provider_client``): its key, headers, timeout, retries, concurrency, proxy and
response-size limit, exactly as its chat calls. Up to ``MAX_BATCH`` texts go in one request;
the answer must hold one finite, non-empty vector per text, all of one length, or the call fails.

Every failure is an ``EmbeddingError`` (a ``ProviderError``): the assertion it serves is
undecided and its item errored with the reason; ``refused`` says the endpoint refused us (auth,
unknown model). ``cosine`` makes the score. The run's view (each text once, the completion
cache) is ``embedder.RunEmbedder``.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from evalkit.config import EMBEDDING_ADAPTERS, OPENAI_DEFAULT_URL, ProviderConfig
from evalkit.errors import EmbeddingError, InputError, ProviderError, ProviderRefused
from evalkit.providers.http import body_error, provider_client
from evalkit.records import Embeddings, Usage

MAX_BATCH = 64  # texts per request: OpenAI takes 2,048, a llama.cpp server's batch is the bound


class EmbeddingsClient(Protocol):
    """One instance's embeddings endpoint: ``embed`` answers one vector per text, in order."""

    instance_id: str
    adapter: str
    model: str  # the alias sent

    async def embed(self, texts: Sequence[str]) -> Embeddings: ...

    async def aclose(self) -> None: ...


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine similarity of two vectors clipped to 0..1: the ``similar`` score (README
    "Embeddings"). A vector of zeros has no direction: nothing is similar to it (0.0). Vectors of
    different lengths come from different models: ValueError."""
    if len(a) != len(b):
        raise ValueError(f"vectors of different lengths ({len(a)} and {len(b)}) cannot be compared")
    norms = math.fsum(x * x for x in a) * math.fsum(y * y for y in b)
    if norms <= 0.0:
        return 0.0
    return min(1.0, max(0.0, math.fsum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(norms)))


def check_embeddings(config: ProviderConfig) -> None:
    """Raise now, before any call, what would stop ``config`` embedding: an adapter that cannot
    embed, a missing key, model alias or model file."""
    from evalkit.providers import check_provider, default_alias

    if config.adapter not in EMBEDDING_ADAPTERS:
        where = f"{config.where}: " if config.where else ""
        raise InputError(
            f"{where}provider '{config.id}' (adapter {config.adapter}) cannot embed texts: name an instance "
            "with adapter openai (an OpenAI-compatible /embeddings endpoint) or local under embeddings:"
        )
    check_provider(config)
    default_alias(config)


def build_embeddings(config: ProviderConfig) -> EmbeddingsClient:
    """The embeddings client of one instance (no network traffic yet; ``check_embeddings`` first)."""
    if config.adapter == "local":
        return LocalEmbeddings(config)
    return OpenAIEmbeddings(config)


class OpenAIEmbeddings:
    """``POST {base_url}/embeddings`` over the instance's keep-alive client, bounded by its
    max_concurrency; the batches of one ``embed`` run concurrently."""

    def __init__(
        self, config: ProviderConfig, base_url: str | None = None, adapter: str = "openai", model: str | None = None
    ) -> None:
        from evalkit.providers import default_alias
        from evalkit.providers.openai import api_key

        self.instance_id = config.id
        self.adapter = adapter
        self.model = model or default_alias(config)
        key = api_key(config)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.client = provider_client(config, base_url or config.base_url or OPENAI_DEFAULT_URL, headers, key)
        self._name = f"embeddings of provider '{config.id}'"

    async def embed(self, texts: Sequence[str]) -> Embeddings:
        batches = [list(texts[i : i + MAX_BATCH]) for i in range(0, len(texts), MAX_BATCH)]
        if not batches:
            return Embeddings((), None)
        outcomes = await asyncio.gather(*(self._batch(batch) for batch in batches), return_exceptions=True)
        for outcome in outcomes:  # every batch finished: none left running unheard
            if isinstance(outcome, BaseException):
                raise outcome
        answered = [o for o in outcomes if isinstance(o, Embeddings)]
        reported = {e.reported_model for e in answered}
        if len(reported) > 1:
            shown = ", ".join(sorted(str(r) for r in reported))
            raise EmbeddingError(f"{self._name}: the endpoint reported several models ({shown}) in one call")
        return Embeddings(
            tuple(v for e in answered for v in e.vectors),
            answered[0].reported_model,
            sum(e.input_tokens for e in answered),
            calls=len(answered),
        )

    async def _batch(self, texts: list[str]) -> Embeddings:
        payload = {"model": self.model, "input": texts, "encoding_format": "float"}
        try:
            body, _latency_ms = await self.client.call("embeddings", payload)
        except ProviderRefused as exc:
            raise EmbeddingError(str(exc), refused=True) from exc
        except ProviderError as exc:
            raise EmbeddingError(str(exc)) from exc
        return self.parse(body, len(texts))

    def parse(self, body: dict[str, Any], count: int) -> Embeddings:
        """The vectors of a decoded answer to ``count`` texts, in the order the texts were sent."""
        data = body.get("data")
        if not isinstance(data, list):
            detail = self.client.mask(body_error(body))  # an error sent with a 200 (it may quote the key)
            raise EmbeddingError(f"{self._name}: the response has no data list{f' ({detail})' if detail else ''}")
        if len(data) != count:
            raise EmbeddingError(f"{self._name}: the response holds {len(data)} vectors for {count} texts")
        vectors = [_vector(entry, self._name, position) for position, entry in enumerate(_in_order(data))]
        if len({len(v) for v in vectors}) > 1:
            raise EmbeddingError(f"{self._name}: the response's vectors differ in length")
        reported = body.get("model")
        usage = Usage.from_body(body.get("usage"), "prompt_tokens", "completion_tokens")
        return Embeddings(
            tuple(vectors), reported if isinstance(reported, str) and reported else None, usage.input_tokens, calls=1
        )

    async def aclose(self) -> None:
        await self.client.aclose()


def _in_order(data: list[Any]) -> list[Any]:
    """The entries by their ``index`` when every one has a distinct one in range, else as sent."""
    indexes = [entry.get("index") if isinstance(entry, dict) else None for entry in data]
    numbered = [i for i in indexes if type(i) is int]
    if len(numbered) != len(data) or {*numbered} != {*range(len(data))}:
        return data
    ordered: list[Any] = [None] * len(data)
    for index, entry in zip(numbered, data, strict=True):
        ordered[index] = entry
    return ordered


def _vector(entry: Any, name: str, position: int) -> tuple[float, ...]:
    values = entry.get("embedding") if isinstance(entry, dict) else None
    if not isinstance(values, list) or not values:
        raise EmbeddingError(f"{name}: data[{position}].embedding is not a list of numbers")
    if not all(type(x) in (int, float) and math.isfinite(x) for x in values):
        raise EmbeddingError(f"{name}: data[{position}].embedding holds something other than finite numbers")
    return tuple(float(x) for x in values)


class LocalEmbeddings:
    """The local model in llama.cpp's embedding mode: its own server, started on first use and
    stopped when closed (one request at a time, as the local chat adapter's)."""

    adapter = "local"

    def __init__(self, config: ProviderConfig) -> None:
        from evalkit.providers import default_alias
        from evalkit.providers.local import LocalServer, model_file, model_id

        self.instance_id = config.id
        self.config = config
        self.model = default_alias(config)
        self.path: Path = model_file(config)
        self.reported_model = model_id(self.path)
        self.server = LocalServer(
            config,
            self.path,
            lambda local, base: OpenAIEmbeddings(local, base_url=base, adapter="local", model=self.model),
            lambda message: EmbeddingError(message, refused=True),  # no later call would start it
            embedding=True,
        )

    async def embed(self, texts: Sequence[str]) -> Embeddings:
        answered = await (await self.server.client()).embed(texts)
        # the model file is the model (its name and hash), whatever the server calls it
        return replace(answered, reported_model=self.reported_model)

    async def aclose(self) -> None:
        await self.server.aclose()
