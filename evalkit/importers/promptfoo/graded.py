"""promptfoo's model-graded assertions -> evalkit's (README "Coming from promptfoo", "Model-graded
assertions"):

    llm-rubric, model-graded-closedqa     rubric: the rubric (the criterion)
    factuality, model-graded-factuality   factuality: the facts
    similar, similar:cosine               similar: the expected text, ``min`` its threshold
                                          (promptfoo's default 0.75 written out: evalkit's is 0.8)

A ``threshold`` is kept (``min`` for similar), and so are ``weight`` and ``not-``. A ``provider``
(the assertion's, else the test's ``options.provider``) that is one of the config's providers
becomes ``provider:`` naming the instance the import made of it; any other is listed with a
hint, and the assertion asks evalkit.yaml's ``judge:`` (``embeddings:`` for similar) instead.
The value is rendered with the test's vars, as promptfoo renders it; a value evalkit cannot take
(empty, a list of several expected texts, a threshold outside 0..1) is not converted, with a hint.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

RUBRIC = ("llm-rubric", "model-graded-closedqa")
FACTUALITY = ("factuality", "model-graded-factuality")
SIMILAR = ("similar", "similar:cosine")
GRADED = frozenset((*RUBRIC, *FACTUALITY, *SIMILAR))
PROMPTFOO_SIMILAR_THRESHOLD = 0.75  # promptfoo's default for similar

NOTES = {
    "llm-rubric": "llm-rubric -> rubric: promptfoo's judge says pass or fail; evalkit's (the judge: instance of "
    "evalkit.yaml, or provider:) rates the answer on five levels, holding at level 3 of 4 or more (score 0.6, or "
    "the threshold)",
    "model-graded-closedqa": "model-graded-closedqa -> rubric: promptfoo asks a yes/no question of the criterion; "
    "evalkit's judge rates how well the answer meets it on five levels (holds at score 0.6)",
    "factuality": "factuality: promptfoo's judge picks one of five relations (A-E) to the facts; evalkit's rates the "
    "agreement on five levels (holds at score 0.6), so a superset or subset of the facts is judged by the level",
    "similar": "similar: evalkit compares embeddings from the embeddings: instance of evalkit.yaml (an "
    "OpenAI-compatible /embeddings endpoint, or the local model), where promptfoo used its default embedding model",
}
HINTS = {
    "similar:dot": "evalkit's similar is the cosine similarity; similar:cosine (or similar) converts",
    "similar:euclidean": "evalkit's similar is the cosine similarity; similar:cosine (or similar) converts",
    "g-eval": "G-Eval's criteria and its step-by-step scoring have no evalkit equivalent; write the criteria as a "
    "rubric: (a judge rates the answer on five levels)",
    "answer-relevance": "it embeds questions generated from the answer; a rubric: such as 'answers the question "
    "that was asked' is the nearest evalkit check",
}


class Refused(Exception):
    """The assertion cannot be converted; the message is the hint."""


def convert_graded(base: str, assertion: Mapping[str, Any], value: Any, instances: Mapping[str, str]) -> tuple[
    str, dict[str, Any], list[str], list[str]
]:  # fmt: skip
    """(evalkit type, its parts beside the type: value, threshold or min, provider; why it is
    partly converted; notes) for the model-graded type ``base`` whose rendered value is ``value``."""
    kind = "rubric" if base in RUBRIC else "factuality" if base in FACTUALITY else "similar"
    parts: dict[str, Any] = {"value": _text(kind, base, value)}
    threshold = assertion.get("threshold")
    if kind == "similar":
        parts["min"] = _unit(PROMPTFOO_SIMILAR_THRESHOLD if threshold is None else threshold, base)
    elif threshold is not None:
        parts["threshold"] = _unit(threshold, base)
    partly: list[str] = []
    provider, why = map_provider(assertion.get("provider"), instances, kind)
    if provider is not None:
        parts["provider"] = provider
    if why:
        partly.append(why)
    return kind, parts, partly, [NOTES[base if base in NOTES else kind]]


def item(name: str, parts: Mapping[str, Any], weight: float) -> dict[str, Any]:
    """The evalkit assertion: ``{rubric: TEXT}`` when it is the value alone, else the long form
    ``{type, value, threshold | min, weight, provider}``."""
    if set(parts) == {"value"} and weight == 1:
        return {name: parts["value"]}
    return {"type": name, "value": parts["value"], **{k: v for k, v in parts.items() if k != "value"}} | (
        {"weight": weight} if weight != 1 else {}
    )


def _text(kind: str, base: str, value: Any) -> str:
    if kind == "similar" and isinstance(value, list):
        if len(value) != 1:
            raise Refused(
                "promptfoo passes when any of several expected texts is similar; evalkit's similar compares one: "
                "write one similar per text you require, or keep the closest"
            )
        value = value[0]
    if isinstance(value, bool) or not isinstance(value, str | int | float) or not str(value).strip():
        what = {"rubric": "the rubric", "factuality": "the facts", "similar": "the expected text"}[kind]
        raise Refused(f"{base} needs {what} as its value (a non-empty string)")
    return value if isinstance(value, str) else str(value)


def _unit(threshold: Any, base: str) -> float | int:
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, int | float)
        or not math.isfinite(threshold)
        or not 0 <= threshold <= 1
    ):
        raise Refused(f"{base} threshold {threshold!r}: evalkit's is a number in 0..1")
    return threshold


def map_provider(provider: Any, instances: Mapping[str, str], kind: str) -> tuple[str | None, str]:
    """The instance a promptfoo grading provider names (None: the configured judge or embeddings
    instance) and, when it is not one of the config's providers, why the assertion is partly converted."""
    if provider is None:
        return None, ""
    if isinstance(provider, Mapping) and not isinstance(provider.get("id"), str):  # {text: ..., embedding: ...}
        provider = provider.get("embedding" if kind == "similar" else "text")
        if provider is None:
            return None, ""
    ident = provider.get("id") if isinstance(provider, Mapping) else provider
    if kind == "similar":
        return None, _embedding_hint(ident)
    if isinstance(ident, str) and instance_key(ident) in instances:
        return instances[instance_key(ident)], ""
    shown = ident if isinstance(ident, str) else "its grading provider"
    return None, (
        f"grading provider {shown} is not one of the config's providers: add an evalkit.yaml instance for it and "
        "name it with provider: on the assertion, or as judge: {provider: ID}"
    )


def _embedding_hint(ident: Any) -> str:
    """similar embeds with an embedding model: promptfoo's ``openai:embedding:<model>`` is said as
    the evalkit.yaml instance to add; a chat provider (a test's grading provider) promptfoo itself
    passes over for its default embedding model, and so does the import."""
    parts = ident.split(":") if isinstance(ident, str) else []
    if len(parts) < 3 or parts[1] not in ("embedding", "embeddings"):
        return ""
    model = ":".join(parts[2:])
    return (
        f"embedding provider {ident}: add an evalkit.yaml instance {{id: ID, adapter: openai, model: {model}}} "
        "and name it as embeddings: {provider: ID} (or provider: ID on the assertion)"
    )


def instance_key(ident: str) -> str:
    """A promptfoo provider id as the import matches it: ``openai:gpt-4o`` is ``openai:chat:gpt-4o``,
    ``anthropic:claude-x`` is ``anthropic:messages:claude-x``."""
    parts = ident.split(":")
    if len(parts) == 2 and parts[0] in ("openai", "anthropic"):
        return f"{parts[0]}:{'chat' if parts[0] == 'openai' else 'messages'}:{parts[1]}"
    return ident
