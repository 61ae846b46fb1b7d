"""The registry of assertion types (README "Assertions").

A family module registers each name with its load-time check and its evaluation; the built-ins
register through the same call plugins use (``register``). ``not_<name>`` is derived for every
registered name: it holds exactly when the positive form does not.

- ``check(value, where)`` runs when the set loads: it returns what ``evaluate`` is given (a
  compiled regex, a validator, the value itself) or raises ``AssertionValueError``, whose message
  becomes the file:line error (exit 2).
- ``evaluate(compiled, response, context)`` returns an ``Outcome``: whether it holds, a score in
  0..1 and, when it does not hold, why. An outcome is ``undecided`` when no verdict could be
  reached (a ``python`` check raised, a regex gave up, the call has no recorded latency): it fails,
  and so does its negation, since "not known to hold" is not "known not to hold".
- ``schema`` is the JSON Schema of the value: the prompt-set schema's assertion definitions are
  generated from the registry (``evalkit.assertions.schema``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import field
from pathlib import Path
from typing import Any

from evalkit import plugins
from evalkit.records import JsonValue, ToolCall, record

NEGATION = "not_"


class AssertionValueError(ValueError):
    """The value of an assertion cannot be used; the message says why."""


@record
class Outcome:
    """One assertion's verdict on one response."""

    passed: bool
    score: float
    reason: str = ""
    undecided: bool = False  # no verdict: it fails, and so does its negation


@record
class Where:
    """What a load-time check may need: the set file's folder (``python`` files are relative to it)."""

    folder: Path


@record
class Context:
    """What an evaluation may look at besides the response (``python`` functions get it as a dict)."""

    prompt_id: str = ""
    prompt: str = ""
    reference: str | None = None
    latency_ms: float | None = None
    cost: float | None = None  # USD of this call when its instance is priced
    model: str | None = None  # the reported model
    vars: Mapping[str, Any] = field(default_factory=dict)
    regex_budget_s: float | None = None  # the grader's in-loop budget for a regex search
    regex_clock: RegexClock | None = None  # off the loop: the time left to the prompt's and run's searches
    tool_calls: tuple[ToolCall, ...] = ()  # the answer's (README, "Tools and tool calls")
    tools: tuple[Mapping[str, JsonValue], ...] = ()  # the tools the call declared
    recorded_context: JsonValue = None  # the context an application reported it used
    # model-graded assertions' outcomes by their checked value (evalkit.assertions.judged)
    judgements: Mapping[Any, Outcome] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "prompt_id": self.prompt_id,
            "prompt": self.prompt,
            "reference": self.reference,
            "latency_ms": self.latency_ms,
            "cost": self.cost,
            "model": self.model,
            "vars": dict(self.vars),
            "tool_calls": [call.as_dict() for call in self.tool_calls],
            "context": self.recorded_context,
        }


class RegexClock:
    """The time a prompt's slow regex searches may still take, together: at most ``prompt_s`` for
    the prompt and, shared by every prompt of a run, what is left of the run's ``run_s``."""

    __slots__ = ("prompt_left_s", "prompt_s", "run_left_s", "run_s")

    def __init__(self, prompt_s: float, run_s: float, run_left_s: float) -> None:
        self.prompt_s, self.run_s = prompt_s, run_s
        self.prompt_left_s, self.run_left_s = prompt_s, run_left_s

    def allowance(self) -> float:
        return min(self.prompt_left_s, self.run_left_s)

    def spend(self, seconds: float) -> None:
        self.prompt_left_s -= seconds
        self.run_left_s -= seconds

    def spent(self) -> str | None:
        """Which budget cuts the next search short, said for a reason; None when neither does."""
        if self.run_left_s < self.prompt_s and self.run_left_s <= self.prompt_left_s:
            return f"the run's {self.run_s:g} s of regex time is spent"
        if self.prompt_left_s < self.prompt_s:
            return f"this prompt's {self.prompt_s:g} s of regex time is spent"
        return None


HELD = Outcome(True, 1.0)  # outcomes are only read: the usual one is shared

Check = Callable[[Any, Where], Any]
Evaluate = Callable[[Any, str, Context], Outcome]


@record
class AssertionType:
    name: str
    check: Check
    evaluate: Evaluate
    schema: Mapping[str, Any]
    description: str
    needs: frozenset[str] = frozenset()  # facts of the call it reads: "cost" needs a priced instance
    origin: str = "evalkit"  # the distribution that registered it
    negated: bool = False


_REGISTRY: plugins.Registry[AssertionType] = plugins.Registry("assertion type", plugins.ASSERTIONS)
_TYPES = _REGISTRY.entries  # the positive types by name (tests snapshot and restore it)


def register(
    name: str,
    *,
    check: Check,
    evaluate: Evaluate,
    schema: Mapping[str, Any],
    description: str,
    needs: frozenset[str] = frozenset(),
    origin: str = "evalkit",
) -> AssertionType:
    """Register ``name`` (and with it ``not_<name>``). A name registered twice is refused."""
    if name.startswith(NEGATION):
        raise ValueError(f"assertion type {name!r}: a name cannot start with {NEGATION!r} (negation is derived)")
    return _REGISTRY.add(AssertionType(name, check, evaluate, dict(schema), description, needs, origin))


