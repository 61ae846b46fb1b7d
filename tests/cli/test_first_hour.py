"""The first hour of a new user (issue 14, points 1-8): the provider a run uses with a key in the
environment, a fallback that says so, validate and the replay answers file, the hint that names
the file, init inside a project, report at 80 columns, JUnit times, counts and small costs, and
models without a config."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from evalkit import api
from evalkit.report.render import SafeConsole, render_history, render_summaries
from tests.fakeserver import FakeServer, Recorded, Reply, last_user_message
from tests.test_runner import THREE as RUNNER_THREE
from tests.test_runner import echo as runner_echo
from tests.test_runner import spare_llm

__all__ = ["spare_llm"]  # the fixture, shared with test_runner

ONE = """
id: first.one
name: One
prompts:
  - id: greet
    prompt: Say hello.
    assertions: [{contains: echo}]
"""

THREE = RUNNER_THREE.replace("id: runner.three", "id: first.three")


def echo(model: str = "fake-model-1") -> Any:
    return runner_echo(model)


@pytest.fixture
def openai_env(monkeypatch: pytest.MonkeyPatch, fake_llm: FakeServer) -> FakeServer:
    """What most users have exported: a key (and here a base URL on the loopback server)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-first-hour")
    monkeypatch.setenv("OPENAI_BASE_URL", f"{fake_llm.url}/v1")
    fake_llm.handler = echo()
    return fake_llm


# --- 1: a key in the environment never changes the README's first command ----------------------


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


# --- 2: a fallback that takes over says so ------------------------------------------------------


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


# --- 3: validate reads the replay answers files evalkit.yaml names -------------------------------

REPLAY = "providers: [{id: rec, adapter: replay, path: answers.jsonl}]\n"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id":"multi","response":5}', "field 'response' must be a string, not a number"),
        ('{"id":"multi","response":null}', "field 'response' must be a string, not null"),
        ('{"id":"multi"}', "missing string field 'response'"),
        ('{"id":7,"response":"x"}', "field 'id' must be a string, not a number"),
    ],
    ids=["number", "null", "missing", "id-number"],
)
def test_validate_without_arguments_reads_the_configured_answers_file(
    cli: Any, write_file: Any, isolated: Path, line: str, message: str
) -> None:
    write_file("evalkit.yaml", REPLAY)
    write_file("sets/one.yaml", ONE)
    write_file("answers.jsonl", '{"id":"greet","response":"echo"}\n' + line + "\n")
    result = cli("validate")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"{isolated.resolve() / 'answers.jsonl'}:2:1: {message}",
        "1 error in 2 files",
    ]
    named = cli("validate", "evalkit.yaml")  # the config named: its answers file is read too
    assert named.stderr.splitlines() == [f"answers.jsonl:2:1: {message}", "1 error in 1 file"]


def test_validate_passes_a_good_answers_file_and_run_reports_the_bad_one_alike(cli: Any, write_file: Any) -> None:
    write_file("evalkit.yaml", REPLAY)
    write_file("sets/one.yaml", ONE)
    write_file("answers.jsonl", '{"id":"greet","response":"echo"}\n')
    assert cli("validate").exit_code == 0
    write_file("answers.jsonl", '{"id":"greet","response":5}\n')
    run = cli("run", "sets/one.yaml")
    assert run.exit_code == 2
    assert "answers.jsonl:1:1: field 'response' must be a string, not a number" in run.stderr


# --- 4: the "and N more" hint names the file ----------------------------------------------------

PROMPTFOO = """
description: test
prompts:
  - "Tell me about {{topic}}"
providers:
  - openai:gpt-4o-mini
tests:
  - vars: {topic: bananas}
"""


@pytest.mark.parametrize("name", ["promptfooconfig.yaml", "my sets/bad set.yaml"])
def test_the_more_hint_names_a_command_that_lists_them(cli: Any, write_file: Any, name: str) -> None:
    write_file(name, PROMPTFOO)
    quoted = f"'{name}'" if " " in name else name
    run = cli("run", name)
    assert run.exit_code == 2
    assert run.stderr.rstrip("\n").endswith(f"more; run `evalkit validate {quoted}` to list them)")
    listed = cli("validate", name)
    assert listed.exit_code == 2
    more = int(run.stderr.split("(and ")[1].split(" more")[0])
    assert sum(1 for line in listed.stderr.splitlines() if line.startswith(f"{name}:")) == more + 1


# --- 5: init inside a project -------------------------------------------------------------------


def test_init_inside_a_project_says_so_and_writes_nothing(cli: Any, isolated: Path) -> None:
    assert cli("init").exit_code == 0
    inner = isolated / "sets"
    before = sorted(p.relative_to(isolated) for p in isolated.rglob("*"))
    import os

    os.chdir(inner)
    result = cli("init")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (
        f"Error: this folder is inside the evalkit project of {isolated.resolve() / 'evalkit.yaml'}, so nothing "
        f"was written: work from {isolated.resolve()}, or pass --force to start a separate project here\n"
    )
    assert sorted(p.relative_to(isolated) for p in isolated.rglob("*")) == before
    forced = cli("init", "--force")
    assert forced.exit_code == 0, forced.stderr
    assert (inner / "evalkit.yaml").is_file()


def test_init_again_at_the_project_root_keeps_the_files(cli: Any, isolated: Path) -> None:
    assert cli("init").exit_code == 0
    again = cli("init")
    assert again.exit_code == 0
    assert f"kept {isolated / 'evalkit.yaml'}" in again.stdout.splitlines()


# --- 6: the progress line of each set (fixed with tests/cli/test_progress_ci.py) -----------------


