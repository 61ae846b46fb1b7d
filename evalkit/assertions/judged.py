"""Model-graded assertion types: ``rubric``, ``factuality`` and ``similar`` (README "Model-graded
assertions").

Their values are checked here when the set loads, like every other type's; what they hold is
decided by a model, asynchronously, by the judged grader (``evalkit.graders.judged``), which
hands each assertion's outcome to the evaluation below through the context
(``Context.judgements``, keyed by the checked value: equal values share one judgement). Weights, a prompt's threshold and the
``not_`` forms therefore work as for any type. Evaluated without a judgement (the Python API's
``check``, a grader that does not judge), such an assertion is undecided: it never holds by
accident.

Each type ``needs`` the service that serves it (``judge`` or ``embeddings``), so the loader keeps
where it was written and planning checks that an instance is configured (exit 2, file:line).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from evalkit.assertions.registry import AssertionValueError, Context, Outcome, Where, get, register
from evalkit.records import Assertion, record

RUBRIC_THRESHOLD = 0.6  # a level of 2.4 of 4 (README "Model-graded assertions")
SIMILAR_MIN = 0.8
JUDGE = "judge"  # the services: evalkit.yaml's judge: and embeddings: sections
EMBEDDINGS = "embeddings"


@record
class JudgedValue:
    """A model-graded assertion's checked value: what it asks and of which instance.

    ``text`` is the rubric, the facts or the expected text; None for ``factuality: true`` (the
    prompt's reference, read when it is graded). ``threshold`` is where it holds (a score for
    ``rubric`` and ``factuality``, the cosine ``min`` for ``similar``). ``provider`` the instance
    named on the assertion, else None (the configured one)."""

    kind: str
    text: str | None
    threshold: float
    provider: str | None = None

    @property
    def source(self) -> str | None:
        """What a reason shows of it (``registry._held``)."""
        return self.text


def _threshold(kind: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or not 0 <= value <= 1:
        raise AssertionValueError(f"{kind}: {key} must be a number in 0..1, got {value!r}")
    return float(value)


def _provider(kind: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise AssertionValueError(f"{kind}: provider must be the id of a provider instance in evalkit.yaml")
    return value


def _text(kind: str, value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise AssertionValueError(f"{kind}: the {what} is empty; write what the answer must meet")
    return value


def _parts(kind: str, value: Any, allowed: frozenset[str]) -> dict[str, Any]:
    """The long form's mapping (``{value, threshold, provider}``), or the short form's text as one."""
    if not isinstance(value, dict):
        return {"value": value}
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise AssertionValueError(f"{kind}: unknown key {unknown[0]!r} (expected {', '.join(sorted(allowed))})")
    if "value" not in value:
        raise AssertionValueError(f"{kind}: value is missing")
    return value


_SCORED_KEYS = frozenset({"value", "threshold", "provider"})


def check_rubric(value: Any, where: Where) -> JudgedValue:
    parts = _parts("rubric", value, _SCORED_KEYS)
    return JudgedValue(
        "rubric",
        _text("rubric", parts["value"], "rubric"),
        _threshold("rubric", "threshold", parts.get("threshold", RUBRIC_THRESHOLD)),
        _provider("rubric", parts.get("provider")),
    )


def check_factuality(value: Any, where: Where) -> JudgedValue:
    parts = _parts("factuality", value, _SCORED_KEYS)
    facts = parts["value"]
    if facts is not True:
        if facts is False:
            raise AssertionValueError("factuality: value is the facts, or true for the prompt's reference; not false")
        facts = _text("factuality", facts, "facts")
    return JudgedValue(
        "factuality",
        None if facts is True else facts,
        _threshold("factuality", "threshold", parts.get("threshold", RUBRIC_THRESHOLD)),
        _provider("factuality", parts.get("provider")),
    )


def check_similar(value: Any, where: Where) -> JudgedValue:
    parts = _parts("similar", value, frozenset({"value", "min", "provider"}))
    return JudgedValue(
        "similar",
        _text("similar", parts["value"], "expected text"),
        _threshold("similar", "min", parts.get("min", SIMILAR_MIN)),
        _provider("similar", parts.get("provider")),
    )


def evaluate(value: JudgedValue, response: str, context: Context) -> Outcome:
    """The outcome the judged grader reached for this assertion; undecided without one."""
    outcome = context.judgements.get(value)
    if outcome is not None:
        return outcome
    return Outcome(False, 0.0, f"{value.kind}: not judged (it needs a judge; run it with evalkit run)", undecided=True)


def judged_value(assertion: Assertion) -> JudgedValue | None:
    """The checked value of a model-graded assertion; None for any other type."""
    kind = get(assertion.type)
    if kind is None or not kind.needs & {JUDGE, EMBEDDINGS}:
        return None
    compiled = assertion.compiled
    if not isinstance(compiled, JudgedValue):
        compiled = kind.check(assertion.value, Where(Path(".")))
    return compiled if isinstance(compiled, JudgedValue) else None


def service_of(value: JudgedValue) -> str:
    return EMBEDDINGS if value.kind == "similar" else JUDGE


def _schema(text: dict[str, Any], limit: str) -> dict[str, Any]:
    return {
        "anyOf": [
            text,
            {
                "type": "object",
                "required": ["value"],
                "additionalProperties": False,
                "properties": {
                    "value": text,
                    limit: {"type": "number"},  # 0..1: the check says so in words
                    "provider": {"type": "string"},
                },
            },
        ]
    }


_TEXT = {"type": "string"}  # not empty: the check says so in words
MODEL_GRADED = frozenset({"rubric", "factuality", "similar"})

register(
    "rubric", check=check_rubric, evaluate=evaluate, schema=_schema(_TEXT, "threshold"), needs=frozenset({JUDGE}),
    description="A judge rates how well the answer meets the rubric on five levels; holds at level/4 >= threshold (0.6).",
)  # fmt: skip
register(
    "factuality", check=check_factuality, evaluate=evaluate, needs=frozenset({JUDGE}),
    schema=_schema({"anyOf": [_TEXT, {"const": True}]}, "threshold"),
    description="A judge rates the answer's agreement with the facts (true: the prompt's reference); as rubric.",
)  # fmt: skip
register(
    "similar", check=check_similar, evaluate=evaluate, schema=_schema(_TEXT, "min"), needs=frozenset({EMBEDDINGS}),
    description="{value: TEXT, min: X}: the cosine similarity of the answer's and TEXT's embeddings is at least X (0.8).",
)  # fmt: skip
