"""The providers' batch APIs: many chat requests sent as one job, answered later at a discount
(README "Batches").

- OpenAI (and OpenAI-compatible endpoints): the requests as a JSONL file uploaded to ``/files``
  with purpose ``batch``, ``POST /batches`` for ``/v1/chat/completions``, ``GET /batches/{id}``
  polled, the answers read from ``/files/{output_file_id}/content`` and the refused requests from
  ``/files/{error_file_id}/content``.
- Anthropic: ``POST /messages/batches`` with ``{"requests": [{"custom_id", "params"}]}``,
  ``GET /messages/batches/{id}`` polled, the answers read from the JSONL at ``results_url``.

Any list of chat requests of one instance can be sent (a run's prompts, a judge's calls): each
request goes under a ``custom_id`` (``custom_ids``), and its answer comes back as the raw body the
instance's own adapter parses (``BatchAnswers``), so a batch answer is graded, cached and priced
like a call's. Results come in any order; a request the provider refused, or one a batch that
expired or was cancelled never answered, is an item error.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from evalkit.config import ProviderConfig
from evalkit.errors import BatchUnanswered, InputError, ProviderError
from evalkit.records import Completion, CompletionRequest, Usage

BATCH_ADAPTERS = ("openai", "anthropic")
MB = 1024 * 1024
# The providers' documented limits per batch (README "Batches"): OpenAI 50,000 requests in an input
# file of at most 200 MB; Anthropic 100,000 requests or 256 MB, whichever comes first.
LIMITS = {"openai": (50_000, 200 * MB), "anthropic": (100_000, 256 * MB)}
RESULTS_MAX_MB = 2048.0  # a results file holds every answer of a batch: far above one answer's bound
BatchAnswer = dict[str, Any] | str  # a request's raw answer body, or its item error
CUSTOM_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


class BatchState(Enum):
    """Where a provider batch is: still working, or ended (its results can be read)."""

    IN_PROGRESS = "in_progress"
    ENDED = "ended"  # completed, or expired / cancelled with what it answered
    FAILED = "failed"  # refused as a whole (a malformed file): every request is an item error

    @property
    def finished(self) -> bool:
        return self is not BatchState.IN_PROGRESS


@dataclass(frozen=True, slots=True)
class BatchStatus:
    state: BatchState
    done: int  # requests answered or failed so far
    total: int
    detail: str = ""  # the provider's own status word, and why a failed batch failed


@dataclass(frozen=True, slots=True)
class BatchResults:
    """A finished batch's answers (raw bodies) and refused requests (their errors), by custom id."""

    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def custom_ids(names: Sequence[str]) -> list[str]:
    """A custom id per request, unique, matching ``^[a-zA-Z0-9_-]{1,64}$`` (Anthropic's rule, kept
    for both): the name itself when it fits and is free, else its fitting characters and a hash
    of it. The caller keeps the mapping to map the answers back."""
    taken: set[str] = set()
    out = []
    for index, name in enumerate(names):
        chosen = name
        if not CUSTOM_ID.fullmatch(name) or name in taken:
            digest = hashlib.sha256(f"{index}\0{name}".encode()).hexdigest()[:12]
            chosen = f"{re.sub(r'[^A-Za-z0-9_-]', '_', name)[:48]}-{digest}"
        taken.add(chosen)
        out.append(chosen)
    return out


def split(sizes: Sequence[int], max_requests: int, max_bytes: int) -> list[range]:
    """Consecutive runs of requests, each within the provider's limits per batch."""
    chunks: list[range] = []
    start, used = 0, 0
    for index, size in enumerate(sizes):
        if index > start and (index - start >= max_requests or used + size > max_bytes):
            chunks.append(range(start, index))
            start, used = index, 0
        used += size
    if start < len(sizes):
        chunks.append(range(start, len(sizes)))
    return chunks


class BatchApi(Protocol):
    """One instance's batch endpoints; ``entry`` encodes one request as the provider wants it."""

    limits: tuple[int, int]

    def entry(self, custom_id: str, request: CompletionRequest) -> bytes: ...

    async def submit(self, entries: Sequence[bytes]) -> str: ...

    async def status(self, batch_id: str) -> BatchStatus: ...

    async def results(self, batch_id: str) -> BatchResults: ...

    async def aclose(self) -> None: ...


def check_adapter(config: ProviderConfig) -> None:
    """Batches exist for openai and anthropic instances; any other is exit 2."""
    if config.adapter not in BATCH_ADAPTERS:
        raise InputError(
            f"--batch: provider '{config.id}' uses the {config.adapter} adapter; provider batches exist for "
            f"{' and '.join(BATCH_ADAPTERS)} instances only: run it without --batch"
        )


