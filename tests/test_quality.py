"""Static checks that CI runs with the tests: ruff, mypy --strict and the import-linter contracts."""

from __future__ import annotations

import json
import os
import re
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


def probe(branches: int) -> str:
    """A function of ``branches`` ifs (complexity branches + 1) and 4 statements per branch."""
    body = "".join(f"    if x == {i}:\n        y += {i}\n        z = y\n    z += 1\n" for i in range(branches))
    return f"def probe(x: int) -> int:\n    y = z = 0\n{body}    return y + z\n"


def ruff_codes(source: str, filename: str) -> set[str]:
    """The rule codes ruff, with the project's configuration, reports for ``source`` as ``filename``."""
    command = [tool("ruff"), "check", "--output-format", "json", "--stdin-filename", filename, "-"]
    result = subprocess.run(command, input=source, check=False, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode in (0, 1), result.stderr
    return {finding["code"] for finding in json.loads(result.stdout)}


def test_the_size_limits_hold_for_evalkit() -> None:
    """README "Development": in evalkit/, ruff refuses a function over complexity 15 (C901), 12
    branches (PLR0912) or 50 statements (PLR0915), whatever the configuration is rewritten to."""
    limits = {"C901", "PLR0912", "PLR0915"}
    assert ruff_codes(probe(15), "evalkit/probe.py") >= limits  # complexity 16, 15 branches, 62 statements
    assert not ruff_codes(probe(12), "evalkit/sets/probe.py") & limits  # complexity 13, 12 branches, 50 statements
    assert not ruff_codes(probe(15), "tests/probe.py") & limits  # tests read as one scenario


def test_every_exception_to_the_size_limits_says_why() -> None:
    """A ``# noqa`` for a size limit names its reason after the codes, on the same line."""
    bare = [
        f"{path.relative_to(REPO)}:{number}"
        for path in sorted((REPO / "evalkit").rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if (found := NOQA_LIMIT.search(line)) and not found.group("reason").strip()
    ]
    assert not bare, "give the reason after the codes, e.g. # noqa: C901  (why)\n" + "\n".join(bare)


NOQA_LIMIT = re.compile(r"#\s*noqa:\s*(?:[A-Z]+\d+,\s*)*(?:C901|PLR0912|PLR0915)(?:,\s*[A-Z]+\d+)*(?P<reason>.*)$")
