"""A database path into a missing folder (--db, EVALKIT_DB, the config's db) is refused for every
command; the default .evalkit folder is still created."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.factories import fake_project, run_json
from tests.fakeserver import FakeServer
from tests.retrieval.test_cli import FRUIT, FRUIT_DOCS

COMMANDS_WITH_DB = [
    ["report"],
    ["show", "x"],
    ["compare", "a", "b"],
    ["models"],
    ["prune"],
    ["cache", "clear"],
    ["baseline", "accept"],
    ["run", "sets/one.yaml"],
    ["retrieval", "sets/fruit.yaml", "--retriever", "lexical"],
]


@pytest.mark.parametrize("args", COMMANDS_WITH_DB, ids=lambda args: " ".join(args[:2]))
def test_db_in_a_missing_folder_is_refused(
    cli: Any, write_file: Any, fake_llm: FakeServer, isolated: Path, args: list[str]
) -> None:
    fake_project(write_file, fake_llm)
    write_file("sets/fruit.yaml", FRUIT)
    write_file("sets/docs.jsonl", FRUIT_DOCS)
    result = cli(*args, "--db", "histroy/evalkit.duckdb")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == "Error: folder histroy does not exist; create it or fix --db\n"
    assert not (isolated / "histroy").exists()
    assert fake_llm.calls == 0


def test_evalkit_db_and_the_config_db_into_a_missing_folder_are_refused(
    cli: Any, write_file: Any, fake_llm: FakeServer, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_project(write_file, fake_llm)
    monkeypatch.setenv("EVALKIT_DB", "nope/x.duckdb")
    result = cli("run", "sets/one.yaml")
    assert (result.exit_code, result.stderr) == (2, "Error: folder nope does not exist; create it or fix EVALKIT_DB\n")
    monkeypatch.delenv("EVALKIT_DB")
    fake_project(write_file, fake_llm, "db: nope/x.duckdb")
    for args in (["run", "sets/one.yaml"], ["report"]):
        result = cli(*args)
        assert result.exit_code == 2
        assert result.stderr == (
            f"Error: folder {isolated / 'nope'} does not exist; create it or fix db: in {isolated / 'evalkit.yaml'}\n"
        )
    assert not (isolated / "nope").exists()
    assert fake_llm.calls == 0


def test_the_default_evalkit_folder_is_still_created(
    cli: Any, write_file: Any, fake_llm: FakeServer, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_project(write_file, fake_llm)
    monkeypatch.delenv("EVALKIT_DB")
    report = cli("report", "--format", "json")  # a read-only command on no database: empty, nothing made
    assert (report.exit_code, json.loads(report.stdout)) == (0, {"runs": []})
    assert not (isolated / ".evalkit").exists()
    assert run_json(cli, "sets/one.yaml")["comparison"]["state"] == "baseline"
    assert (isolated / ".evalkit" / "evalkit.duckdb").is_file()
    explicit = cli("run", "sets/one.yaml", "--db", ".evalkit/second.duckdb", "--format", "json")
    assert explicit.exit_code == 0, explicit.stderr
    nested = cli("report", "--db", "missing/.evalkit/x.duckdb")  # a .evalkit/ inside a typo is the typo
    assert (nested.exit_code, nested.stderr) == (
        2,
        f"Error: folder {Path('missing/.evalkit')} does not exist; create it or fix --db\n",
    )
