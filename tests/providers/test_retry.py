"""The retry policy and fault handling, against the loopback server (openai adapter).

Counts of recorded requests show what was retried; nothing here measures time.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from evalkit.errors import ProviderError, ProviderRefused
from evalkit.providers.retry import MAX_RETRY_AFTER_S, RetryPolicy, TransientError, parse_retry_after
from tests.fakeserver import FakeServer, Recorded, Reply, last_user_message, openai_reply
from tests.providers.conftest import KEY, KEY_ENV

THREE = """
id: faults.three
name: Faults
prompts:
  - id: first
    prompt: first question
    assertions: [{contains: echo}]
  - id: bad
    prompt: bad question
    assertions: [{contains: echo}]
  - id: last
    prompt: last question
    assertions: [{contains: echo}]
"""

ONE = """
id: faults.one
name: One prompt
prompts:
  - id: only
    prompt: only question
    assertions: [{contains: ok}]
"""


def calls_per_prompt(server: FakeServer) -> Counter[str]:
    return Counter(last_user_message(r) for r in server.requests)


def fail_bad(reply: Reply) -> Any:
    """A handler answering ``reply`` to the 'bad' prompt and an echo to the others."""

    def handler(req: Recorded) -> Reply:
        prompt = last_user_message(req)
        return reply if prompt == "bad question" else openai_reply(f"echo: {prompt}")

    return handler


def items(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["id"]: item for item in doc["items"]}


# --- Retry-After -------------------------------------------------------------------------------

NOW = datetime(2015, 10, 21, 7, 28, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("1", 1.0),
        (" 7 ", 7.0),
        ("0", 0.0),
        ("Wed, 21 Oct 2015 07:28:30 GMT", 30.0),
        ("Wed, 21 Oct 2015 07:29:00 -0000", 60.0),  # no zone information: read as UTC
        ("Wed, 21 Oct 2015 09:28:00 +0200", 0.0),  # the same instant as NOW
        ("Wed, 21 Oct 2015 07:27:00 GMT", 0.0),  # in the past: retry at once
        ("Wed, 21 Oct 2015 08:28:00 GMT", MAX_RETRY_AFTER_S),  # capped
        ("86400", MAX_RETRY_AFTER_S),
    ],
)
def test_parse_retry_after(header: str, seconds: float) -> None:
    assert parse_retry_after(header, now=NOW) == seconds


@pytest.mark.parametrize("header", [None, "", "soon", "Wed, 99 Foo 2015", "nan"])
def test_parse_retry_after_ignores_what_it_cannot_read(header: str | None) -> None:
    assert parse_retry_after(header, now=NOW) is None


def test_policy_waits_what_the_server_asked() -> None:
    policy = RetryPolicy(max_retries=3, backoff_s=0.5)
    assert policy.delay(0, 1.0) == 1.0
    assert policy.delay(2, 0.0) == 0.0
    for retry in range(4):
        assert 0.5 * 2**retry / 2 <= policy.delay(retry, None) <= 0.5 * 2**retry


# --- the policy on its own -----------------------------------------------------------------------


def test_policy_makes_max_retries_plus_one_attempts() -> None:
    attempts: list[int] = []

    async def attempt() -> str:
        attempts.append(1)
        raise TransientError("provider 'x': HTTP 503", retry_after=0.0)

    with pytest.raises(ProviderError, match=r"HTTP 503 \(after 4 attempts\)") as caught:
        asyncio.run(RetryPolicy(max_retries=3, backoff_s=0.0).run(attempt))
    assert not isinstance(caught.value, TransientError)
    assert len(attempts) == 4


def test_policy_does_not_retry_a_refusal() -> None:
    attempts: list[int] = []

    async def attempt() -> str:
        attempts.append(1)
        raise ProviderRefused("provider 'x': HTTP 401")

    with pytest.raises(ProviderRefused):
        asyncio.run(RetryPolicy(max_retries=3, backoff_s=0.0).run(attempt))
    assert len(attempts) == 1


def test_policy_returns_the_first_success() -> None:
    outcomes: list[Exception | str] = [TransientError("t1"), TransientError("t2"), "done", "unused"]

    async def attempt() -> str:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    assert asyncio.run(RetryPolicy(max_retries=2, backoff_s=0.0).run(attempt)) == "done"
    assert outcomes == ["unused"]


# --- transient faults against the server ---------------------------------------------------------


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, float | None]]:
    """Every (retry, retry_after) the policy is asked to wait for."""
    asked: list[tuple[int, float | None]] = []
    original = RetryPolicy.delay

    def recording(self: RetryPolicy, retry: int, retry_after: float | None) -> float:
        asked.append((retry, retry_after))
        return original(self, retry, retry_after)

    monkeypatch.setattr(RetryPolicy, "delay", recording)
    return asked


@pytest.mark.slow
def test_429_with_retry_after_seconds_then_success(
    cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any, waits: list[Any]
) -> None:
    write_file("sets/one.yaml", ONE)
    fake_llm.enqueue(
        Reply(status=429, json={"error": {"message": "rate limited"}}, headers={"Retry-After": "1"}),
        openai_reply("ok"),
    )
    result = cli("run", "sets/one.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert [(i["id"], i["passed"], i["error"]) for i in doc["items"]] == [("only", True, None)]
    assert fake_llm.calls == 2
    assert waits == [(0, 1.0)]  # the server's Retry-After, not the backoff


def test_429_with_retry_after_http_date_then_success(
    cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any, waits: list[Any]
) -> None:
    write_file("sets/one.yaml", ONE)
    fake_llm.enqueue(
        Reply(
            status=429,
            json={"error": {"message": "slow down"}},
            headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"},
        ),
        openai_reply("ok"),
    )
    result = cli("run", "sets/one.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["passed_count"] == 1
    assert fake_llm.calls == 2
    assert waits == [(0, 0.0)]  # a date in the past: retry at once


@pytest.mark.parametrize("status", [408, 409, 500, 502, 503, 504])
def test_transient_status_then_success(
    cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any, status: int
) -> None:
    write_file("sets/one.yaml", ONE)
    fake_llm.enqueue(Reply(status=status, json={"error": {"message": "try again"}}), openai_reply("ok"))
    result = cli("run", "sets/one.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["passed_count"] == 1
    assert fake_llm.calls == 2


def test_500s_until_retries_run_out_error_that_item_only(
    cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    write_file("sets/three.yaml", THREE)
    fake_llm.handler = fail_bad(Reply(status=500, json={"error": {"message": "boom"}}))
    result = cli("run", "sets/three.yaml", "--format", "json", "--concurrency", "1")
    assert result.exit_code == 3
    assert result.exception is None
    assert calls_per_prompt(fake_llm) == {"first question": 1, "bad question": 3, "last question": 1}
    doc = json.loads(result.stdout)
    assert doc["error_count"] == 1
    assert doc["passed_count"] == 2
    by_id = items(doc)
    assert by_id["first"]["passed"]
    assert by_id["last"]["passed"]
    assert by_id["first"]["error"] is None
    assert by_id["last"]["error"] is None
    assert by_id["bad"]["passed"] is False
    assert by_id["bad"]["score"] == 0.0
    assert by_id["bad"]["error"] == "provider 'fake': HTTP 500: boom (after 3 attempts)"
    assert doc["comparison"]["state"] == "not_compared"


def test_max_retries_zero_means_one_attempt(cli: Any, fake_llm: FakeServer, write_file: Any) -> None:
    write_file(
        "evalkit.yaml",
        f"""
        providers:
          - id: fake
            adapter: openai
            base_url: {fake_llm.url}/v1
            model: fake-alias
            max_retries: 0
        """,
    )
    write_file("sets/three.yaml", THREE)
    fake_llm.handler = fail_bad(Reply(status=503, json={"error": {"message": "down"}}))
    result = cli("run", "sets/three.yaml", "--format", "json")
    assert result.exit_code == 3
    assert calls_per_prompt(fake_llm)["bad question"] == 1
    assert items(json.loads(result.stdout))["bad"]["error"] == "provider 'fake': HTTP 503: down (after 1 attempt)"


@pytest.fixture
def short_timeout_config(write_file: Any, fake_llm: FakeServer) -> Path:
    return write_file(
        "evalkit.yaml",
        f"""
        providers:
          - id: fake
            adapter: openai
            base_url: {fake_llm.url}/v1
            model: fake-alias
            max_retries: 2
            retry_backoff_s: 0.01
            timeout_s: 0.3
        """,
    )


@pytest.mark.slow
def test_read_timeout_is_retried_then_item_error(
    cli: Any, short_timeout_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    write_file("sets/three.yaml", THREE)

    def handler(req: Recorded) -> Reply:
        prompt = last_user_message(req)
        return openai_reply(f"echo: {prompt}") if prompt != "bad question" else Reply(delay_s=1.5, json={})

    fake_llm.handler = handler
    result = cli("run", "sets/three.yaml", "--format", "json")
    assert result.exit_code == 3
    assert result.exception is None
    assert calls_per_prompt(fake_llm)["bad question"] == 3
    doc = json.loads(result.stdout)
    assert doc["error_count"] == 1
    assert doc["passed_count"] == 2
    assert items(doc)["bad"]["error"] == "provider 'fake': timed out after 0.3 s (after 3 attempts)"


def test_read_timeout_then_success(cli: Any, short_timeout_config: Path, fake_llm: FakeServer, write_file: Any) -> None:
    write_file("sets/one.yaml", ONE)
    fake_llm.enqueue(Reply(delay_s=1.5, json=openai_reply("late ok").json), openai_reply("ok"))
    result = cli("run", "sets/one.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["items"][0]["passed"] is True
    assert fake_llm.calls == 2


def test_connection_reset_is_retried(cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any) -> None:
    write_file("sets/one.yaml", ONE)
    fake_llm.enqueue(Reply(reset=True), Reply(reset=True), openai_reply("ok"))
    result = cli("run", "sets/one.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["items"][0]["passed"] is True
    assert fake_llm.calls == 3


def test_connection_resets_until_retries_run_out_error_the_item(
    cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    write_file("sets/three.yaml", THREE)
    fake_llm.handler = fail_bad(Reply(reset=True))
    result = cli("run", "sets/three.yaml", "--format", "json")
    assert result.exit_code == 3
    assert result.exception is None
    assert calls_per_prompt(fake_llm)["bad question"] == 3
    error = items(json.loads(result.stdout))["bad"]["error"]
    assert error.startswith("provider 'fake': connection error (")
    assert error.endswith("(after 3 attempts)")


# --- errors no retry fixes -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (Reply(body=b"{not json"), "provider 'fake': malformed JSON in the response body (HTTP 200)"),
        (Reply(body=b""), "provider 'fake': malformed JSON in the response body (HTTP 200)"),
        (Reply(body=b"\xff\xfe garbage"), "provider 'fake': malformed JSON in the response body (HTTP 200)"),
        (Reply(json=[1, 2]), "provider 'fake': expected a JSON object in the response body, got list"),
        (Reply(json={"object": "chat.completion"}), "provider 'fake': response has no choices[0].message"),
        (Reply(json={"choices": []}), "provider 'fake': response has no choices[0].message"),
    ],
    ids=["truncated", "empty", "not-utf8", "array", "no-choices", "empty-choices"],
)
def test_malformed_200_body_is_an_item_error(
    cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any, reply: Reply, message: str
) -> None:
    write_file("sets/three.yaml", THREE)
    fake_llm.handler = fail_bad(reply)
    result = cli("run", "sets/three.yaml", "--format", "json")
    assert result.exit_code == 3, result.stderr
    assert result.exception is None
    assert calls_per_prompt(fake_llm) == {"first question": 1, "bad question": 1, "last question": 1}
    doc = json.loads(result.stdout)
    assert doc["error_count"] == 1
    assert doc["passed_count"] == 2
    assert items(doc)["bad"]["error"] == message


@pytest.mark.parametrize(
    "usage", [{"prompt_tokens": "many", "completion_tokens": 1}, [1, 2]], ids=["non-numeric", "not-an-object"]
)
def test_malformed_usage_in_a_200_body_does_not_crash(
    cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any, usage: Any
) -> None:
    write_file("sets/three.yaml", THREE)
    body = openai_reply("echo: bad question").json
    body["usage"] = usage
    fake_llm.handler = fail_bad(Reply(json=body))
    result = cli("run", "sets/three.yaml", "--format", "json")
    assert result.exception is None, repr(result.exception)
    assert result.exit_code in (0, 3)
    doc = json.loads(result.stdout)
    assert doc["prompt_count"] == 3
    assert items(doc)["first"]["passed"]
    assert items(doc)["last"]["passed"]


def test_400_is_an_item_error_without_retry(cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any) -> None:
    write_file("sets/three.yaml", THREE)
    fake_llm.handler = fail_bad(Reply(status=400, json={"error": {"message": "max_tokens is too large"}}))
    result = cli("run", "sets/three.yaml", "--format", "json")
    assert result.exit_code == 3
    assert result.exception is None
    assert calls_per_prompt(fake_llm) == {"first question": 1, "bad question": 1, "last question": 1}
    doc = json.loads(result.stdout)
    assert doc["error_count"] == 1
    assert doc["passed_count"] == 2
    assert items(doc)["bad"]["error"] == "provider 'fake': HTTP 400: max_tokens is too large"


@pytest.mark.parametrize("status", [401, 403])
def test_auth_refusal_aborts_at_once(
    cli: Any, keyed_config: Path, fake_llm: FakeServer, write_file: Any, status: int
) -> None:
    write_file("sets/three.yaml", THREE)
    # real APIs echo (part of) the key they rejected
    fake_llm.handler = lambda req: Reply(
        status=status, json={"error": {"message": f"Incorrect API key provided: {KEY}."}}
    )
    result = cli("run", "sets/three.yaml", "--format", "json", "--concurrency", "1")
    assert result.exit_code == 3
    assert result.exception is None
    assert fake_llm.calls == 1
    assert result.stdout == ""
    assert KEY not in result.stdout + result.stderr
    error_lines = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(error_lines) == 1
    assert f"HTTP {status}" in error_lines[0]
    assert "'fake'" in error_lines[0]
    assert f"${KEY_ENV}" in error_lines[0]


def test_404_aborts_at_once(cli: Any, keyed_config: Path, fake_llm: FakeServer, write_file: Any) -> None:
    write_file("sets/three.yaml", THREE)
    fake_llm.handler = lambda req: Reply(status=404, json={"error": {"message": "The model does not exist"}})
    result = cli("run", "sets/three.yaml", "--format", "json", "--concurrency", "1")
    assert result.exit_code == 3
    assert result.exception is None
    assert fake_llm.calls == 1
    assert result.stdout == ""
    error_lines = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(error_lines) == 1
    assert "'fake'" in error_lines[0]
    assert "HTTP 404" in error_lines[0]
    assert "model alias" in error_lines[0]


def test_refusal_with_concurrent_calls_aborts_cleanly(
    cli: Any, keyed_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    write_file("sets/three.yaml", THREE)
    fake_llm.handler = fail_bad(Reply(status=401, json={"error": {"message": "invalid key"}}))
    result = cli("run", "sets/three.yaml", "--format", "json", "--concurrency", "3")
    assert result.exit_code == 3
    assert result.exception is None
    assert calls_per_prompt(fake_llm)["bad question"] == 1
    assert "HTTP 401" in result.stderr


def test_refusal_without_a_configured_key_says_to_set_one(
    cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    write_file("sets/one.yaml", ONE)
    fake_llm.handler = lambda req: Reply(status=401, json={"error": {"message": "missing credentials"}})
    result = cli("run", "sets/one.yaml")
    assert result.exit_code == 3
    assert fake_llm.calls == 1
    assert "set api_key_env for this instance" in result.stderr


def test_the_key_never_appears_in_item_errors(
    cli: Any, keyed_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    write_file("sets/three.yaml", THREE)
    fake_llm.handler = fail_bad(Reply(status=400, json={"error": {"message": f"bad request from key {KEY}"}}))
    result = cli("run", "sets/three.yaml", "--format", "json", "--output", "report.json")
    assert result.exit_code == 3
    assert items(json.loads(result.stdout))["bad"]["error"] == "provider 'fake': HTTP 400: bad request from key ***"
    assert KEY not in result.stdout + result.stderr
    assert KEY not in Path("report.json").read_text(encoding="utf-8")


def test_refusal_message_names_the_instance_once(
    cli: Any, keyed_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    write_file("sets/one.yaml", ONE)
    fake_llm.handler = lambda req: Reply(status=401, json={"error": {"message": "invalid key"}})
    result = cli("run", "sets/one.yaml")
    assert result.exit_code == 3
    assert result.stderr.splitlines()[-1] == (
        f"Error: provider 'fake': HTTP 401: invalid key; check the API key in ${KEY_ENV}"
    )
