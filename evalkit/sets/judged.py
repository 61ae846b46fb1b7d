"""Which instance serves each model-graded assertion of a set, checked against evalkit.yaml
(README "Model-graded assertions").

``validate`` and planning ask the same question, so a set that ``run`` would refuse is refused by
``validate`` with the same words: a model-graded assertion with no instance to serve it (no
``judge:`` / ``decision:`` for ``rubric`` and ``factuality``, no ``embeddings:`` for ``similar``),
an instance named on an assertion that is not configured, and ``factuality: true`` on a prompt
without a ``reference``. Each problem names the assertion's file:line:col.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from evalkit.assertions.judged import EMBEDDINGS, JUDGE, judged_value, service_of
from evalkit.config import Config
from evalkit.records import Prompt

SECTION_HINT = {
    JUDGE: "set judge: {provider: ID} (or decision: {provider: ID}) in evalkit.yaml, or provider: ID on the assertion",
    EMBEDDINGS: "set embeddings: {provider: ID} in evalkit.yaml, or provider: ID on the assertion",
}


@dataclass(frozen=True, slots=True)
class Served:
    """One model-graded assertion and the instance that serves it."""

    where: str  # file:line:col of the assertion (the set file when unknown)
    kind: str  # rubric | factuality | similar
    service: str  # judge | embeddings
    instance: str | None  # None: none configured
    on_reference: bool = False  # factuality: true (the prompt's reference are the facts)


def default_instance(config: Config, service: str) -> str | None:
    """The instance a service's assertions use when they name none."""
    return config.embeddings_provider if service == EMBEDDINGS else config.judge


def served(prompts: Iterable[Prompt], config: Config, fallback_where: str) -> Iterator[tuple[Prompt, Served]]:
    """Every model-graded assertion of ``prompts`` with the instance that serves it."""
    for prompt in prompts:
        for assertion in prompt.assertions:
            value = judged_value(assertion)
            if value is None:
                continue
            service = service_of(value)
            where = str(assertion.where) if assertion.where is not None else fallback_where
            instance = value.provider or default_instance(config, service)
            yield prompt, Served(where, value.kind, service, instance, value.text is None)


def problems(prompts: Iterable[Prompt], config: Config, fallback_where: str) -> list[tuple[str, str]]:
    """What ``run`` would refuse, each as (``file:line:col``, what to do)."""
    found: list[tuple[str, str]] = []
    known = {p.id for p in config.providers}
    for prompt, one in served(prompts, config, fallback_where):
        if one.instance is None:
            found.append((one.where, f"{one.kind} needs {_article(one.service)}: {SECTION_HINT[one.service]}"))
        elif one.instance not in known:
            listed = ", ".join(sorted(known)) or "none configured"
            found.append(
                (
                    one.where,
                    f"{one.kind}: unknown provider instance '{one.instance}' (known: {listed}); "
                    "add it under providers: in evalkit.yaml",
                )
            )
        if one.on_reference and not (prompt.reference or "").strip():
            found.append(
                (
                    one.where,
                    f"factuality: true compares with the prompt's reference, and prompt "
                    f"'{prompt.id}' has none; add reference: to it or write the facts as the value",
                )
            )
    return found


def _article(service: str) -> str:
    return "a judge" if service == JUDGE else "an embeddings instance"
