"""The tests' own layout (README "Development"): ``tests/`` mirrors ``evalkit/``, and a test file is
named by what it tests, never by the issue, review or session that brought it."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import REPO

TESTS = REPO / "tests"
HISTORY = re.compile(r"issue|review|first_hour|_\d+$")  # test_faults_issue14, test_first_hour_2, ...


def files_of_tests() -> list[Path]:
    return sorted(TESTS.rglob("test_*.py"))


def test_no_test_file_is_named_by_its_history() -> None:
    assert [str(p.relative_to(TESTS)) for p in files_of_tests() if HISTORY.search(p.stem)] == []


def test_each_test_folder_is_a_package_of_evalkit() -> None:
    folders = {p.parent.relative_to(TESTS) for p in files_of_tests()} - {Path(), Path("e2e")}
    assert folders
    assert [str(f) for f in sorted(folders) if not (REPO / "evalkit" / f / "__init__.py").is_file()] == []
