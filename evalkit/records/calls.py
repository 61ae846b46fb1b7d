"""Call records: what a provider is asked (messages, requests) and what it answers (completions,
usage, tool calls, the serving record), with the sanitising an answer gets before it is kept.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from evalkit.records.base import JsonValue, Params, record


@record
class Message:
    role: str
    content: str


# What evalkit sends itself and records as sent: never taken from a set's params (the schema
# refuses them there; the adapters drop them from a CompletionRequest built in code).
RESERVED_PARAMS = ("model", "messages", "system", "stream")


@record
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


@record
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


@record
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


@record
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


@record
class Embeddings:
    """What an embeddings endpoint answered for a list of texts: one vector per text, in order,
    the model it reported (None: it named none) and the input tokens it counted (README
    "Embeddings"). ``cached`` counts the vectors replayed from the completion cache, ``calls``
    the requests sent for the rest."""

    vectors: tuple[tuple[float, ...], ...]
    reported_model: str | None
    input_tokens: int = 0
    cached: int = 0
    calls: int = 0


@record
class Similarity:
    """How close an answer is to an expected text (README "Embeddings"): the cosine of their
    embeddings clipped to 0..1, the model that embedded both, and what it took (tokens, vectors
    replayed from the completion cache, requests sent)."""

    score: float
    reported_model: str | None
    input_tokens: int = 0
    cached: int = 0
    calls: int = 0


@record
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


@record
class CallFacts:
    """What the grader may check of the call besides its text (latency_ms and cost assertions)."""

    latency_ms: float | None = None
    cost: float | None = None  # USD, when the answering instance is priced
    model: str | None = None  # the reported model
    tool_calls: tuple[ToolCall, ...] = ()
    context: JsonValue = None  # what an application reported it used (context_contains)
