"""The pull-request comment (``--format markdown``): its headline, and names shown whole."""

from __future__ import annotations

import json
from typing import Any

from evalkit.report.markdown import run_markdown
from tests.factories import run_of

JUDGED = "decision:judge:gpt-4o@2024-08-06:v2"  # a decision grader names its judge's reported model


def replay_project(write_file: Any, model: str) -> None:
    write_file("evalkit.yaml", "default_provider: rec\nproviders: [{id: rec, adapter: replay, path: answers.jsonl}]\n")
    write_file("answers.jsonl", json.dumps({"id": "p", "response": "yes", "model": model}) + "\n")
    write_file(
        "set.yaml", "id: md.out\nname: Markdown\nprompts:\n  - {id: p, prompt: hi, assertions: [{contains: yes}]}\n"
    )


def test_a_reported_model_with_an_at_sign_is_one_name_in_the_comment(cli: Any, write_file: Any) -> None:
    replay_project(write_file, "claude-3-5-sonnet@20240620")
    result = cli("run", "set.yaml", "--format", "markdown")
    assert result.exit_code == 0, result.stderr
    assert "(reported `claude-3-5-sonnet@20240620`)" in result.stdout
    reason = next(line for line in result.stdout.splitlines() if line.startswith("> "))
    assert "on rec/replay (reported claude-3-5-sonnet@20240620)" in reason
    assert "`@`" not in result.stdout


def test_the_grader_is_one_code_span() -> None:
    lines = run_markdown(run_of(2, 2, grader=JUDGED)).splitlines()
    assert lines[2].endswith(f" · grader `{JUDGED}`")


def test_an_at_sign_that_could_mention_someone_is_still_set_as_code() -> None:
    text = run_markdown(run_of(1, 1, set_id="@octocat")).splitlines()[0]
    assert text.startswith("### `@`octocat · run")


def test_a_run_that_could_not_complete_says_so_and_how_many_items_errored(cli: Any, write_file: Any) -> None:
    replay_project(write_file, "m1")
    write_file(  # a prompt with no recorded answer is asked of the fallback: a closed loopback port
        "evalkit.yaml",
        "default_provider: rec\nproviders:\n  - {id: rec, adapter: replay, path: answers.jsonl, fallback: down}\n"
        '  - {id: down, adapter: openai, base_url: "http://127.0.0.1:9/v1", model: m, max_retries: 0}\n',
    )
    write_file("set.yaml", "id: md.out\nname: Markdown\nprompts:\n" + "".join(
        f"  - {{id: {p}, prompt: hi, assertions: [{{contains: yes}}]}}\n" for p in ("p", "unanswered", "silent")
    ))  # fmt: skip
    result = cli("run", "set.yaml", "--format", "markdown", "--fail-on-regression")  # the replay has no answer for two
    assert result.exit_code == 3, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "## evalkit: 1 run, could not complete: 2 of 3 items errored"
    assert lines[4].startswith("❌ **could not complete**: 2 of 3 items errored · rec/")
    assert "gate failed" not in result.stdout.lower()
