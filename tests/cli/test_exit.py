"""How the ``evalkit`` process ends: the teardown-free exit keeps every byte and exit code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def evalkit_shell(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", "-c", f"{sys.executable} -m evalkit {command}"],
        cwd=cwd,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_closed_stdout_is_no_traceback(tmp_path: Path) -> None:
    done = evalkit_shell("--version >&-", tmp_path)
    assert done.returncode == 0
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_large_json_output_arrives_whole_through_a_pipe(tmp_path: Path) -> None:
    prompts = "\n".join(f"  - {{id: p{i}, prompt: 'question {i}', assertions: [{{contains: x}}]}}" for i in range(2000))
    (tmp_path / "big.yaml").write_text(f"id: exit.big\nname: Big\nprompts:\n{prompts}\n")
    answers = "\n".join(json.dumps({"id": f"p{i}", "response": "x" * 50, "model": "m"}) for i in range(2000))
    (tmp_path / "answers.jsonl").write_text(answers + "\n")
    (tmp_path / "evalkit.yaml").write_text("providers:\n  - {id: rec, adapter: replay, path: answers.jsonl}\n")
    done = evalkit_shell("run big.yaml --format json --db runs.duckdb --output out.json | cat", tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["passed_count"] == 2000
    assert json.loads((tmp_path / "out.json").read_text())["passed_count"] == 2000
