"""The local model's server (``providers.local.LocalServer``), one for the chat adapter and the
embeddings: started once however many callers ask at the same time, and a model file llama.cpp
cannot load fails the first call and every later one with the same error, without a second
start. The real xllamacpp runtime on a file that is no model."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from evalkit.config import ProviderConfig
from evalkit.errors import EmbeddingError, ProviderRefused
from evalkit.providers import local
from evalkit.providers.embeddings import LocalEmbeddings
from evalkit.providers.local import LocalProvider
from evalkit.records import CompletionRequest, Message


def counted_starts(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Every start of a llama.cpp server from now on, by its embedding mode."""
    starts: list[bool] = []
    real = local.start_server

    def counting(config: ProviderConfig, path: Path, *, embedding: bool = False) -> tuple[Any, str]:
        starts.append(embedding)
        return real(config, path, embedding=embedding)

    monkeypatch.setattr(local, "start_server", counting)
    return starts


def ask(provider: LocalProvider) -> Callable[[], Awaitable[object]]:
    request = CompletionRequest((Message("user", "Say hi."),), "local", {"max_tokens": 4})
    return lambda: provider.complete(request)


def embed(embeddings: LocalEmbeddings) -> Callable[[], Awaitable[object]]:
    return lambda: embeddings.embed(["hello"])


def outcomes(client: Any, call: Callable[[], Awaitable[object]], times: int) -> list[object]:
    async def calls() -> list[object]:
        try:
            first = await asyncio.gather(*(call() for _ in range(times)), return_exceptions=True)
            return [*first, *(await asyncio.gather(call(), return_exceptions=True))]
        finally:
            await client.aclose()

    return asyncio.run(calls())


@pytest.mark.parametrize("kind", ["chat", "embeddings"])
def test_a_model_file_llama_cpp_cannot_load_fails_every_call_with_one_error_and_one_start(
    local_model: None, isolated: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    bogus = isolated / "broken.gguf"
    bogus.write_bytes(b"GGUF but no model in it")
    config = ProviderConfig(id="cpu", adapter="local", model="tiny", model_path=bogus)
    starts = counted_starts(monkeypatch)
    if kind == "chat":
        provider = LocalProvider(config)
        failed = outcomes(provider, ask(provider), 3)
        expected: type[Exception] = ProviderRefused
    else:
        embeddings = LocalEmbeddings(config)
        failed = outcomes(embeddings, embed(embeddings), 3)
        expected = EmbeddingError
    assert starts == [kind == "embeddings"]  # once, in its mode, for four callers
    assert len(failed) == 4
    assert all(error is failed[0] for error in failed)
    assert type(failed[0]) is expected
    assert str(failed[0]).startswith(f"provider 'cpu': cannot load the model file {bogus} (")
    if kind == "embeddings":
        assert getattr(failed[0], "refused", False) is True


@pytest.mark.model
def test_the_real_model_is_started_once_for_concurrent_callers(
    local_model: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    starts = counted_starts(monkeypatch)
    provider = LocalProvider(ProviderConfig(id="cpu", adapter="local"))
    answers = outcomes(provider, ask(provider), 3)
    assert starts == [False]
    assert [type(a).__name__ for a in answers] == ["Completion"] * 4
    assert provider.address is not None
    assert provider.address.startswith("http://127.0.0.1:")
