"""A run on another model than the baseline's: not compared (exit 1 under --fail-on-regression),
with its delta against the other model's baseline shown for information, marked as such."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_gate import project, run_json
from tests.fakeserver import FakeServer

__all__ = ["project"]


def info(run_id: str, where: str, rate: str, score: str) -> str:
    return (
        f"For information only, against another model's baseline (fake/alias-1 (reported fake-model-1), graded by "
        f"deterministic; run {run_id}{where}): pass rate {rate} pp, mean score {score}; not a verdict."
    )


@pytest.mark.slow
def test_a_switched_model_is_not_compared_but_shows_its_delta_against_the_other_model(
    cli, project: FakeServer, isolated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, base = run_json(cli)
    assert cli("baseline", "accept").exit_code == 0
    monkeypatch.setenv("EVALKIT_DB", str(tmp_path / "fresh.duckdb"))  # CI: a fresh clone, the committed file
    project.model = "fake-model-2"  # type: ignore[attr-defined]
    project.wrong = {0, 1, 2, 3, 4}  # type: ignore[attr-defined]
    result, doc = run_json(cli, "--fail-on-regression", "--markdown", "pr.md")
    assert result.exit_code == 1
    comparison = doc["comparison"]
    assert (comparison["state"], comparison["regressed"]) == ("not_compared", False)
    assert comparison["other_scope"] == {
        "note": "another model's (or provider instance's) baseline: for information only, not a verdict",
        "run_id": base["run_id"],
        "provider": "fake",
        "model": "alias-1",
        "reported_model": "fake-model-1",
        "grader": "deterministic",
        "source": "file",
        "pass_rate_delta": -0.5,
        "mean_score_delta": -0.5,
    }
    said = info(base["run_id"], " (baselines/gate.ten.json)", "-50.0", "-0.500")
    assert comparison["reason"].startswith("Not compared: baselines/gate.ten.json has no baseline for gate.ten")
    assert comparison["reason"].endswith(said)
    assert doc["gate"]["passed"] is False
    # the gate names why the run was not compared, and only that: the information is not a verdict
    failure = doc["gate"]["failures"][0]
    assert failure.startswith("not compared with a baseline (baselines/gate.ten.json has no baseline for gate.ten")
    assert failure.endswith("accept a baseline for this scope with evalkit baseline accept)")
    assert said in " ".join((isolated / "pr.md").read_text(encoding="utf-8").split())
    # the terminal says it too (another fresh runner)
    monkeypatch.setenv("EVALKIT_DB", str(tmp_path / "fresh2.duckdb"))
    result = cli("run", "sets/ten.yaml", "--no-cache", "--fail-on-regression")
    assert result.exit_code == 1
    assert said in " ".join(result.stdout.split())


@pytest.mark.slow
def test_a_new_model_in_the_database_history_shows_its_delta_against_the_previous_model(
    cli, project: FakeServer
) -> None:
    _, base = run_json(cli)
    project.model = "fake-model-2"  # type: ignore[attr-defined]
    project.wrong = {0, 1}  # type: ignore[attr-defined]
    result, doc = run_json(cli)
    assert result.exit_code == 0
    comparison = doc["comparison"]
    assert comparison["state"] == "baseline"  # the first run of its scope, as before
    assert comparison["other_scope"]["run_id"] == base["run_id"]
    assert comparison["other_scope"]["source"] == "db"
    assert comparison["other_scope"]["pass_rate_delta"] == pytest.approx(-0.2)
    assert comparison["reason"].endswith(info(base["run_id"], "", "-20.0", "-0.200"))
    _, again = run_json(cli)  # compared within its own scope now: no other model's numbers
    assert again["comparison"]["state"] == "compared"
    assert "other_scope" not in again["comparison"]
    assert json.dumps(again).count("another model") == 0


@pytest.mark.slow
def test_another_instance_of_the_same_model_is_named_as_such(cli, project: FakeServer) -> None:
    _, base = run_json(cli)
    _, doc = run_json(cli, "--provider", "fake2")
    assert doc["comparison"]["state"] == "baseline"
    assert (doc["comparison"]["other_scope"]["provider"], doc["comparison"]["other_scope"]["run_id"]) == (
        "fake",
        base["run_id"],
    )
    assert (
        "For information only, against another provider instance's baseline (fake/alias-1"
        in (doc["comparison"]["reason"])
    )
