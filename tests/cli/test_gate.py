"""`evalkit run` against a stored history: comparison states, exit codes and tolerances."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from tests.conftest import wrong_answers
from tests.fakeserver import FakeServer, Recorded

TEN = "\n".join(f"  - {{id: q{i}, prompt: 'question {i}', assertions: [{{contains: right}}]}}" for i in range(10))


@pytest.fixture
def project(isolated: Path, fake_llm: FakeServer) -> FakeServer:
    """A ten-prompt set on the fake server, instances fake and fake2; ``fake_llm.wrong`` says which prompts fail."""
    project = wrong_answers(
        isolated, fake_llm, "sets/ten.yaml", f"id: gate.ten\nname: Ten\nprompts:\n{TEN}\n", instances=("fake", "fake2")
    )
    project.model = "fake-model-1"  # the reported model the tables below name
    return project


def run_json(cli, *args: str):
    result = cli("run", "sets/ten.yaml", "--format", "json", "--no-cache", *args)
    return result, json.loads(result.stdout) if result.stdout.strip() else None


def stored_runs(db: Path) -> int:
    if not db.exists():
        return 0
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("select count(*) from runs").fetchone()[0]
    finally:
        con.close()


@pytest.mark.slow
def test_states_and_exit_codes(cli, project: FakeServer) -> None:
    result, doc = run_json(cli, "--fail-on-regression")
    assert (result.exit_code, doc["comparison"]["state"]) == (0, "baseline")
    assert doc["gate"] == {"fail_on_regression": True, "passed": True, "failures": []}

    project.wrong = {0}
    result, doc = run_json(cli, "--fail-on-regression")
    assert (result.exit_code, doc["comparison"]["state"], doc["comparison"]["regressed"]) == (0, "compared", False)
    assert doc["comparison"]["reason"].startswith("No regression: pass rate -10.0 pp")

    project.wrong = {0, 1, 2, 3}
    result, doc = run_json(cli, "--fail-on-regression")
    assert (result.exit_code, doc["comparison"]["regressed"]) == (1, True)
    assert doc["gate"] == {
        "fail_on_regression": True,
        "passed": False,
        "failures": [f"regression against the baseline (run {doc['comparison']['baseline_run_id']})"],
    }
    assert doc["comparison"]["reason"].startswith(
        "Regression: pass rate dropped 30.0 pp, beyond the tolerance of 10.0 pp"
    )

    # Without the flag a regression is reported and the exit is 0 (the regressed run, being
    # verified and error-free, is now the newest baseline of its scope: README "Baselines and regressions").
    project.wrong = {0, 1, 2, 3, 4, 5, 6}
    result, doc = run_json(cli)
    assert (result.exit_code, doc["comparison"]["regressed"]) == (0, True)
    assert doc["gate"] == {"fail_on_regression": False, "passed": True, "failures": []}


@pytest.mark.slow
def test_table_states_the_verdict_in_words(cli, project: FakeServer) -> None:
    first = cli("run", "sets/ten.yaml")
    assert (
        "Recorded as the baseline for gate.ten on fake/alias-1 (reported fake-model-1), graded by deterministic."
        in first.stdout
    )
    project.wrong = {0, 1, 2}
    assert first.exit_code == 0
    second = cli("run", "sets/ten.yaml", "--no-cache")
    assert "Regression: pass rate dropped 30.0 pp, beyond the tolerance of 10.0 pp" in second.stdout
    assert second.exit_code == 0  # a regression fails the run only under --fail-on-regression


@pytest.mark.slow
def test_tolerance_option_widens_the_gate(cli, project: FakeServer) -> None:
    run_json(cli)
    project.wrong = {0, 1, 2}
    result, doc = run_json(cli, "--fail-on-regression", "--max-pass-rate-drop", "0.3", "--max-mean-score-drop", "0.3")
    assert result.exit_code == 0
    assert doc["comparison"]["regressed"] is False
    assert doc["tolerances"] == {"max_pass_rate_drop": 0.3, "max_mean_score_drop": 0.3}


@pytest.mark.slow
def test_yaml_tolerance_applies_and_cli_wins(cli, project: FakeServer, isolated: Path) -> None:
    text = (
        (isolated / "sets/ten.yaml")
        .read_text()
        .replace("name: Ten\n", "name: Ten\ntolerances: {max_pass_rate_drop: 0.5, max_mean_score_drop: 0.5}\n")
    )
    (isolated / "sets/ten.yaml").write_text(text)
    run_json(cli)
    project.wrong = {0, 1, 2}
    result, _ = run_json(cli, "--fail-on-regression")
    assert result.exit_code == 0
    project.wrong = {0, 1, 2, 3, 4, 5}
    result, doc = run_json(cli, "--fail-on-regression", "--max-pass-rate-drop", "0.1")
    assert result.exit_code == 1
    assert doc["tolerances"] == {"max_pass_rate_drop": 0.1, "max_mean_score_drop": 0.5}


ACCEPTED = ["0", "-0.0", "0.5", "5e-1", "1"]
REJECTED = ["", "typo", "NAN", "INF", "-INF", "1e309", "-0.0001", "1.0001"]


@pytest.mark.parametrize("option", ["--max-pass-rate-drop", "--max-mean-score-drop"])
@pytest.mark.parametrize("value", REJECTED)
def test_rejected_tolerances_call_nothing_and_store_nothing(
    cli, project: FakeServer, db_file: Path, option: str, value: str
) -> None:
    result = cli("run", "sets/ten.yaml", option, value)
    assert result.exit_code == 2
    assert result.stderr.strip() == f"Error: {option}: must be a finite number in 0..1, got {value!r}"
    assert project.calls == 0
    assert stored_runs(db_file) == 0


@pytest.mark.slow
@pytest.mark.parametrize("option", ["--max-pass-rate-drop", "--max-mean-score-drop"])
@pytest.mark.parametrize("value", ACCEPTED)
def test_accepted_tolerances(cli, project: FakeServer, option: str, value: str) -> None:
    result, doc = run_json(cli, option, value)
    assert result.exit_code == 0, result.stderr
    key = option.lstrip("-").replace("-", "_")
    assert doc["tolerances"][key] == abs(float(value))


@pytest.mark.slow
def test_scope_other_runs_never_hide_the_baseline(cli, project: FakeServer) -> None:
    _, base = run_json(cli)
    run_json(cli, "--provider", "fake2")  # another instance
    run_json(cli, "--model", "alias-2")  # another alias
    reported, project.model = project.model, "fake-model-2"
    run_json(cli)  # another reported model
    project.model = reported
    project.wrong = {0}
    _, doc = run_json(cli)
    assert doc["comparison"]["state"] == "compared"
    assert doc["comparison"]["baseline_run_id"] == base["run_id"]


@pytest.mark.slow
def test_errored_run_is_stored_not_compared_and_not_a_baseline(cli, project: FakeServer, db_file: Path) -> None:
    _, base = run_json(cli)
    original = project.handler

    def fail_one(request: Recorded):
        if request.json["messages"][-1]["content"].endswith(" 3"):
            from tests.fakeserver import Reply

            return Reply(status=500, json={"error": {"message": "boom"}})
        return original(request)

    project.handler = fail_one
    result, doc = run_json(cli, "--fail-on-regression")
    assert result.exit_code == 3
    assert doc["comparison"]["state"] == "not_compared"
    assert doc["error_count"] == 1
    project.handler = original
    _, doc = run_json(cli)
    assert doc["comparison"]["baseline_run_id"] == base["run_id"]
    assert stored_runs(db_file) == 3


@pytest.mark.slow
def test_mixed_generator_run_is_stored_not_compared_and_exits_1(cli, project: FakeServer, db_file: Path) -> None:
    run_json(cli)
    original = project.handler

    def two_models(request: Recorded):
        reply = original(request)
        if request.json["messages"][-1]["content"].endswith(" 5"):
            reply.json["model"] = "fake-model-other"
        return reply

    project.handler = two_models
    result, doc = run_json(cli, "--fail-on-regression")
    assert result.exit_code == 1
    assert doc["generator"] is None
    assert doc["comparison"]["state"] == "not_compared"
    assert "no single verified serving generator" in doc["comparison"]["reason"]
    assert stored_runs(db_file) == 2
    table = cli("run", "sets/ten.yaml", "--no-cache")
    assert "Not compared: no single verified serving generator" in table.stdout


def test_unknown_grader_is_refused(cli, project: FakeServer, db_file: Path) -> None:
    for name in ("llm_judge", "judge", ""):
        result = cli("run", "sets/ten.yaml", "--grader", name)
        assert result.exit_code == 2
        assert "unknown grader" in result.stderr
        assert "deterministic, decision" in result.stderr
    assert project.calls == 0
    assert stored_runs(db_file) == 0


POWER_NOTE = (
    "Note: gate.ten: 10 prompts are too few for the gate to tell a 10.0 pp pass-rate drop (its tolerance) from "
    "noise: at a pass rate of 100% that takes about 112 prompts (80% of such drops found at one-sided 5%; README, "
    '"Choosing a gate")'
)


@pytest.mark.slow
def test_the_gate_says_once_when_the_set_is_too_small_for_its_tolerance(
    cli, project: FakeServer, isolated: Path
) -> None:
    config = isolated / "evalkit.yaml"  # two instances at once: retry a connection the fake server drops
    config.write_text(config.read_text().replace("max_retries: 0", "max_retries: 2"))
    result = cli("run", "sets/ten.yaml", "--fail-on-regression", "--provider", "fake", "--provider", "fake2")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.count("Note: gate.ten:") == 1
    assert POWER_NOTE in " ".join(result.stderr.split())


def test_no_power_note_when_the_set_can_tell_its_tolerance_or_no_gate_was_asked(cli, project: FakeServer) -> None:
    wide = cli("run", "sets/ten.yaml", "--fail-on-regression", "--max-pass-rate-drop", "0.5")
    assert wide.exit_code == 0
    assert "Note: gate.ten:" not in wide.stderr  # 10 prompts tell a 50 pp drop: 5 are enough
    ungated = cli("run", "sets/ten.yaml")
    assert "Note: gate.ten:" not in ungated.stderr
