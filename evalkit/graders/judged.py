"""The judged grader: the deterministic grader with model-graded assertions (README "Model-graded
assertions").

A prompt without model-graded assertions is graded as the deterministic grader grades it, with
no call. For one with them, each distinct model-graded assertion is judged by its kind
(``evalkit.graders.judging``) through the instance that serves it, all at once, each instance
holding at most its ``max_concurrency`` judgements in flight; their outcomes then go through the
deterministic grader's one scoring loop (weights, thresholds, ``not_`` forms and reasons as for
any type). A failed judgement leaves its assertion undecided and errors the item with the reason.

Identity: an item names the yardstick ``judged:<identities>`` (each serving
``<instance>:<reported model>``), ``judged`` when some of its judgements failed and
``judged:failed`` when all did; ``stored_grader`` makes the run's name from its items'.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from evalkit.assertions.judged import EMBEDDINGS, JudgedValue, judged_value, service_of
from evalkit.assertions.registry import Outcome
from evalkit.config import Cost
from evalkit.graders import rubric, similar  # noqa: F401  (register rubric, factuality and similar)
from evalkit.graders.deterministic import DeterministicGrader
from evalkit.graders.judging import KINDS, Instance, JudgedKind, Judgement, Task
from evalkit.records import AssertionResult, CallFacts, Grade, ItemResult, Prompt, PromptSet, ServingRecord, Usage
from evalkit.records.sets import Assertion
from evalkit.verdicts import JUDGED, Yardstick

NAME = JUDGED


class JudgedGrader:
    """Grades by assertions, asking the judge and embeddings instances for the model-graded ones."""

    name = NAME

    def __init__(
        self,
        instances: Mapping[str, Instance],
        defaults: Mapping[str, str | None],
        costs: Mapping[str, Cost | None] | None = None,
        limits: Mapping[str, int] | None = None,
        embedders: Mapping[str, Instance] | None = None,
    ) -> None:
        """``instances``: the judges by id; ``embedders``: the embeddings instances by id (one
        instance may serve both); ``defaults``: the instance of each service (judge, embeddings)
        for assertions that name none; ``costs`` and ``limits``: each instance's price and
        concurrency."""
        self.instances = instances
        self.embedders = embedders or {}
        self.defaults = defaults
        self.costs = costs or {}
        self.limits = limits or {}
        self.plain = DeterministicGrader()
        self._gates: dict[str, asyncio.Semaphore] = {}  # made in the running loop
        self._judged: dict[int, tuple[Prompt, bool]] = {}  # by the prompt's id, the prompt kept

    def judges(self, prompt: Prompt) -> bool:
        """Whether grading ``prompt`` calls a model."""
        known = self._judged.get(id(prompt))
        if known is None or known[0] is not prompt:
            known = self._judged[id(prompt)] = (prompt, any(judged_value(a) is not None for a in prompt.assertions))
        return known[1]

    def name_for(self, prompt_set: PromptSet) -> str:
        """The grader a run of the set is stored under before its items say more: ``judged``
        when it has model-graded assertions, else ``deterministic``."""
        return NAME if any(self.judges(p) for p in prompt_set.prompts) else self.plain.name

    async def grade(
        self,
        prompt_set: PromptSet,
        prompt: Prompt,
        response: str,
        serving: ServingRecord | None,
        call: CallFacts | None = None,
    ) -> Grade:
        if not self.judges(prompt):
            return await self.plain.grade(prompt_set, prompt, response, serving, call)
        task = Task(prompt_set, prompt, response, call.tool_calls if call else ())
        wanted = judged_values(prompt.assertions)
        verdicts = await asyncio.gather(*(self._judge(value, task) for value in wanted.values()))
        by_value = dict(zip(wanted, verdicts, strict=True))
        outcomes: dict[JudgedValue, Outcome] = {key: j.outcome for key, (j, _) in by_value.items()}
        grade = await self.plain.grade(prompt_set, prompt, response, serving, call, judgements=outcomes)
        return self._with_judgements(grade, prompt.assertions, by_value)

    def instance_id(self, value: JudgedValue) -> str:
        """The instance serving ``value``: the one it names, else its service's default."""
        return value.provider or self.defaults.get(service_of(value)) or ""

    def judge_of(self, value: JudgedValue) -> tuple[JudgedKind, Instance] | None:
        """The kind that evaluates ``value`` and the instance serving it; None when either is unknown."""
        serving = self.embedders if service_of(value) == EMBEDDINGS else self.instances
        instance = serving.get(self.instance_id(value))
        kind = KINDS.get(value.kind)
        return None if kind is None or instance is None else (kind, instance)

    async def _judge(self, value: JudgedValue, task: Task) -> tuple[Judgement, str]:
        found = self.judge_of(value)
        if found is None:  # planning refuses both: a Python API caller's mistake
            instance_id = self.instance_id(value)
            return Judgement.failed(value.kind, f"no {service_of(value)} instance '{instance_id}' to ask"), instance_id
        kind, instance = found
        instance_id = instance.id
        gate = self._gates.get(instance_id)
        if gate is None:
            gate = self._gates[instance_id] = asyncio.Semaphore(max(1, self.limits.get(instance_id, 8)))
        async with gate:
            return await kind.judge(value, task, instance), instance_id

    def _with_judgements(
        self, grade: Grade, assertions: Sequence[Assertion], by_value: Mapping[JudgedValue, tuple[Judgement, str]]
    ) -> Grade:
        """The grade with each judged assertion's yardstick, the item's, its calls, cost and error."""
        results: list[AssertionResult] = []
        for assertion, result in zip(assertions, grade.assertions, strict=True):
            value = judged_value(assertion)
            found = by_value.get(value) if value is not None else None
            results.append(replace(result, yardstick=found[0].yardstick) if found else result)
        judgements = [j for j, _ in by_value.values()]
        failures = [j.failure for j in judgements if j.failure]
        usage = sum((j.usage for j in judgements), Usage())
        return replace(
            grade,
            assertions=tuple(results),
            yardstick=_item_yardstick(judgements),
            usage=usage,
            cached=all(j.calls and j.cached == j.calls for j in judgements),
            error="; ".join(failures) or None,
            judge_calls=sum(j.calls for j in judgements),
            judge_cached=sum(j.cached for j in judgements),
            cost=self._cost(by_value.values()),
        )

    def _cost(self, judged: Iterable[tuple[Judgement, str]]) -> float | None:
        total, priced = 0.0, False
        for judgement, instance_id in judged:
            price = self.costs.get(instance_id)
            if price is not None:
                priced = True
                total += price.of(judgement.usage.input_tokens, judgement.usage.output_tokens)
        return total if priced else None


