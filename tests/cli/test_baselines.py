"""Baselines kept in the repository, no ratchet, absolute gates, and the CI outputs (README "Baselines and regressions",
5.7, 5.8, 5.9): `evalkit baseline accept/show`, `run --baselines`, flips, `gate.failures`,
markdown and JUnit."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import duckdb
import pytest

from tests.cli.test_gate import TEN, project, run_json, stored_runs
from tests.conftest import write
from tests.fakeserver import FakeServer, Recorded, openai_reply

__all__ = ["project"]  # the fixture, shared with test_gate


def baseline_doc(work: Path, set_id: str = "gate.ten") -> dict:
    return json.loads((work / "baselines" / f"{set_id}.json").read_text(encoding="utf-8"))


def accepted_ids(db: Path) -> list[str]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return [
            r[0]
            for r in con.execute("select run_id from runs where accepted_at is not null order by run_id").fetchall()
        ]
    finally:
        con.close()


@pytest.mark.slow
def test_accept_writes_a_stable_file_that_gates_a_fresh_database(
    cli, project: FakeServer, isolated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.wrong = {9}
    result, first = run_json(cli)
    assert result.exit_code == 0
    accepted = cli("baseline", "accept")
    assert accepted.exit_code == 0, accepted.stderr
    assert f"Accepted run {first['run_id']} as the baseline of gate.ten on fake/alias-1" in accepted.stdout
    path = isolated / "baselines" / "gate.ten.json"
    written = path.read_bytes()
    doc = baseline_doc(isolated)
    assert doc["format"] == "evalkit-baseline/1"
    assert doc["set"] == "gate.ten"
    (entry,) = doc["baselines"]
    assert (entry["provider"], entry["model"], entry["reported_model"], entry["grader"]) == (
        "fake", "alias-1", "fake-model-1", "deterministic",
    )  # fmt: skip
    assert (entry["run_id"], entry["prompt_count"], entry["passed_count"], entry["pass_rate"]) == (
        first["run_id"], 10, 9, 0.9,
    )  # fmt: skip
    assert entry["items"]["q9"] == {"passed": False, "score": 0.0}
    assert entry["items"]["q0"] == {"passed": True, "score": 1.0}
    assert written.endswith(b"\n")
    assert written == (json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()
    assert "question" not in written.decode()  # ids only, never prompt or response text
    assert accepted_ids(tmp_path / "evalkit.duckdb") == [first["run_id"]]

    again = cli("baseline", "accept", first["run_id"][:12])  # a prefix; the same run: the same bytes
    assert again.exit_code == 0
    assert path.read_bytes() == written

    # A new database (a fresh CI runner): the file is the baseline, and a worse answer regresses.
    monkeypatch.setenv("EVALKIT_DB", str(tmp_path / "fresh.duckdb"))
    project.wrong = {0, 1, 2, 9}
    result, doc = run_json(cli, "--fail-on-regression")
    assert result.exit_code == 1
    comparison = doc["comparison"]
    assert (comparison["state"], comparison["regressed"]) == ("compared", True)
    assert comparison["baseline_run_id"] == first["run_id"]
    assert comparison["baseline_source"] == "file"
    assert comparison["baseline_file"] == "baselines/gate.ten.json"
    assert comparison["flips"] == {"regressed": ["q0", "q1", "q2"], "fixed": [], "added": [], "removed": []}
    assert doc["gate"]["failures"] == [f"regression against the baseline (run {first['run_id']})"]


@pytest.mark.slow
def test_database_baseline_says_its_source_and_flips(cli, project: FakeServer) -> None:
    project.wrong = {3}
    run_json(cli)
    project.wrong = {4}
    result, doc = run_json(cli)
    assert result.exit_code == 0
    assert doc["comparison"]["baseline_source"] == "db"
    assert doc["comparison"]["baseline_file"] is None
    assert doc["comparison"]["flips"] == {"regressed": ["q4"], "fixed": ["q3"], "added": [], "removed": []}


@pytest.mark.slow
def test_table_lists_flips_and_gate_failures(cli, project: FakeServer) -> None:
    run_json(cli)
    project.wrong = {1, 2}
    result = cli("run", "sets/ten.yaml", "--no-cache", "--min-pass-rate", "0.9")
    assert result.exit_code == 1
    assert "Regressed (passed in the baseline, fail now): q1, q2" in result.stdout
    assert "Gate: FAILED" in result.stdout
    assert "  - pass rate 0.80 (8/10) is below the minimum 0.9" in result.stdout


@pytest.mark.slow
def test_no_ratchet_a_regressed_run_is_not_the_next_baseline(cli, project: FakeServer, tmp_path: Path) -> None:
    _, good = run_json(cli)
    project.wrong = {0, 1, 2, 3}
    result, bad = run_json(cli, "--fail-on-regression")
    assert (result.exit_code, bad["comparison"]["regressed"]) == (1, True)
    # Re-running the job must not accept the regression: the baseline is still the good run.
    result, again = run_json(cli, "--fail-on-regression")
    assert result.exit_code == 1
    assert again["comparison"]["baseline_run_id"] == good["run_id"]
    # Accepting the regressed run makes it the baseline, in the database too.
    accepted = cli("baseline", "accept", bad["run_id"])
    assert accepted.exit_code == 0, accepted.stderr
    (tmp_path / "work" / "baselines" / "gate.ten.json").unlink()  # the database alone
    result, after = run_json(cli, "--fail-on-regression")
    assert result.exit_code == 0
    assert after["comparison"]["baseline_run_id"] == bad["run_id"]


@pytest.mark.slow
def test_baselines_option_overrides_the_folder(cli, project: FakeServer, isolated: Path, tmp_path: Path) -> None:
    run_json(cli)
    assert cli("baseline", "accept", "--baselines", "elsewhere").exit_code == 0
    assert (isolated / "elsewhere" / "gate.ten.json").is_file()
    assert not (isolated / "baselines").exists()
    project.wrong = {0, 1, 2}
    _, doc = run_json(cli, "--baselines", "elsewhere")
    assert doc["comparison"]["baseline_source"] == "file"
    shown = cli("baseline", "show", "--baselines", "elsewhere", "--format", "json")
    assert shown.exit_code == 0
    (entry,) = json.loads(shown.stdout)["baselines"]
    assert (entry["set"], entry["provider"], entry["pass_rate"]) == ("gate.ten", "fake", 1.0)
    table = cli("baseline", "show", "gate.ten", "--baselines", "elsewhere")
    assert "gate.ten" in table.stdout
    assert "100.0% (10/10)" in table.stdout


@pytest.mark.slow
def test_baselines_key_in_config(cli, project: FakeServer, isolated: Path) -> None:
    config = isolated / "evalkit.yaml"
    config.write_text(config.read_text() + "baselines: ci/accepted\n")
    run_json(cli)
    assert cli("baseline", "accept").exit_code == 0
    assert (isolated / "ci" / "accepted" / "gate.ten.json").is_file()


@pytest.mark.slow
def test_a_second_scope_is_added_sorted(cli, project: FakeServer, isolated: Path) -> None:
    run_json(cli, "--provider", "fake2")
    run_json(cli)
    assert cli("baseline", "accept").exit_code == 0
    providers = [e["provider"] for e in baseline_doc(isolated)["baselines"]]
    assert providers == ["fake", "fake2"]


@pytest.mark.slow
def test_accept_refuses_a_run_that_cannot_be_a_baseline(
    cli, project: FakeServer, isolated: Path, tmp_path: Path
) -> None:
    def broken(request):
        from tests.fakeserver import Reply

        return Reply(status=500, json={"error": {"message": "down"}})

    project.handler = broken
    result, doc = run_json(cli)
    assert result.exit_code == 3
    refused = cli("baseline", "accept", doc["run_id"])
    assert refused.exit_code == 2
    assert f"run {doc['run_id']} (gate.ten) cannot be a baseline: 10 of 10 items errored" in refused.stderr
    assert not (isolated / "baselines").exists()
    assert accepted_ids(tmp_path / "evalkit.duckdb") == []


def test_accept_without_a_database_is_exit_2(cli, isolated: Path) -> None:
    result = cli("baseline", "accept")
    assert result.exit_code == 2
    assert "no database yet" in result.stderr


def test_malformed_baseline_file_is_exit_2_before_any_call(
    cli, project: FakeServer, isolated: Path, tmp_path: Path
) -> None:
    write(
        isolated / "baselines" / "gate.ten.json",
        '{"format": "evalkit-baseline/1",\n  "set": "gate.ten",\n  "baselines": [\n',
    )
    result, _ = run_json(cli)
    assert result.exit_code == 2
    assert "baselines/gate.ten.json:4:" in result.stderr
    assert project.requests == []
    assert stored_runs(tmp_path / "evalkit.duckdb") == 0


@pytest.mark.slow
def test_a_first_run_meets_the_absolute_gates(cli, project: FakeServer, tmp_path: Path) -> None:
    project.wrong = {0, 1, 2, 3, 4}
    result, doc = run_json(cli, "--min-pass-rate", "0.8", "--min-mean-score", "0.75")
    assert result.exit_code == 1
    assert doc["comparison"]["state"] == "baseline"
    assert doc["gate"] == {
        "fail_on_regression": False,
        "passed": False,
        "failures": [
            "pass rate 0.50 (5/10) is below the minimum 0.8",
            "mean score 0.50 is below the minimum 0.75",
        ],
    }
    assert stored_runs(tmp_path / "evalkit.duckdb") == 1
    result, doc = run_json(cli, "--min-pass-rate", "0.5")  # a minimum met exactly holds
    assert (result.exit_code, doc["gate"]["passed"], doc["gate"]["failures"]) == (0, True, [])


@pytest.mark.slow
def test_set_gate_and_critical_prompts(cli, project: FakeServer, isolated: Path) -> None:
    write(
        isolated / "sets/ten.yaml",
        f"id: gate.ten\nname: Ten\ngate: {{min_pass_rate: 0.7}}\nprompts:\n{TEN}\n"
        "  - {id: refund, prompt: 'question 10', critical: true, assertions: [{contains: right}]}\n",
    )
    project.wrong = {10}
    result, doc = run_json(cli)
    assert result.exit_code == 1
    assert doc["gate"]["failures"] == ["critical prompt 'refund' failed"]
    project.wrong = {0, 1, 2, 3}
    result, doc = run_json(cli)
    assert doc["gate"]["failures"] == ["pass rate 0.64 (7/11) is below the minimum 0.7"]
    result, doc = run_json(cli, "--min-pass-rate", "0.6")  # the option overrides the set's gate
    assert (result.exit_code, doc["gate"]["failures"]) == (0, [])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--min-pass-rate", "1.5"), "--min-pass-rate: must be a finite number in 0..1, got '1.5'"),
        (("--min-mean-score", "NAN"), "--min-mean-score: must be a finite number in 0..1, got 'NAN'"),
        (("--min-pass-rate", "typo"), "--min-pass-rate: must be a finite number in 0..1, got 'typo'"),
    ],
)
def test_bad_gate_values_are_exit_2_before_any_call(
    cli, project: FakeServer, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    result, _ = run_json(cli, *args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert project.requests == []
    assert stored_runs(tmp_path / "evalkit.duckdb") == 0


@pytest.mark.parametrize(
    ("gate", "line"),
    [("gate: {min_pass_rate: 2}", 3), ("gate: {min_pass_rate: .nan}", 3), ("gate: {min_score: 0.5}", 3)],
)
def test_bad_set_gate_is_exit_2_with_file_line(cli, project: FakeServer, isolated: Path, gate: str, line: int) -> None:
    write(isolated / "sets/ten.yaml", f"id: gate.ten\nname: Ten\n{gate}\nprompts:\n{TEN}\n")
    result, _ = run_json(cli)
    assert result.exit_code == 2
    assert f"sets/ten.yaml:{line}:" in result.stderr
    assert project.requests == []


def test_bad_critical_is_exit_2(cli, project: FakeServer, isolated: Path) -> None:
    write(
        isolated / "sets/ten.yaml",
        "id: gate.ten\nname: Ten\nprompts:\n  - {id: a, prompt: b, critical: yes, assertions: [{contains: c}]}\n",
    )
    result, _ = run_json(cli)
    assert result.exit_code == 2
    assert "sets/ten.yaml:4:" in result.stderr


@pytest.mark.slow
def test_markdown_names_scope_verdict_flips_gate_and_failures(cli, project: FakeServer, isolated: Path) -> None:
    run_json(cli)
    project.wrong = {5, 6}
    result = cli(
        "run", "sets/ten.yaml", "--no-cache", "--format", "markdown", "--markdown", "pr.md", "--junit", "j.xml",
        "--min-pass-rate", "0.9",
    )  # fmt: skip
    assert result.exit_code == 1
    text = result.stdout
    assert (isolated / "pr.md").read_text(encoding="utf-8") == text
    assert text.startswith("## evalkit: 1 run, gate failed for 1\n")
    assert "### gate.ten · run `" in text
    assert "❌ **gate failed** · fake/alias-1 (reported `fake-model-1`) · grader `deterministic`" in text
    assert "**Pass rate 80.0%** (8/10) (-20.0 pp against the baseline) · mean score 0.800 (-0.200)" in text
    assert "- pass rate 0.80 (8/10) is below the minimum 0.9" in text
    assert "- **Regressed (passed in the baseline, fail now):** `q5`, `q6`" in text
    assert "| q5 | fail | 0.00 | assertion failed: contains 'right': not found |" in text
    suite = ET.parse(isolated / "j.xml").getroot().find("testsuite")
    assert suite is not None
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    failure = cases["q5"].find("failure")
    assert failure is not None
    assert failure.get("type") == "Regressed"
    assert failure.get("message", "").startswith("regressed: passed in baseline run ")
    gate = cases["gate"].find("failure")
    assert gate is not None
    assert gate.get("message") == "pass rate 0.80 (8/10) is below the minimum 0.9"
    assert (suite.get("tests"), suite.get("failures")) == ("11", "3")


@pytest.mark.slow
def test_changed_set_says_which_prompts_were_added_or_removed(cli, project: FakeServer, isolated: Path) -> None:
    run_json(cli)
    lines = TEN.splitlines()
    write(
        isolated / "sets/ten.yaml",
        "id: gate.ten\nname: Ten\nprompts:\n"
        + "\n".join(lines[1:])
        + "\n  - {id: new, prompt: 'question 3', assertions: [{contains: right}]}\n",
    )
    _, doc = run_json(cli)
    assert doc["comparison"]["flips"]["added"] == ["new"]
    assert doc["comparison"]["flips"]["removed"] == ["q0"]
    assert "changed since that run (added: new; removed: q0)" in doc["comparison"]["reason"]


def test_a_missing_baselines_folder_named_on_the_command_line_is_exit_2(
    cli, project: FakeServer, tmp_path: Path
) -> None:
    result, _ = run_json(cli, "--baselines", "typo")
    assert result.exit_code == 2
    assert "Error: --baselines typo: no such folder; check the path" in result.stderr
    assert project.requests == []
    assert stored_runs(tmp_path / "evalkit.duckdb") == 0
    assert cli("baseline", "show", "--baselines", "typo").exit_code == 2


def test_validate_checks_the_baseline_files(cli, project: FakeServer, isolated: Path) -> None:
    run_json(cli)
    assert cli("baseline", "accept").exit_code == 0
    assert cli("validate").exit_code == 0
    path = isolated / "baselines" / "gate.ten.json"
    path.write_text(path.read_text().replace('"pass_rate": 1.0', '"pass_rate": "high"'))
    result = cli("validate")
    assert result.exit_code == 2
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if '"pass_rate"' in text)
    assert f"baselines/gate.ten.json:{line}:" in result.stdout + result.stderr
    named = cli("validate", "baselines/gate.ten.json")
    assert named.exit_code == 2
    assert f"baselines/gate.ten.json:{line}:" in named.stdout + named.stderr


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (("rn",), "(see evalkit --help)"),
        (("baseline", "accept", "--nope"), "(see evalkit baseline accept --help)"),
        (("cache", "clear", "--older-than", "0"), "(see evalkit cache clear --help)"),
    ],
)
def test_usage_errors_name_the_whole_command(cli, args: tuple[str, ...], hint: str) -> None:
    result = cli(*args)
    assert result.exit_code == 2
    assert result.stderr.strip().endswith(hint)


# --- repeated baselines, hand-edited and nested files, other scopes, hostile ids -------------------


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