def batch_api(config: ProviderConfig) -> BatchApi:
    """The batch endpoints of an openai or anthropic instance; exit 2 for any other adapter."""
    check_adapter(config)
    if config.adapter == "openai":
        from evalkit.providers.openai import OpenAIProvider

        return OpenAIBatches(OpenAIProvider(config))
    from evalkit.providers.anthropic import AnthropicProvider

    return AnthropicBatches(AnthropicProvider(config))


def _lines(data: bytes) -> Iterable[dict[str, Any]]:
    for raw in data.splitlines():
        if raw.strip():
            try:
                line = json.loads(raw)
            except ValueError:
                continue  # a damaged line: its request stays unanswered, an item error
            if isinstance(line, dict) and isinstance(line.get("custom_id"), str):
                yield line


def _message(error: Any) -> str:
    """An error object's message (``{"message"}``, or nested ``{"error": {...}}``), clipped."""
    while isinstance(error, dict) and isinstance(error.get("error"), dict):
        error = error["error"]
    if isinstance(error, dict):
        text = error.get("message") or error.get("type") or error.get("code")
        return str(text)[:300] if text else "refused"
    return str(error)[:300] if error else "refused"


class OpenAIBatches:
    def __init__(self, provider: Any) -> None:
        self.provider = provider
        self.client = provider.client
        self.limits = LIMITS["openai"]
        self.name = f"provider '{provider.instance_id}'"

    def entry(self, custom_id: str, request: CompletionRequest) -> bytes:
        body = self.provider.payload(request)
        line = {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}
        return json.dumps(line, ensure_ascii=False).encode()

    async def submit(self, entries: Sequence[bytes]) -> str:
        data = b"\n".join(entries) + b"\n"
        uploaded = await self.client.upload("files", {"purpose": "batch"}, "evalkit-batch.jsonl", data)
        file_id = uploaded.get("id")
        if not isinstance(file_id, str):
            raise ProviderError(f"{self.name}: the file upload answered no id")
        body = {"input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h"}
        created = await self.client.post_bytes("batches", json.dumps(body).encode())
        return _batch_id(created, self.name)

    async def status(self, batch_id: str) -> BatchStatus:
        body = await self.client.get_json(f"batches/{batch_id}")
        word = str(body.get("status", ""))
        counts = body.get("request_counts") or {}
        done = int(counts.get("completed", 0) or 0) + int(counts.get("failed", 0) or 0)
        total = int(counts.get("total", 0) or 0)
        if word == "failed":
            errors = (body.get("errors") or {}).get("data") or []
            why = "; ".join(_message(e) for e in errors[:3]) if isinstance(errors, list) else ""
            return BatchStatus(BatchState.FAILED, done, total, f"failed{': ' + why if why else ''}")
        if word in ("completed", "expired", "cancelled"):
            return BatchStatus(BatchState.ENDED, done, total, word)
        return BatchStatus(BatchState.IN_PROGRESS, done, total, word or "in_progress")

    async def results(self, batch_id: str) -> BatchResults:
        body = await self.client.get_json(f"batches/{batch_id}")
        results = BatchResults()
        for file_id in (body.get("output_file_id"), body.get("error_file_id")):
            if not isinstance(file_id, str) or not file_id:
                continue
            data = await self.client.get_bytes(f"files/{file_id}/content", RESULTS_MAX_MB)
            for line in _lines(data):
                self._take(line, results)
        return results

    def _take(self, line: dict[str, Any], results: BatchResults) -> None:
        custom_id = line["custom_id"]
        response = line.get("response")
        status = response.get("status_code") if isinstance(response, dict) else None
        body = response.get("body") if isinstance(response, dict) else None
        if status == 200 and isinstance(body, dict) and not line.get("error"):
            results.answers[custom_id] = self.client.masked(body)
            return
        error = line.get("error") or (body.get("error") if isinstance(body, dict) else None)
        where = f"HTTP {status}: " if isinstance(status, int) else ""
        results.errors[custom_id] = self.client.mask(f"{self.name}: batch request refused ({where}{_message(error)})")

    async def aclose(self) -> None:
        await self.provider.aclose()


