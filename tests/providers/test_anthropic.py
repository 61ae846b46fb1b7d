"""The anthropic adapter against the loopback server: Messages API shape, headers, serving, retries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalkit.api import run_set
from evalkit.records import ServingRecord, Usage
from tests.fakeserver import FakeServer, Recorded, Reply, anthropic_reply, last_user_message

KEY_ENV = "EVALKIT_TEST_ANTHROPIC_KEY"
KEY = "sk-ant-test-5d1e77"


@pytest.fixture
def claude_config(write_file: Any, fake_llm: FakeServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(KEY_ENV, KEY)
    return write_file(
        "evalkit.yaml",
        f"""
        default_provider: claude
        providers:
          - id: claude
            adapter: anthropic
            base_url: {fake_llm.url}/v1
            model: claude-alias
            api_key_env: {KEY_ENV}
            max_retries: 2
            retry_backoff_s: 0.01
            timeout_s: 5
        """,
    )


SHAPE_SET = """
id: claude.shape
name: Messages shape
system: You are concise.
params: {temperature: 0, stop: "END"}
prompts:
  - id: inherits
    prompt: First question
    assertions: [{contains: echo}]
  - id: overrides
    prompt: Second question
    system: Answer in English.
    params: {max_tokens: 64, stop: ["X", "Y"], top_p: 0.5}
    assertions: [{contains: echo}]
  - id: no-system
    prompt: Third question
    system: ""
    assertions: [{contains: echo}]
"""

ONE = """
id: claude.one
name: One
prompts:
  - id: only
    prompt: only question
    assertions: [{contains: ok}]
