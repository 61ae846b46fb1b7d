"""The decision grader end to end on the real local model, as generator and as judge.

SmolLM2-135M is a weak judge, but a real one: its structured answers must be parsed, every
grading must carry one yardstick, and a re-run must be compared with the first run. Never
assert the model's text or its exact scores.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.conftest import evalkit_process as evalkit
from tests.conftest import write

pytestmark = [pytest.mark.model, pytest.mark.usefixtures("local_model")]


def rows(db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, list(params)).fetchall()
    finally:
        con.close()


@pytest.fixture
def project(isolated: Path) -> Path:
    write(
        isolated / "evalkit.yaml",
        """
        default_provider: cpu
        decision: {provider: cpu}
        providers:
          - id: cpu
            adapter: local
            model: tiny
            n_ctx: 2048
            seed: 7
        """,
    )
    write(
        isolated / "sets/judged.yaml",
        """
        id: local.judged
        name: Judged by the local model
        system: Answer in one short sentence.
        params: {max_tokens: 24}
        prompts:
          - {id: capital, prompt: What is the capital of France?, reference: Paris.}
          - {id: sum, prompt: What is 2 + 2?, reference: "4"}
          - id: colour
            prompt: Name a colour of the sky.
            system: Answer in French.
            reference: Bleu.
        """,
    )
    return isolated


def test_local_model_judges_itself_under_one_yardstick_and_a_rerun_is_compared(project: Path, db_file: Path) -> None:
    first = evalkit("run", "sets/judged.yaml", "--grader", "decision", "--format", "json", cwd=project)
    assert first.returncode == 0, first.stderr
    doc = json.loads(first.stdout)
    assert doc["prompt_count"] == 3
    assert doc["error_count"] == 0
    assert doc["generator"]["provider"] == "cpu"
    reported = doc["generator"]["reported_model"]
    assert reported.startswith("SmolLM2-135M-Instruct.Q4_1@")
    # The judge is the same instance, so its reported model is the same model file.
    yardstick = f"decision:cpu:{reported}:v1"
    assert doc["grader"] == yardstick
    assert doc["comparison"]["state"] == "baseline"
    for item in doc["items"]:
        assert 0.0 <= item["score"] <= 1.0
        assert item["passed"] == (item["score"] >= 0.6)
        assert item["reason"].startswith("level ")
        assert not item["reason"].startswith("Decision failed")
    assert doc["usage"]["output_tokens"] > 0
    assert doc["grader_usage"]["output_tokens"] > 0
    assert rows(db_file, "select grader, comparison_state from runs") == [(yardstick, "baseline")]
    stored = rows(db_file, "select yardstick from results where run_id = ?", doc["run_id"])
    assert stored == [(yardstick,)] * 3

    again = evalkit("run", "sets/judged.yaml", "--grader", "decision", "--format", "json", cwd=project)
    assert again.returncode == 0, again.stderr
    redo = json.loads(again.stdout)
    assert [i.get("cached") for i in redo["items"]] == [True, True, True]
    assert redo["grader"] == yardstick
    assert redo["comparison"]["state"] == "compared"
    assert redo["comparison"]["baseline_run_id"] == doc["run_id"]

    fresh = evalkit("run", "sets/judged.yaml", "--grader", "decision", "--no-cache", "--format", "json", cwd=project)
    assert fresh.returncode == 0, fresh.stderr
    anew = json.loads(fresh.stdout)
    assert anew["usage"]["output_tokens"] > 0  # really answered again, not replayed
    assert anew["grader"] == yardstick
    assert anew["comparison"]["state"] == "compared"
    assert anew["comparison"]["baseline_run_id"] == redo["run_id"]
    assert rows(db_file, "select grader from runs") == [(yardstick,)] * 3
