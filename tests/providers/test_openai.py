"""The openai adapter against the loopback server: request shape, key header, serving record, usage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalkit.api import run_set
from evalkit.records import ServingRecord, Usage
from tests.fakeserver import FakeServer, Recorded, Reply, last_user_message, openai_reply
from tests.providers.conftest import KEY, KEY_ENV

SHAPE_SET = """
id: shape.demo
name: Request shape
system: You are concise.
params: {temperature: 0, max_tokens: 256}
prompts:
  - id: inherits
    prompt: First question
    assertions: [{contains: echo}]
  - id: overrides
    prompt: Second question
    system: Answer in English.
    params: {max_tokens: 5, top_p: 0.5}
    assertions: [{contains: echo}]
  - id: no-system
    prompt: Third question
    system: ""
    assertions: [{contains: echo}]
"""


def by_prompt(requests: list[Recorded]) -> dict[str, Recorded]:
    return {last_user_message(r): r for r in requests}


def test_request_shape_system_first_and_params_merged(
    cli: Any, keyed_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    write_file("sets/shape.yaml", SHAPE_SET)
    result = cli("run", "sets/shape.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert fake_llm.calls == 3
    sent = by_prompt(fake_llm.requests)
    assert sent["First question"].json == {
        "model": "fake-alias",
        "messages": [
            {"role": "system", "content": "You are concise."},
            {"role": "user", "content": "First question"},
        ],
        "temperature": 0,
        "max_tokens": 256,
    }
    assert sent["Second question"].json == {
        "model": "fake-alias",
        "messages": [
            {"role": "system", "content": "Answer in English."},
            {"role": "user", "content": "Second question"},
        ],
        "temperature": 0,
        "max_tokens": 5,
        "top_p": 0.5,
    }
    assert sent["Third question"].json == {
        "model": "fake-alias",
        "messages": [{"role": "user", "content": "Third question"}],
        "temperature": 0,
        "max_tokens": 256,
    }
    for request in fake_llm.requests:
        assert request.method == "POST"
        assert request.path == "/v1/chat/completions"
        assert request.headers["authorization"] == f"Bearer {KEY}"


def test_a_set_without_system_sends_only_the_user_message(
    cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    write_file(
        "sets/plain.yaml",
        """
        id: shape.plain
        name: No system
        prompts:
          - id: only
            prompt: Just the question
            assertions: [{contains: echo}]
        """,
    )
    result = cli("run", "sets/plain.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert [r.json for r in fake_llm.requests] == [
        {"model": "fake-alias", "messages": [{"role": "user", "content": "Just the question"}]}
    ]
    # no api_key_env: no Authorization header is invented
    assert "authorization" not in fake_llm.requests[0].headers


def test_serving_record_names_instance_alias_and_reported_model(
    keyed_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    write_file("sets/shape.yaml", SHAPE_SET)
    fake_llm.model = "served-model-7"
    run = run_set("sets/shape.yaml")
    expected = {"version": 1, "provider": "fake", "model": "fake-alias", "reported_model": "served-model-7"}
    assert [item.serving.as_dict() if item.serving else None for item in run.items] == [expected] * 3
    assert run.generator == ServingRecord("fake", "fake-alias", "served-model-7")
    assert [item.adapter for item in run.items] == ["openai"] * 3


def test_model_option_is_the_alias_sent_and_recorded(
    cli: Any, keyed_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    write_file("sets/shape.yaml", SHAPE_SET)
    fake_llm.model = "served-model-7"
    result = cli("run", "sets/shape.yaml", "--model", "override-alias", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert {r.json["model"] for r in fake_llm.requests} == {"override-alias"}
    doc = json.loads(result.stdout)
    assert doc["generator"] == {"provider": "fake", "model": "override-alias", "reported_model": "served-model-7"}
    assert doc["model"] == "override-alias"


def test_model_option_through_the_api_records_the_alias_sent(
    keyed_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    write_file("sets/shape.yaml", SHAPE_SET)
    run = run_set("sets/shape.yaml", model="override-alias")
    assert {item.serving for item in run.items} == {ServingRecord("fake", "override-alias", "fake-model-1")}


def test_response_without_model_gives_no_serving_proof(
    cli: Any, keyed_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    write_file("sets/shape.yaml", SHAPE_SET)
    fake_llm.model = None
    result = cli("run", "sets/shape.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["generator"] is None
    assert doc["comparison"]["state"] == "not_compared"
    assert "did not report their model" in doc["comparison"]["reason"]
    assert doc["passed_count"] == 3  # the grades are kept
    gated = cli("run", "sets/shape.yaml", "--format", "json", "--fail-on-regression", "--no-cache")
    assert gated.exit_code == 1, gated.stderr
    assert json.loads(gated.stdout)["comparison"]["state"] == "not_compared"


def test_one_unreported_model_among_reported_ones_gives_no_generator(
    keyed_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    write_file("sets/shape.yaml", SHAPE_SET)
    fake_llm.handler = lambda req: openai_reply(
        "echo", model=None if last_user_message(req) == "Second question" else "fake-model-1"
    )
    run = run_set("sets/shape.yaml")
    assert [item.serving.reported_model if item.serving else "-" for item in run.items] == [
        "fake-model-1",
        None,
        "fake-model-1",
    ]
    assert run.generator is None
    assert run.comparison is not None
    assert run.comparison.state == "not_compared"


def test_usage_tokens_are_recorded(cli: Any, keyed_config: Path, fake_llm: FakeServer, write_file: Any) -> None:
    write_file("sets/shape.yaml", SHAPE_SET)
    tokens = {"First question": (11, 3), "Second question": (13, 5), "Third question": (17, 7)}

    def reply(req: Recorded) -> Any:
        prompt_tokens, completion_tokens = tokens[last_user_message(req)]
        return openai_reply("echo", prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)

    fake_llm.handler = reply
    result = cli("run", "sets/shape.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["usage"] == {"input_tokens": 41, "output_tokens": 15}
    fake_llm.handler = reply
    run = run_set("sets/shape.yaml", use_cache=False)
    assert [item.usage for item in run.items] == [Usage(11, 3), Usage(13, 5), Usage(17, 7)]


def test_unset_key_variable_is_exit_2_with_no_request(
    cli: Any, fake_llm: FakeServer, write_file: Any, db_file: Path
) -> None:
    write_file(
        "evalkit.yaml",
        f"""
        providers:
          - id: fake
            adapter: openai
            base_url: {fake_llm.url}/v1
            model: fake-alias
            api_key_env: EVALKIT_TEST_UNSET_KEY
        """,
    )
    write_file("sets/shape.yaml", SHAPE_SET)
    result = cli("run", "sets/shape.yaml", "--format", "json")
    assert result.exit_code == 2
    assert result.exception is None
    assert result.stdout == ""
    assert result.stderr.startswith("Error: provider 'fake': environment variable EVALKIT_TEST_UNSET_KEY is not set")
    assert fake_llm.calls == 0
    assert not db_file.exists()  # nothing was stored


@pytest.fixture
def run_with_key(cli: Any, keyed_config: Path, write_file: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``evalkit run`` of the shape set with the key variable holding ``value``."""

    def run(value: str) -> Any:
        monkeypatch.setenv(KEY_ENV, value)
        write_file("sets/shape.yaml", SHAPE_SET)
        return cli("run", "sets/shape.yaml", "--format", "json")

    return run