"""


def by_prompt(requests: list[Recorded]) -> dict[str, Recorded]:
    return {last_user_message(r): r for r in requests}


def test_messages_request_shape(cli: Any, claude_config: Path, fake_llm: FakeServer, write_file: Any) -> None:
    write_file("sets/shape.yaml", SHAPE_SET)
    result = cli("run", "sets/shape.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert fake_llm.calls == 3
    sent = by_prompt(fake_llm.requests)
    assert sent["First question"].json == {
        "model": "claude-alias",
        "system": "You are concise.",
        "messages": [{"role": "user", "content": "First question"}],
        "max_tokens": 1024,
        "temperature": 0,
        "stop_sequences": ["END"],
    }
    assert sent["Second question"].json == {
        "model": "claude-alias",
        "system": "Answer in English.",
        "messages": [{"role": "user", "content": "Second question"}],
        "max_tokens": 64,
        "temperature": 0,
        "stop_sequences": ["X", "Y"],
        "top_p": 0.5,
    }
    assert sent["Third question"].json == {
        "model": "claude-alias",
        "messages": [{"role": "user", "content": "Third question"}],
        "max_tokens": 1024,
        "temperature": 0,
        "stop_sequences": ["END"],
    }
    for request in fake_llm.requests:
        assert request.method == "POST"
        assert request.path == "/v1/messages"
        assert request.headers["x-api-key"] == KEY
        assert request.headers["anthropic-version"] == "2023-06-01"
        assert "authorization" not in request.headers
        assert "stop" not in request.json


def test_max_tokens_is_sent_without_params(
    cli: Any, claude_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    write_file("sets/one.yaml", ONE)
    fake_llm.handler = lambda req: anthropic_reply("ok")
    result = cli("run", "sets/one.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert [r.json for r in fake_llm.requests] == [
        {"model": "claude-alias", "messages": [{"role": "user", "content": "only question"}], "max_tokens": 1024}
    ]


def test_serving_record_and_usage(cli: Any, claude_config: Path, fake_llm: FakeServer, write_file: Any) -> None:
    write_file("sets/shape.yaml", SHAPE_SET)
    tokens = {"First question": (12, 7), "Second question": (20, 1), "Third question": (3, 30)}

    def reply(req: Recorded) -> Reply:
        prompt = last_user_message(req)
        input_tokens, output_tokens = tokens[prompt]
        return anthropic_reply(
            f"echo: {prompt}", model="claude-served-3", input_tokens=input_tokens, output_tokens=output_tokens
        )

    fake_llm.handler = reply
    result = cli("run", "sets/shape.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["generator"] == {"provider": "claude", "model": "claude-alias", "reported_model": "claude-served-3"}
    assert doc["usage"] == {"input_tokens": 35, "output_tokens": 38}
    run = run_set("sets/shape.yaml", use_cache=False)
    assert {item.serving for item in run.items} == {ServingRecord("claude", "claude-alias", "claude-served-3")}
    assert [item.usage for item in run.items] == [Usage(12, 7), Usage(20, 1), Usage(3, 30)]
    assert [item.response for item in run.items] == [f"echo: {prompt}" for prompt in tokens]


def test_text_is_the_concatenated_text_blocks(claude_config: Path, fake_llm: FakeServer, write_file: Any) -> None:
    write_file("sets/one.yaml", ONE)
    reply = anthropic_reply("")
    reply.json["content"] = [
        {"type": "thinking", "thinking": "hmm"},
        {"type": "text", "text": "o"},
        {"type": "text", "text": "k"},
    ]
    fake_llm.enqueue(reply)
    run = run_set("sets/one.yaml")
    assert run.items[0].response == "ok"
    assert run.items[0].passed


def test_response_without_model_gives_no_serving_proof(
    cli: Any, claude_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    write_file("sets/shape.yaml", SHAPE_SET)
    fake_llm.model = None
    result = cli("run", "sets/shape.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["generator"] is None
    assert doc["comparison"]["state"] == "not_compared"


@pytest.mark.parametrize("status", [529, 503, 429])
def test_overloaded_then_success(
    cli: Any, claude_config: Path, fake_llm: FakeServer, write_file: Any, status: int
) -> None:
    write_file("sets/one.yaml", ONE)
    fake_llm.enqueue(
        Reply(status=status, json={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        anthropic_reply("ok"),
    )
    result = cli("run", "sets/one.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["items"][0]["passed"] is True
    assert fake_llm.calls == 2


def test_overloaded_until_retries_run_out_is_an_item_error(
    cli: Any, claude_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    write_file("sets/shape.yaml", SHAPE_SET)

    def reply(req: Recorded) -> Reply:
        prompt = last_user_message(req)
        if prompt == "Second question":
            return Reply(
                status=529, json={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
            )
        return anthropic_reply(f"echo: {prompt}")

    fake_llm.handler = reply
    result = cli("run", "sets/shape.yaml", "--format", "json")
    assert result.exit_code == 3
    assert result.exception is None
    assert sum(1 for r in fake_llm.requests if last_user_message(r) == "Second question") == 3
    doc = json.loads(result.stdout)
    assert doc["error_count"] == 1
    assert doc["passed_count"] == 2
    assert [i["error"] for i in doc["items"]] == [
        None,
        "provider 'claude': HTTP 529: Overloaded (after 3 attempts)",
        None,
    ]


def test_response_without_content_list_is_an_item_error(
    cli: Any, claude_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    write_file("sets/one.yaml", ONE)
    fake_llm.enqueue(Reply(json={"type": "message", "model": "claude-test-1"}))
    result = cli("run", "sets/one.yaml", "--format", "json")
    assert result.exit_code == 3
    assert result.exception is None
    assert fake_llm.calls == 1
    assert json.loads(result.stdout)["items"][0]["error"] == "provider 'claude': response has no content list"


def test_malformed_usage_does_not_crash(cli: Any, claude_config: Path, fake_llm: FakeServer, write_file: Any) -> None:
    write_file("sets/one.yaml", ONE)
    reply = anthropic_reply("ok")
    reply.json["usage"] = {"input_tokens": "n/a", "output_tokens": 2}
    fake_llm.enqueue(reply)
    result = cli("run", "sets/one.yaml", "--format", "json")
    assert result.exception is None, repr(result.exception)
    assert result.exit_code in (0, 3)
    assert json.loads(result.stdout)["prompt_count"] == 1


def test_auth_refusal_aborts_and_never_prints_the_key(
    cli: Any, claude_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    write_file("sets/shape.yaml", SHAPE_SET)
    fake_llm.handler = lambda req: Reply(
        status=401,
        json={"type": "error", "error": {"type": "authentication_error", "message": f"invalid x-api-key {KEY}"}},
    )
    result = cli("run", "sets/shape.yaml", "--format", "json", "--concurrency", "1")
    assert result.exit_code == 3
    assert result.exception is None
    assert fake_llm.calls == 1
    assert KEY not in result.stdout + result.stderr
    assert "'claude'" in result.stderr
    assert f"${KEY_ENV}" in result.stderr


def test_unset_key_variable_is_exit_2_with_no_request(
    cli: Any, claude_config: Path, fake_llm: FakeServer, write_file: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV)
    write_file("sets/one.yaml", ONE)
    result = cli("run", "sets/one.yaml")
    assert result.exit_code == 2
    assert f"environment variable {KEY_ENV} is not set" in result.stderr
    assert fake_llm.calls == 0
