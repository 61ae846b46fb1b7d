"""Which provider a run uses: a key in the environment never changes the README's first command (the
implicit local instance stays the default and selectable by name; --model or --provider openai
use the environment and say so), and a fallback that takes over says so in one warning line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalkit import api
from tests.cli.test_progress_ci import ONE, THREE, echo
from tests.fakeserver import FakeServer, Recorded, Reply, last_user_message
from tests.test_runner import spare_llm

__all__ = ["spare_llm"]  # the fixture, shared with test_runner


@pytest.fixture
def openai_env(monkeypatch: pytest.MonkeyPatch, fake_llm: FakeServer) -> FakeServer:
    """What most users have exported: a key (and here a base URL on the loopback server)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-first-hour")
    monkeypatch.setenv("OPENAI_BASE_URL", f"{fake_llm.url}/v1")
    fake_llm.handler = echo()
    return fake_llm


# --- a key in the environment never changes the README's first command ----------------------


def test_a_key_in_the_environment_leaves_the_local_model_the_default(
    local_model: None, openai_env: FakeServer, write_file: Any
) -> None:
    write_file("sets/one.yaml", ONE)
    cfg = api.load_config(None)
    plan = api.plan_run(api.load_prompt_sets(["sets/one.yaml"], cfg), cfg)
    assert (plan.provider.id, plan.provider.adapter, plan.provider.implicit) == ("local", "local", True)
    assert openai_env.calls == 0


@pytest.mark.parametrize("requested", ["local", ["local"]], ids=["name", "list"])
def test_the_implicit_local_instance_is_selectable_by_name_with_a_key_set(
    local_model: None, openai_env: FakeServer, write_file: Any, requested: Any
) -> None:
    write_file("sets/one.yaml", ONE)
    cfg = api.load_config(None)
    plan = api.plan_run(api.load_prompt_sets(["sets/one.yaml"], cfg), cfg, provider=requested)
    assert [t.provider.id for t in plan.targets] == ["local"]


def test_model_alone_uses_openai_from_the_environment_and_says_so(
    cli: Any, openai_env: FakeServer, write_file: Any
) -> None:
    write_file("sets/one.yaml", ONE)
    result = cli("run", "sets/one.yaml", "--model", "gpt-test", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert "Using OpenAI from the environment: openai/gpt-test" in result.stderr.splitlines()
    assert [r.json["model"] for r in openai_env.requests] == ["gpt-test"]
    assert openai_env.requests[0].headers["authorization"] == "Bearer sk-first-hour"
    assert json.loads(result.stdout)["provider"] == "openai"


def test_provider_openai_with_a_model_uses_the_environment(cli: Any, openai_env: FakeServer, write_file: Any) -> None:
    write_file("sets/one.yaml", ONE)
    result = cli("run", "sets/one.yaml", "--provider", "openai", "--model", "gpt-test", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert openai_env.calls == 1


def test_provider_openai_without_a_model_says_what_to_add(
    cli: Any, openai_env: FakeServer, write_file: Any, db_file: Path
) -> None:
    write_file("sets/one.yaml", ONE)
    result = cli("run", "sets/one.yaml", "--provider", "openai")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == "Error: --provider openai (from OPENAI_API_KEY / OPENAI_BASE_URL) needs --model ALIAS\n"
    assert openai_env.calls == 0
    assert not db_file.exists()


@pytest.mark.model
def test_the_readme_command_runs_the_local_model_with_a_key_exported(
    cli: Any, local_model: None, openai_env: FakeServer, write_file: Any
) -> None:
    write_file("sets/one.yaml", ONE)
    result = cli("run", "sets/one.yaml", "--format", "json")
    assert result.exit_code in (0, 1), result.stderr  # the model's answer may fail the assertion
    assert result.stderr.splitlines()[0].startswith("Using the local model (no provider configured): local/")
    assert json.loads(result.stdout)["provider"] == "local"
    run = api.run_set("sets/one.yaml", provider="local", store=False)
    assert run.provider == "local"
    assert openai_env.calls == 0


# --- a fallback that takes over says so ------------------------------------------------------


@pytest.fixture
def fallback_project(write_file: Any, fake_llm: FakeServer, spare_llm: FakeServer) -> None:
    write_file("sets/three.yaml", THREE)
    write_file(
        "evalkit.yaml",
        f"""
        default_provider: main
        providers:
          - {{id: main, adapter: openai, base_url: '{fake_llm.url}/v1', model: main-alias, max_retries: 0, fallback: spare}}
          - {{id: spare, adapter: openai, base_url: '{spare_llm.url}/v1', model: spare-alias, max_retries: 0}}
        """,
    )

    def handler(req: Recorded) -> Reply:
        prompt = last_user_message(req)
        return Reply(status=500, json={"error": {"message": "boom"}}) if prompt != "first question" else echo()(req)

    fake_llm.handler = handler
    spare_llm.handler = echo("spare-model")


def test_a_fallback_that_answers_prints_one_warning_line(
    cli: Any, fallback_project: None, spare_llm: FakeServer
) -> None:
    result = cli("run", "sets/three.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert spare_llm.calls == 2
    warnings = [line for line in result.stderr.splitlines() if line.startswith("Warning:")]
    assert warnings == [
        "Warning: first.three: provider 'main' fell back to 'spare' for 2 of 3 prompts (its own calls failed)"
    ]
    assert json.loads(result.stdout)["passed_count"] == 3  # stdout is only the JSON


def test_no_fallback_no_warning(cli: Any, fallback_project: None, fake_llm: FakeServer, spare_llm: FakeServer) -> None:
    fake_llm.handler = echo()
    result = cli("run", "sets/three.yaml")
    assert result.exit_code == 0, result.stderr
    assert spare_llm.calls == 0
    assert "fell back" not in result.stderr + result.stdout
