"""The runner: the fallback chain, bounded concurrency and the completion cache, over loopback."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from evalkit.api import run_set
from evalkit.records import CompletionRequest, Message, ServingRecord
from evalkit.runner import cache_key
from tests.factories import fake_project, run_json
from tests.fakeserver import FakeServer, Recorded, Reply, last_user_message, openai_reply

THREE = """
id: runner.three
name: Three
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


def many_prompts(count: int) -> str:
    lines = ["id: runner.many", "name: Many", "prompts:"]
    for n in range(count):
        lines += [f"  - id: p{n}", f"    prompt: question {n}", "    assertions: [{contains: echo}]"]
    return "\n".join(lines) + "\n"


def calls_per_prompt(server: FakeServer) -> Counter[str]:
    return Counter(last_user_message(r) for r in server.requests)


def echo(model: str) -> Any:
    return lambda req: openai_reply(f"echo: {last_user_message(req)}", model=model)


# --- fallback ------------------------------------------------------------------------------------


@pytest.fixture
def spare_llm() -> Iterator[FakeServer]:
    server = FakeServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def fallback_config(
    write_file: Any, fake_llm: FakeServer, spare_llm: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> Path:
    monkeypatch.setenv("EVALKIT_TEST_MAIN_KEY", "sk-main-1")
    write_file("sets/three.yaml", THREE)
    return write_file(
        "evalkit.yaml",
        f"""
        default_provider: main
        providers:
          - id: main
            adapter: openai
            base_url: {fake_llm.url}/v1
            model: main-alias
            api_key_env: EVALKIT_TEST_MAIN_KEY
            max_retries: 1
            retry_backoff_s: 0.01
            fallback: other
          - id: other
            adapter: openai
            base_url: {spare_llm.url}/v1
            model: other-alias
            max_retries: 0
        """,
    )


def fail_bad_on(server: FakeServer, reply: Reply, model: str = "main-model") -> None:
    def handler(req: Recorded) -> Reply:
        prompt = last_user_message(req)
        return reply if prompt == "bad question" else openai_reply(f"echo: {prompt}", model=model)

    server.handler = handler


def test_fallback_answers_an_item_whose_calls_fail(
    cli: Any, fallback_config: Path, fake_llm: FakeServer, spare_llm: FakeServer
) -> None:
    fail_bad_on(fake_llm, Reply(status=500, json={"error": {"message": "boom"}}))
    spare_llm.handler = echo("other-model")
    result = cli("run", "sets/three.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert calls_per_prompt(fake_llm) == {"first question": 1, "bad question": 2, "last question": 1}
    assert [r.json for r in spare_llm.requests] == [
        {"model": "other-alias", "messages": [{"role": "user", "content": "bad question"}]}
    ]
    assert "authorization" not in spare_llm.requests[0].headers  # the primary's key stays with the primary
    doc = json.loads(result.stdout)
    assert doc["error_count"] == 0
    assert doc["passed_count"] == 3
    assert doc["generator"] is None
    assert doc["comparison"]["state"] == "not_compared"
    assert "different generators" in doc["comparison"]["reason"]


def test_fallback_serving_record_names_the_fallback(
    fallback_config: Path, fake_llm: FakeServer, spare_llm: FakeServer
) -> None:
    fail_bad_on(fake_llm, Reply(status=503, json={"error": {"message": "down"}}))
    spare_llm.handler = echo("other-model")
    run = run_set("sets/three.yaml", model="cli-alias")
    assert {item.id: item.serving for item in run.items} == {
        "first": ServingRecord("main", "cli-alias", "main-model"),
        "bad": ServingRecord("other", "other-alias", "other-model"),
        "last": ServingRecord("main", "cli-alias", "main-model"),
    }
    assert run.generator is None
    assert {r.json["model"] for r in fake_llm.requests} == {"cli-alias"}


def test_fallback_that_fails_too_leaves_an_item_error_naming_both(
    cli: Any, fallback_config: Path, fake_llm: FakeServer, spare_llm: FakeServer
) -> None:
    fail_bad_on(fake_llm, Reply(status=500, json={"error": {"message": "boom"}}))
    spare_llm.handler = lambda req: Reply(status=502, json={"error": {"message": "bad gateway"}})
    result = cli("run", "sets/three.yaml", "--format", "json")
    assert result.exit_code == 3
    assert result.exception is None
    assert spare_llm.calls == 1  # its max_retries is 0
    doc = json.loads(result.stdout)
    assert doc["error_count"] == 1
    error = {i["id"]: i["error"] for i in doc["items"]}["bad"]
    assert error == (
        "provider 'main': HTTP 500: boom (after 2 attempts); then provider 'other': HTTP 502: bad gateway (after 1 attempt)"
    )


def test_a_refusal_on_the_primary_aborts_without_fallback(
    cli: Any, fallback_config: Path, fake_llm: FakeServer, spare_llm: FakeServer
) -> None:
    fake_llm.handler = lambda req: Reply(status=401, json={"error": {"message": "invalid key sk-main-1"}})
    result = cli("run", "sets/three.yaml", "--format", "json", "--concurrency", "1")
    assert result.exit_code == 3
    assert result.exception is None
    assert fake_llm.calls == 1
    assert spare_llm.calls == 0
    assert result.stdout == ""
    assert "'main'" in result.stderr
    assert "$EVALKIT_TEST_MAIN_KEY" in result.stderr
    assert "sk-main-1" not in result.stderr


def test_a_rerun_replays_the_fallback_answer_from_the_cache(
    cli: Any, fallback_config: Path, fake_llm: FakeServer, spare_llm: FakeServer
) -> None:
    fail_bad_on(fake_llm, Reply(status=500, json={"error": {"message": "boom"}}))
    spare_llm.handler = echo("other-model")
    assert cli("run", "sets/three.yaml").exit_code == 0
    assert spare_llm.calls == 1
    spare_llm.handler = echo("other-model-v2")
    again = cli("run", "sets/three.yaml", "--format", "json")
    assert again.exit_code == 0, again.stderr
    assert spare_llm.calls == 1  # the fallback's answer came from the cache


# --- concurrency ---------------------------------------------------------------------------------


class InFlight:
    """A handler counting requests in flight: each waits until ``expect`` are in flight (or every
    request was seen), then holds a little (injected latency) so any excess would overlap."""

    def __init__(self, expect: int, total: int, hold_s: float = 0.05) -> None:
        self.expect, self.total, self.hold_s = expect, total, hold_s
        self.now = self.peak = self.seen = 0
        self.cond = threading.Condition()

    def __call__(self, req: Recorded) -> Reply:
        with self.cond:
            self.now += 1
            self.seen += 1
            self.peak = max(self.peak, self.now)
            self.cond.notify_all()
            self.cond.wait_for(lambda: self.now >= self.expect or self.seen >= self.total, timeout=10)
        time.sleep(self.hold_s)  # server latency, not synchronisation
        with self.cond:
            self.now -= 1
        return openai_reply(f"echo: {last_user_message(req)}")


def concurrency_config(write_file: Any, server: FakeServer, max_concurrency: int) -> None:
    write_file(
        "evalkit.yaml",
        f"""
        providers:
          - id: fake
            adapter: openai
            base_url: {server.url}/v1
            model: fake-alias
            max_concurrency: {max_concurrency}
        """,
    )
    write_file("sets/many.yaml", many_prompts(10))


def test_concurrency_option_bounds_calls_in_flight(cli: Any, write_file: Any, fake_llm: FakeServer) -> None:
    concurrency_config(write_file, fake_llm, max_concurrency=8)
    tracker = InFlight(expect=3, total=10)
    fake_llm.handler = tracker
    result = cli("run", "sets/many.yaml", "--concurrency", "3", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["passed_count"] == 10
    assert tracker.seen == 10
    assert tracker.peak == 3


@pytest.mark.parametrize("option", [["--concurrency", "6"], []], ids=["higher-option", "default"])
def test_max_concurrency_bounds_calls_in_flight(
    cli: Any, write_file: Any, fake_llm: FakeServer, option: list[str]
) -> None:
    concurrency_config(write_file, fake_llm, max_concurrency=2)
    tracker = InFlight(expect=2, total=10)
    fake_llm.handler = tracker
    result = cli("run", "sets/many.yaml", *option, "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["passed_count"] == 10
    assert tracker.seen == 10
    assert tracker.peak == 2


@pytest.mark.slow
def test_results_keep_set_order_whatever_the_completion_order(cli: Any, write_file: Any, fake_llm: FakeServer) -> None:
    concurrency_config(write_file, fake_llm, max_concurrency=8)

    def handler(req: Recorded) -> Reply:
        n = int(last_user_message(req).split()[-1])
        return Reply(json=openai_reply(f"echo {n}").json, delay_s=0.02 * (9 - n))

    fake_llm.handler = handler
    result = cli("run", "sets/many.yaml", "--concurrency", "10", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert [i["id"] for i in json.loads(result.stdout)["items"]] == [f"p{n}" for n in range(10)]


# --- the completion cache ------------------------------------------------------------------------


def test_rerun_uses_the_cache_and_keeps_the_original_serving_record(
    cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    write_file("sets/three.yaml", THREE)
    fake_llm.model = "model-a"
    first = cli("run", "sets/three.yaml", "--format", "json")
    assert first.exit_code == 0, first.stderr
    assert fake_llm.calls == 3
    fake_llm.model = "model-b"
    again = cli("run", "sets/three.yaml", "--format", "json")
    assert again.exit_code == 0, again.stderr
    assert fake_llm.calls == 3  # zero HTTP calls
    doc = json.loads(again.stdout)
    assert doc["generator"] == {"provider": "fake", "model": "fake-alias", "reported_model": "model-a"}
    assert [i.get("cached") for i in doc["items"]] == [True, True, True]
    assert doc["comparison"]["state"] == "compared"
    assert doc["comparison"]["baseline_run_id"] == json.loads(first.stdout)["run_id"]


def test_no_cache_calls_again(cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any) -> None:
    write_file("sets/three.yaml", THREE)
    fake_llm.model = "model-a"
    assert cli("run", "sets/three.yaml").exit_code == 0
    fake_llm.model = "model-b"
    fresh = cli("run", "sets/three.yaml", "--no-cache", "--format", "json")
    assert fresh.exit_code == 0, fresh.stderr
    assert fake_llm.calls == 6
    doc = json.loads(fresh.stdout)
    assert doc["generator"] == {"provider": "fake", "model": "fake-alias", "reported_model": "model-b"}
    assert not any(i.get("cached") for i in doc["items"])
    assert doc["comparison"]["state"] == "baseline"  # a new reported model is a new scope


def test_no_cache_still_caches_fresh_answers(
    cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    write_file("sets/three.yaml", THREE)
    fake_llm.model = "model-a"
    assert cli("run", "sets/three.yaml").exit_code == 0
    fake_llm.model = "model-b"
    assert cli("run", "sets/three.yaml", "--no-cache").exit_code == 0
    fake_llm.model = "model-c"
    replayed = cli("run", "sets/three.yaml", "--format", "json")
    assert replayed.exit_code == 0, replayed.stderr
    assert fake_llm.calls == 6
    assert json.loads(replayed.stdout)["generator"]["reported_model"] == "model-b"  # the newest answer


def test_answers_received_before_an_abort_stay_in_the_cache(
    cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    write_file("sets/three.yaml", THREE)
    fake_llm.handler = lambda req: (
        Reply(status=401, json={"error": {"message": "key revoked"}})
        if last_user_message(req) == "bad question"
        else openai_reply(f"echo: {last_user_message(req)}")
    )
    aborted = cli("run", "sets/three.yaml", "--concurrency", "1")
    assert aborted.exit_code == 3
    assert [last_user_message(r) for r in fake_llm.requests] == ["first question", "bad question"]
    fake_llm.handler = None
    again = cli("run", "sets/three.yaml", "--concurrency", "1", "--format", "json")
    assert again.exit_code == 0, again.stderr
    assert [last_user_message(r) for r in fake_llm.requests[2:]] == ["bad question", "last question"]


def test_a_changed_prompt_or_alias_misses_the_cache(
    cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    write_file("sets/three.yaml", THREE)
    assert cli("run", "sets/three.yaml").exit_code == 0
    assert fake_llm.calls == 3
    write_file("sets/three.yaml", THREE.replace("last question", "last question, reworded"))
    assert cli("run", "sets/three.yaml").exit_code == 0
    assert [last_user_message(r) for r in fake_llm.requests[3:]] == ["last question, reworded"]
    assert cli("run", "sets/three.yaml", "--model", "other-alias").exit_code == 0
    assert fake_llm.calls == 7


def test_cache_false_in_config_calls_again(cli: Any, fake_llm: FakeServer, write_file: Any) -> None:
    write_file(
        "evalkit.yaml",
        f"""
        cache: false
        providers:
          - id: fake
            adapter: openai
            base_url: {fake_llm.url}/v1
            model: fake-alias
        """,
    )
    write_file("sets/three.yaml", THREE)
    assert cli("run", "sets/three.yaml").exit_code == 0
    assert cli("run", "sets/three.yaml").exit_code == 0
    assert fake_llm.calls == 6


def test_errored_items_are_not_cached(cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any) -> None:
    write_file("sets/three.yaml", THREE)
    fake_llm.handler = lambda req: (
        Reply(status=500, json={"error": {"message": "boom"}})
        if last_user_message(req) == "bad question"
        else openai_reply(f"echo: {last_user_message(req)}")
    )
    assert cli("run", "sets/three.yaml").exit_code == 3
    assert fake_llm.calls == 5  # 1 + 3 + 1
    fake_llm.handler = None
    again = cli("run", "sets/three.yaml", "--format", "json")
    assert again.exit_code == 0, again.stderr
    assert [last_user_message(r) for r in fake_llm.requests[5:]] == ["bad question"]
    assert [bool(i.get("cached")) for i in json.loads(again.stdout)["items"]] == [True, False, True]


def request(*messages: tuple[str, str], model: str = "alias", **params: Any) -> CompletionRequest:
    return CompletionRequest(
        messages=tuple(Message(role, content) for role, content in messages), model=model, params=params
    )


def test_cache_key_covers_instance_alias_messages_and_params() -> None:
    base = request(("system", "S"), ("user", "U"), temperature=0, max_tokens=5)
    key = cache_key("inst", base)
    assert cache_key("inst", request(("system", "S"), ("user", "U"), max_tokens=5, temperature=0)) == key
    assert cache_key("other", base) != key
    assert (
        cache_key("inst", request(("system", "S"), ("user", "U"), model="alias2", temperature=0, max_tokens=5)) != key
    )
    assert cache_key("inst", request(("user", "U"), temperature=0, max_tokens=5)) != key
    assert cache_key("inst", request(("system", "S"), ("user", "U2"), temperature=0, max_tokens=5)) != key
    assert cache_key("inst", request(("user", "S"), ("user", "U"), temperature=0, max_tokens=5)) != key
    assert cache_key("inst", request(("system", "S"), ("user", "U"), temperature=1, max_tokens=5)) != key
    assert cache_key("inst", request(("system", "S"), ("user", "U"), temperature=0)) != key
    assert cache_key("inst", base, repeat=1) != key
    # the ids of the item and set are not part of what was asked
    assert cache_key("inst", CompletionRequest(base.messages, "alias", base.params, item_id="x", set_id="y")) == key


def test_replayed_call_facts_are_those_of_each_answer_s_own_serving_record() -> None:
    from evalkit.config import Cost, ProviderConfig
    from evalkit.providers import ProviderPool
    from evalkit.records import Completion, Usage
    from evalkit.runner import Caller, call_facts

    priced = ProviderConfig(id="rec", adapter="replay", cost=Cost(input_per_mtok=1, output_per_mtok=2))
    caller = Caller(ProviderPool(lambda _: priced), None, True)
    first, second = ServingRecord("rec", "replay", "model-a"), ServingRecord("rec", "replay", "model-b")
    facts_a = call_facts(caller, Completion("x", first, adapter="replay"))
    facts_b = call_facts(caller, Completion("y", second, adapter="replay"))
    assert (facts_a.latency_ms, facts_a.cost, facts_a.model) == (None, 0.0, "model-a")
    assert (facts_b.latency_ms, facts_b.cost, facts_b.model) == (None, 0.0, "model-b")
    # every answer recorded for one serving record has its facts, whatever answered before it
    assert call_facts(caller, Completion("z", first, adapter="replay")) == facts_a
    assert call_facts(caller, Completion("z", second, adapter="replay")) == facts_b
    # an answer with token counts is priced on its own, and the answers after it are not
    counted = call_facts(caller, Completion("w", first, usage=Usage(1_000_000, 0), adapter="replay"))
    assert (counted.cost, counted.model) == (1.0, "model-a")
    later = call_facts(caller, Completion("v", first, adapter="replay"))
    assert (later.latency_ms, later.cost, later.model) == (None, 0.0, "model-a")


# --- the run id is the run's start -----------------------------------------------------------------


class SteppingClock(datetime):
    """Every reading a minute after the previous one: a run that reads the clock twice shows it."""

    readings = 0

    @classmethod
    def now(cls, tz: Any = None) -> SteppingClock:  # type: ignore[override]
        cls.readings += 1
        moment = datetime(2026, 11, 30, 13, 15, 2, 250000, tzinfo=UTC) + timedelta(minutes=cls.readings)
        return cls.fromtimestamp(moment.timestamp(), tz or UTC)


def test_run_id_time_is_the_stored_and_reported_start(
    cli: Any, write_file: Any, fake_llm: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import evalkit.runner

    fake_project(write_file, fake_llm)
    monkeypatch.setattr(evalkit.runner, "datetime", SteppingClock)
    doc = run_json(cli, "sets/one.yaml")
    started = datetime.fromisoformat(doc["started_at"])
    assert doc["run_id"][:15] == f"{started:%Y%m%d-%H%M%S}"
    assert doc["finished_at"] > doc["started_at"]
    (row,) = json.loads(cli("report", "--format", "json").stdout)["runs"]
    assert row["run_id"] == doc["run_id"]
    assert f"{datetime.fromisoformat(row['started_at']):%Y%m%d-%H%M%S}" == doc["run_id"][:15]