def test_each_set_announces_its_own_prompts(cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any) -> None:
    fake_llm.handler = echo()
    write_file("sets/one.yaml", ONE)
    write_file("sets/three.yaml", THREE)
    result = cli("run", "sets/one.yaml", "sets/three.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    lines = result.stderr.splitlines()
    assert "Running first.one: 1 prompt" in lines  # 8: "1 prompt", not "1 prompts"
    assert "Running first.three: 3 prompts" in lines
    assert "first.three: 3/3 prompts, 0 errors" in "\n".join(lines)


# --- 7: report at 80 columns keeps ids and verdicts whole --------------------------------------


@pytest.fixture
def two_sets_history(cli: Any, write_file: Any) -> list[dict[str, Any]]:
    """Two runs each of two sets with long ids on a long-named replay instance."""
    write_file("evalkit.yaml", "providers: [{id: recorded-answers-instance, adapter: replay, path: answers.jsonl}]\n")
    write_file("answers.jsonl", '{"id": "greet", "response": "echo", "model": "gpt-4o-mini-2024-07-18"}\n')
    for set_id in ("acme_search.faq_answers_long", "acme_search.second_set"):
        write_file(f"sets/{set_id}.yaml", ONE.replace("first.one", set_id))
        for _ in range(2):
            assert cli("run", f"sets/{set_id}.yaml").exit_code == 0
    return list(api.history(api.load_config(None)))


@pytest.mark.parametrize("width", [80, 100, 160])
def test_report_never_cuts_ids_or_verdicts(two_sets_history: list[dict[str, Any]], width: int) -> None:
    cfg = api.load_config(None)
    out = io.StringIO()
    console = SafeConsole(file=out, width=width, color_system=None)
    render_summaries(console, api.set_report(cfg))
    render_history(console, "acme_search.faq_answers_long", api.history(cfg, set_id="acme_search.faq_answers_long"))
    text = out.getvalue()
    assert "…" not in text
    words = set(text.split())
    for row in two_sets_history:
        assert row["run_id"] in words
        assert row["set"] in words
    assert "baseline" in words
    assert "no regression" in text  # on one line
    assert max(len(line) for line in text.splitlines()) <= width


# --- 8: JUnit times, small costs, models without a config ---------------------------------------


def test_junit_time_of_cached_items_is_zero_and_the_suite_time_is_the_wall_time(
    cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    def slow(req: Recorded) -> Reply:
        reply = echo()(req)
        reply.delay_s = 0.05  # the latency the first run measures
        return reply

    fake_llm.handler = slow
    write_file("sets/three.yaml", THREE)
    assert cli("run", "sets/three.yaml", "--junit", "fresh.xml").exit_code == 0
    fresh = ET.parse("fresh.xml").getroot().find("testsuite")
    assert fresh is not None
    assert all(float(case.get("time", "0")) >= 0.05 for case in fresh.iter("testcase"))
    result = cli("run", "sets/three.yaml", "--junit", "cached.xml", "--output", "cached.json")
    assert result.exit_code == 0, result.stderr
    assert fake_llm.calls == 3  # every answer of the second run came from the cache
    suite = ET.parse("cached.xml").getroot().find("testsuite")
    assert suite is not None
    assert [case.get("time") for case in suite.iter("testcase")] == ["0.000"] * 3
    doc = json.loads(Path("cached.json").read_text())
    wall = datetime.fromisoformat(doc["finished_at"]) - datetime.fromisoformat(doc["started_at"])
    assert suite.get("time") == f"{wall.total_seconds():.3f}"


def test_a_cost_below_a_cent_keeps_its_digits(cli: Any, fake_llm: FakeServer, write_file: Any) -> None:
    fake_llm.handler = echo()  # 10 prompt and 5 completion tokens per answer
    write_file(
        "evalkit.yaml",
        f"""
        providers:
          - id: priced
            adapter: openai
            base_url: {fake_llm.url}/v1
            model: cheap
            cost: {{input_per_mtok: 0.15, output_per_mtok: 0.6}}
        """,
    )
    write_file("sets/one.yaml", ONE)
    result = cli("run", "sets/one.yaml")
    assert result.exit_code == 0, result.stderr
    assert " · cost $0.0000045 · " in result.stdout  # (10 x 0.15 + 5 x 0.6) / 1e6


def test_models_without_a_config_ranks_the_implicit_local_instance_it_has_runs_of(
    cli: Any, local_model: None, write_file: Any
) -> None:
    assert "No provider instances to rank" in cli("models").stdout
    from evalkit.config import ProviderConfig
    from evalkit.providers import default_alias

    alias = default_alias(ProviderConfig(id="local", adapter="local"))  # what the implicit instance sends
    # runs stored under the implicit instance's id and alias (answers recorded from it)
    write_file("evalkit.yaml", f"providers: [{{id: local, adapter: replay, path: answers.jsonl, model: {alias}}}]\n")
    write_file("answers.jsonl", '{"id": "greet", "response": "echo", "model": "SmolLM2"}\n')
    write_file("sets/one.yaml", ONE)
    assert cli("run", "sets/one.yaml").exit_code == 0
    Path("evalkit.yaml").unlink()
    result = cli("models", "--format", "json")
    assert result.exit_code == 0, result.stderr
    models = json.loads(result.stdout)["models"]
    assert [(m["provider"], m["model"], m["quality"], m["sets"]) for m in models] == [("local", alias, 1.0, 1)]
    table = cli("models")
    assert "No provider instances to rank" not in table.stdout
    assert "local" in table.stdout
