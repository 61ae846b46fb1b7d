"""The provider adapters and the judge's use of them against the shapes of the real APIs: null
text parts, refusals, parameters that would override what is recorded as sent, multi-digit
level tokens, OpenAI's strict structured output.

Each test states the behaviour a user of the real OpenAI Chat Completions or Anthropic Messages
API (or an OpenAI-compatible server) would expect; the loopback ``FakeServer`` plays the API.
"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import pytest

from evalkit.config import ProviderConfig
from evalkit.graders.decision import DecisionGrader, weighted_level
from evalkit.providers.anthropic import AnthropicProvider
from evalkit.providers.openai import OpenAIProvider
from evalkit.records import Completion, CompletionRequest, Grade, Message, Prompt, PromptSet
from tests.fakeserver import FakeServer, Recorded, Reply, anthropic_reply, openai_reply

ONE_PROMPT = """
id: review.one
name: One prompt
prompts:
  - id: only
    prompt: only question
    assertions: [{contains: echo}]
"""

# The JSON Schema keywords OpenAI's Structured Outputs accept with "strict": true (its
# "Supported schemas" guide); anything else is refused with
# 400 "Invalid schema for response_format '...': In context=(...), '<keyword>' is not permitted."
STRICT_KEYWORDS = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "enum", "const", "items", "anyOf",
        "$ref", "$defs", "definitions", "description", "title", "pattern", "format", "multipleOf",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems",
    }
)  # fmt: skip


def not_permitted(schema: Any) -> list[str]:
    """The keywords of ``schema`` (and its subschemas) that strict mode refuses."""
    if not isinstance(schema, dict):
        return []
    found = [k for k in schema if k not in STRICT_KEYWORDS]
    subschemas = [*(schema.get("properties") or {}).values(), *(schema.get("$defs") or {}).values()]
    subschemas += [schema[k] for k in ("items", "additionalProperties") if isinstance(schema.get(k), dict)]
    subschemas += list(schema.get("anyOf") or [])
    return found + [k for sub in subschemas for k in not_permitted(sub)]


def openai_config(server: FakeServer, instance: str = "fake") -> ProviderConfig:
    return ProviderConfig(id=instance, adapter="openai", model="alias", base_url=f"{server.url}/v1", max_retries=0)


def anthropic_config(server: FakeServer) -> ProviderConfig:
    # always a loopback base_url: without one the adapter would call the real API
    return ProviderConfig(id="claude", adapter="anthropic", model="alias", base_url=f"{server.url}/v1", max_retries=0)


def complete(provider: OpenAIProvider | AnthropicProvider, request: CompletionRequest) -> Completion:
    async def main() -> Completion:
        try:
            return await provider.complete(request)
        finally:
            await provider.aclose()

    return asyncio.run(main())


def simple_request(**params: Any) -> CompletionRequest:
    return CompletionRequest((Message("user", "hello"),), model="alias", params=params)


# --- the judge ---------------------------------------------------------------------------------


def test_a_multi_digit_alternative_token_is_not_a_level() -> None:
    # level token "2" (p=0.9); the alternative "23" is a different number, not one of the five levels
    level = {
        "token": "2",
        "logprob": math.log(0.9),
        "top_logprobs": [{"token": "2", "logprob": math.log(0.9)}, {"token": "23", "logprob": math.log(0.1)}],
    }
    raw = {"logprobs": {"content": [{"token": '{"level":', "logprob": 0.0}, level]}}
    # today: (2*0.9 + 23*0.1) / 1.0 = 4.1, so a level-2 (failing) judgement passes with score 1.0
    assert weighted_level(raw) == pytest.approx(2.0)


def strict_openai(request: Recorded) -> Reply:
    """An OpenAI-like judge: refuses a strict schema with unsupported keywords, else answers level 3."""
    body = request.json if isinstance(request.json, dict) else {}
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema")
    refused = not_permitted(schema) if fmt.get("json_schema", {}).get("strict") else []
    if refused:
        message = (
            "Invalid schema for response_format 'answer': In context=('properties', 'justification'), "
            f"'{refused[0]}' is not permitted."
        )
        return Reply(
            status=400,
            json={"error": {"message": message, "type": "invalid_request_error", "param": "response_format"}},
        )
    return openai_reply(json.dumps({"level": 3, "justification": "Mostly right."}), model="judge-model")


def test_the_openai_judge_schema_is_accepted_by_strict_structured_outputs(fake_llm: FakeServer) -> None:
    fake_llm.handler = strict_openai
    prompt = Prompt("p", "What is 2 + 2?", reference="4")
    prompt_set = PromptSet("review.judge", "Judge", (prompt,))

    async def main() -> Grade:
        judge = OpenAIProvider(openai_config(fake_llm, "judge"))
        try:
            return await DecisionGrader(judge, "judge-alias").grade(prompt_set, prompt, "4", None)
        finally:
            await judge.aclose()

    grade = asyncio.run(main())
    assert grade.yardstick == "decision:judge:judge-model:v1"
    # one structured call (with logprobs), not a refused one followed by a plain-text retry
    assert fake_llm.calls == 1
    assert "response_format" in fake_llm.requests[0].json


# --- response parsing --------------------------------------------------------------------------


def test_an_openai_content_part_without_text_is_skipped_not_a_crash(
    cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    parts = [{"type": "text", "text": None}, {"type": "text", "text": "echo: kept"}]
    body = {"model": "m", "choices": [{"message": {"role": "assistant", "content": parts}}]}
    fake_llm.handler = lambda _: Reply(json=body)
    write_file("sets/one.yaml", ONE_PROMPT)
    result = cli("run", "sets/one.yaml", "--format", "json")
    assert result.exception is None, repr(result.exception)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["items"][0]["passed"] is True


def test_an_anthropic_text_block_without_text_is_skipped(fake_llm: FakeServer) -> None:
    blocks = [{"type": "text", "text": None}, {"type": "text", "text": "the rest"}]
    body = {"model": "claude-x", "content": blocks, "usage": {}, "stop_reason": "end_turn"}
    fake_llm.enqueue(Reply(json=body))
    assert complete(AnthropicProvider(anthropic_config(fake_llm)), simple_request()).text == "the rest"


def test_an_openai_refusal_is_not_silently_an_empty_answer(fake_llm: FakeServer) -> None:
    refusal = "I'm sorry, I cannot help with that."
    body = {
        "model": "gpt-x",
        "choices": [{"message": {"role": "assistant", "content": None, "refusal": refusal}, "finish_reason": "stop"}],
    }
    fake_llm.enqueue(Reply(json=body))
    assert complete(OpenAIProvider(openai_config(fake_llm)), simple_request()).text == refusal


# --- serving identity --------------------------------------------------------------------------


def test_a_model_in_params_never_makes_the_serving_record_lie(
    cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    write_file(
        "sets/one.yaml",
        """
        id: review.sneaky
        name: Model in params
        params: {model: other-alias}
        prompts:
          - id: only
            prompt: only question
            assertions: [{contains: echo}]
        """,
    )
    result = cli("run", "sets/one.yaml", "--format", "json")
    assert result.exit_code == 2
    assert "params.model: 'model' is what evalkit sends for you" in result.stderr
    assert fake_llm.calls == 0


def test_anthropic_sends_the_alias_it_records(fake_llm: FakeServer) -> None:
    completion = complete(AnthropicProvider(anthropic_config(fake_llm)), simple_request(model="other-alias"))
    assert fake_llm.requests[0].json["model"] == completion.serving.model


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"choices": [{"message": None}]}, "response has no choices[0].message"),
        ({"choices": [{"message": {"content": 5}}]}, "choices[0].message.content is not text"),
        ({"error": {"message": "quota exceeded"}}, "response has no choices[0].message (quota exceeded)"),
    ],
)
def test_an_openai_answer_of_another_shape_is_an_item_error_not_an_empty_answer(
    cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any, body: dict[str, Any], error: str
) -> None:
    fake_llm.handler = lambda request: Reply(json=body)
    write_file("sets/one.yaml", ONE_PROMPT)
    result = cli("run", "sets/one.yaml", "--format", "json")
    assert result.exit_code == 3
    (item,) = json.loads(result.stdout)["items"]
    assert item["error"] == f"provider 'fake': {error}"


@pytest.mark.parametrize("adapter", ["openai", "anthropic"])
def test_params_built_in_code_never_override_what_is_sent_and_recorded(fake_llm: FakeServer, adapter: str) -> None:
    provider = (
        OpenAIProvider(openai_config(fake_llm))
        if adapter == "openai"
        else AnthropicProvider(anthropic_config(fake_llm))
    )
    request = CompletionRequest(
        (Message("system", "be brief"), Message("user", "hello")),
        model="alias",
        params={"model": "other", "messages": [], "system": "other", "stream": True, "temperature": 0},
    )
    fake_llm.enqueue(Reply(json=openai_reply("x").json if adapter == "openai" else anthropic_reply("x").json))
    complete(provider, request)
    sent = fake_llm.requests[0].json
    assert (sent["model"], sent["temperature"], "stream" in sent) == ("alias", 0, False)
    assert sent["messages"][-1] == {"role": "user", "content": "hello"}
    if adapter == "anthropic":
        assert sent["system"] == "be brief"


def test_the_schema_refuses_exactly_the_params_evalkit_sends_itself() -> None:
    from evalkit.records import RESERVED_PARAMS
    from evalkit.sets.validation import load_schema

    params = load_schema("prompts")["$defs"]["params"]
    assert params["propertyNames"]["not"]["enum"] == list(RESERVED_PARAMS)


@pytest.mark.parametrize(("finish", "noted"), [("length", True), ("stop", False)])
def test_a_failing_answer_cut_off_at_max_tokens_says_so(
    cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any, finish: str, noted: bool
) -> None:
    body = {
        "model": "m",
        "choices": [{"message": {"role": "assistant", "content": "The answer is"}, "finish_reason": finish}],
    }
    fake_llm.handler = lambda _: Reply(json=body)
    write_file("sets/one.yaml", ONE_PROMPT)
    result = cli("run", "sets/one.yaml", "--format", "json")
    (item,) = json.loads(result.stdout)["items"]
    assert item["passed"] is False
    cut = "(the answer was cut off at max_tokens; raise it in the set's params)"
    assert item["reason"].endswith(cut) is noted


def test_anthropic_max_tokens_stop_marks_the_completion_truncated(fake_llm: FakeServer) -> None:
    body = {"model": "claude-x", "content": [{"type": "text", "text": "The"}], "usage": {}, "stop_reason": "max_tokens"}
    fake_llm.enqueue(Reply(json=body))
    assert complete(AnthropicProvider(anthropic_config(fake_llm)), simple_request()).truncated is True
