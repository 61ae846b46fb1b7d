"""Embeddings against a real loopback server speaking OpenAI's /embeddings wire format: the
request, batching, retries, faults, the answer's checks, usage, the run's memo and the cache."""

from __future__ import annotations

import asyncio
import gzip
import json
import math
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from evalkit.config import Cost, ProviderConfig
from evalkit.errors import EmbeddingError, InputError, ProviderError
from evalkit.providers.embedder import RunEmbedder, embedding_key, open_embedder
from evalkit.providers.embeddings import (
    MAX_BATCH,
    OpenAIEmbeddings,
    build_embeddings,
    check_embeddings,
    cosine,
)
from evalkit.records import Completion
from evalkit.store.cache import StoreCache
from evalkit.store.store import Store
from tests.fakeserver import FakeServer, Recorded, Reply
from tests.providers.conftest import KEY, KEY_ENV

T = TypeVar("T")


def run(main: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(main())  # type: ignore[arg-type]


def vector_of(text: str, dims: int = 8) -> list[float]:
    """A deterministic vector per text: texts sharing their first word point the same way."""
    first = text.split(maxsplit=1)[0].lower() if text.split() else ""
    seed = sum(ord(c) for c in first) or 1
    return [math.sin(seed * (i + 1)) for i in range(dims)]


def embeddings_body(texts: list[str], model: str | None = "emb-model-3", tokens: int | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "object": "list",
        "data": [{"object": "embedding", "index": i, "embedding": vector_of(t)} for i, t in enumerate(texts)],
        "usage": {"prompt_tokens": sum(len(t.split()) for t in texts) if tokens is None else tokens},
    }
    if model is not None:
        body["model"] = model
    return body


def answer_embeddings(request: Recorded) -> Reply:
    return Reply(json=embeddings_body(list(request.json["input"])))


def config(server: FakeServer, **changes: Any) -> ProviderConfig:
    values: dict[str, Any] = {
        "id": "emb",
        "adapter": "openai",
        "model": "text-embedding-3-small",
        "base_url": f"{server.url}/v1",
        "max_retries": 2,
        "retry_backoff_s": 0.01,
        "timeout_s": 5.0,
    }
    return ProviderConfig(**(values | changes))


async def embed_once(cfg: ProviderConfig, texts: list[str]) -> Any:
    client = build_embeddings(cfg)
    try:
        return await client.embed(texts)
    finally:
        await client.aclose()


def test_the_request_is_openai_shaped_with_the_key_and_headers(
    fake_llm: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    fake_llm.handler = answer_embeddings
    cfg = config(fake_llm, api_key_env=KEY_ENV, headers={"X-Team": "quality"})
    got = run(lambda: embed_once(cfg, ["Refunds take 14 days.", "Shipping is free."]))
    [request] = fake_llm.requests
    assert request.path == "/v1/embeddings"
    assert request.json == {
        "model": "text-embedding-3-small",
        "input": ["Refunds take 14 days.", "Shipping is free."],
        "encoding_format": "float",
    }
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["x-team"] == "quality"
    assert got.vectors == (tuple(vector_of("Refunds")), tuple(vector_of("Shipping")))
    assert (got.reported_model, got.input_tokens, got.calls) == ("emb-model-3", 7, 1)


def test_texts_are_sent_in_batches_and_usage_is_summed(fake_llm: FakeServer) -> None:
    fake_llm.handler = answer_embeddings
    texts = [f"text{i} number {i}" for i in range(MAX_BATCH * 2 + 5)]
    got = run(lambda: embed_once(config(fake_llm), texts))
    assert sorted(len(r.json["input"]) for r in fake_llm.requests) == [5, MAX_BATCH, MAX_BATCH]
    assert got.vectors == tuple(tuple(vector_of(t)) for t in texts)
    assert (got.calls, got.input_tokens) == (3, 3 * len(texts))


def test_vectors_follow_their_index_not_the_order_sent(fake_llm: FakeServer) -> None:
    body = embeddings_body(["alpha one", "beta two", "gamma three"])
    body["data"].reverse()
    fake_llm.enqueue(Reply(json=body))
    got = run(lambda: embed_once(config(fake_llm), ["alpha one", "beta two", "gamma three"]))
    assert got.vectors == tuple(tuple(vector_of(t)) for t in ("alpha", "beta", "gamma"))


@pytest.mark.parametrize("status", [429, 500, 503])
def test_transient_faults_are_retried(fake_llm: FakeServer, status: int) -> None:
    fake_llm.enqueue(Reply(status=status, json={"error": {"message": "busy"}}))
    fake_llm.handler = answer_embeddings
    got = run(lambda: embed_once(config(fake_llm), ["retry me"]))
    assert fake_llm.calls == 2
    assert got.vectors == (tuple(vector_of("retry")),)


def test_a_fault_that_persists_is_an_embedding_error_after_the_retries(fake_llm: FakeServer) -> None:
    fake_llm.handler = lambda request: Reply(status=500, json={"error": {"message": "overloaded"}})
    with pytest.raises(EmbeddingError) as caught:
        run(lambda: embed_once(config(fake_llm), ["never"]))
    assert fake_llm.calls == 3  # max_retries 2
    assert str(caught.value) == "provider 'emb': HTTP 500: overloaded (after 3 attempts)"
    assert isinstance(caught.value, ProviderError)
    assert not caught.value.refused


def test_a_refusal_is_not_retried_and_says_so(fake_llm: FakeServer) -> None:
    fake_llm.handler = lambda request: Reply(status=404, json={"error": {"message": "no such model"}})
    with pytest.raises(EmbeddingError) as caught:
        run(lambda: embed_once(config(fake_llm), ["x"]))
    assert fake_llm.calls == 1
    assert caught.value.refused
    assert "HTTP 404: no such model" in str(caught.value)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"not json at all", "provider 'emb': malformed JSON in the response body (HTTP 200)"),
        (
            json.dumps({"error": {"message": "quota exceeded"}}).encode(),
            "embeddings of provider 'emb': the response has no data list (quota exceeded)",
        ),
        (
            json.dumps({"data": [{"index": 0, "embedding": "AAAA"}]}).encode(),
            "embeddings of provider 'emb': data[0].embedding is not a list of numbers",
        ),
        (
            json.dumps({"data": [{"index": 0, "embedding": []}]}).encode(),
            "embeddings of provider 'emb': data[0].embedding is not a list of numbers",
        ),
        (
            json.dumps({"data": [{"index": 0, "embedding": [0.1, "0.2", 0.3]}]}).encode(),
            "embeddings of provider 'emb': data[0].embedding holds something other than finite numbers",
        ),
        (
            b'{"data": [{"index": 0, "embedding": [0.1, NaN]}]}',
            "embeddings of provider 'emb': data[0].embedding holds something other than finite numbers",
        ),
        (
            b'{"data": [{"index": 0, "embedding": [0.1, true]}]}',
            "embeddings of provider 'emb': data[0].embedding holds something other than finite numbers",
        ),
    ],
)
def test_a_malformed_answer_is_an_embedding_error(fake_llm: FakeServer, body: bytes, reason: str) -> None:
    fake_llm.enqueue(Reply(body=body))
    with pytest.raises(EmbeddingError) as caught:
        run(lambda: embed_once(config(fake_llm), ["one text"]))
    assert str(caught.value) == reason
    assert fake_llm.calls == 1  # a malformed answer is not retried