def judged_values(assertions: Sequence[Assertion]) -> dict[JudgedValue, JudgedValue]:
    """The prompt's model-graded values, each once (equal values written apart share one check)."""
    found: dict[JudgedValue, JudgedValue] = {}
    for assertion in assertions:
        value = judged_value(assertion)
        if value is not None:
            found[value] = value
    return found


def _item_yardstick(judgements: Sequence[Judgement]) -> str:
    failed = [j for j in judgements if j.served_by is None]
    if failed and len(failed) == len(judgements):
        return str(Yardstick(JUDGED, failed=True))
    if failed:
        return JUDGED
    return str(Yardstick.judged_by(j.served_by for j in judgements if j.served_by))


def stored_grader(items: Sequence[ItemResult]) -> str | None:
    """The grader a run with model-graded assertions is stored under (README "Model-graded
    assertions"): ``judged:<identities>`` when every judgement succeeded and each instance
    reported one model, ``judged`` when some failed or an instance's model changed,
    ``judged:failed`` when all failed; None when no item was judged."""
    marks = [Yardstick.parse(i.yardstick) for i in items if i.yardstick and i.yardstick.startswith(JUDGED)]
    if not marks:
        return None
    if all(m.failed for m in marks):
        return str(Yardstick(JUDGED, failed=True))
    if any(not m.identities for m in marks):
        return JUDGED
    served = {identity for m in marks for identity in m.identities}
    instances = [identity.partition(":")[0] for identity in served]
    if len(instances) != len(set(instances)):  # one instance, two models: the judge changed mid-run
        return JUDGED
    return str(Yardstick.judged_by(served))
