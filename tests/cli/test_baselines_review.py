"""Defects a review of the baseline work found, each reproduced here: repeated baselines that
judged differently from a file and from the database, hand-edited figures, partial accepts,
deep nesting, a baseline file for another scope that let a worse run pass, hostile ids in the
pull-request comment and in JUnit."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.cli.test_gate import TEN, project, run_json
from tests.conftest import write
from tests.fakeserver import FakeServer, Recorded, openai_reply

__all__ = ["project"]


def entry_line(path: Path, key: str) -> int:
    return next(i for i, text in enumerate(path.read_text().splitlines(), 1) if f'"{key}"' in text)


@pytest.mark.slow
def test_a_repeated_baseline_judges_alike_from_the_file_and_from_the_database(
    cli, project: FakeServer, isolated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: dict[int, int] = {}

    def flaky(request: Recorded):  # q6..q9 fail one sample in five; q0..q5 pass unless wrong
        index = int(request.json["messages"][-1]["content"].split()[-1])
        calls[index] = calls.get(index, 0) + 1
        bad = index in project.wrong or (index >= 6 and calls[index] % 5 == 0)
        return openai_reply("wrong" if bad else "right", model=project.model)

    project.handler = flaky
    _, base = run_json(cli, "--repeat", "5")
    assert base["passed_count"] == 46
    assert cli("baseline", "accept").exit_code == 0
    item = json.loads((isolated / "baselines/gate.ten.json").read_text())["baselines"][0]["items"]["q7"]
    assert item == {"passed": False, "pass_rate": 0.8, "score": 0.8}
    project.wrong = set(range(6))
    args = ("--repeat", "5", "--fail-on-regression", "--significance", "0.05", "--max-mean-score-drop", "1")
    _, from_file = run_json(cli, *args)
    (isolated / "baselines/gate.ten.json").unlink()
    _, from_db = run_json(cli, *args)
    assert from_file["comparison"]["baseline_source"] == "file"
    assert from_db["comparison"]["baseline_source"] == "db"
    assert from_db["comparison"]["baseline_run_id"] == base["run_id"]
    for key in ("pass_rate_delta", "regressed"):
        assert from_file["comparison"][key] == from_db["comparison"][key]
    assert from_file["comparison"]["paired_test"] == from_db["comparison"]["paired_test"]


@pytest.mark.slow
def test_a_hand_edited_mean_score_is_exit_2(cli, project: FakeServer, isolated: Path) -> None:
    run_json(cli)
    assert cli("baseline", "accept").exit_code == 0
    path = isolated / "baselines/gate.ten.json"
    path.write_text(path.read_text().replace('"mean_score": 1.0', '"mean_score": 0.0'))
    result, _ = run_json(cli)
    assert result.exit_code == 2
    assert f"baselines/gate.ten.json:{entry_line(path, 'mean_score')}:" in result.stderr
    assert "the mean of its items' scores is 1.0" in result.stderr


@pytest.mark.slow
def test_accept_writes_no_file_when_another_target_file_is_malformed(cli, project: FakeServer, isolated: Path) -> None:
    run_json(cli)
    write(isolated / "sets/other.yaml", f"id: other.set\nname: Other\nprompts:\n{TEN}\n")
    cli("run", "sets/other.yaml", "--no-cache")
    write(isolated / "baselines/other.set.json", "{\n")
    result = cli("baseline", "accept")
    assert result.exit_code == 2
    assert "baselines/other.set.json:2:" in result.stderr
    assert not (isolated / "baselines/gate.ten.json").exists()


def test_a_deeply_nested_baseline_file_is_exit_2(cli, project: FakeServer, isolated: Path) -> None:
    write(isolated / "baselines/gate.ten.json", '{"a":' * 1200 + "1" + "}" * 1200)
    for args in (("run", "sets/ten.yaml"), ("baseline", "show"), ("validate",)):
        result = cli(*args)
        assert result.exit_code == 2, args
        assert result.exception is None
        assert "baselines/gate.ten.json:1:1:" in result.stderr + result.stdout


def test_validate_a_baselines_folder_checks_its_files(cli, project: FakeServer, isolated: Path) -> None:
    write(isolated / "baselines/gate.ten.json", "{\n")
    result = cli("validate", "baselines")
    assert result.exit_code == 2
    assert "baselines/gate.ten.json:2:" in result.stdout + result.stderr


@pytest.mark.slow
def test_a_baseline_file_for_another_scope_does_not_let_a_worse_run_pass(
    cli, project: FakeServer, isolated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_json(cli)
    assert cli("baseline", "accept").exit_code == 0
    monkeypatch.setenv("EVALKIT_DB", str(tmp_path / "fresh.duckdb"))  # a fresh runner
    project.model = "fake-model-2"  # a new snapshot answers, and answers worse
    project.wrong = {0, 1, 2, 3, 4}
    result, doc = run_json(cli, "--fail-on-regression")
    assert result.exit_code == 1
    assert doc["comparison"]["state"] == "not_compared"
    assert doc["comparison"]["reason"].startswith(
        "Not compared: baselines/gate.ten.json has no baseline for gate.ten on fake/alias-1 (reported fake-model-2)"
    )
    assert "(it holds: fake/alias-1 (reported fake-model-1) graded by deterministic)" in doc["comparison"]["reason"]
    first = doc["run_id"]
    result, doc = run_json(cli)  # this database now has a run of that scope: it is the baseline
    assert (result.exit_code, doc["comparison"]["state"]) == (0, "compared")
    assert (doc["comparison"]["baseline_source"], doc["comparison"]["baseline_run_id"]) == ("db", first)


@pytest.mark.slow
def test_default_accept_passes_over_a_scope_whose_latest_run_cannot_be_a_baseline(
    cli, project: FakeServer, isolated: Path
) -> None:
    from tests.fakeserver import Reply

    run_json(cli)
    project.handler = lambda request: Reply(status=500, json={"error": {"message": "down"}})
    run_json(cli, "--provider", "fake2")
    result = cli("baseline", "accept")
    assert result.exit_code == 0, result.stderr
    assert "Skipped: run " in result.stderr
    assert "10 of 10 items errored" in result.stderr
    entries = json.loads((isolated / "baselines/gate.ten.json").read_text())["baselines"]
    assert [e["provider"] for e in entries] == ["fake"]


def test_baseline_show_refuses_a_path_for_a_set_id(cli, isolated: Path) -> None:
    result = cli("baseline", "show", "a/../x")
    assert result.exit_code == 2
    assert "'a/../x' is not a set id" in result.stderr


HOSTILE = "![i](https://evil.example/t.png) @octocat **b** <!-- x"


def test_hostile_ids_and_reasons_are_plain_text_in_markdown(cli, project: FakeServer, isolated: Path) -> None:
    write(
        isolated / "sets/ten.yaml",
        "id: gate.ten\nname: Ten\nprompts:\n"
        f"  - {{id: {json.dumps(HOSTILE)}, prompt: 'question 1', critical: true, assertions: [{{exact: {json.dumps(HOSTILE)}}}]}}\n",
    )
    result = cli("run", "sets/ten.yaml", "--format", "markdown", "--no-cache")
    assert result.exit_code == 1
    text = result.stdout
    assert "![" not in text
    assert "](" not in text.replace("\\](", "")
    assert "**b**" not in text
    assert " @octocat" not in text
    assert "<!--" not in text
    assert r"\!\[i\](https://evil.example/t.png) `@`octocat \*\*b\*\* &lt;\!-- x" in text


def test_a_prompt_called_gate_keeps_junit_names_unique(cli, project: FakeServer, isolated: Path) -> None:
    write(
        isolated / "sets/ten.yaml",
        "id: gate.ten\nname: Ten\nprompts:\n  - {id: gate, prompt: 'question 1', assertions: [{contains: right}]}\n",
    )
    project.wrong = {1}
    result = cli("run", "sets/ten.yaml", "--no-cache", "--junit", "j.xml", "--min-pass-rate", "1")
    assert result.exit_code == 1
    names = [c.get("name") for c in ET.parse(isolated / "j.xml").getroot().iter("testcase")]
    assert names == ["gate", "[gate]"]
