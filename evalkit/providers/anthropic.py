"""The Anthropic Messages API: system prompt as its own field, x-api-key, anthropic-version.

A conversation is sent as its user and assistant turns, its system turns joined into ``system``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from evalkit.config import ANTHROPIC_DEFAULT_URL, ProviderConfig
from evalkit.errors import ProviderError
from evalkit.providers.http import provider_client
from evalkit.providers.openai import api_key
from evalkit.records import (
    RESERVED_PARAMS,
    Completion,
    CompletionRequest,
    JsonValue,
    Message,
    ServingRecord,
    Usage,
    recorded_tool_calls,
)

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 1024
# OpenAI-style parameter names in set files, mapped to the Messages API's own.
TOOL_NAME = "record_answer"
PARAM_NAMES = {"max_tokens": "max_tokens", "temperature": "temperature", "top_p": "top_p", "stop": "stop_sequences"}


def split_system(messages: Sequence[Message]) -> tuple[str, list[dict[str, str]]]:
    """The Messages API's top-level system text and its user/assistant turns.

    Every system turn goes to ``system`` (in order, a blank line apart); two turns of the same
    role in a row become one, a blank line apart, as the API itself combines them, so an endpoint
    that insists on alternating roles gets them alternating.
    """
    system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
    turns: list[dict[str, str]] = []
    for m in messages:
        if m.role == "system":
            continue
        if turns and turns[-1]["role"] == m.role:
            turns[-1]["content"] += f"\n\n{m.content}"
        else:
            turns.append({"role": m.role, "content": m.content})
    return system, turns


class AnthropicProvider:
    adapter = "anthropic"

    def __init__(self, config: ProviderConfig) -> None:
        self.instance_id = config.id
        self.config = config
        key = api_key(config)
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if key:
            headers["x-api-key"] = key
        self.client = provider_client(config, config.base_url or ANTHROPIC_DEFAULT_URL, headers, key)

    def payload(self, request: CompletionRequest) -> dict[str, Any]:
        system, turns = split_system(request.messages)
        payload: dict[str, Any] = {"model": request.model, "messages": turns, "max_tokens": DEFAULT_MAX_TOKENS}
        if system:
            payload["system"] = system
        for name, value in request.params.items():
            if name in PARAM_NAMES:
                payload[PARAM_NAMES[name]] = [value] if name == "stop" and isinstance(value, str) else value
            elif name != "seed" and name not in RESERVED_PARAMS:  # no seed in the Messages API
                payload[name] = value
        tools = [_tool(tool) for tool in request.tools]
        if tools and request.tool_choice is not None:  # a tool_choice without tools is refused
            payload["tool_choice"] = tool_choice(request.tool_choice)
        if request.response_schema is not None:  # structured output through a forced tool call
            schema = dict(request.response_schema)
            tools.append({"name": TOOL_NAME, "description": "Record the answer.", "input_schema": schema})
            payload["tool_choice"] = {"type": "tool", "name": TOOL_NAME}
        if tools:
            payload["tools"] = tools
        return payload

    async def complete(self, request: CompletionRequest) -> Completion:
        body, latency_ms = await self.client.call("messages", self.payload(request))
        return self.parse(body, request, latency_ms)

    def parse(self, body: dict[str, Any], request: CompletionRequest, latency_ms: float) -> Completion:
        """A Messages API answer (from a call, or a batch's result) as a completion."""
        content = body.get("content")
        if not isinstance(content, list):
            raise ProviderError(f"provider '{self.instance_id}': response has no content list")
        text = "".join(
            b["text"]
            for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        )
        uses = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
        if request.response_schema is not None:  # the forced call's input is the answer
            answer = next((b.get("input") for b in uses if b.get("name") == TOOL_NAME), None)
            if answer is not None:
                text = json.dumps(answer)
            uses = [b for b in uses if b.get("name") != TOOL_NAME]
        raw: dict[str, JsonValue] = {"content": content, "stop_reason": body.get("stop_reason")}
        if uses:
            raw["tool_calls"] = recorded_tool_calls(uses)
        reported = body.get("model")
        return Completion(
            text=text,
            serving=ServingRecord(
                self.instance_id, request.model, reported if isinstance(reported, str) and reported else None
            ),
            usage=Usage.from_body(body.get("usage"), "input_tokens", "output_tokens"),
            latency_ms=latency_ms,
            adapter=self.adapter,
            raw=raw,
        )

    async def aclose(self) -> None:
        await self.client.aclose()


def _tool(tool: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """A declared tool (``{name, description, parameters}``) in the Messages API's form."""
    out: dict[str, JsonValue] = {"name": tool["name"]}
    if "description" in tool:
        out["description"] = tool["description"]
    out["input_schema"] = tool.get("parameters") or {"type": "object", "properties": {}}
    return out


def tool_choice(choice: JsonValue) -> JsonValue:
    """A set's ``tool_choice`` in the Messages API's form: ``auto``, ``none``, ``required`` as
    ``{"type": "any"}``, ``{name: N}`` as ``{"type": "tool", "name": N}``."""
    if isinstance(choice, dict) and "name" in choice:
        return {"type": "tool", "name": choice["name"]}
    return {"type": "any" if choice == "required" else choice}
