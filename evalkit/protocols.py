"""Interfaces between layers, as structural types.

The runner wires concrete objects together; the layers below only know these shapes (the
decision grader receives a ``Provider``, the runner a ``CompletionCache``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from evalkit.records import (
    CallFacts,
    Completion,
    CompletionRequest,
    Embeddings,
    Grade,
    Prompt,
    PromptSet,
    Ranking,
    ServingRecord,
    Similarity,
)


class Provider(Protocol):
    """A model endpoint. ``complete`` retries transient faults itself and raises
    ``ProviderError`` when they persist, ``ProviderRefused`` when no retry can help."""

    @property
    def instance_id(self) -> str: ...

    @property
    def adapter(self) -> str: ...

    async def complete(self, request: CompletionRequest) -> Completion: ...

    async def aclose(self) -> None: ...


class Embedder(Protocol):
    """The embeddings instance of a run, for the ``similar`` assertion (README "Embeddings"):
    each distinct text is embedded once per run, through the completion cache; a failure raises
    ``EmbeddingError`` (a ``ProviderError``) naming the reason."""

    @property
    def instance_id(self) -> str: ...

    async def embed(self, texts: Sequence[str]) -> Embeddings: ...

    async def similarity(self, answer: str, expected: str) -> Similarity: ...

    async def aclose(self) -> None: ...


class Grader(Protocol):
    """Grades one answer to one prompt of a set."""

    name: str

    async def grade(
        self,
        prompt_set: PromptSet,
        prompt: Prompt,
        response: str,
        serving: ServingRecord | None,
        call: CallFacts | None = None,
    ) -> Grade: ...


class CompletionCache(Protocol):
    """Completions keyed by provider instance, endpoint, alias, messages and params; ``put`` keeps
    the endpoint identity beside the entry."""

    def get(self, key: str) -> Completion | None: ...

    def put(self, key: str, completion: Completion, endpoint: str | None = None) -> None: ...


class Retriever(Protocol):
    """A remote retriever (http, command): ranked document ids for a question."""

    @property
    def id(self) -> str: ...

    async def search(self, question: str, limit: int) -> Ranking: ...

    async def aclose(self) -> None: ...
