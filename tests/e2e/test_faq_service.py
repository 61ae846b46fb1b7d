"""The FAQ service example (examples/faq-service) end to end, as a team would run it in CI: a
git repository with its committed baseline, a fresh clone, the service started on 127.0.0.1
with the real local model, the gate run on it through the ``http`` adapter; the same feature as
a ``python`` function and a ``command``; then its prompt changed so that quality drops, and the
gate fails (exit 1)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "faq-service"
BIN = Path(sys.executable).parent
pytestmark = [pytest.mark.model, pytest.mark.slow]


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture
def clone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh clone of a repository holding the example, as a CI runner checks it out."""
    monkeypatch.delenv("EVALKIT_DB")  # a runner's own, empty database in the clone
    origin = tmp_path / "origin"
    shutil.copytree(EXAMPLE, origin, ignore=shutil.ignore_patterns(".evalkit", "__pycache__"))
    git("init", "-q", "-b", "main", cwd=origin)
    git("add", "-A", cwd=origin)
    git("-c", "user.name=ci", "-c", "user.email=ci@example.com", "commit", "-qm", "faq", cwd=origin)
    target = tmp_path / "clone"
    git("clone", "-q", str(origin), str(target), cwd=tmp_path)
    assert not (target / ".evalkit").exists()
    return target


@pytest.fixture
def service(clone: Path) -> Iterator[str]:
    """The service started from the clone on a free loopback port; evalkit.yaml pointed at it."""
    process = subprocess.Popen(
        [sys.executable, "service.py", "--port", "0"],
        cwd=clone,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # printed once the model is ready
        assert line.startswith("listening on http://127.0.0.1:"), line
        url = line.split()[-1]
        config = clone / "evalkit.yaml"
        config.write_text(config.read_text().replace("http://127.0.0.1:8765", url))
        yield url
    finally:
        process.kill()
        process.communicate(timeout=30)  # reaped, its pipe closed


def gate(clone: Path, *args: str) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [str(BIN / "evalkit"), "run", "sets/faq.yaml", "--format", "json", *args],
        cwd=clone,
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PATH": os.pathsep.join([str(BIN), os.environ["PATH"]])},
    )
    assert done.stdout, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    return done.returncode, doc


def test_the_gate_holds_on_the_service_and_fails_when_its_prompt_loses_the_facts(clone: Path, service: str) -> None:
    code, held = gate(clone, "--fail-on-regression")
    assert code == 0, held["comparison"]
    assert held["error_count"] == 0
    assert held["generator"] == {"provider": "app", "model": "http", "reported_model": "SmolLM2-135M-Instruct.Q4_1"}
    assert held["comparison"]["state"] == "compared"
    assert held["comparison"]["baseline_source"] == "file"

    for instance in ("fn", "cli"):  # the same feature, as a function and as a program
        code, same = gate(clone, "--provider", instance)
        assert code == 0, same["comparison"]
        assert same["error_count"] == 0
        assert same["generator"]["reported_model"] == "SmolLM2-135M-Instruct.Q4_1"
        assert [i["passed"] for i in same["items"]] == [i["passed"] for i in held["items"]]

    (clone / "prompt.txt").write_text("Answer this question: {question}\n")  # the facts left out
    code, dropped = gate(clone, "--fail-on-regression")
    assert code == 1
    assert dropped["comparison"]["regressed"] is True
    assert dropped["pass_rate"] < held["pass_rate"]
