"""`evalkit validate` reads the replay answers files evalkit.yaml names and judges them as `run`
does; the "and N more" hint of a failing run names the validate command that lists them all."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_progress_ci import ONE

# --- validate reads the replay answers files evalkit.yaml names -------------------------------

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


# --- the "and N more" hint names the file ----------------------------------------------------

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
