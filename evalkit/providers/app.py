"""What the application adapters (http, python, command) send and what they accept back
(README, "Testing your application").

The request, the same for the three (the http body template sees the same names):
``prompt`` (the last user turn), ``messages`` (the whole conversation, the system turn first when
there is one), ``system``, ``vars``, ``tools`` (the declared tools, ``{name, description,
parameters}`` each; null when none are), ``tool_choice``, ``params``, ``set`` and ``prompt_id``.

The answer: a string (the output), or an object ``{"output": str, "model": str, "usage":
{"input_tokens", "output_tokens"}, "tool_calls": [...], "context": [...], "cost": usd}``, every
key but ``output`` optional. The reported model (the serving proof) is the answer's ``model``;
without it the run is unverified and not compared. Tool calls (``{name, arguments}`` each, or
OpenAI's ``{function: {name, arguments}}``; README, "Tools and tool calls"), context and cost are
kept with the answer (``Completion.raw``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from evalkit.errors import ProviderError
from evalkit.records import Completion, CompletionRequest, JsonValue, ServingRecord, Usage, recorded_tool_calls

ANSWER_KEYS = ("output", "model", "usage", "tool_calls", "context", "cost")


def app_request(request: CompletionRequest) -> dict[str, Any]:
    """The request an application adapter is given (see the module's text)."""
    messages = [{"role": m.role, "content": m.content} for m in request.messages]
    users = [m.content for m in request.messages if m.role == "user"]
    return {
        "prompt": users[-1] if users else "",
        "messages": messages,
        "system": request.system,
        "vars": dict(request.vars),
        "tools": [dict(tool) for tool in request.tools] or None,
        "tool_choice": request.tool_choice,
        "params": dict(request.params),
        "set": request.set_id,
        "prompt_id": request.item_id,
    }


def app_completion(
    answer: object, request: CompletionRequest, *, instance: str, adapter: str, latency_ms: float
) -> Completion:
    """An application's answer (a string or an answer object) as a Completion; ProviderError
    (this item's error) for any other shape."""
    label = f"provider '{instance}'"
    if isinstance(answer, str):
        return Completion(answer, ServingRecord(instance, request.model, None), latency_ms=latency_ms, adapter=adapter)
    if not isinstance(answer, Mapping):
        raise ProviderError(
            f"{label}: the answer is {type(answer).__name__}; return a string or an object with 'output'"
        )
    output = answer.get("output")
    tool_calls = answer.get("tool_calls")
    if output is None and tool_calls:  # a feature that only acted: graded as an empty answer
        output = ""
    if not isinstance(output, str):
        keys = ", ".join(sorted(str(k) for k in answer)[:12]) or "none"
        raise ProviderError(f"{label}: the answer has no text 'output' (its keys: {keys})")
    model = answer.get("model")
    reported = model if isinstance(model, str) and model.strip() else None
    usage = answer.get("usage")
    raw: dict[str, JsonValue] = {}
    if tool_calls is not None:
        raw["tool_calls"] = _tool_calls(tool_calls, label)
    context = answer.get("context")
    if context is not None:
        raw["context"] = _json(context)
    cost = answer.get("cost")
    if isinstance(cost, int | float) and not isinstance(cost, bool) and math.isfinite(cost) and cost >= 0:
        raw["cost"] = float(cost)
    return Completion(
        text=output,
        serving=ServingRecord(instance, request.model, reported),
        usage=Usage.from_body(usage, "input_tokens", "output_tokens"),
        latency_ms=latency_ms,
        adapter=adapter,
        raw=raw or None,
    )


def _tool_calls(value: object, label: str) -> list[dict[str, JsonValue]]:
    """The answer's ``tool_calls`` as recorded; ProviderError for an entry without a name."""
    listed = _json(value)
    if not isinstance(listed, list):
        raise ProviderError(f"{label}: the answer's tool_calls is not a list; return [{{name, arguments}}, ...]")
    calls = recorded_tool_calls(listed)
    if len(calls) != len(listed):
        first = next(k for k, e in enumerate(listed) if not recorded_tool_calls([e]))
        raise ProviderError(f"{label}: the answer's tool_calls[{first}] has no name; give each call a name")
    return calls


def dig(body: object, path: str) -> object:
    """The value at a dotted path (``answer.text``, ``choices.0.message.content``); KeyError
    naming the first step that is not there."""
    value = body
    for step in path.split("."):
        if isinstance(value, Mapping) and step in value:
            value = value[step]
        elif isinstance(value, list) and step.lstrip("-").isdigit() and -len(value) <= int(step) < len(value):
            value = value[int(step)]
        else:
            raise KeyError(step)
    return value


def top_level(body: object) -> str:
    """The answer's top-level keys (or its type), for an error that says what came back."""
    if isinstance(body, Mapping):
        keys = sorted(str(k) for k in body)
        more = f" (and {len(keys) - 12} more)" if len(keys) > 12 else ""
        return f"its top-level keys: {', '.join(keys[:12]) or 'none'}{more}"
    return f"it is a JSON {type(body).__name__}"


def _json(value: object) -> JsonValue:
    """``value`` kept as JSON (what a function returned may hold other Python objects)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # NaN is no JSON: it could be neither stored nor printed as such
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, Mapping):
        return {str(k): _json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json(v) for v in value]
    return str(value)