@pytest.mark.parametrize("answered", [1, 3])
def test_a_wrong_number_of_vectors_is_an_embedding_error(fake_llm: FakeServer, answered: int) -> None:
    fake_llm.enqueue(Reply(json=embeddings_body([f"t{i}" for i in range(answered)])))
    with pytest.raises(EmbeddingError) as caught:
        run(lambda: embed_once(config(fake_llm), ["first", "second"]))
    assert str(caught.value) == f"embeddings of provider 'emb': the response holds {answered} vectors for 2 texts"


def test_vectors_of_different_lengths_are_an_embedding_error(fake_llm: FakeServer) -> None:
    body = embeddings_body(["a b", "c d"])
    body["data"][1]["embedding"] = body["data"][1]["embedding"][:4]
    fake_llm.enqueue(Reply(json=body))
    with pytest.raises(EmbeddingError, match="the response's vectors differ in length"):
        run(lambda: embed_once(config(fake_llm), ["a b", "c d"]))


def test_a_response_over_max_response_mb_is_read_no_further(fake_llm: FakeServer) -> None:
    big = embeddings_body(["huge"])
    big["data"][0]["embedding"] = [0.123456789] * 150_000  # about 1.8 MB of JSON
    fake_llm.enqueue(Reply(json=big))
    with pytest.raises(EmbeddingError) as caught:
        run(lambda: embed_once(config(fake_llm, max_response_mb=1.0), ["huge"]))
    assert "larger than max_response_mb (1 MB)" in str(caught.value)


