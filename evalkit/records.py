"""Frozen records shared by every layer.

Loaders produce set records, providers produce completions, graders produce grades, the runner
assembles run results, and the store, compare and report layers read them. Nothing here does
I/O; aggregates are derived properties so they can never disagree with the items.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal, TypeVar

from evalkit.verdicts import ComparisonState, GateBasis, GateVerdict

JsonValue = Any
Params = Mapping[str, JsonValue]

_R = TypeVar("_R")


def quick_init(cls: type[_R]) -> type[_R]:
    """``cls`` (a frozen, slotted dataclass) with an ``__init__`` that sets each field through its
    slot's descriptor: about 3x faster than the generated one, which calls object.__setattr__
    per field (a run builds several records per answer: at 100,000 answers that was a second).
    Same parameters, defaults and factories; the record stays frozen."""
    slots = getattr(cls, "__slots__", None)
    params = getattr(cls, "__dataclass_params__", None)
    if slots is None or params is None or not params.frozen or hasattr(cls, "__post_init__"):
        raise TypeError(f"quick_init: {cls.__name__} is not a frozen, slotted dataclass without __post_init__")
    namespace: dict[str, object] = {"_NO_VALUE": object()}
    arguments: list[str] = []
    body: list[str] = []
    for index, spec in enumerate(fields(cls)):  # type: ignore[arg-type]  # a dataclass: checked above
        if not spec.init or spec.kw_only:
            raise TypeError(f"quick_init: {cls.__name__}.{spec.name} is keyword-only or not an argument")
        name = spec.name
        namespace[f"_set{index}"] = cls.__dict__[name].__set__
        if spec.default is not MISSING:
            namespace[f"_default{index}"] = spec.default
            arguments.append(f"{name}=_default{index}")
        elif spec.default_factory is not MISSING:
            namespace[f"_factory{index}"] = spec.default_factory
            arguments.append(f"{name}=_NO_VALUE")
            body.append(f"    if {name} is _NO_VALUE: {name} = _factory{index}()")
        else:
            arguments.append(name)
        body.append(f"    _set{index}(self, {name})")
    source = f"def __init__(self, {', '.join(arguments)}):\n" + "\n".join(body or ["    pass"]) + "\n"
    exec(compile(source, f"<quick_init {cls.__qualname__}>", "exec"), namespace)  # built from the field names alone
    init: Any = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__annotations__ = dict(cls.__init__.__annotations__)
    setattr(cls, "__init__", init)  # noqa: B010 - mypy refuses assigning a method
    return cls


GRADERS = ("deterministic", "decision")
# a set id: namespaced, lowercase (README, "Set files"); it names files (baselines/<set id>.json)
SET_ID = re.compile(r"[a-z0-9_]+(\.[a-z0-9_]+)*")


@quick_init
@dataclass(frozen=True, slots=True)
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


@quick_init
@dataclass(frozen=True, slots=True)
class Assertion:
    """One assertion of a prompt: its type, its value as written, its weight (0: recorded, not
    counted), its compiled matcher and where it was written (``file:line:col``, for plan-time errors)."""

    type: str
    value: JsonValue
    compiled: Any = field(default=None, compare=False, repr=False)
    weight: float = 1.0
    where: object | None = field(default=None, compare=False)  # str() is file:line:col (worked out then)


@quick_init
@dataclass(frozen=True, slots=True)
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


@quick_init
@dataclass(frozen=True, slots=True)
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


@quick_init
@dataclass(frozen=True, slots=True)
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


@quick_init
@dataclass(frozen=True, slots=True)
class RetrievalTolerances:
    max_top1_drop: Decimal = Decimal("0.1")
    max_top3_drop: Decimal = Decimal("0.1")

    def as_dict(self) -> dict[str, float]:
        return {"max_top1_drop": float(self.max_top1_drop), "max_top3_drop": float(self.max_top3_drop)}


@quick_init
@dataclass(frozen=True, slots=True)
class Question:
    id: str
    question: str
    form: str
    expected: tuple[str, ...]
    hard_class: str | None = None
    answer_gist: str | None = None


@quick_init
@dataclass(frozen=True, slots=True)
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


@quick_init
@dataclass(frozen=True, slots=True)
class Message:
    role: str
    content: str


# What evalkit sends itself and records as sent: never taken from a set's params (the schema
# refuses them there; the adapters drop them from a CompletionRequest built in code).
RESERVED_PARAMS = ("model", "messages", "system", "stream")


@quick_init
@dataclass(frozen=True, slots=True)
class CompletionRequest:
    """What a provider is asked: the messages, the alias to send and request parameters."""

    messages: tuple[Message, ...]
    model: str
    params: Params = field(default_factory=dict)
    item_id: str = ""  # the prompt id (the replay adapter answers by it)
    set_id: str = ""
    # Structured output: a JSON Schema the answer must follow (OpenAI response_format,
    # Anthropic tool use); adapters without support ignore it.
    response_schema: Mapping[str, JsonValue] | None = None
    top_logprobs: int = 0  # ask for this many alternatives per token, where supported
    vars: Mapping[str, Any] = field(default_factory=dict)  # the prompt's variables (application adapters get them)
    tools: tuple[Mapping[str, JsonValue], ...] = ()  # {name, description, parameters} each
    tool_choice: JsonValue = None  # auto | none | required | {name: N}; None: the endpoint's default

    @property
    def system(self) -> str | None:
        for message in self.messages:
            if message.role == "system":
                return message.content
        return None


@quick_init
@dataclass(frozen=True, slots=True)
class ServingRecord:
    """Which model answered: instance id, alias actually sent, model the response reported."""

    provider: str
    model: str
    reported_model: str | None
    version: int = 1

    @property
    def verified(self) -> bool:
        """True when the response named its model (the serving proof)."""
        return bool(self.reported_model)

    def as_dict(self) -> dict[str, JsonValue]:
        return {
            "version": self.version,
            "provider": self.provider,
            "model": self.model,
            "reported_model": self.reported_model,
        }


def without_lone_surrogates(text: str) -> str:
    """``text`` with lone surrogates (a JSON string may escape them) as U+FFFD: they cannot be
    stored or printed. ASCII text holds none: most answers skip the round trip."""
    return text if text.isascii() else text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


# No model reads or writes this many tokens in one call: a larger count is a broken endpoint.
MAX_TOKENS_PER_CALL = 100_000_000


def plausible_tokens(value: object) -> int | None:
    """``value`` as a token count of one call, or None when it cannot be one (not a whole
    number, negative, above MAX_TOKENS_PER_CALL)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not value.is_integer():  # also nan and inf
        return None
    return int(value) if 0 <= value <= MAX_TOKENS_PER_CALL else None


