"""Nesting is bounded before any node graph is built: libyaml's composer recurses in C, and a
file nested 100,000 deep ended the process (segfault, exit 139, no message). Each case runs in a
subprocess, so that a crash fails the test instead of ending pytest."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from evalkit.errors import SetError
from evalkit.sets.yamldoc import MAX_DEPTH, parse_document
from tests.conftest import REPO

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    ("text", "where"),
    [
        pytest.param(f"prompts: {DEEP}\n", "deep.yaml:1:74", id="plain"),
        pytest.param(f"prompts: &a {DEEP}\nother: *a\n", "deep.yaml:1:77", id="anchored"),  # no fast path
    ],
)
def test_validate_refuses_a_file_nested_100000_deep(isolated: Path, text: str, where: str) -> None:
    (isolated / "deep.yaml").write_text(text, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "evalkit", "validate", "deep.yaml"],
        capture_output=True,
        text=True,
        cwd=isolated,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(isolated)},
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"{where}: YAML error: nested deeper than {MAX_DEPTH} levels; flatten it" in done.stderr


@pytest.mark.parametrize("extra", [0, 1])
def test_the_limit_is_the_node_graphs_own(extra: int) -> None:
    """The guard refuses what the node graph's check refuses, and nothing it accepts: nodes
    down to depth MAX_DEPTH load (here behind an anchor, so not by the fast path)."""
    depth = MAX_DEPTH + extra  # the innermost list's items are at depth + 1
    text = "&a " + "[" * depth + "1" + "]" * depth + "\n"
    if extra:
        with pytest.raises(SetError, match=f"nested deeper than {MAX_DEPTH} levels"):
            parse_document(text, "f.yaml")
    else:
        assert parse_document(text, "f.yaml").data is not None
