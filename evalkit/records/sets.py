"""Set records: prompt sets and question sets as loaded, with their tolerances and gates.

``evalkit.sets`` builds them from YAML (README "Set files"); everything downstream reads them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import field
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from evalkit.records.base import JsonValue, Params, record
from evalkit.records.calls import Message

GRADERS = ("deterministic", "decision")
# a set id: namespaced, lowercase (README, "Set files"); it names files (baselines/<set id>.json)
SET_ID = re.compile(r"[a-z0-9_]+(\.[a-z0-9_]+)*")


@record
class Tolerances:
    """Allowed drops before a run counts as a regression; exact decimals in 0..1."""

    max_pass_rate_drop: Decimal = Decimal("0.1")
    max_mean_score_drop: Decimal = Decimal("0.1")

    def as_dict(self) -> dict[str, float]:
        return {
            "max_pass_rate_drop": float(self.max_pass_rate_drop),
            "max_mean_score_drop": float(self.max_mean_score_drop),
        }


def parse_tolerance(value: object) -> Decimal:
    """A tolerance as an exact decimal; ValueError unless a finite number in 0..1 inclusive.

    Strings are parsed as decimals (``5e-1``, ``-0.0``); floats from YAML through their shortest
    repr, so ``0.1`` is exactly one tenth. Booleans are not numbers.
    """
    if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal):
        raise ValueError("must be a finite number in 0..1")
    text = value.strip() if isinstance(value, str) else str(value) if isinstance(value, Decimal) else repr(value)
    try:
        number = Decimal(text)
    except ArithmeticError:
        raise ValueError("must be a finite number in 0..1") from None
    if not number.is_finite() or not Decimal(0) <= number <= Decimal(1):
        raise ValueError("must be a finite number in 0..1")
    return abs(number) if number.is_zero() else number


@record
class Assertion:
    """One assertion of a prompt: its type, its value as written, its weight (0: recorded, not
    counted), its compiled matcher and where it was written (``file:line:col``, for plan-time errors)."""

    type: str
    value: JsonValue
    compiled: Any = field(default=None, compare=False, repr=False)
    weight: float = 1.0
    where: object | None = field(default=None, compare=False)  # str() is file:line:col (worked out then)


@record
class Prompt:
    id: str
    prompt: str
    assertions: tuple[Assertion, ...] = ()
    system: str | None = None  # None: inherit the set's; "": none
    params: Params = field(default_factory=dict)
    reference: str | None = None
    critical: bool = False  # a failing critical prompt fails the gate (README "Absolute gates")
    threshold: float | None = None  # passes when the weighted score reaches it, not when all hold
    vars: Mapping[str, Any] = field(default_factory=dict)  # given to python checks (README "Assertions")
    # a conversation (README "Templates, variables, data files and conversations") instead of one user message: every turn as sent, the last the
    # user's; ``prompt`` is then that last turn (what tables and reasons show)
    messages: tuple[Message, ...] = ()
    # the tools the call declares (README, "Tools and tool calls"): None inherits the set's
    tools: tuple[Mapping[str, JsonValue], ...] | None = None
    tool_choice: JsonValue = None  # None inherits the set's


@record
class Gate:
    """Absolute minimums a run must reach whatever its baseline (README "Absolute gates"); exact decimals."""

    min_pass_rate: Decimal | None = None
    min_mean_score: Decimal | None = None

    def as_dict(self) -> dict[str, float]:
        out = {}
        if self.min_pass_rate is not None:
            out["min_pass_rate"] = float(self.min_pass_rate)
        if self.min_mean_score is not None:
            out["min_mean_score"] = float(self.min_mean_score)
        return out


@record
class PromptSet:
    id: str
    name: str
    prompts: tuple[Prompt, ...]
    path: Path | None = None
    description: str | None = None
    system: str | None = None
    params: Params = field(default_factory=dict)
    tolerances: Tolerances = field(default_factory=Tolerances)
    # Tolerances the file stated explicitly; the CLI's options win over them.
    gate: Gate = field(default_factory=Gate)  # the set's own minimums; the CLI's options win
    kind: Literal["prompts"] = "prompts"
    tools: tuple[Mapping[str, JsonValue], ...] = ()  # every prompt's, unless it declares its own
    tool_choice: JsonValue = None

    def system_for(self, prompt: Prompt) -> str | None:
        """The system prompt a call for ``prompt`` runs with (None when there is none)."""
        system = prompt.system if prompt.system is not None else self.system
        return system or None

    def params_for(self, prompt: Prompt) -> Params:
        """The set's params with the prompt's over them (the set's own mapping when the prompt has none)."""
        return {**self.params, **prompt.params} if prompt.params else self.params

    def tools_for(self, prompt: Prompt) -> tuple[Mapping[str, JsonValue], ...]:
        """The tools a call for ``prompt`` declares: its own, else the set's."""
        return prompt.tools if prompt.tools is not None else self.tools

    def tool_choice_for(self, prompt: Prompt) -> JsonValue:
        return prompt.tool_choice if prompt.tool_choice is not None else self.tool_choice


@record
class RetrievalTolerances:
    max_top1_drop: Decimal = Decimal("0.1")
    max_top3_drop: Decimal = Decimal("0.1")

    def as_dict(self) -> dict[str, float]:
        return {"max_top1_drop": float(self.max_top1_drop), "max_top3_drop": float(self.max_top3_drop)}


@record
class Question:
    id: str
    question: str
    form: str
    expected: tuple[str, ...]
    hard_class: str | None = None
    answer_gist: str | None = None


@record
class QuestionSet:
    id: str
    name: str
    questions: tuple[Question, ...]
    path: Path | None = None
    description: str | None = None
    corpus: Path | None = None
    corpus_line: int = 0
    tolerances: RetrievalTolerances = field(default_factory=RetrievalTolerances)
    kind: Literal["questions"] = "questions"


AnySet = PromptSet | QuestionSet