def test_a_pasted_newline_around_the_key_is_dropped(run_with_key: Any, fake_llm: FakeServer) -> None:
    result = run_with_key(f" {KEY}\n")
    assert result.exit_code == 0, result.stderr
    assert fake_llm.requests[-1].headers["authorization"] == f"Bearer {KEY}"


def test_a_key_with_control_characters_inside_is_exit_2_and_never_printed(
    run_with_key: Any, fake_llm: FakeServer
) -> None:
    result = run_with_key(f"{KEY}\nsecond-line")
    assert result.exit_code == 2
    assert result.stderr == (
        f"Error: provider 'fake': the key in {KEY_ENV} contains spaces or control characters; export the key alone\n"
    )
    assert KEY not in result.stdout + result.stderr
    assert fake_llm.calls == 0


def test_unset_key_of_the_fallback_is_exit_2_with_no_request(
    cli: Any, fake_llm: FakeServer, write_file: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    write_file(
        "evalkit.yaml",
        f"""
        default_provider: fake
        providers:
          - id: fake
            adapter: openai
            base_url: {fake_llm.url}/v1
            model: fake-alias
            api_key_env: {KEY_ENV}
            fallback: spare
          - id: spare
            adapter: openai
            base_url: {fake_llm.url}/v1
            model: spare-alias
            api_key_env: EVALKIT_TEST_UNSET_KEY
        """,
    )
    write_file("sets/shape.yaml", SHAPE_SET)
    result = cli("run", "sets/shape.yaml")
    assert result.exit_code == 2
    assert "provider 'spare'" in result.stderr
    assert "EVALKIT_TEST_UNSET_KEY" in result.stderr
    assert fake_llm.calls == 0


def test_an_uppercase_scheme_in_base_url_is_accepted(
    cli: Any, isolated: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    # URL schemes are case-insensitive (RFC 3986 3.1): HTTP:// is the same endpoint as http://
    url = fake_llm.url.replace("http://", "HTTP://")
    write_file("evalkit.yaml", f"providers:\n  - {{id: fake, adapter: openai, base_url: '{url}/v1', model: m}}\n")
    write_file(
        "sets/up.yaml", "id: up.case\nname: Up\nprompts:\n  - {id: q, prompt: Hi, assertions: [{contains: echo}]}\n"
    )
    assert cli("validate", "evalkit.yaml", "sets/up.yaml").exit_code == 0
    result = cli("run", "sets/up.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert [last_user_message(r) for r in fake_llm.requests] == ["Hi"]


def test_a_header_value_is_sent_without_its_surrounding_whitespace(
    cli: Any, isolated: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    # a value pasted with its newline (a YAML block scalar keeps it) would otherwise be refused by
    # the HTTP layer on every call
    write_file(
        "evalkit.yaml",
        f"providers:\n  - id: fake\n    adapter: openai\n    base_url: '{fake_llm.url}/v1'\n    model: m\n"
        "    headers:\n      X-Team: |+\n        search\n\n",
    )
    write_file("sets/h.yaml", "id: h.ws\nname: H\nprompts:\n  - {id: q, prompt: Hi, assertions: [{contains: echo}]}\n")
    result = cli("run", "sets/h.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert fake_llm.requests[0].headers["x-team"] == "search"


def test_an_error_sent_with_a_200_never_shows_the_key(
    cli: Any, keyed_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    fake_llm.handler = lambda request: Reply(json={"error": {"message": f"Incorrect API key provided: {KEY}"}})
    write_file("sets/k.yaml", "id: k.200\nname: K\nprompts:\n  - {id: q, prompt: Hi, assertions: [{contains: x}]}\n")
    result = cli("run", "sets/k.yaml", "--format", "json")
    assert result.exit_code == 3
    (item,) = json.loads(result.stdout)["items"]
    assert item["error"] == "provider 'fake': response has no choices[0].message (Incorrect API key provided: ***)"
    assert KEY not in result.stdout + result.stderr
