"""``evalkit init`` keeps the database out of git: a committed cache would be replayed in CI."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from evalkit.sets.scaffold import GITIGNORE_LINES


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True, timeout=60)
    return done.stdout


def test_git_add_all_after_init_leaves_the_database_out(cli: Any, isolated: Path) -> None:
    git(isolated, "init", "-q")
    result = cli("init")
    assert result.exit_code == 0, result.stderr
    assert f"wrote {isolated / '.gitignore'}" in result.stdout.splitlines()
    (isolated / ".evalkit" / "evalkit.duckdb").write_bytes(b"runs and cached answers")
    (isolated / ".evalkit" / "evalkit.duckdb.wal").write_bytes(b"more of them")
    git(isolated, "add", "-A")
    staged = git(isolated, "ls-files").splitlines()
    assert ".gitignore" in staged
    assert "evalkit.yaml" in staged
    assert ".evalkit/schemas/config.schema.json" in staged  # the editors' copies travel with the project
    assert not [name for name in staged if "duckdb" in name]


def test_init_extends_the_users_gitignore_once(cli: Any, isolated: Path) -> None:
    (isolated / ".gitignore").write_text("__pycache__/\n*.log", encoding="utf-8")  # no final newline
    first = cli("init")
    assert first.exit_code == 0, first.stderr
    assert f"extended {isolated / '.gitignore'}" in first.stdout.splitlines()
    text = (isolated / ".gitignore").read_text(encoding="utf-8")
    assert text.splitlines()[:2] == ["__pycache__/", "*.log"]
    assert all(line in text.splitlines() for line in GITIGNORE_LINES)
    again = cli("init", "--force")
    assert f"kept {isolated / '.gitignore'}" in again.stdout.splitlines()
    assert (isolated / ".gitignore").read_text(encoding="utf-8") == text