def _builtins() -> None:
    # one module per family; importing it registers its types
    from evalkit.assertions import call, jsondoc, judged, patterns, pyfunc, text, tools  # noqa: F401


_LOADED: list[bool] = []  # the built-in families are imported on first use


def _ensure() -> None:
    if not _LOADED:
        _LOADED.append(True)
        _builtins()


def positive_names() -> list[str]:
    """Every registered (positive) name, sorted."""
    _ensure()
    return sorted(_REGISTRY.names())


def names() -> list[str]:
    """Every usable name: each registered name and its negation, sorted."""
    return sorted([*positive_names(), *(NEGATION + n for n in positive_names())])


def get(name: str) -> AssertionType | None:
    """The type ``name`` (``not_<name>`` derived from ``name``), or None when it is not registered."""
    if not _LOADED:
        _ensure()
    kind = _REGISTRY.get(name)
    if kind is not None:
        return kind
    if name.startswith(NEGATION):
        positive = _REGISTRY.get(name[len(NEGATION) :])
        if positive is not None:
            return _negation(positive)
    return None


def types() -> list[AssertionType]:
    _ensure()
    return sorted(_REGISTRY.records(), key=lambda kind: kind.name)


_NEGATIONS: dict[str, AssertionType] = {}


def _negation(positive: AssertionType) -> AssertionType:
    found = _NEGATIONS.get(positive.name)
    if found is not None and found.origin == positive.origin:
        return found
    name = NEGATION + positive.name
    inner = positive.evaluate

    def evaluate(compiled: Any, response: str, context: Context) -> Outcome:
        outcome = inner(compiled, response, context)
        if outcome.undecided:
            return Outcome(False, 0.0, f"{name}: {outcome.reason}", undecided=True)
        if outcome.passed:
            return Outcome(False, 1.0 - outcome.score, f"{name}: {_held(positive.name, compiled)}")
        return HELD if outcome.score == 0.0 else Outcome(True, 1.0 - outcome.score)

    kind = AssertionType(
        name,
        positive.check,
        evaluate,
        positive.schema,
        f"Holds exactly when {positive.name} does not.",
        positive.needs,
        positive.origin,
        negated=True,
    )
    _NEGATIONS[positive.name] = kind
    return kind


def _held(name: str, compiled: Any) -> str:
    shown = _shown(getattr(compiled, "source", compiled))
    return f"{name} {shown} holds" if shown else f"{name} holds"


def _shown(value: Any) -> str:
    """An assertion's value for a reason: text quoted, numbers plain, lists and mappings as JSON;
    "" for what it cannot show (a compiled validator, a tuple of bounds)."""
    from evalkit.assertions.excerpt import excerpt

    if isinstance(value, str):
        return excerpt(value, 60)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return f"{value:g}"
    if isinstance(value, tuple) and value and all(isinstance(v, str) for v in value):
        return "[" + ", ".join(excerpt(v, 30) for v in value[:5]) + (", ...]" if len(value) > 5 else "]")
    if isinstance(value, dict | list):
        try:
            return excerpt(json.dumps(value, ensure_ascii=False), 60)
        except (TypeError, ValueError, RecursionError):
            return ""
    return ""


def from_plugins(wanted: set[str]) -> dict[str, str]:
    """Register the plugin assertion types among ``wanted`` (names a set uses that are not built
    in; ``not_x`` asks for ``x``). Returns the errors of those that failed to load, by the name
    the set used."""
    _ensure()
    available = plugins.installed(_REGISTRY.group)
    asked = {
        used: used[len(NEGATION) :] if used.startswith(NEGATION) and used not in available else used
        for used in sorted(wanted)
    }
    errors = _REGISTRY.from_plugins(asked.values(), _register_plugin)
    return {used: errors[name] for used, name in asked.items() if name in errors}


def _register_plugin(name: str, function: Any, origin: str) -> AssertionType:
    """``register_function`` for the plugin loop: a name it refuses is the plugin's error."""
    try:
        return register_function(name, function, origin=origin)
    except ValueError as exc:
        distribution = plugins.installed(_REGISTRY.group)[name].distribution
        raise plugins.PluginError(f"plugin '{name}' from {distribution}: {exc}") from None


def register_function(name: str, function: Any, *, origin: str, description: str = "") -> AssertionType:
    """Register a check function called like ``python``'s, ``(response, context)``; its optional
    ``check_value(value)`` attribute raising ValueError is the load-time check."""
    if not callable(function):
        raise ValueError(f"the entry point is {type(function).__name__}, not a function")
    from evalkit.assertions.pyfunc import call_check

    check_value = getattr(function, "check_value", None)

    def check(value: Any, where: Where) -> Any:
        if check_value is not None:
            try:
                check_value(value)
            except ValueError as exc:
                raise AssertionValueError(str(exc)) from None
        return value

    def evaluate(value: Any, response: str, context: Context) -> Outcome:
        return call_check(function, response, context, name)

    summary = plugins.summary(function, description, origin)
    return register(name, check=check, evaluate=evaluate, schema={}, description=summary, origin=origin)
