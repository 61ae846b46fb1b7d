"""The decision grader: an LLM judge on five levels (profile ``evalkit.task_fulfilment`` v1).

The judge is asked how well the candidate response fulfils its task: the prompt (for a
conversation, every turn before the answer as ``role: content`` lines), preceded by the system
prompt the call ran with as instructions the response had to follow. A non-empty
reference answer is sent as evidence. The judge answers ``{"level": 0-4, "justification": ...}``
through structured output where the endpoint supports it (else a JSON object parsed from its
text). When the endpoint returns log-probabilities for the level token, the level is their
probability-weighted mean (G-Eval); otherwise the integer level. Score = min(1, level/4), pass
at score >= 0.6 (level >= 2.4). A judgement that errors or stays unparseable after one retry
is a failed decision: score 0, reason ``Decision failed: ...``, never a crash.

Each grading names its yardstick ``decision:<judge instance>:<judge's reported model>:v1``;
the prompt texts below are part of that yardstick and must not change without a new version.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Sequence
from dataclasses import replace
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from evalkit.assertions.excerpt import clip_words, excerpt
from evalkit.errors import BatchUnanswered, ProviderError, ProviderRefused, RunError
from evalkit.protocols import Provider
from evalkit.records import (
    CallFacts,
    Completion,
    CompletionRequest,
    Grade,
    Message,
    Prompt,
    PromptSet,
    ServingRecord,
    Usage,
)
from evalkit.verdicts import Yardstick

PROFILE = "evalkit.task_fulfilment"
VERSION = 1
PASS_LEVEL = Decimal("2.4")  # score 0.6
LEVELS = frozenset("01234")  # the level tokens; "12" or "34" (one token to some tokenizers) is none

SYSTEM = """\
You are an impartial evaluator. Judge how well a candidate response fulfils its task.
Choose exactly one level:
0: fails the task entirely or answers something else
1: addresses the task but is mostly wrong or incomplete
2: fulfils part of the task, important parts missing or wrong
3: fulfils the task with minor gaps or inaccuracies
4: fulfils the task completely and correctly
If instructions are given, a response that ignores them does not fulfil the task.
Answer with a JSON object only: {"level": <0-4>, "justification": "<one sentence>"}"""

EVIDENCE = "Reference answer (evidence: judge the substance of the candidate against it, not its wording):"

ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "level": {"type": "integer", "enum": [0, 1, 2, 3, 4]},
        "justification": {"type": "string"},  # no maxLength: OpenAI's strict mode refuses it
    },
    "required": ["level", "justification"],
    "additionalProperties": False,
}
_LEVEL_KEY = re.compile(r'"level"\s*:\s*"?$')


CONVERSATION = "Conversation (the candidate response is the assistant's next turn):"


def transcript(messages: Sequence[Message]) -> str:
    """A conversation as text, one ``role: content`` line per turn, in order."""
    return "\n".join(f"{m.role}: {m.content}" for m in messages)


def prompt_text(prompt: Prompt) -> str:
    """What a prompt asked, as stored and shown: its text, or its whole conversation with the roles."""
    return transcript(prompt.messages) if prompt.messages else prompt.prompt


def task_text(prompt_set: PromptSet, prompt: Prompt) -> str:
    """The task as the judge sees it: the prompt (a conversation: every turn before the answer,
    with the roles), with the system prompt as instructions."""
    task = f"{CONVERSATION}\n{transcript(prompt.messages)}" if prompt.messages else prompt.prompt
    system = prompt_set.system_for(prompt)
    if system:
        return f"Instructions the response had to follow:\n{system}\n\nTask:\n{task}"
    return task


def judge_messages(task: str, response: str, reference: str | None) -> tuple[Message, ...]:
    parts = [f"Task:\n{task}"]
    if reference and reference.strip():
        parts.append(f"{EVIDENCE}\n{reference}")
    parts.append(f"Candidate response:\n{response}")
    return (Message("system", SYSTEM), Message("user", "\n\n".join(parts)))


def yardstick(judge_instance: str, reported_model: str) -> str:
    return str(Yardstick.decision(judge_instance, reported_model, VERSION))


def parse_answer(text: str) -> tuple[int, str]:
    """(level, justification) from the judge's text; ValueError when there is none."""
    return read_level(text, "justification")


def read_level(text: str, reason: str, also: str | None = None) -> tuple[int, str]:
    """(level 0-4, its reason on one line) from a judge's text: the first JSON object with a level
    (a number, or its digit as a string), its reason under the key ``reason`` (else ``also``);
    ValueError when there is none. Shared by the decision grader and the model-graded kinds."""
    candidates = _json_objects(text)
    for candidate in candidates:
        level = candidate.get("level")
        if isinstance(level, str) and level.strip() in LEVELS:
            level = int(level.strip())
        if isinstance(level, float) and level.is_integer():
            level = int(level)
        if isinstance(level, int) and not isinstance(level, bool) and 0 <= level <= 4:
            said = candidate.get(reason, candidate.get(also, "") if also else "")
            return level, _sentence(str(said))
    # an answer cut off by max_tokens still states its level first; a whole answer whose level is
    # not one of the five (10 on a 0-10 scale, 3.5) is no level at all
    truncated = None if any("level" in c for c in candidates) else _truncated(reason).search(text)
    if truncated:
        return int(truncated.group(1)), _sentence(truncated.group(2) or "")
    raise ValueError("no JSON object with a level 0-4 in the judge's answer")


