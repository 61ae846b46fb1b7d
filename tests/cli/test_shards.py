"""`evalkit run --shard` and `evalkit gate` on one database (README "Larger suites: shards and
batches"): what a part stores and refuses, and how a group is assembled, checked and gated. The
recipes across CI jobs, with merged databases, are played in tests/e2e/test_ci_shards.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from evalkit.pipeline.shards import shard_of
from tests.conftest import write, wrong_answers
from tests.fakeserver import FakeServer

pytestmark = pytest.mark.slow

PROMPTS = 12
SET_ID = "shards.twelve"


def twelve(critical: str = "") -> str:
    lines = [f"id: {SET_ID}", "name: Twelve", "prompts:"]
    for i in range(PROMPTS):
        flag = ", critical: true" if f"q{i}" == critical else ""
        lines.append(f"  - {{id: q{i}, prompt: 'question {i}', assertions: [{{contains: right}}]{flag}}}")
    return "\n".join(lines) + "\n"


@pytest.fixture
def project(isolated: Path, fake_llm: FakeServer, monkeypatch: pytest.MonkeyPatch) -> FakeServer:
    """A twelve-prompt set on the fake server; ``wrong`` prompts fail, ``broken`` ones error."""
    for var in ("GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT", "CI_PIPELINE_ID"):
        monkeypatch.delenv(var, raising=False)
    return wrong_answers(isolated, fake_llm, "sets/twelve.yaml", twelve())


def shard(cli: Any, spec: str, *extra: str, group: str = "g1") -> tuple[int, Any, str]:
    result = cli("run", "sets/twelve.yaml", "--shard", spec, "--run-group", group, "--format", "json", *extra)
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip() else None, result.stderr


def shards(cli: Any, count: int = 3, *, group: str = "g1", skip: tuple[int, ...] = ()) -> None:
    for index in range(1, count + 1):
        if index not in skip:
            code, _, err = shard(cli, f"{index}/{count}", group=group)
            assert code == 0, err


def gate(cli: Any, *extra: str) -> tuple[int, Any, str]:
    result = cli("gate", "--format", "json", *extra)
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip() else None, result.stderr


def rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    if not db.exists():
        return []
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_a_shard_stores_its_part_in_state_shard(cli: Any, project: FakeServer, db_file: Path) -> None:
    code, doc, _ = shard(cli, "2/3")
    assert code == 0
    assert doc["shard"] == {"index": 2, "count": 3, "group": "g1"}
    assert doc["comparison"]["state"] == "shard"
    assert doc["gate"] == {"fail_on_regression": False, "passed": True, "failures": []}
    expected = [f"q{i}" for i in range(PROMPTS) if shard_of(SET_ID, f"q{i}", 3) == 2]
    assert [item["id"] for item in doc["items"]] == expected
    assert len(project.requests) == len(expected)
    stored = rows(db_file, "select shard_index, shard_count, run_group, comparison_state, item_count from runs")
    assert stored == [(2, 3, "g1", "shard", len(expected))]


def test_the_run_group_defaults_to_the_ci_pipeline(
    cli: Any, project: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = cli("run", "sets/twelve.yaml", "--shard", "1/2")
    assert result.exit_code == 2
    assert "pass --run-group ID" in result.stderr
    assert not project.requests
    monkeypatch.setenv("GITHUB_RUN_ID", "42")
    monkeypatch.setenv("GITHUB_RUN_ATTEMPT", "3")
    result = cli("run", "sets/twelve.yaml", "--shard", "1/2", "--format", "json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["shard"]["group"] == "42-3"


@pytest.mark.parametrize(
    "options",
    [
        ("--fail-on-regression",),
        ("--min-pass-rate", "0.9"),
        ("--min-mean-score", "0.9"),
        ("--max-pass-rate-drop", "0.2"),
        ("--significance", "0.05"),
        ("--baselines", "."),
        ("--html", "report.html"),
    ],
)
def test_gate_options_with_a_shard_point_at_evalkit_gate(
    cli: Any, project: FakeServer, db_file: Path, options: tuple[str, ...]
) -> None:
    code, doc, err = shard(cli, "1/2", *options)
    assert (code, doc) == (2, None)
    assert options[0] in err
    assert "evalkit gate" in err
    assert not project.requests
    assert not rows(db_file, "select * from runs")


def test_privacy_none_and_a_group_without_a_shard_are_refused(cli: Any, project: FakeServer, isolated: Path) -> None:
    result = cli("run", "sets/twelve.yaml", "--run-group", "g1")
    assert result.exit_code == 2
    assert "--shard I/N" in result.stderr
    config = (isolated / "evalkit.yaml").read_text(encoding="utf-8")
    write(isolated / "evalkit.yaml", config + "privacy: none\n")
    code, _, err = shard(cli, "1/2")
    assert code == 2
    assert "privacy: none" in err
    assert not project.requests


def test_an_empty_shard_stores_an_empty_part(cli: Any, project: FakeServer, isolated: Path, db_file: Path) -> None:
    write(isolated / "sets/twelve.yaml", twelve().split("  - {id: q1,")[0])  # q0 alone
    empty = 2 if shard_of(SET_ID, "q0", 2) == 1 else 1
    code, doc, _ = shard(cli, f"{empty}/2")
    assert (code, doc["prompt_count"], doc["items"]) == (0, 0, [])
    assert rows(db_file, "select item_count, shard_index from runs") == [(0, empty)]
    shard(cli, f"{3 - empty}/2")
    code, doc, err = gate(cli, "--run-group", "g1")
    assert code == 0, err
    assert (doc["prompt_count"], doc["passed_count"]) == (1, 1)


def test_a_part_is_nobodys_baseline_and_no_run_of_its_own_in_report(cli: Any, project: FakeServer) -> None:
    shards(cli, 1)
    result = cli("run", "sets/twelve.yaml", "--format", "json")
    whole = json.loads(result.stdout)
    assert whole["comparison"]["state"] == "baseline"
    _, part, _ = shard(cli, "1/1", group="g2")  # the newest run of its scope, yet not what is accepted
    report = json.loads(cli("report", "--format", "json").stdout)
    assert [r["run_id"] for r in report["runs"]] == [whole["run_id"]]
    assert whole["run_id"] in cli("report").stdout
    assert part["run_id"] not in cli("report").stdout
    accepted = json.loads(cli("baseline", "accept", "--format", "json").stdout)
    assert [a["run_id"] for a in accepted["accepted"]] == [whole["run_id"]]
    refused = cli("baseline", "accept", part["run_id"])
    assert refused.exit_code == 2
    assert "is shard 1/1 of run group g2, not a whole run" in refused.stderr


def test_the_gate_assembles_a_whole_group_as_one_run(cli: Any, project: FakeServer, db_file: Path) -> None:
    project.wrong = {3, 7}  # type: ignore[attr-defined]
    shards(cli, 3)
    code, doc, err = gate(cli, "--run-group", "g1")
    assert code == 0, err
    assert [item["id"] for item in doc["items"]] == [f"q{i}" for i in range(PROMPTS)]  # in set order
    assert (doc["prompt_count"], doc["passed_count"], doc["error_count"]) == (12, 10, 0)
    assert doc["generator"] == {"provider": "fake", "model": "alias-1", "reported_model": "model-1"}
    assert doc["shard"] == {"index": None, "count": 3, "group": "g1"}
    assert doc["comparison"]["state"] == "baseline"
    # a later whole run is compared with the assembled run, which is an ordinary run now
    project.wrong = {3, 7, 8, 9}  # type: ignore[attr-defined]
    result = cli("run", "sets/twelve.yaml", "--format", "json", "--no-cache", "--fail-on-regression")
    later = json.loads(result.stdout)
    assert (result.exit_code, later["comparison"]["baseline_run_id"]) == (1, doc["run_id"])
    assert later["comparison"]["flips"]["regressed"] == ["q8", "q9"]


def test_gating_twice_stores_once_and_says_the_same(cli: Any, project: FakeServer, db_file: Path) -> None:
    shards(cli, 2)
    first = gate(cli, "--run-group", "g1")
    second = gate(cli, "--run-group", "g1", "--min-pass-rate", "1")
    assert first[0] == 0
    assert second[0] == 0
    assert second[1]["run_id"] == first[1]["run_id"]
    assert second[1]["comparison"] == first[1]["comparison"]  # not compared with itself
    assert rows(db_file, "select count(*) from runs where shard_index is null") == [(1,)]


def test_a_missing_or_doubled_shard_is_exit_3_and_nothing_is_gated(
    cli: Any, project: FakeServer, db_file: Path
) -> None:
    shards(cli, 3, skip=(2,))
    code, doc, err = gate(cli, "--run-group", "g1")
    assert (code, doc) == (3, None)
    assert f"{SET_ID} on fake/alias-1: shard 2/3 is missing" in err
    assert "nothing was gated" in err
    shard(cli, "2/3")
    shard(cli, "3/3")
    code, doc, err = gate(cli, "--run-group", "g1")
    assert (code, doc) == (3, None)
    assert "shard 3/3 is there 2 times (runs " in err
    assert rows(db_file, "select count(*) from runs where shard_index is null") == [(0,)]


def test_shards_of_another_version_of_the_set_are_exit_3(cli: Any, project: FakeServer, isolated: Path) -> None:
    shard(cli, "1/2")
    write(isolated / "sets/twelve.yaml", twelve().replace("question 11", "question  11"))
    shard(cli, "2/2")
    code, _, err = gate(cli, "--run-group", "g1")
    assert code == 3
    assert "different versions of the set (fingerprints " in err


def test_the_gate_reads_no_set_file(cli: Any, project: FakeServer, isolated: Path) -> None:
    """What the gate needs of a set, its parts kept: a gate job with the set moved or changed
    gates what the shards ran."""
    write(isolated / "sets/twelve.yaml", twelve(critical="q2"))
    project.wrong = {2}  # type: ignore[attr-defined]
    shards(cli, 2)
    (isolated / "sets/twelve.yaml").unlink()
    code, doc, _ = gate(cli, "--run-group", "g1")
    assert code == 1
    assert doc["gate"]["failures"] == ["critical prompt 'q2' failed"]
    assert [item["id"] for item in doc["items"]] == [f"q{i}" for i in range(PROMPTS)]


def test_an_unknown_group_is_exit_2_naming_the_groups_held(cli: Any, project: FakeServer) -> None:
    code, _, err = gate(cli, "--run-group", "nope")
    assert code == 2
    assert "no database" in err
    shards(cli, 2)
    code, _, err = gate(cli, "--run-group", "nope")
    assert code == 2
    assert "no shard of run group 'nope' (groups here: g1)" in err
    code, _, err = gate(cli)
    assert code == 2
    assert "pass --run-group ID" in err


def test_the_gate_holds_the_absolute_gates_and_critical_prompts(cli: Any, project: FakeServer, isolated: Path) -> None:
    write(isolated / "sets/twelve.yaml", twelve(critical="q5"))
    project.wrong = {5}  # type: ignore[attr-defined]
    shards(cli, 2)
    code, doc, _ = gate(cli, "--run-group", "g1", "--min-pass-rate", "0.95")
    assert code == 1
    assert doc["gate"]["failures"] == [
        "pass rate 0.92 (11/12) is below the minimum 0.95",
        "critical prompt 'q5' failed",
    ]


def test_errored_items_fail_the_shard_and_the_gate_with_3(cli: Any, project: FakeServer, tmp_path: Path) -> None:
    project.broken = {4}  # type: ignore[attr-defined]
    owner = shard_of(SET_ID, "q4", 2)
    code, doc, _ = shard(cli, f"{owner}/2")
    assert (code, doc["error_count"]) == (3, 1)
    shard(cli, f"{3 - owner}/2")
    junit = tmp_path / "gate.xml"
    code, doc, err = gate(cli, "--run-group", "g1", "--junit", str(junit))
    assert (code, doc["error_count"], doc["comparison"]["state"]) == (3, 1, "not_compared")
    assert "1 of 12 items errored" in err
    assert junit.exists()


def test_several_sets_gate_as_an_array(cli: Any, project: FakeServer, isolated: Path) -> None:
    write(isolated / "sets/other.yaml", twelve().replace(SET_ID, "shards.other"))
    for index in (1, 2):
        result = cli("run", "sets/", "--shard", f"{index}/2", "--run-group", "g1", "--format", "json")
        assert result.exit_code == 0
        assert len(json.loads(result.stdout)) == 2
    code, doc, _ = gate(cli, "--run-group", "g1")
    assert code == 0
    assert sorted(d["set"] for d in doc) == ["shards.other", SET_ID]
    assert all(d["prompt_count"] == PROMPTS for d in doc)


def test_repeated_samples_are_assembled_per_prompt(cli: Any, project: FakeServer) -> None:
    for index in (1, 2):
        code, _, err = shard(cli, f"{index}/2", "--repeat", "2")
        assert code == 0, err
    code, doc, err = gate(cli, "--run-group", "g1")
    assert code == 0, err
    assert (doc["prompt_count"], doc["sample_count"], doc["repeats"]) == (PROMPTS, 2 * PROMPTS, 2)
    assert [(item["id"], item["repeat"]) for item in doc["items"][:4]] == [("q0", 0), ("q0", 1), ("q1", 0), ("q1", 1)]


def test_a_parts_markdown_and_table_say_it_is_a_shard(cli: Any, project: FakeServer) -> None:
    markdown = cli("run", "sets/twelve.yaml", "--shard", "1/2", "--run-group", "g1", "--format", "markdown")
    assert "➗ **shard 1/2**: gated with the other shards by `evalkit gate`" in markdown.stdout
    table = cli("run", "sets/twelve.yaml", "--shard", "2/2", "--run-group", "g1")
    assert (
        "Shard 2/2 of run group g1: a shard is compared and gated with the other shards by evalkit gate" in table.stdout
    )
