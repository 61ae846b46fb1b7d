"""The shard recipes of docs/ci.md "Large suites: shards across jobs", played end to end: the
workflow's own commands, read from the page, in fresh git clones as CI runners, four shard
processes at once, then a gate job that downloads their databases, merges and gates (README
"Larger suites: shards and batches").

Each job is a fresh clone of a bare "origin" with its own HOME and no database; an artifact is a
file copied out of one clone into another, and the CI's variables are what GitHub Actions and
GitLab set. The model is the deterministic loopback server of the single-job workflow test, so
only what git carries can change a verdict.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.conftest import REPO, write
from tests.e2e.test_ci_workflow import (
    CAPITALS,
    WORSE_SYSTEM,
    WRONG_IN_FRENCH,
    Repo,
    answer,
    capitals_origin,
    capitals_set,
    git,
)
from tests.fakeserver import FakeServer, serving

pytestmark = pytest.mark.slow

SHARDS = 4


def recipe(heading: str) -> dict[str, Any]:
    """The YAML block under ``heading`` in docs/ci.md, parsed."""
    text = (REPO / "docs" / "ci.md").read_text(encoding="utf-8")
    block = text.split(f"### {heading}\n", 1)[1].split("```yaml\n", 1)[1].split("```\n", 1)[0]
    parsed: dict[str, Any] = YAML(typ="safe").load(StringIO(block))
    return parsed


def github_step(job: str, starts: str) -> str:
    """The ``run:`` of the GitHub Actions matrix job's step whose name starts with ``starts``."""
    steps = recipe("GitHub Actions matrix")["jobs"][job]["steps"]
    return str(next(s["run"] for s in steps if str(s.get("name", "")).startswith(starts)))