class AnthropicBatches:
    def __init__(self, provider: Any) -> None:
        self.provider = provider
        self.client = provider.client
        self.limits = LIMITS["anthropic"]
        self.name = f"provider '{provider.instance_id}'"

    def entry(self, custom_id: str, request: CompletionRequest) -> bytes:
        return json.dumps(
            {"custom_id": custom_id, "params": self.provider.payload(request)}, ensure_ascii=False
        ).encode()

    async def submit(self, entries: Sequence[bytes]) -> str:
        created = await self.client.post_bytes("messages/batches", b'{"requests": [' + b",".join(entries) + b"]}")
        return _batch_id(created, self.name)

    async def status(self, batch_id: str) -> BatchStatus:
        body = await self.client.get_json(f"messages/batches/{batch_id}")
        counts = body.get("request_counts") or {}
        numbers = {k: int(counts.get(k, 0) or 0) for k in ("processing", "succeeded", "errored", "canceled", "expired")}
        done = numbers["succeeded"] + numbers["errored"] + numbers["canceled"] + numbers["expired"]
        word = str(body.get("processing_status", ""))
        state = BatchState.ENDED if word == "ended" else BatchState.IN_PROGRESS
        return BatchStatus(state, done, done + numbers["processing"], word or "in_progress")

    async def results(self, batch_id: str) -> BatchResults:
        body = await self.client.get_json(f"messages/batches/{batch_id}")
        url = body.get("results_url")
        if not isinstance(url, str) or not url:
            raise ProviderError(f"{self.name}: batch {batch_id} has ended but gives no results_url")
        results = BatchResults()
        for line in _lines(await self.client.get_bytes(url, RESULTS_MAX_MB)):
            custom_id, result = line["custom_id"], line.get("result")
            kind = result.get("type") if isinstance(result, dict) else None
            if kind == "succeeded" and isinstance(result, dict) and isinstance(result.get("message"), dict):
                results.answers[custom_id] = self.client.masked(result["message"])
            elif kind in ("expired", "canceled"):
                results.errors[custom_id] = f"{self.name}: the batch {kind} this request before answering it"
            else:
                error = result.get("error") if isinstance(result, dict) else None
                results.errors[custom_id] = self.client.mask(f"{self.name}: batch request refused ({_message(error)})")
        return results

    async def aclose(self) -> None:
        await self.provider.aclose()


def _batch_id(created: dict[str, Any], name: str) -> str:
    batch_id = created.get("id")
    if not isinstance(batch_id, str) or not re.fullmatch(r"[A-Za-z0-9_.:-]{1,200}", batch_id):
        raise ProviderError(f"{name}: creating the batch answered no usable id")
    return batch_id


@dataclass(slots=True)
class BatchAnswers:
    """A provider that answers from finished batches (``evalkit collect``): each prompt's request
    gets the answer its custom id received, parsed by the instance's own adapter, or the item
    error its request met; a prompt's request the batch never had is an error, never a live call.
    A request of no prompt (a judge's) gets what the judge's batches hold under its cache key
    (``key`` makes it), its answer or its error; one they do not hold (the plain-text retry after
    an unusable answer) is a call. ``served`` lists the judge's batch answers given, with their
    tokens (the run's batch saving counts them)."""

    instance_id: str
    adapter: str
    parser: Any  # the instance's adapter object: its ``parse(body, request, latency_ms)``
    answers: dict[tuple[str, str], list[BatchAnswer]]  # (set, prompt) -> per repeat
    judged: Mapping[str, BatchAnswer] = field(default_factory=dict)  # a judge's requests, by cache key
    key: Callable[[CompletionRequest], str] | None = None
    served: list[tuple[str, Usage]] = field(default_factory=list)

    async def complete(self, request: CompletionRequest) -> Completion:
        if not request.item_id:  # not a prompt's request: a judge's
            key = self.key(request) if self.key is not None and self.judged else None
            found = self.judged.get(key) if key is not None else None
            if key is None or found is None:
                live: Completion = await self.parser.complete(request)
                return live
            judged = self._parsed(found, request)
            self.served.append((key, judged.usage.checked()))
            return judged
        pending = self.answers.get((request.set_id, request.item_id))
        if not pending:
            raise ProviderError(
                f"provider '{self.instance_id}': no answer in the batch for this request (it was cached when the "
                "batch was submitted and the cache entry is gone, or the submit stopped before sending it)"
            )
        return self._parsed(pending.pop(0), request)

    def _parsed(self, answer: BatchAnswer, request: CompletionRequest) -> Completion:
        if isinstance(answer, str):
            raise BatchUnanswered(answer)
        completion: Completion = self.parser.parse(answer, request, 0.0)
        return completion

    async def aclose(self) -> None:
        await self.parser.aclose()
