"""Static checks that CI runs with the tests: ruff, mypy --strict and the import-linter contracts."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: pip install -e '.[test]'")
    return found


def check(*command: str) -> None:
    env = {**os.environ, "NO_COLOR": "1"}
    result = subprocess.run(command, check=False, cwd=REPO, capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}"


def test_ruff_lint() -> None:
    check(tool("ruff"), "check", "evalkit", "tests", "bench")


def test_ruff_format() -> None:
    check(tool("ruff"), "format", "--check", "evalkit", "tests", "bench")


@pytest.mark.slow
def test_mypy_strict() -> None:
    check(tool("mypy"))


def test_import_contracts() -> None:
    check(tool("lint-imports"))
