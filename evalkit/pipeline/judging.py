"""Planning the model-graded assertions: which instance serves each, checked before any call
(README "Model-graded assertions").

Under ``--grader decision`` the decision grader replaces the assertions, model-graded ones
included, so nothing is asked of their instances and nothing here applies. Otherwise every
model-graded assertion needs an instance (``judge:``, else ``decision:``; ``embeddings:`` for
``similar``; or ``provider:`` on the assertion) that is configured and usable (its key present),
and ``factuality: true`` a prompt with a ``reference``: exit 2 naming the assertion's
file:line:col, nothing called, nothing stored.
"""

from __future__ import annotations

from collections.abc import Sequence

from evalkit.assertions.judged import EMBEDDINGS, JUDGE
from evalkit.config import Config
from evalkit.errors import InputError
from evalkit.pipeline.plans import JudgedPlan, Target
from evalkit.providers import check_provider, default_alias
from evalkit.providers.embeddings import check_embeddings
from evalkit.records import PromptSet
from evalkit.sets.judged import default_instance, problems, served

SERVICES = (JUDGE, EMBEDDINGS)


def plan_judged(sets: Sequence[PromptSet], config: Config, grader: str) -> JudgedPlan | None:
    """The checked instances of the sets' model-graded assertions; None when there are none or the
    decision grader replaces them."""
    if grader == "decision":
        return None
    found: list[str] = []
    needed: dict[str, set[str]] = {}
    for prompt_set in sets:
        where = str(prompt_set.path or prompt_set.id)
        found += [f"{at}: {said}" for at, said in problems(prompt_set.prompts, config, where)]
        for _, one in served(prompt_set.prompts, config, where):
            if one.instance is not None:
                needed.setdefault(one.instance, set()).add(one.service)
    if found:
        more = f" (and {len(found) - 1} more: evalkit validate lists them)" if len(found) > 1 else ""
        raise InputError(found[0] + more)
    if not needed:
        return None
    targets = []
    for instance_id, services in needed.items():
        instance = config.provider(instance_id)
        if EMBEDDINGS in services:
            check_embeddings(instance)  # an adapter that cannot embed, a missing key or model file
        if JUDGE in services:
            check_provider(instance)  # a missing key or model file fails here, not at the first judgement
        targets.append(Target(instance, default_alias(instance)))
    defaults = {service: default_instance(config, service) for service in SERVICES}
    return JudgedPlan(tuple(targets), defaults, {i: frozenset(s) for i, s in needed.items()})