def _shown(value: object) -> str:
    try:
        text = repr(value)
    except ValueError:  # an int of more digits than Python converts to text
        return "(a number too long to show)"
    return text if len(text) <= 40 else text[:39] + "…"


@quick_init
@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    # implausible counts read as 0, each noted as "<key> <value as sent>"; not stored
    dropped: tuple[str, ...] = field(default=(), compare=False)

    @classmethod
    def from_body(cls, usage: object, input_key: str, output_key: str) -> Usage:
        """Token counts from an API's usage block; a missing count reads as 0, an implausible one
        (see ``plausible_tokens``) as 0 with a note in ``dropped``."""
        if usage is None:
            return cls()
        if not isinstance(usage, dict):
            return cls(dropped=(f"usage {_shown(usage)}",))
        counts: list[int] = []
        dropped: list[str] = []
        for key in (input_key, output_key):
            value = usage.get(key)
            count = plausible_tokens(value)
            if count is None and value is not None:
                dropped.append(f"{key} {_shown(value)}")
            counts.append(count or 0)
        return cls(counts[0], counts[1], tuple(dropped))

    def checked(self) -> Usage:
        """This usage with implausible counts (a plugin's, an old cache row's) dropped and noted."""
        if (
            type(self.input_tokens) is int
            and type(self.output_tokens) is int
            and (  # the usual case, at once
                0 <= self.input_tokens <= MAX_TOKENS_PER_CALL and 0 <= self.output_tokens <= MAX_TOKENS_PER_CALL
            )
        ):
            return self
        inputs, outputs = plausible_tokens(self.input_tokens), plausible_tokens(self.output_tokens)
        if inputs is not None and outputs is not None:
            return self
        dropped = list(self.dropped)
        if inputs is None:
            dropped.append(f"input_tokens {_shown(self.input_tokens)}")
        if outputs is None:
            dropped.append(f"output_tokens {_shown(self.output_tokens)}")
        return Usage(inputs or 0, outputs or 0, tuple(dropped))

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens)

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens


