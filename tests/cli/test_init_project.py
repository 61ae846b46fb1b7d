"""`evalkit init` inside a project says so and writes nothing; at the project root it keeps the files."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def test_init_inside_a_project_says_so_and_writes_nothing(cli: Any, isolated: Path) -> None:
    assert cli("init").exit_code == 0
    inner = isolated / "sets"
    before = sorted(p.relative_to(isolated) for p in isolated.rglob("*"))
    import os

    os.chdir(inner)
    result = cli("init")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (
        f"Error: this folder is inside the evalkit project of {isolated.resolve() / 'evalkit.yaml'}, so nothing "
        f"was written: work from {isolated.resolve()}, or pass --force to start a separate project here\n"
    )
    assert sorted(p.relative_to(isolated) for p in isolated.rglob("*")) == before
    forced = cli("init", "--force")
    assert forced.exit_code == 0, forced.stderr
    assert (inner / "evalkit.yaml").is_file()


def test_init_again_at_the_project_root_keeps_the_files(cli: Any, isolated: Path) -> None:
    assert cli("init").exit_code == 0
    again = cli("init")
    assert again.exit_code == 0
    assert f"kept {isolated / 'evalkit.yaml'}" in again.stdout.splitlines()
