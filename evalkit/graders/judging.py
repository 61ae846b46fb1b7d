"""The seam of model-graded assertions (README "Model-graded assertions"): what one asks of the
instance serving it, and what it gives back.

A model-graded type is a ``JudgedKind`` registered here by name (``register``): the judged grader
(``evalkit.graders.judged``) finds the assertions of a prompt whose checked value is a
``JudgedValue`` (``evalkit.assertions.judged``), gives each kind its value, the ``Task`` (what was
asked and answered) and the ``service`` that serves it, and awaits its ``Judgement``. The grader,
not the kind, holds the instance's concurrency, prices the tokens and names the run's grader; the
kind only asks and reads the answer.

- ``service`` is the evalkit.yaml section whose instance serves the kind: ``judge`` (a
  ``Provider`` seen through the completion cache, ``runner.CachedProvider``: its ``complete`` reads
  and fills the cache and runs with the instance's retries and timeout) or ``embeddings``.
- ``judge(value, task, instance)`` makes the calls and returns a ``Judgement``. It never raises for
  an answer it cannot use: that is a failed judgement (``failure`` says why; the item is errored).
  A ``ProviderRefused`` (a key refused, an unknown model) is raised: it stops the run.
- A ``Judgement`` names ``served_by``, the ``<instance>:<reported model>`` of the call that measured
  it (the run's grader is ``judged:<every served_by>``), its ``yardstick``
  ``<profile>:<instance>:<reported model>:v<version>``, its calls, cached calls and the tokens of
  those not cached.

Adding a kind (``similar`` is one: ``evalkit.graders.similar``): its value check registers in
``evalkit.assertions.judged`` (``JudgedValue(kind, text, threshold, provider)``); its evaluation is
one module here that registers an object with ``service`` ``judge`` or ``embeddings`` and
``async judge(value, task, instance) -> Judgement``, where ``instance.client`` is the judge or
the run's embedder (``providers.embedder.RunEmbedder``), both through the completion cache, and
``instance.alias`` the model sent; it returns its ``Outcome`` with ``served_by``
``<instance>:<reported model>`` and its calls, cached calls and tokens. ``pipeline.instances``
builds each instance's client by what it serves (``JudgedPlan.services``); the grader's
identity, concurrency, pricing, JSON and reports need no change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from evalkit.assertions.registry import Outcome
from evalkit.records import PromptSet, ServingRecord, ToolCall, Usage, record
from evalkit.records.sets import Prompt


@record
class Task:
    """What a judge sees: the set and prompt (the system prompt and the whole conversation), the
    answer, its tool calls."""

    prompt_set: PromptSet
    prompt: Prompt
    response: str
    tool_calls: tuple[ToolCall, ...] = ()


@record
class Judgement:
    """One model-graded assertion's verdict and what it cost."""

    outcome: Outcome  # undecided when the judgement failed
    served_by: str | None = None  # <instance>:<reported model>; None when nothing measured it
    yardstick: str | None = None  # <profile>:<instance>:<reported model>:v<version>
    calls: int = 0
    cached: int = 0
    usage: Usage = Usage()  # of the calls not answered by the cache
    failure: str | None = None  # why no judgement was reached

    @classmethod
    def failed(cls, kind: str, why: str, calls: int = 0, cached: int = 0, usage: Usage | None = None) -> Judgement:
        reason = f"{kind}: judgement failed: {why}"
        return cls(Outcome(False, 0.0, reason, undecided=True), None, None, calls, cached, usage or Usage(), reason)


@record
class Instance:
    """The instance serving a kind: its client (for ``judge`` a ``Provider`` through the completion
    cache; for ``embeddings`` the embeddings client) and the model alias sent to it."""

    id: str
    client: Any
    alias: str


class JudgedKind(Protocol):
    """A model-graded assertion type's evaluation (its value check is in evalkit.assertions)."""

    service: str  # judge | embeddings

    async def judge(self, value: Any, task: Task, instance: Instance) -> Judgement: ...


def served_by(serving: ServingRecord | None, instance: str) -> str:
    """``<instance>:<reported model>``; the model ends ``?`` when the instance reported none."""
    if serving is None:
        return f"{instance}:?"
    return f"{serving.provider}:{serving.reported_model or f'{serving.model}?'}"


_KINDS: dict[str, JudgedKind] = {}
KINDS: Mapping[str, JudgedKind] = _KINDS


def register(name: str, kind: JudgedKind) -> None:
    """Register the evaluation of the model-graded type ``name``; a name registered twice is refused."""
    if name in _KINDS:
        raise ValueError(f"model-graded assertion type {name!r} is registered twice")
    _KINDS[name] = kind