@quick_init
@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call of an answer (README, "Tools and tool calls"): the tool's name and its
    arguments, parsed JSON, or the text as sent when it does not parse."""

    name: str
    arguments: JsonValue = None

    def as_dict(self) -> dict[str, JsonValue]:
        return {"name": self.name, "arguments": self.arguments}


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def tool_arguments(value: JsonValue) -> JsonValue:
    """Arguments as recorded: a JSON text parsed (OpenAI sends them as a string), kept as sent
    when it does not parse as strict JSON; any other value as it is, or as its text when it is
    not JSON (NaN, an object of a function's own): a record must stay storable and printable."""
    if not isinstance(value, str):
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError, RecursionError):
            return str(value)
        return value
    try:
        return json.loads(value, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return value


def recorded_tool_calls(value: JsonValue) -> list[dict[str, JsonValue]]:
    """Tool calls as an answer records them, ``[{"name", "arguments"}]``, from the forms endpoints
    send: ``{name, arguments}``, OpenAI's ``{"function": {name, arguments}}``, Anthropic's
    ``{name, input}``. An entry without a name is left out (``app_completion`` refuses them first)."""
    calls: list[dict[str, JsonValue]] = []
    for entry in value if isinstance(value, list) else ():
        if isinstance(entry, Mapping) and isinstance(entry.get("function"), Mapping):
            entry = entry["function"]
        name = entry.get("name") if isinstance(entry, Mapping) else None
        if isinstance(name, str) and name:
            assert isinstance(entry, Mapping)
            arguments = entry["arguments"] if "arguments" in entry else entry.get("input")
            calls.append({"name": name, "arguments": tool_arguments(arguments)})
    return calls


def tool_calls_of(recorded: JsonValue) -> tuple[ToolCall, ...]:
    """Records of tool calls as recorded (``recorded_tool_calls``: nothing parsed again)."""
    return tuple(
        ToolCall(e["name"], e.get("arguments"))
        for e in (recorded if isinstance(recorded, list) else ())
        if isinstance(e, Mapping) and isinstance(e.get("name"), str)
    )


@quick_init
@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    serving: ServingRecord
    usage: Usage = Usage()
    latency_ms: float = 0.0
    adapter: str = ""
    cached: bool = False
    # provider-specific extras (e.g. logprobs); ``tool_calls`` (``[{"name", "arguments"}]``) and
    # ``context`` (what an application retrieved) are kept here too, so the cache replays them
    raw: Mapping[str, JsonValue] | None = None
    cached_at: str | None = None  # replayed from a cache entry stored before this run: when it was written

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The answer's tool calls, in the order made."""
        return tool_calls_of(self.raw.get("tool_calls")) if self.raw else ()

    @property
    def context(self) -> JsonValue:
        """The context an application reported it used (None when it reported none)."""
        return self.raw.get("context") if self.raw else None

    @property
    def truncated(self) -> bool:
        """The answer was cut off at max_tokens (OpenAI's finish_reason, Anthropic's stop_reason)."""
        raw = self.raw or {}
        return raw.get("finish_reason") == "length" or raw.get("stop_reason") == "max_tokens"


@quick_init
@dataclass(frozen=True, slots=True)
class CallFacts:
    """What the grader may check of the call besides its text (latency_ms and cost assertions)."""

    latency_ms: float | None = None
    cost: float | None = None  # USD, when the answering instance is priced
    model: str | None = None  # the reported model
    tool_calls: tuple[ToolCall, ...] = ()
    context: JsonValue = None  # what an application reported it used (context_contains)


@quick_init
@dataclass(frozen=True, slots=True)
class AssertionResult:
    type: str
    passed: bool
    reason: str = ""
    score: float | None = None  # None: 1.0 when it passed, else 0.0
    weight: float = 1.0

    @property
    def value(self) -> float:
        """The score counted: ``score``, else 1 or 0."""
        return self.score if self.score is not None else (1.0 if self.passed else 0.0)


def assertions_reason(
    failed: Sequence[str],
    counted: int,
    notes: Sequence[str] = (),
    threshold: tuple[float, float, bool] | None = None,
) -> str:
    """A prompt's reason from its counted assertions (weight above 0; README "Score and pass"):
    ``run`` gives each failed one's reason (and the reasons of those that held, as ``notes``), the
    store at privacy ``metadata`` their types; the counts and the words are the same.
    ``threshold``: (score, threshold, passed) of a prompt that sets one."""
    if not failed:
        text = "assertion holds" if counted == 1 else f"all {counted} assertions hold"
    else:
        text = "assertion failed" if counted == 1 else f"{len(failed)} of {counted} assertions failed"
        text += f": {'; '.join(failed)}"
    if notes:  # the reasons of those that held
        text += f"{'; held' if failed else ''}: {'; '.join(notes)}"
    if threshold is None:
        return text
    score, limit, passed = threshold
    return f"score {score:.2f} {'reaches' if passed else 'is below'} the threshold {limit:g}; {text}"


@quick_init
@dataclass(frozen=True, slots=True)
class Grade:
    """A grader's verdict on one answer; ``yardstick`` names what measured it."""

    passed: bool
    score: float
    reason: str
    assertions: tuple[AssertionResult, ...] = ()
    yardstick: str | None = "deterministic"  # None: the grading failed, nothing measured it
    usage: Usage = Usage()
    cached: bool = False  # the judge's answer came from the completion cache


@quick_init
@dataclass(frozen=True, slots=True)
class ItemResult:
    """One prompt's outcome: a grade, or an error when its call failed after retries."""

    id: str
    passed: bool
    score: float
    reason: str
    latency_ms: float | None = None
    error: str | None = None
    assertions: tuple[AssertionResult, ...] = ()
    prompt: str = ""
    system: str | None = None
    response: str | None = None
    serving: ServingRecord | None = None
    adapter: str | None = None
    usage: Usage = Usage()
    yardstick: str | None = None
    grader_usage: Usage = Usage()
    cached: bool = False
    repeat: int = 0  # which sample of the prompt (run --repeat N)
    grader_cached: bool = False  # the judge's grading was replayed from the cache
    threshold: float | None = None  # the prompt's pass threshold, for its text-free reason
    cached_at: str | None = None  # the answer came from a cache entry stored before this run, written then
    tool_calls: tuple[ToolCall, ...] = ()  # answer content: stored and shown per privacy level
    context: JsonValue = None

    @property
    def errored(self) -> bool:
        return self.error is not None


@quick_init
@dataclass(frozen=True, slots=True)
class PairedTest:
    """A paired comparison of two runs over the items present in both.

    ``p_value`` and ``score_p_value`` are two-sided (has it changed?); the ``drop_`` figures are
    one-sided (has it dropped?), which is what the regression gate asks, with the smallest
    p-value the changed items could have given at all (``_floor``).
    """

    paired: int
    only_first: int
    only_second: int
    pass_rate_delta: float  # second - first, over the paired items
    mean_score_delta: float
    pass_rate_ci: tuple[float, float]
    mean_score_ci: tuple[float, float]
    p_value: float
    test: str  # "McNemar exact" | "sign-flip permutation"
    lost: int = 0  # items that passed in the first and fail in the second
    gained: int = 0
    score_p_value: float = 1.0  # sign-flip permutation test of the mean-score difference
    drop_p_value: float = 1.0
    drop_p_floor: float = 1.0
    score_drop_p_value: float = 1.0
    score_drop_p_floor: float = 1.0
    score_changed: int = 0  # paired items whose mean score changed

    def describe(self, one_sided: bool = False, measure: str = "pass rate") -> str:
        """``pass rate -12.0 pp (95% CI -20.1 … -3.9), two-sided p = 0.008`` (has it changed?);
        with ``one_sided`` the p-value of a drop, which ``--significance`` gates on
        (``one-sided p = 0.004``). Each is labelled: both can be seen side by side. ``measure``
        names what the stored pass is (a retrieval run's: the top-1 hit)."""
        return f"{measure} {self.pass_rate_delta * 100:+.1f} pp ({self.pass_interval()}), {self.p_text(one_sided)}"

    def p_text(self, one_sided: bool = False) -> str:
        """``two-sided p = 0.008``, or the one-sided p of a drop: ``one-sided p < 0.001``."""
        p = self.drop_p_value if one_sided else self.p_value
        label = "one-sided p" if one_sided else "two-sided p"
        return f"{label} < 0.001" if p < 0.001 else f"{label} = {p:.3f}"

    def pass_interval(self) -> str:
        """``95% CI -20.1 … -3.9``, or why there is no interval: a bootstrap over items that all
        changed alike (or not at all) is a single point, which is no interval."""
        return _interval_text(self.pass_rate_ci, self.pass_rate_delta, 100, "{:+.1f}")

    def score_interval(self) -> str:
        return _interval_text(self.mean_score_ci, self.mean_score_delta, 1, "{:+.3f}")

    @classmethod
    def from_dict(cls, data: Mapping[str, JsonValue]) -> PairedTest:
        return cls(
            paired=data["paired_items"],
            only_first=data["only_in_first"],
            only_second=data["only_in_second"],
            pass_rate_delta=data["pass_rate_delta"],
            mean_score_delta=data["mean_score_delta"],
            pass_rate_ci=tuple(data["pass_rate_ci95"]),
            mean_score_ci=tuple(data["mean_score_ci95"]),
            p_value=data["p_value"],
            test=data["test"],
            lost=data["pass_to_fail"],
            gained=data["fail_to_pass"],
            score_p_value=data.get("mean_score_p_value", 1.0),
            drop_p_value=data.get("one_sided_p_value", 1.0),
            drop_p_floor=data.get("one_sided_p_floor", 1.0),
            score_drop_p_value=data.get("mean_score_one_sided_p_value", 1.0),
            score_drop_p_floor=data.get("mean_score_one_sided_p_floor", 1.0),
            score_changed=data.get("mean_score_changed", 0),
        )

    def as_dict(self) -> dict[str, JsonValue]:
        return {
            "paired_items": self.paired,
            "only_in_first": self.only_first,
            "only_in_second": self.only_second,
            "pass_rate_delta": self.pass_rate_delta,
            "pass_rate_ci95": list(self.pass_rate_ci),
            "mean_score_delta": self.mean_score_delta,
            "mean_score_ci95": list(self.mean_score_ci),
            "p_value": self.p_value,
            "mean_score_p_value": self.score_p_value,
            "one_sided_p_value": self.drop_p_value,
            "one_sided_p_floor": self.drop_p_floor,
            "mean_score_one_sided_p_value": self.score_drop_p_value,
            "mean_score_one_sided_p_floor": self.score_drop_p_floor,
            "mean_score_changed": self.score_changed,
            "test": self.test,
            "pass_to_fail": self.lost,
            "fail_to_pass": self.gained,
        }


def _interval_text(interval: tuple[float, float], delta: float, scale: int, fmt: str) -> str:
    low, high = interval
    if low != high:
        return f"95% CI {fmt.format(low * scale)} … {fmt.format(high * scale)}"
    if delta == 0:
        return "no paired item changed"
    return "every paired item changed by the same amount: no interval"


@quick_init
@dataclass(frozen=True, slots=True)
class Flips:
    """Prompts whose outcome changed against the baseline, by id (README "Baselines kept in the repository")."""

    regressed: tuple[str, ...] = ()  # passed in the baseline, fail now
    fixed: tuple[str, ...] = ()  # failed in the baseline, pass now
    added: tuple[str, ...] = ()  # not in the baseline
    removed: tuple[str, ...] = ()  # in the baseline, not in this run

    def as_dict(self) -> dict[str, JsonValue]:
        return {
            "regressed": list(self.regressed),
            "fixed": list(self.fixed),
            "added": list(self.added),
            "removed": list(self.removed),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, JsonValue]) -> Flips:
        return cls(*(tuple(data.get(k) or ()) for k in ("regressed", "fixed", "added", "removed")))


