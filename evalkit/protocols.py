"""Interfaces between layers, as structural types.

The runner wires concrete objects together; the layers below only know these shapes (the
decision grader receives a ``Provider``, the runner a ``CompletionCache``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from evalkit.records import Completion, CompletionRequest, Grade, Prompt, PromptSet, ServingRecord


class Provider(Protocol):
    """A model endpoint. ``complete`` retries transient faults itself and raises
    ``ProviderError`` when they persist, ``ProviderRefused`` when no retry can help."""

    @property
    def instance_id(self) -> str: ...

    @property
    def adapter(self) -> str: ...

    async def complete(self, request: CompletionRequest) -> Completion: ...

    async def aclose(self) -> None: ...


class Grader(Protocol):
    """Grades one answer to one prompt of a set."""

    name: str

    async def grade(
        self, prompt_set: PromptSet, prompt: Prompt, response: str, serving: ServingRecord | None
    ) -> Grade: ...


class CompletionCache(Protocol):
    """Completions keyed by provider instance, alias, messages and params."""

    def get(self, key: str) -> Completion | None: ...

    def put(self, key: str, completion: Completion) -> None: ...


class Retriever(Protocol):
    """Returns ranked document ids for a question, and optional provenance."""

    id: str

    def search(self, question: str, limit: int) -> Sequence[str]: ...