@pytest.fixture
def shim(tmp_path: Path) -> Path:
    """A folder with an ``evalkit`` command (this checkout's, as pip would install it)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    command = folder / "evalkit"
    command.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m evalkit "$@"\n', encoding="utf-8")
    command.chmod(0o755)
    return folder


class Runner:
    """CI jobs: each a fresh clone running shell lines with the CI's variables."""

    def __init__(self, repo: Repo, dev: Path, shim: Path, artifacts: Path) -> None:
        self.repo, self.dev, self.shim, self.artifacts = repo, dev, shim, artifacts
        artifacts.mkdir()

    def env(self, home: Path, ci: dict[str, str]) -> dict[str, str]:
        return {
            "PATH": f"{self.shim}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": str(REPO),
            "HOME": str(home),
            "EVALKIT_TEST_KEY": "sk-test",
            "CI": "true",
            **ci,
        }

    def start(self, script: str, ci: dict[str, str], branch: str = "main") -> tuple[subprocess.Popen[str], Path]:
        clone, home = self.repo.clone(branch)
        process = subprocess.Popen(
            ["bash", "-e", "-c", script],
            cwd=clone,
            env=self.env(home, ci),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        return process, clone

    def shards(self, script: str, ci_of: Any, branch: str = "main", skip: int | None = None) -> None:
        """The four shard jobs at once; each uploads its database (every one exits 0 here)."""
        jobs = [(i, *self.start(script(i), ci_of(i), branch)) for i in range(1, SHARDS + 1) if i != skip]
        for index, process, clone in jobs:
            out, err = process.communicate(timeout=120)
            assert process.returncode == 0, f"shard {index}: exit {process.returncode}\n{err}"
            assert f"Shard {index}/{SHARDS} of run group" in out  # its own report, in state shard
            for database in clone.glob("shard-*.duckdb"):
                shutil.copy(database, self.artifacts / database.name)

    def gate(self, script: str, ci: dict[str, str], branch: str = "main") -> tuple[int, str, Path]:
        """The gate job: download every artifact, then the step's lines; (exit, stderr, clone)."""
        clone, home = self.repo.clone(branch)
        for artifact in self.artifacts.iterdir():
            shutil.copy(artifact, clone / artifact.name)
        result = subprocess.run(
            ["bash", "-e", "-c", script], cwd=clone, env=self.env(home, ci), stdin=subprocess.DEVNULL,
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        for artifact in self.artifacts.iterdir():
            artifact.unlink()
        return result.returncode, result.stderr, clone


def junit_failures(clone: Path) -> dict[str, str]:
    root = ET.parse(clone / "evalkit-junit.xml").getroot()
    return {c.get("name", ""): f.get("type", "") for c in root.iter("testcase") for f in c.findall("failure")}


@pytest.fixture
def model_server() -> Iterator[FakeServer]:
    with serving(answer) as server:
        yield server


@pytest.fixture
def runner(tmp_path: Path, model_server: FakeServer, shim: Path) -> Runner:
    """Origin with main holding evalkit.yaml, sets/capitals.yaml and .gitignore."""
    ignored = ".evalkit/\nshard-*.duckdb\nevalkit-junit.xml\nevalkit.md\n"
    repo, dev = capitals_origin(tmp_path / "git", model_server, ignored)
    return Runner(repo, dev, shim, tmp_path / "artifacts")


def github(run_id: int) -> Any:
    return lambda index: {"GITHUB_RUN_ID": str(run_id), "GITHUB_RUN_ATTEMPT": "1"}


def test_the_github_matrix_gates_the_merged_shards_and_fails_on_a_regression_and_a_missing_shard(
    runner: Runner, model_server: FakeServer
) -> None:
    shard_step = github_step("shard", "Run shard")
    gate_step = github_step("gate", "Merge the shards")

    def shard_script(index: int) -> str:
        return shard_step.replace("${{ matrix.shard }}", str(index))

    # (1) main: four shards, the gate records the baseline; a developer accepts it from the gate's
    # database and commits baselines/
    runner.shards(shard_script, github(100))
    code, err, gate_clone = runner.gate(gate_step, {"GITHUB_RUN_ID": "100", "GITHUB_RUN_ATTEMPT": "1"})
    assert code == 0, err
    assert "capitals" in (gate_clone / "evalkit.md").read_text(encoding="utf-8")
    assert not junit_failures(gate_clone)
    accepted = subprocess.run(
        ["evalkit", "baseline", "accept"], cwd=gate_clone, env=runner.env(runner.repo.home, {}),
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert accepted.returncode == 0, accepted.stderr
    runner.repo.commit_and_push(gate_clone, runner.repo.home, "Accept the capitals baseline", "baselines")
    assert len(model_server.requests) == len(CAPITALS)  # each prompt asked once, by its own shard

    # (2) a pull request plants a regression: the final job fails (exit 1) on the committed baseline
    dev = runner.dev
    git("pull", "-q", "origin", "main", cwd=dev, home=runner.repo.home)
    git("checkout", "-q", "-b", "french", cwd=dev, home=runner.repo.home)
    write(dev / "sets" / "capitals.yaml", capitals_set(WORSE_SYSTEM))
    git("add", ".", cwd=dev, home=runner.repo.home)
    git("commit", "-q", "-m", "Answer in French", cwd=dev, home=runner.repo.home)
    git("push", "-q", "origin", "french", cwd=dev, home=runner.repo.home)
    runner.shards(shard_script, github(101), branch="french")
    code, err, gate_clone = runner.gate(gate_step, {"GITHUB_RUN_ID": "101", "GITHUB_RUN_ATTEMPT": "1"}, "french")
    assert code == 1, err
    failures = junit_failures(gate_clone)
    assert {name for name, kind in failures.items() if kind == "Regressed"} == set(WRONG_IN_FRENCH)
    assert "gate" in failures
    comment = (gate_clone / "evalkit.md").read_text(encoding="utf-8")
    assert all(pid in comment for pid in WRONG_IN_FRENCH)

    # (3) main again, one shard's artifact never arrives: the final job fails with exit 3, naming it
    runner.shards(shard_script, github(102), skip=3)
    code, err, gate_clone = runner.gate(gate_step, {"GITHUB_RUN_ID": "102", "GITHUB_RUN_ATTEMPT": "1"})
    assert code == 3
    assert "shard 3/4 is missing" in err
    assert "nothing was gated" in err
    assert not (gate_clone / "evalkit.md").exists()
    assert not (gate_clone / "evalkit-junit.xml").exists()


def test_the_gitlab_parallel_jobs_gate_the_merged_shards(runner: Runner) -> None:
    jobs = recipe("GitLab CI `parallel: N`")
    assert jobs["evalkit-shard"]["parallel"] == SHARDS
    shard_lines = [line for line in jobs["evalkit-shard"]["script"] if not line.startswith("pip ")]
    gate_lines = [line for line in jobs["evalkit-gate"]["script"] if not line.startswith("pip ")]

    def ci(index: int) -> dict[str, str]:
        return {"CI_PIPELINE_ID": "7", "CI_NODE_INDEX": str(index), "CI_NODE_TOTAL": str(SHARDS)}

    runner.shards(lambda index: "\n".join(shard_lines), ci)
    code, err, gate_clone = runner.gate("\n".join(gate_lines), {"CI_PIPELINE_ID": "7"})
    assert code == 0, err
    assert not junit_failures(gate_clone)