@quick_init
@dataclass(frozen=True, slots=True)
class OtherScope:
    """For information only: how a run that has no baseline of its own compares with another
    model's baseline of the same set and grader (README, "Baselines and regressions"). Never a
    verdict: a run on another model is not compared."""

    run_id: str
    provider: str
    model: str
    reported_model: str
    grader: str
    source: str  # file | db: where that baseline came from
    pass_rate_delta: float  # this run minus that baseline
    mean_score_delta: float

    def as_dict(self) -> dict[str, JsonValue]:
        return {
            "note": "another model's (or provider instance's) baseline: for information only, not a verdict",
            "run_id": self.run_id,
            "provider": self.provider,
            "model": self.model,
            "reported_model": self.reported_model,
            "grader": self.grader,
            "source": self.source,
            "pass_rate_delta": self.pass_rate_delta,
            "mean_score_delta": self.mean_score_delta,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, JsonValue]) -> OtherScope:
        return cls(
            run_id=data["run_id"],
            provider=data["provider"],
            model=data["model"],
            reported_model=data["reported_model"],
            grader=data["grader"],
            source=data["source"],
            pass_rate_delta=data["pass_rate_delta"],
            mean_score_delta=data["mean_score_delta"],
        )


@quick_init
@dataclass(frozen=True, slots=True)
class BaselineEntry:
    """One accepted baseline in a set's baseline file: a scope and what its run measured."""

    provider: str
    model: str
    reported_model: str
    grader: str
    run_id: str
    accepted_at: str
    evalkit_version: str
    set_fingerprint: str
    prompt_count: int
    passed_count: int
    pass_rate: float
    mean_score: float
    items: Mapping[str, tuple[float, float]]  # prompt id -> (fraction of its samples passed, mean score)
    repeats: int = 1

    @property
    def scope(self) -> tuple[str, str, str, str]:
        return (self.provider, self.model, self.reported_model, self.grader)


