"""Any OpenAI-compatible ``/chat/completions`` endpoint (OpenAI, vLLM, Ollama, llama.cpp, ...)."""

from __future__ import annotations

import os
from typing import Any

from evalkit.config import OPENAI_DEFAULT_URL, ProviderConfig
from evalkit.errors import InputError, ProviderError
from evalkit.providers.http import body_error, provider_client
from evalkit.records import (
    RESERVED_PARAMS,
    Completion,
    CompletionRequest,
    JsonValue,
    ServingRecord,
    Usage,
    recorded_tool_calls,
)


def api_key(config: ProviderConfig) -> str | None:
    """The key from the environment variable the instance names; an unset variable is an error.
    Surrounding whitespace (a pasted newline) is dropped; whitespace or control characters inside
    are an error, since the key would be refused in a header and could be echoed in the message."""
    if not config.api_key_env:
        return None
    key = os.environ.get(config.api_key_env, "").strip()
    if not key:
        raise InputError(
            f"provider '{config.id}': environment variable {config.api_key_env} is not set; "
            f"export {config.api_key_env}=... (keys are only read from the environment)"
        )
    if any(c.isspace() or not c.isprintable() for c in key):
        raise InputError(
            f"provider '{config.id}': the key in {config.api_key_env} contains spaces or control characters; "
            "export the key alone"
        )
    return key


class OpenAIProvider:
    """Chat completions over one keep-alive client, bounded by the instance's max_concurrency."""

    adapter = "openai"

    def __init__(self, config: ProviderConfig, base_url: str | None = None, adapter: str = "openai") -> None:
        self.instance_id = config.id
        self.adapter = adapter
        self.config = config
        key = api_key(config)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.client = provider_client(config, base_url or config.base_url or OPENAI_DEFAULT_URL, headers, key)

    def payload(self, request: CompletionRequest) -> dict[str, Any]:
        payload: dict[str, Any] = {
            **{k: v for k, v in request.params.items() if k not in RESERVED_PARAMS},
            "model": request.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
        }
        if request.response_schema is not None:
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "strict": True, "schema": dict(request.response_schema)},
            }
        if request.top_logprobs:
            payload["logprobs"] = True
            payload["top_logprobs"] = request.top_logprobs
        if request.tools:  # a tool_choice without tools is refused by the API: sent only with them
            payload["tools"] = [{"type": "function", "function": dict(tool)} for tool in request.tools]
            if request.tool_choice is not None:
                payload["tool_choice"] = tool_choice(request.tool_choice)
        return payload

    async def complete(self, request: CompletionRequest) -> Completion:
        body, latency_ms = await self.client.call("chat/completions", self.payload(request))
        return self.parse(body, request, latency_ms)

    def parse(self, body: dict[str, Any], request: CompletionRequest, latency_ms: float) -> Completion:
        # an answer of another shape is no answer: never graded (or cached) as an empty one
        choices = body.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
        message = choice.get("message")
        if not isinstance(message, dict):
            detail = self.client.mask(body_error(body))  # an error sent with a 200 (it may quote the key)
            raise ProviderError(
                f"provider '{self.instance_id}': response has no choices[0].message{f' ({detail})' if detail else ''}"
            )
        content = message.get("content")
        if not isinstance(content, str | list | None):
            raise ProviderError(f"provider '{self.instance_id}': choices[0].message.content is not text")
        if isinstance(content, list):  # content parts
            content = "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
        refusal = message.get("refusal")
        if not content and isinstance(refusal, str) and refusal:  # the model declined: that is its answer
            content = refusal
        calls = recorded_tool_calls(message.get("tool_calls"))
        if content is None and calls:  # a model that only acted: graded as an empty answer
            content = ""
        if content is None:  # no text at all (a filtered answer): not an empty answer
            finish = choice.get("finish_reason")
            why = f" (finish_reason {str(finish)[:40]!r})" if isinstance(finish, str) and finish else ""
            raise ProviderError(
                f"provider '{self.instance_id}': choices[0].message.content is null{why}: the endpoint gave no answer"
            )
        reported = body.get("model")
        extras: dict[str, JsonValue] = {k: choice[k] for k in ("logprobs", "finish_reason") if k in choice}
        if calls:
            extras["tool_calls"] = calls
        return Completion(
            text=content if isinstance(content, str) else "",
            serving=ServingRecord(
                self.instance_id, request.model, reported if isinstance(reported, str) and reported else None
            ),
            usage=Usage.from_body(body.get("usage"), "prompt_tokens", "completion_tokens"),
            latency_ms=latency_ms,
            adapter=self.adapter,
            raw=extras,
        )

    async def aclose(self) -> None:
        await self.client.aclose()


def tool_choice(choice: JsonValue) -> JsonValue:
    """A set's ``tool_choice`` in the Chat Completions form: ``auto``, ``none`` and ``required`` as
    they are, ``{name: N}`` as ``{"type": "function", "function": {"name": N}}``."""
    if isinstance(choice, dict) and "name" in choice:
        return {"type": "function", "function": {"name": choice["name"]}}
    return choice
