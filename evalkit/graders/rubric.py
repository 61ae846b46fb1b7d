"""``rubric`` and ``factuality``: one judge call per assertion (README "Model-graded assertions").

Profiles ``evalkit.rubric`` v1 and ``evalkit.factuality`` v1: the texts below are part of each
assertion's yardstick ``<profile>:<instance>:<reported model>:v1`` and must not change without a
new version. The judge sees the task (the system prompt as instructions, the whole conversation
with its roles), the candidate answer, its tool calls when there are any, and the rubric or the
facts; it answers ``{"level": 0-4, "reason": "..."}``, asked for with structured output where the
adapter offers it (openai, anthropic, local), read defensively from its text otherwise. A call
that errors, or an answer with no level 0-4, is asked once more as plain text; failing again, the
judgement fails (the assertion is undecided, the item errored, the reason says why). A request a
provider batch refused or never answered (``BatchUnanswered``, README "Batches") is not asked
again: the judgement fails with the batch's reason. Score = level/4; the assertion holds at
score >= its threshold (default 0.6).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from evalkit.assertions.excerpt import excerpt
from evalkit.assertions.judged import JudgedValue
from evalkit.assertions.registry import Outcome
from evalkit.errors import BatchUnanswered, ProviderError, ProviderRefused
from evalkit.graders.decision import read_level, task_text
from evalkit.graders.judging import Instance, Judgement, Task, register, served_by
from evalkit.protocols import Provider
from evalkit.records import Completion, CompletionRequest, Message, Usage

VERSION = 1
ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "level": {"type": "integer", "enum": [0, 1, 2, 3, 4]},
        "reason": {"type": "string"},
    },
    "required": ["level", "reason"],
    "additionalProperties": False,
}
_ANSWER = 'Answer with a JSON object only: {"level": <0-4>, "reason": "<one sentence>"}'

RUBRIC_SYSTEM = f"""\
You are an impartial evaluator. Rate how well a candidate response meets a rubric.
Judge the response only against the rubric, taking the task it answered into account.
Choose exactly one level:
0: does not meet the rubric at all, or does the opposite of what it asks
1: meets a small part of the rubric; mostly it does not
2: meets part of the rubric; important parts are missing or wrong
3: meets the rubric with minor gaps
4: meets the rubric fully
{_ANSWER}"""

FACTUALITY_SYSTEM = f"""\
You are an impartial evaluator. Rate how well a candidate response agrees with the given facts.
Judge the substance, not the wording; a response may add detail the facts do not cover, but no
claim of it may contradict them.
Choose exactly one level:
0: contradicts the facts
1: mostly disagrees with the facts, or leaves out what they say and claims otherwise
2: partly agrees with the facts; some of its claims disagree with them or are unsupported
3: agrees with the facts but leaves out part of them
4: fully consistent with the facts
{_ANSWER}"""

PROFILES = {
    "rubric": ("evalkit.rubric", RUBRIC_SYSTEM, "Rubric"),
    "factuality": ("evalkit.factuality", FACTUALITY_SYSTEM, "Facts"),
}


def judge_messages(kind: str, task: Task, criteria: str) -> tuple[Message, ...]:
    """The profile's system text, then the task, the tool calls, the answer and the rubric or facts."""
    _, system, label = PROFILES[kind]
    parts = [f"Task:\n{task_text(task.prompt_set, task.prompt)}"]
    if task.tool_calls:
        calls = "\n".join(f"{c.name}({json.dumps(c.arguments, ensure_ascii=False)})" for c in task.tool_calls)
        parts.append(f"Tool calls the response made:\n{calls}")
    parts.append(f"Candidate response:\n{task.response}")
    parts.append(f"{label}:\n{criteria}")
    return (Message("system", system), Message("user", "\n\n".join(parts)))


def parse_level(text: str) -> tuple[int, str]:
    """(level, reason) from the judge's answer; ValueError when it holds no level 0-4."""
    return read_level(text, "reason", also="justification")


def outcome(kind: str, level: int, reason: str, threshold: float) -> Outcome:
    """Score = level/4, holding at the threshold (README "Model-graded assertions")."""
    score = level / 4
    passed = score >= threshold - 1e-12
    said = f"{kind} level {level}/4" + (f": {reason}" if reason else "")
    if passed:
        return Outcome(True, score, "" if score == 1.0 else said)
    return Outcome(False, score, f"{said} (below the threshold {threshold:g})")


class LevelJudge:
    """``rubric`` or ``factuality``: one judge call, structured first, plain text on a retry."""

    service = "judge"

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.profile = PROFILES[kind][0]

    async def judge(self, value: JudgedValue, task: Task, instance: Instance) -> Judgement:
        service: Provider = instance.client
        criteria = value.text if value.text is not None else (task.prompt.reference or "")
        structured = CompletionRequest(
            judge_messages(self.kind, task, criteria),
            model=instance.alias,
            params={"temperature": 0, "max_tokens": 200},
            response_schema=ANSWER_SCHEMA,
        )
        calls = cached = 0
        usage = Usage()
        problems: list[str] = []
        for request in (structured, replace(structured, response_schema=None)):
            calls += 1
            try:
                completion = await service.complete(request)
            except ProviderRefused:
                raise
            except ProviderError as exc:
                problems.append(str(exc))
                if isinstance(exc, BatchUnanswered):  # the batch's final word: no call asks it again
                    break
                continue
            if completion.cached:
                cached += 1
            else:
                usage = usage + completion.usage
            judged = self._read(completion, value.threshold)
            if judged is not None:
                return replace(judged, calls=calls, cached=cached, usage=usage)
            problems.append(f"unparseable judge answer {excerpt(completion.text, 80, flatten=True)}")
        return Judgement.failed(self.kind, "; retry: ".join(problems), calls, cached, usage)

    def _read(self, completion: Completion, threshold: float) -> Judgement | None:
        try:
            level, reason = parse_level(completion.text)
        except ValueError:
            return None
        identity = served_by(completion.serving, completion.serving.provider if completion.serving else "?")
        instance, _, model = identity.partition(":")
        mark = f"{self.profile}:{instance}:{model}:v{VERSION}"
        return Judgement(outcome(self.kind, level, reason, threshold), identity, mark)


register("rubric", LevelJudge("rubric"))
register("factuality", LevelJudge("factuality"))
