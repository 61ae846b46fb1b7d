"""Commands evalkit runs are ended as a whole (evalkit.procs): real processes, on Linux read back
from /proc; a process that left the command's session with setsid is ended too."""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
from pathlib import Path

import pytest

from evalkit import procs

pytestmark = [
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc"),
    pytest.mark.timeout(60),
]

# the orphan prints its pid once it is in a session of its own; the script exits at once, the
# orphan holding stdout (the parent's pipe), reparented away from anything evalkit started
ESCAPES = (
    f"{shlex.quote(sys.executable)} -c "
    "'import os, time; os.setsid(); print(os.getpid(), flush=True); time.sleep(600)' &"
)
# a grandchild that stays in the session but leaves the process group
LEAVES_THE_GROUP = (
    f"{shlex.quote(sys.executable)} -c "
    "'import os, time; os.setpgid(0, 0); print(os.getpid(), flush=True); time.sleep(600)' &"
)


def alive(pid: int) -> bool:
    """Running (a zombie nobody reaped is not running)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return False
    return fields[0] not in ("Z", "X")


def started_then_ended(script: str, tmp_path: Path) -> tuple[int, bool]:
    """Run ``script`` with sh, read the pid it prints, let the script exit, end the command: the
    pid and whether stdout reached its end (every holder of the pipe gone) without being closed."""

    async def main() -> tuple[int, bool]:
        command = await procs.start(["sh", "-c", script], tmp_path)
        assert command.process.stdout is not None
        pid = int(await command.process.stdout.readline())
        await command.process.wait()  # the script is gone; what it started is not
        assert alive(pid)
        await procs.end(command)
        return pid, command.process.stdout.at_eof()

    return asyncio.run(main())


def test_a_child_that_called_setsid_is_ended_with_the_command(tmp_path: Path) -> None:
    pid, drained = started_then_ended(ESCAPES, tmp_path)
    assert not alive(pid)
    assert drained  # the pipe closed because its holder died, not after REAP_S


def test_a_child_that_left_the_process_group_is_ended_with_the_command(tmp_path: Path) -> None:
    pid, drained = started_then_ended(LEAVES_THE_GROUP, tmp_path)
    assert not alive(pid)
    assert drained


def test_only_the_commands_own_processes_are_ended(tmp_path: Path) -> None:
    async def main() -> tuple[int, int]:
        first = await procs.start(["sh", "-c", ESCAPES], tmp_path)
        second = await procs.start(["sh", "-c", ESCAPES], tmp_path)
        pids = []
        for command in (first, second):
            assert command.process.stdout is not None
            pids.append(int(await command.process.stdout.readline()))
            await command.process.wait()
        await procs.end(first)
        still = alive(pids[1])
        await procs.end(second)
        assert not alive(pids[1])
        return pids[0], still

    ended, other_alive = asyncio.run(main())
    assert not alive(ended)
    assert other_alive


def test_the_mark_is_in_the_commands_environment(tmp_path: Path) -> None:
    async def main() -> tuple[bytes, str]:
        command = await procs.start(["sh", "-c", f'echo "${procs.MARK}"'], tmp_path)
        out, _ = await procs.exchange(command, b"", 1024, 1024)
        await command.process.wait()
        assert out is not None
        return out, command.mark

    out, mark = asyncio.run(main())
    assert out.decode().strip() == mark
    assert procs.MARK not in os.environ  # evalkit's own environment is left as it was