@quick_init
@dataclass(frozen=True, slots=True)
class BaselineFile:
    """A set's baseline file (``baselines/<set id>.json``), as read."""

    path: Path
    set_id: str
    entries: tuple[BaselineEntry, ...] = ()

    def entry_for(self, provider: str, model: str, reported_model: str, grader: str) -> BaselineEntry | None:
        wanted = (provider, model, reported_model, grader)
        return next((e for e in self.entries if e.scope == wanted), None)


@quick_init
@dataclass(frozen=True, slots=True)
class Comparison:
    """The verdict against the baseline."""

    state: ComparisonState
    reason: str  # the verdict in words, as shown and stored (README "JSON output")
    regressed: bool = False
    baseline_run_id: str | None = None
    pass_rate_delta: float | None = None
    mean_score_delta: float | None = None
    treatment_changed: bool | None = None
    paired: PairedTest | None = None  # the paired test against the baseline, when one was run
    significance: float | None = None  # --significance ALPHA, when given
    baseline_source: str | None = None  # file | db: where the baseline came from (README "Baselines and regressions")
    baseline_file: str | None = None  # the baseline file's path, when the source is a file
    flips: Flips | None = None  # per-prompt flips against the baseline (README "Baselines kept in the repository")
    gate_basis: GateBasis | None = None  # how a regression under --significance was decided
    other_scope: OtherScope | None = None  # another model's baseline, for information (not compared)
    cause: str | None = None  # why a run was not compared, apart from the reason's sentence

    def as_dict(self) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = {
            "state": self.state.value,
            "regressed": self.regressed,
            "baseline_run_id": self.baseline_run_id,
            "pass_rate_delta": self.pass_rate_delta,
            "mean_score_delta": self.mean_score_delta,
            "reason": self.reason,
        }
        if self.treatment_changed is not None:
            out["treatment_changed"] = self.treatment_changed
        if self.paired is not None:
            out["paired_test"] = self.paired.as_dict()
        if self.significance is not None:
            out["significance"] = self.significance
        if self.baseline_source is not None:
            out["baseline_source"] = self.baseline_source
            out["baseline_file"] = self.baseline_file
        if self.flips is not None:
            out["flips"] = self.flips.as_dict()
        if self.gate_basis is not None:
            out["gate_basis"] = self.gate_basis.value
        if self.other_scope is not None:
            out["other_scope"] = self.other_scope.as_dict()
        return out

    @classmethod
    def not_compared(
        cls, cause: str, state: ComparisonState = ComparisonState.NOT_COMPARED, **kwargs: Any
    ) -> Comparison:
        """A run that was not compared, and why: the sentence is made from ``cause`` here, and
        ``cause`` stays apart for the gate's failure (README "Baselines and regressions")."""
        return cls(state, f"Not compared: {cause}.", cause=cause, **kwargs)

    @classmethod
    def from_dict(cls, data: Mapping[str, JsonValue]) -> Comparison:
        """The inverse of ``as_dict`` (a stored comparison)."""
        paired = data.get("paired_test")
        return cls(
            # a state or basis no version wrote (a damaged or hostile database) reads as unknown
            state=ComparisonState.read(data.get("state")) or ComparisonState.UNKNOWN,
            reason=data["reason"],
            regressed=bool(data.get("regressed")),
            baseline_run_id=data.get("baseline_run_id"),
            pass_rate_delta=data.get("pass_rate_delta"),
            mean_score_delta=data.get("mean_score_delta"),
            treatment_changed=data.get("treatment_changed"),
            paired=PairedTest.from_dict(paired) if isinstance(paired, Mapping) else None,
            significance=data.get("significance"),
            baseline_source=data.get("baseline_source"),
            baseline_file=data.get("baseline_file"),
            flips=Flips.from_dict(flips) if isinstance(flips := data.get("flips"), Mapping) else None,
            gate_basis=GateBasis.read(data.get("gate_basis")),
            other_scope=OtherScope.from_dict(other) if isinstance(other := data.get("other_scope"), Mapping) else None,
        )