@functools.cache
def _truncated(reason: str) -> re.Pattern[str]:
    """An answer cut off after its level (and part of its ``reason``)."""
    return re.compile(rf'\A\s*\{{\s*"level"\s*:\s*"?([0-4])(?![\d.eE])"?\s*(?:,\s*"{reason}"\s*:\s*"([^"]*))?', re.S)


def _sentence(justification: str) -> str:
    """The justification on one line, at most 300 characters (the schema asks no maxLength:
    OpenAI's strict structured output refuses that keyword)."""
    return clip_words(" ".join(justification.split()), 300)


def _json_objects(text: str) -> list[dict[str, Any]]:
    """Every JSON object embedded in ``text`` (outermost first)."""
    found, decoder = [], json.JSONDecoder()
    for start in (i for i, ch in enumerate(text) if ch == "{"):
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def weighted_level(raw: Any) -> float | None:
    """The probability-weighted level from OpenAI-style logprobs of the level token, if present."""
    content = (raw or {}).get("logprobs", {}) if isinstance(raw, dict) else {}
    tokens = content.get("content") if isinstance(content, dict) else None
    if not isinstance(tokens, list):
        return None
    seen = ""
    for token in tokens:
        text = str(token.get("token", "")) if isinstance(token, dict) else ""
        if _LEVEL_KEY.search(seen) and text.strip() in LEVELS:
            weights: dict[int, float] = {}
            for alt in token.get("top_logprobs") or [{"token": text, "logprob": token.get("logprob", 0.0)}]:
                digit = str(alt.get("token", "")).strip()
                if digit in LEVELS and isinstance(alt.get("logprob"), int | float):
                    weights[int(digit)] = weights.get(int(digit), 0.0) + math.exp(alt["logprob"])
            total = sum(weights.values())
            if total <= 0:
                return None
            return sum(level * p for level, p in weights.items()) / total
        seen += text
    return None


def level_grade(level: float, justification: str, mark: str) -> Grade:
    """Score = min(1, level/4); pass at level >= 2.4 (score 0.6). The level is taken to 12 places,
    so a weighted 2.3999999999999995 is 2.4 while 2.395 stays below the mark; it is shown to two
    decimals unless more of them decide."""
    exact = Decimal(repr(level)).quantize(Decimal("1e-12"), rounding=ROUND_HALF_EVEN)
    shown = exact.quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN)
    if (shown >= PASS_LEVEL) != (exact >= PASS_LEVEL):  # two decimals would contradict the verdict
        shown = Decimal(f"{exact.normalize():f}")
    score = min(Decimal(1), exact / 4)
    reason = f"level {shown}/4: {justification}" if justification else f"level {shown}/4"
    return Grade(exact >= PASS_LEVEL, float(score), reason, yardstick=mark)


class DecisionGrader:
    """Asks a judge provider (injected, usually wrapped by the completion cache)."""

    name = "decision"

    def __init__(self, judge: Provider, judge_alias: str) -> None:
        self.judge = judge
        self.alias = judge_alias

    async def grade(
        self,
        prompt_set: PromptSet,
        prompt: Prompt,
        response: str,
        serving: ServingRecord | None,
        call: CallFacts | None = None,
    ) -> Grade:
        messages = judge_messages(task_text(prompt_set, prompt), response, prompt.reference)
        structured = CompletionRequest(
            messages,
            model=self.alias,
            params={"temperature": 0, "max_tokens": 200},
            response_schema=ANSWER_SCHEMA,
            top_logprobs=5 if self.judge.adapter in ("openai", "local") else 0,
        )
        usage = Usage()
        problems: list[str] = []
        calls = cached = 0
        # First structured (with logprobs where offered), then once more as plain text.
        for request in (structured, replace(structured, response_schema=None, top_logprobs=0)):
            calls += 1
            try:
                completion = await self.judge.complete(request)
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
            grade = self._judged(completion)
            if grade is not None:
                return replace(grade, usage=usage, cached=completion.cached, judge_calls=calls, judge_cached=cached)
            problems.append(f"unparseable judge answer {excerpt(completion.text, 80, flatten=True)}")
        reason = "Decision failed: " + "; retry: ".join(problems)
        # no yardstick: nothing measured it
        return Grade(False, 0.0, reason, yardstick=None, usage=usage, judge_calls=calls, judge_cached=cached)

    def _judged(self, completion: Completion) -> Grade | None:
        try:
            level, justification = parse_answer(completion.text)
        except ValueError:
            return None
        weighted = weighted_level(completion.raw)
        reported = completion.serving.reported_model or f"{completion.serving.model}?"
        mark = yardstick(completion.serving.provider, reported)
        return level_grade(weighted if weighted is not None else float(level), justification, mark)


async def probe(judge: Provider, alias: str) -> None:
    """One tiny call before any completion is paid for; RunError (exit 3) when it fails."""
    request = CompletionRequest(
        (Message("user", "Reply with the single word OK."),), model=alias, params={"max_tokens": 5, "temperature": 0}
    )
    try:
        await judge.complete(request)
    except ProviderError as exc:
        raise RunError(f"the judge '{judge.instance_id}' did not answer a readiness probe: {exc}") from None
