"""A scripted judge for model-graded assertions: a handler for ``FakeServer`` (a real HTTP server on
127.0.0.1 speaking the OpenAI chat wire format) that reads what evalkit sends a judge and answers
``{"level": N, "reason": ...}`` from its own reading, never from labels.

Its reading is keyword-based: the quoted phrases of the rubric (or facts) are what the answer must
contain, a phrase after ``not`` / ``never`` / ``no`` what it must not; the level is 4 x the share of
them the answer gets right, rounded down. A rubric without quotes scores 4 when every word longer
than four letters of it appears in the answer, else 1. Requests without a candidate answer (the
readiness probe) get ``OK``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.fakeserver import Recorded, Reply, openai_reply

JUDGE_MODEL = "judge-model-1"
QUOTED = re.compile(r'(\b(?:not|never|no|without)\s+(?:\w+\s+){0,3})?"([^"]+)"', re.I)
SECTIONS = re.compile(r"^(Task|Tool calls the response made|Candidate response|Rubric|Facts):\n", re.M)


def sections(text: str) -> dict[str, str]:
    """The labelled parts of the judge's user message."""
    found: dict[str, str] = {}
    marks = list(SECTIONS.finditer(text))
    for mark, following in zip(marks, [*marks[1:], None], strict=False):
        end = following.start() if following else len(text)
        found[mark.group(1)] = text[mark.end() : end].strip()
    return found


def level_of(answer: str, criteria: str) -> tuple[int, str]:
    """The scripted judge's level for ``answer`` against a rubric or facts, and why."""
    lowered = answer.lower()
    checks = [(bool(neg), phrase.lower()) for neg, phrase in QUOTED.findall(criteria)]
    if not checks:
        words = list(re.findall(r"[a-z]{5,}", criteria.lower()))
        held = all(w in lowered for w in words)
        return (4, "meets every point") if held else (1, "misses the rubric's words")
    right = [phrase for negated, phrase in checks if (phrase in lowered) != negated]
    wrong = [phrase for negated, phrase in checks if (phrase in lowered) == negated]
    level = (4 * len(right)) // len(checks)
    return level, ("meets every point" if not wrong else f"gets wrong: {', '.join(wrong)}")


def judge_handler(model: str = JUDGE_MODEL, prompt_tokens: int = 100, completion_tokens: int = 20) -> Any:
    """A FakeServer handler answering as the scripted judge."""

    def handle(request: Recorded) -> Reply:
        body = request.json if isinstance(request.json, dict) else {}
        messages = body.get("messages") or []
        user = str(messages[-1].get("content", "")) if messages else ""
        parts = sections(user)
        if "Candidate response" not in parts:
            return openai_reply("OK", model=model, prompt_tokens=1, completion_tokens=1)
        level, reason = level_of(parts["Candidate response"], parts.get("Rubric") or parts.get("Facts") or "")
        answer = json.dumps({"level": level, "reason": reason})
        return openai_reply(answer, model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)

    return handle


def judge_or_echo(text: str) -> str:
    """A batch server's answer (tests/batchserver.py) to a request's last user message: the scripted
    judge's verdict for a judge's request, ``answer: <text>`` for a prompt's."""
    parts = sections(text)
    if "Candidate response" not in parts:
        return f"answer: {text}"
    level, reason = level_of(parts["Candidate response"], parts.get("Rubric") or parts.get("Facts") or "")
    return json.dumps({"level": level, "reason": reason})
