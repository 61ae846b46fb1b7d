"""User mistakes and faults around the commands: each is one `Error:` line with the right exit code
(and a fallback that answered is the instance the baseline names)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakeserver import FakeServer, Reply, openai_reply

ONE = "id: edge.one\nname: One\nprompts:\n  - {id: a, prompt: hi, assertions: [{contains: echo}]}\n"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["prune", "--older-than", "0"], "Error: Invalid value for '--older-than': 0 is not in the range x>=1."),
        (["run", "x.yaml", "--repeat", "0"], "Error: Invalid value for '--repeat': 0 is not in the range x>=1."),
        (["models", "--policy", "fastest"], "Error: Invalid value for '--policy': 'fastest' is not one of"),
    ],
)
def test_usage_errors_are_one_error_line(cli, args: list[str], expected: str) -> None:
    result = cli(*args)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(expected)


def test_openai_base_url_alone_needs_no_key(cli, fake_llm: FakeServer, write_file, monkeypatch) -> None:
    write_file("s.yaml", ONE)
    monkeypatch.setenv("OPENAI_BASE_URL", f"{fake_llm.url}/v1")
    result = cli("run", "s.yaml", "--model", "served-model", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["generator"]["provider"] == "openai"
    assert "authorization" not in fake_llm.requests[0].headers


def test_replay_file_that_is_not_utf8(cli, write_file, isolated: Path, db_file: Path) -> None:
    write_file("s.yaml", ONE)
    (isolated / "answers.jsonl").write_bytes(b'{"id": "a", "response": "\xff", "model": "m"}\n')
    write_file("evalkit.yaml", "providers:\n  - {id: rec, adapter: replay, path: answers.jsonl}\n")
    result = cli("run", "s.yaml")
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: ")
    assert "not UTF-8 text" in result.stderr
    assert not db_file.exists()


def test_unwritable_output_is_refused_before_any_call(
    cli, fake_config, fake_llm: FakeServer, write_file, db_file
) -> None:
    write_file("s.yaml", ONE)
    blocker = Path("blocker")
    blocker.write_text("a file, not a folder")
    result = cli("run", "s.yaml", "--output", "blocker/out.json")
    assert result.exit_code == 2
    assert result.stderr.strip() == "Error: blocker/out.json: cannot write this file; choose another path"
    assert fake_llm.calls == 0
    assert not db_file.exists()


@pytest.mark.parametrize("option", ["--output", "--junit"])
def test_an_output_name_too_long_for_the_file_system_is_refused_before_any_call(
    cli, fake_config, fake_llm: FakeServer, write_file, db_file, option: str
) -> None:
    write_file("s.yaml", ONE)
    name = "x" * 300 + ".out"
    result = cli("run", "s.yaml", option, name)
    assert result.exit_code == 2
    assert result.exception is None
    # the name is a literal echoed in the error line: cut to 80 characters
    shown = name[:79] + "…"
    assert result.stderr.strip() == f"Error: {shown}: cannot write this file (File name too long); choose another path"
    assert fake_llm.calls == 0
    assert not db_file.exists()


def test_invalid_base_url_is_an_input_error(cli, write_file) -> None:
    write_file("s.yaml", ONE)
    write_file("evalkit.yaml", "providers:\n  - {id: x, adapter: openai, base_url: 'http://[::1', model: m}\n")
    result = cli("run", "s.yaml")
    assert result.exit_code == 2
    assert result.stderr.endswith(
        "evalkit.yaml:2:40: providers[0].base_url: 'http://[::1' is not a usable URL (Invalid IPv6 URL)\n"
    )


def test_compare_refuses_runs_of_different_sets(cli, fake_config, fake_llm: FakeServer, write_file) -> None:
    write_file("a.yaml", ONE)
    write_file("b.yaml", ONE.replace("edge.one", "edge.two"))
    first = json.loads(cli("run", "a.yaml", "--format", "json").stdout)["run_id"]
    second = json.loads(cli("run", "b.yaml", "--format", "json").stdout)["run_id"]
    result = cli("compare", first, second)
    assert result.exit_code == 2
    assert "are of different sets" in result.stderr


def test_fallback_baseline_names_the_instance_that_answered(cli, fake_llm: FakeServer, write_file) -> None:
    write_file("s.yaml", ONE)
    write_file(
        "evalkit.yaml",
        f"""
        providers:
          - {{id: bad, adapter: openai, base_url: '{fake_llm.url}/bad/v1', model: alias-bad, max_retries: 0, fallback: good}}
          - {{id: good, adapter: openai, base_url: '{fake_llm.url}/v1', model: alias-good}}
        """,
    )
    fake_llm.handler = lambda req: Reply(status=500, json={}) if "/bad/" in req.path else openai_reply("echo")
    result = cli("run", "s.yaml", "--provider", "bad")
    assert result.exit_code == 0, result.stderr
    assert "Recorded as the baseline for edge.one on good/alias-good (reported fake-model-1)" in result.stdout


def test_lexical_without_corpus_creates_no_database(cli, write_file, db_file: Path) -> None:
    write_file("q.yaml", "id: edge.q\nname: Q\nquestions:\n  - {id: q, question: Where?, form: match, expected: [d]}\n")
    result = cli("retrieval", "q.yaml", "--retriever", "lexical")
    assert result.exit_code == 2
    assert "the lexical retriever needs a corpus" in result.stderr
    assert not db_file.exists()


def test_report_on_a_folder_is_a_store_error(cli, isolated: Path) -> None:
    folder = isolated / "not-a-db"
    folder.mkdir()
    result = cli("report", "--db", str(folder))
    assert result.exit_code == 3
    assert "cannot open the database" in result.stderr