def shared_generator(serving: list[ServingRecord | None]) -> ServingRecord | None:
    """The one verified serving record every answered item reports, else None."""
    answered = [s for s in serving if s is not None]
    if not answered or not all(s.verified for s in answered):
        return None
    first = answered[0]
    return first if all(s == first for s in answered) else None


@quick_init
@dataclass(frozen=True, slots=True)
class Aggregates:
    """A run's counts and rates; both rates are 0.0 for a run with no items."""

    item_count: int = 0
    passed_count: int = 0
    error_count: int = 0
    pass_rate: float = 0.0
    mean_score: float = 0.0

    @classmethod
    def of(cls, items: tuple[ItemResult, ...]) -> Aggregates:
        n = len(items)
        passed = sum(1 for i in items if i.passed)
        return cls(
            item_count=n,
            passed_count=passed,
            error_count=sum(1 for i in items if i.errored),
            pass_rate=passed / n if n else 0.0,
            mean_score=sum(i.score for i in items) / n if n else 0.0,
        )


@quick_init
@dataclass(frozen=True, slots=True)
class RunResult:
    """A prompt run: what ran, on which generator, each item, and the aggregates.

    Built by ``RunResult.create`` from items (aggregates and generator derived from them), or
    read back from the store (where items may be absent under the ``none`` privacy level).
    """

    run_id: str
    set_id: str
    set_fingerprint: str
    provider: str
    model: str
    grader: str  # the stored grader: deterministic, a decision yardstick, decision, decision:failed
    items: tuple[ItemResult, ...]
    started_at: str
    finished_at: str
    generator: ServingRecord | None
    totals: Aggregates
    tolerances: Tolerances = Tolerances()
    comparison: Comparison | None = None
    set_name: str = ""
    set_path: str | None = None
    adapter: str = ""
    usage: Usage = Usage()
    grader_usage: Usage = Usage()
    cost: float | None = None
    grader_cost: float | None = None
    repeats: int = 1
    gate: GateVerdict | None = None  # the gate verdict, once decided (evalkit.compare.gate_of)
    kind: Literal["prompts"] = "prompts"

    @classmethod
    def create(cls, items: tuple[ItemResult, ...], **fields: Any) -> RunResult:
        usage, grader_usage = Usage(), Usage()
        for item in items:
            if not item.cached:
                usage = usage + item.usage
            grader_usage = grader_usage + item.grader_usage
        return cls(
            items=items,
            generator=shared_generator([i.serving for i in items]),
            totals=Aggregates.of(items),
            usage=usage,
            grader_usage=grader_usage,
            **fields,
        )

    @property
    def sample_count(self) -> int:
        """Answers graded: prompts x repeats."""
        return self.totals.item_count

    @property
    def prompt_count(self) -> int:
        return self.totals.item_count // max(1, self.repeats)

    @property
    def passed_count(self) -> int:
        return self.totals.passed_count

    @property
    def error_count(self) -> int:
        return self.totals.error_count

    @property
    def pass_rate(self) -> float:
        return self.totals.pass_rate

    @property
    def mean_score(self) -> float:
        return self.totals.mean_score


