"""A truncated or corrupt database file is exit 3 for every command, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakeserver import FakeServer

THREE = """
id: hostile.three
name: Three
prompts:
  - {id: q0, prompt: question 0, assertions: [{contains: echo}]}
  - {id: q1, prompt: question 1, assertions: [{contains: echo}]}
  - {id: q2, prompt: question 2, assertions: [{contains: echo}]}
"""


@pytest.fixture
def stored_run(cli: Any, fake_config: Path, write_file: Any, db_file: Path) -> str:
    write_file("sets/three.yaml", THREE)
    result = cli("run", "sets/three.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    return str(json.loads(result.stdout)["run_id"])


def commands(run_id: str) -> list[tuple[str, ...]]:
    return [
        ("report",),
        ("report", "--format", "json"),
        ("show", run_id),
        ("run", "sets/three.yaml"),
        ("compare", run_id, run_id),
        ("models",),
        ("prune",),
        ("baseline", "accept"),
        ("cache", "clear"),
    ]


@pytest.mark.slow
def test_a_truncated_database_is_exit_3_for_every_command(
    cli: Any, fake_llm: FakeServer, stored_run: str, db_file: Path
) -> None:
    whole = db_file.read_bytes()
    calls = fake_llm.calls
    for size in (100, 20_000, len(whole) // 3):
        for args in commands(stored_run):
            db_file.write_bytes(whole[:size])
            result = cli(*args)
            assert result.exception is None, (size, args, result.exception)
            assert result.exit_code == 3, (size, args, result.stderr)
            (line,) = result.stderr.strip().splitlines()[-1:]
            assert line == (
                f"Error: {db_file}: the database could not be opened: the file is damaged or truncated "
                "(a read past the end of the file); move it aside (evalkit then starts a new one) "
                "or restore it from a backup"
            )
    assert fake_llm.calls == calls  # no call was made on a database that cannot be opened


@pytest.mark.slow
def test_a_block_failing_its_checksum_is_exit_3_never_a_traceback(cli: Any, stored_run: str, db_file: Path) -> None:
    whole = db_file.read_bytes()
    block = int.from_bytes(whole[8192 + 40 : 8192 + 48], "little")  # the block size in the database header
    assert block > 0
    damaged = 0
    for offset in range(3 * 4096 + 200, len(whole), block):  # one corrupt block at a time
        corrupt = bytearray(whole)
        corrupt[offset : offset + 8] = b"\xff" * 8
        for args in (("report",), ("show", stored_run), ("compare", stored_run, stored_run)):
            db_file.write_bytes(bytes(corrupt))
            result = cli(*args)
            assert result.exception is None, (offset, args, result.exception)
            assert result.exit_code in (0, 3), (offset, args, result.stderr)
            if result.exit_code == 3:
                damaged += 1
                assert "the database could not be opened: the file is damaged" in result.stderr
    assert damaged