def test_a_compressed_bomb_stops_at_max_response_mb(fake_llm: FakeServer) -> None:
    inflated = json.dumps(embeddings_body(["pad"]) | {"pad": " " * 3_000_000}).encode()
    fake_llm.enqueue(Reply(body=gzip.compress(inflated), headers={"Content-Encoding": "gzip"}))
    with pytest.raises(EmbeddingError, match=r"larger than max_response_mb \(1 MB\)"):
        run(lambda: embed_once(config(fake_llm, max_response_mb=1.0), ["pad"]))


def test_implausible_usage_counts_no_tokens(fake_llm: FakeServer) -> None:
    body = embeddings_body(["one"])
    body["usage"] = {"prompt_tokens": -5}
    fake_llm.enqueue(Reply(json=body))
    got = run(lambda: embed_once(config(fake_llm), ["one"]))
    assert got.input_tokens == 0
    assert len(got.vectors) == 1


def test_the_key_is_masked_in_an_error(fake_llm: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    fake_llm.enqueue(Reply(json={"error": {"message": f"bad key {KEY}"}}))
    with pytest.raises(EmbeddingError) as caught:
        run(lambda: embed_once(config(fake_llm, api_key_env=KEY_ENV), ["x"]))
    assert KEY not in str(caught.value)
    assert "bad key ***" in str(caught.value)


def test_max_concurrency_bounds_the_requests_in_flight(fake_llm: FakeServer) -> None:
    fake_llm.handler = lambda request: Reply(json=embeddings_body(list(request.json["input"])), delay_s=0.05)
    texts = [f"t{i}" for i in range(MAX_BATCH * 6)]
    run(lambda: embed_once(config(fake_llm, max_concurrency=2), texts))
    assert fake_llm.calls == 6
    assert fake_llm.max_open_connections == 2


def test_cosine_is_clipped_to_zero_and_one() -> None:
    assert cosine([1.0, 0.0], [2.0, 0.0]) == 1.0
    assert cosine([1.0, 0.0], [0.0, 3.0]) == 0.0
    assert cosine([1.0, 0.0], [-1.0, 0.0]) == 0.0  # opposite: clipped, not -1
    assert cosine([1.0, 1.0], [1.0, 0.0]) == pytest.approx(1 / math.sqrt(2))
    assert cosine([0.0, 0.0], [1.0, 0.0]) == 0.0
    with pytest.raises(ValueError, match="different lengths"):
        cosine([1.0], [1.0, 0.0])


# ---- the run's embedder: each text once, the completion cache ----


async def with_embedder(cfg: ProviderConfig, body: Callable[[RunEmbedder], Awaitable[T]], cache: Any = None) -> T:
    embedder = open_embedder(cfg, cache)
    try:
        return await body(embedder)
    finally:
        await embedder.aclose()


def test_each_text_is_embedded_once_per_run(fake_llm: FakeServer) -> None:
    fake_llm.handler = lambda request: Reply(json=embeddings_body(list(request.json["input"])), delay_s=0.02)
    expected = "Refunds are possible within 14 days."

    async def many(embedder: RunEmbedder) -> list[float]:
        answers = [f"Answer {i} about refunds" for i in range(6)]
        scored = await asyncio.gather(*(embedder.similarity(a, expected) for a in answers))
        return [s.score for s in scored]

    run(lambda: with_embedder(config(fake_llm), many))
    sent = [t for r in fake_llm.requests for t in r.json["input"]]
    assert sorted(sent) == sorted({*sent})  # no text twice
    assert sent.count(expected) == 1


def test_similarity_scores_the_cosine_and_names_the_model(fake_llm: FakeServer) -> None:
    fake_llm.handler = answer_embeddings

    async def pair(embedder: RunEmbedder) -> Any:
        return (
            await embedder.similarity("Refunds within 14 days", "Refunds are possible"),
            await embedder.similarity("Shipping is free", "Refunds are possible"),
        )

    same, other = run(lambda: with_embedder(config(fake_llm, cost=Cost(input_per_mtok=1e6)), pair))
    assert same.score == 1.0  # same first word: the same direction
    assert other.score == cosine(vector_of("Shipping"), vector_of("Refunds"))
    assert same.reported_model == other.reported_model == "emb-model-3"
    assert (same.calls, other.calls, same.cached) == (1, 1, 0)


def test_a_blank_answer_is_similar_to_nothing_and_sends_nothing(fake_llm: FakeServer) -> None:
    got = run(lambda: with_embedder(config(fake_llm), lambda e: e.similarity("  \n", "Refunds")))
    assert got.score == 0.0
    assert fake_llm.calls == 0


def test_a_failed_embedding_fails_every_caller_waiting_for_it(fake_llm: FakeServer) -> None:
    fake_llm.handler = lambda request: Reply(status=500, json={"error": {"message": "down"}}, delay_s=0.02)

    async def both(embedder: RunEmbedder) -> list[Any]:
        return await asyncio.gather(
            embedder.similarity("first answer", "Expected"),
            embedder.similarity("second answer", "Expected"),
            return_exceptions=True,
        )

    outcomes = run(lambda: with_embedder(config(fake_llm, max_retries=0), both))
    assert all(isinstance(o, EmbeddingError) and "HTTP 500: down" in str(o) for o in outcomes)


def test_the_run_counts_calls_tokens_and_cost(fake_llm: FakeServer) -> None:
    fake_llm.handler = lambda request: Reply(json=embeddings_body(list(request.json["input"]), tokens=10))

    async def count(embedder: RunEmbedder) -> tuple[int, int, int, float]:
        await embedder.embed(["a", "b"])
        await embedder.embed(["b", "c"])
        return embedder.calls, embedder.input_tokens, embedder.cached, embedder.cost

    cfg = config(fake_llm, cost=Cost(input_per_mtok=2.0))
    assert run(lambda: with_embedder(cfg, count)) == (2, 20, 0, 20 * 2.0 / 1e6)
    assert [r.json["input"] for r in fake_llm.requests] == [["a", "b"], ["c"]]


def test_embeddings_are_cached_like_completions_in_the_database(fake_llm: FakeServer, tmp_path: Path) -> None:
    fake_llm.handler = lambda request: Reply(json=embeddings_body(list(request.json["input"]), tokens=9))
    db = tmp_path / "evalkit.duckdb"
    cfg = config(fake_llm)
    texts = ["Refunds within 14 days", "Shipping is free", "Returns need a receipt"]

    first_cache = StoreCache(db)
    first = run(lambda: with_embedder(cfg, lambda e: e.embed(texts), first_cache))
    first_cache.flush()
    assert fake_llm.calls == 1

    second_cache = StoreCache(db)
    keys = open_embedder(cfg).keys([*texts, texts[0]])
    assert len(keys) == 3  # each text once
    with Store.open(db) as store:
        assert second_cache.preload(store, keys) == 3
        rows = store.con.execute("select provider, model, response, input_tokens from cache order by key").fetchall()
    assert {r[:3] for r in rows} == {("emb", "text-embedding-3-small", "")}
    assert sum(r[3] for r in rows) == 9  # the request's tokens shared among its texts

    async def again(embedder: RunEmbedder) -> Any:
        got = await embedder.embed(texts)
        return got, embedder.calls, embedder.cached

    replayed, calls, cached = run(lambda: with_embedder(cfg, again, second_cache))
    assert fake_llm.calls == 1  # nothing sent again
    assert (calls, cached, replayed.cached) == (0, 3, 3)
    assert replayed.vectors == first.vectors
    assert replayed.reported_model == "emb-model-3"


def test_no_cache_reads_nothing_but_still_writes(fake_llm: FakeServer) -> None:
    fake_llm.handler = answer_embeddings
    cache = MemoryCache()
    cfg = config(fake_llm)
    run(lambda: with_embedder(cfg, lambda e: e.embed(["cached text"]), cache))

    async def unread(embedder: RunEmbedder) -> Any:
        return await embedder.embed(["cached text"])

    def fresh_embedder() -> RunEmbedder:
        from evalkit.providers import endpoint_identity
        from evalkit.providers.embeddings import build_embeddings

        return RunEmbedder(build_embeddings(cfg), cache=cache, read_cache=False, endpoint=endpoint_identity(cfg))

    async def main() -> Any:
        embedder = fresh_embedder()
        try:
            return await unread(embedder)
        finally:
            await embedder.aclose()

    got = run(main)
    assert fake_llm.calls == 2
    assert got.cached == 0
    assert cache.puts == 2


def test_an_instance_with_cache_false_keeps_its_embeddings_out(fake_llm: FakeServer) -> None:
    fake_llm.handler = answer_embeddings
    cache = MemoryCache()
    run(lambda: with_embedder(config(fake_llm, cache=False), lambda e: e.embed(["x y"]), cache))
    assert cache.puts == 0


def test_vectors_of_two_models_are_never_compared(fake_llm: FakeServer) -> None:
    cache = MemoryCache()
    cfg = config(fake_llm)
    fake_llm.handler = answer_embeddings
    run(lambda: with_embedder(cfg, lambda e: e.embed(["Refunds are possible"]), cache))
    fake_llm.handler = lambda request: Reply(json=embeddings_body(list(request.json["input"]), model="emb-model-4"))
    with pytest.raises(EmbeddingError, match=r"different models \(emb-model-3, emb-model-4\)"):
        run(lambda: with_embedder(cfg, lambda e: e.similarity("Refunds within 14 days", "Refunds are possible"), cache))


def test_a_completion_under_an_embedding_key_is_no_vector(fake_llm: FakeServer) -> None:
    from evalkit.providers import endpoint_identity
    from evalkit.records import ServingRecord

    cfg = config(fake_llm)
    cache = MemoryCache()
    key = embedding_key("emb", "text", model="text-embedding-3-small", endpoint=endpoint_identity(cfg))
    cache.entries[key] = Completion("an answer", ServingRecord("emb", "text-embedding-3-small", "m"), cached=True)
    fake_llm.handler = answer_embeddings
    got = run(lambda: with_embedder(cfg, lambda e: e.embed(["text"]), cache))
    assert fake_llm.calls == 1
    assert got.cached == 0


class MemoryCache:
    """The completion cache's protocol over a dict (the database one is tested above)."""

    def __init__(self) -> None:
        self.entries: dict[str, Completion] = {}
        self.puts = 0

    def get(self, key: str) -> Completion | None:
        return self.entries.get(key)

    def put(self, key: str, completion: Completion, endpoint: str | None = None) -> None:
        self.puts += 1
        self.entries[key] = completion


# ---- which instances can embed ----


def test_only_openai_and_local_instances_embed(fake_llm: FakeServer) -> None:
    with pytest.raises(InputError) as caught:
        check_embeddings(ProviderConfig(id="claude", adapter="anthropic", model="claude-x", where="evalkit.yaml:4:14"))
    assert str(caught.value) == (
        "evalkit.yaml:4:14: provider 'claude' (adapter anthropic) cannot embed texts: name an instance with "
        "adapter openai (an OpenAI-compatible /embeddings endpoint) or local under embeddings:"
    )
    check_embeddings(config(fake_llm))
    assert isinstance(build_embeddings(config(fake_llm)), OpenAIEmbeddings)


def test_an_openai_instance_without_a_model_alias_cannot_embed(fake_llm: FakeServer) -> None:
    with pytest.raises(InputError, match="provider 'emb' has no model alias"):
        check_embeddings(config(fake_llm, model=None))


def test_an_unset_key_is_refused_before_any_call(fake_llm: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVALKIT_EMB_KEY_UNSET", raising=False)
    with pytest.raises(InputError, match="environment variable EVALKIT_EMB_KEY_UNSET is not set"):
        check_embeddings(config(fake_llm, api_key_env="EVALKIT_EMB_KEY_UNSET"))
    assert fake_llm.calls == 0


def test_embeddings_go_through_the_instances_proxy(fake_llm: FakeServer) -> None:
    from tests.proxyserver import ProxyServer

    proxy = ProxyServer().start()
    try:
        fake_llm.handler = answer_embeddings
        got = run(lambda: embed_once(config(fake_llm, proxy=proxy.url), ["via the proxy"]))
    finally:
        proxy.stop()
    assert [(r.method, r.target) for r in proxy.requests] == [("POST", f"{fake_llm.url}/v1/embeddings")]
    assert got.vectors == (tuple(vector_of("via")),)


def test_a_slow_endpoint_times_out_as_an_embedding_error(fake_llm: FakeServer) -> None:
    fake_llm.handler = lambda request: Reply(json=embeddings_body(list(request.json["input"])), delay_s=1.0)
    with pytest.raises(EmbeddingError) as caught:
        run(lambda: embed_once(config(fake_llm, timeout_s=0.2, max_retries=0), ["slow"]))
    assert str(caught.value) == "provider 'emb': timed out after 0.2 s (after 1 attempt)"