@quick_init
@dataclass(frozen=True, slots=True)
class Ranking:
    """What a retriever returns for one question: ranked ids and any provenance it declares."""

    ids: tuple[str, ...]
    provenance: Mapping[str, object] = field(default_factory=dict)
    latency_ms: float = 0.0


@quick_init
@dataclass(frozen=True, slots=True)
class RetrievalItem:
    """One labelled question's outcome: hits, and the first three distinct ids retrieved."""

    id: str
    form: str
    hard_class: str | None
    top1_hit: bool
    top3_hit: bool
    retrieved: tuple[str, ...]
    question: str = ""
    error: str | None = None
    latency_ms: float | None = None

    @property
    def errored(self) -> bool:
        return self.error is not None


@quick_init
@dataclass(frozen=True, slots=True)
class RetrievalRunResult:
    """A retrieval run: rates, breakdowns, ranking metrics, provenance and fingerprints."""

    run_id: str
    set_id: str
    retriever: str
    items: tuple[RetrievalItem, ...]
    started_at: str
    finished_at: str
    question_count: int
    top1_hit_rate: float
    top3_hit_rate: float
    by_form: Mapping[str, Mapping[str, float | int]]
    by_hard_class: Mapping[str, Mapping[str, float | int]]
    metrics: Mapping[str, float]
    scored: int
    left_out: int
    provenance: Mapping[str, str | None]
    benchmark_fingerprint: str | None
    variant_fingerprint: str
    top1_hits: int = 0
    top3_hits: int = 0
    tolerances: RetrievalTolerances = RetrievalTolerances()
    comparison: Comparison | None = None
    set_name: str = ""
    set_path: str | None = None
    error_count: int = 0
    gate: GateVerdict | None = None  # the gate verdict, once decided (evalkit.compare.gate_of)
    kind: Literal["retrieval"] = "retrieval"
    grader: str = "retrieval_hit_rate"
