"""Commands evalkit runs (a ``command`` retriever; any adapter that runs one): started without a
shell in a new session, fed on stdin, their output bounded, and ended as a whole.

Ending a command kills everything it started, not only its process group: a child that called
``setsid`` (a daemon, ``setsid sleep 600 &``) has left the group and, once its parent exits, is
no descendant of anything evalkit knows. Every process of the command is found instead (on
Linux, from /proc): those in its session or process group, those carrying its mark (an
environment variable, inherited by whatever it starts), and their descendants; each is killed,
until a look finds none left. The pipes are then read to their end, waiting at most ``REAP_S``
for a process that escaped even that (one that cleared its environment and left the session):
a command's time limit is held to within a second (README "Configuration", its retrievers).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

MARK = "EVALKIT_COMMAND_MARK"
REAP_S = 0.5  # after the kill: how long the pipes may stay open
_CHUNK = 64 * 1024
_ROUNDS = 20  # looks for processes left: each kills what it finds, which then cannot fork


@dataclass(frozen=True, slots=True)
class Command:
    """A started command: its process (the leader of its session) and the mark its processes carry."""

    process: asyncio.subprocess.Process
    mark: str


async def start(argv: Sequence[str], cwd: Path) -> Command:
    """``argv`` started in ``cwd`` with piped stdin, stdout and stderr, in a session of its own.
    OSError when it cannot be started."""
    mark = uuid.uuid4().hex
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,  # its own session and process group
        env={**os.environ, MARK: mark},
    )
    return Command(process, mark)


@dataclass(frozen=True, slots=True)
class Finished:
    """A command run to its end: its exit status, its stdout (None: it passed the output bound and
    was ended) and the tail of its stderr."""

    status: int
    out: bytes | None
    err: bytes


async def run(
    argv: Sequence[str], cwd: Path, data: bytes, *, timeout_s: float, max_output: int, max_stderr: int
) -> Finished:
    """``argv`` started in ``cwd``, ``data`` on its stdin, its output read within the bounds. At
    ``timeout_s`` (TimeoutError), on any other exception, or past ``max_output`` (``out`` None),
    everything it started is ended. OSError when it cannot be started."""
    command = await start(argv, cwd)
    try:
        async with asyncio.timeout(timeout_s):
            out, err = await exchange(command, data, max_output, max_stderr)
            if out is not None:
                await command.process.wait()
    except BaseException:
        await end(command)
        raise
    if out is None:
        await end(command)
    status = command.process.returncode
    return Finished(status if status is not None else -signal.SIGKILL, out, err)


async def exchange(command: Command, data: bytes, max_output: int, max_stderr: int) -> tuple[bytes | None, bytes]:
    """Write ``data`` to stdin, read stdout (None once it passes ``max_output`` bytes) and the
    last ``max_stderr`` bytes of stderr."""
    stdin, stdout, stderr = command.process.stdin, command.process.stdout, command.process.stderr
    assert stdin is not None
    assert stdout is not None
    assert stderr is not None

    async def feed() -> None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # it need not read its input
            stdin.write(data)
            await stdin.drain()
        stdin.close()

    async def tail() -> bytes:
        kept = bytearray()
        while chunk := await stderr.read(_CHUNK):
            kept += chunk
            del kept[:-max_stderr]
        return bytes(kept)

    fed, errors = asyncio.ensure_future(feed()), asyncio.ensure_future(tail())
    try:
        chunks: list[bytes] = []
        size = 0
        while chunk := await stdout.read(_CHUNK):
            size += len(chunk)
            if size > max_output:
                return None, b""
            chunks.append(chunk)
        await fed
        return b"".join(chunks), await errors
    finally:
        fed.cancel()
        errors.cancel()
        await asyncio.gather(fed, errors, return_exceptions=True)


async def end(command: Command) -> None:
    """Kill every process of the command and reap it, its pipes read to their end (at most
    ``REAP_S``, then they are closed on whatever still holds them)."""
    process = command.process
    if hasattr(os, "killpg"):
        kill_all(process.pid, command.mark)
    else:  # no sessions or process groups (Windows): the command alone
        with contextlib.suppress(ProcessLookupError):
            process.kill()
    try:
        async with asyncio.timeout(REAP_S):
            for stream in (process.stdout, process.stderr):
                while stream is not None and await stream.read(_CHUNK):
                    pass
            await process.wait()
    except TimeoutError:
        transport = getattr(process, "_transport", None)
        if transport is not None:
            transport.close()


def kill_all(leader: int, mark: str) -> None:
    """SIGKILL the session and process group of ``leader`` and, where /proc lists processes,
    every process in them, marked with ``mark``, or descending from any of those."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(leader, signal.SIGKILL)  # the group's id is the leader's pid (a new session)
    if not os.path.isdir("/proc/self"):
        return
    for _ in range(_ROUNDS):
        found = _members(leader, mark)
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if not found:
            return


def _members(leader: int, mark: str) -> set[int]:
    """The live processes of the command: in its session or group, marked, or their descendants."""
    marked = f"{MARK}={mark}".encode()
    parents: dict[int, int] = {}
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        stat = _stat(entry)
        if stat is None or stat[0] == "Z":  # gone, or dead and waiting for its parent
            continue
        pid, (_, ppid, group, session) = int(entry), stat
        parents[pid] = ppid
        if leader in (group, session) or marked in _environ(entry):
            found.add(pid)
    grown = True
    while grown:
        more = {pid for pid, ppid in parents.items() if ppid in found and pid not in found}
        found |= more
        grown = bool(more)
    return found


def _stat(pid: str) -> tuple[str, int, int, int] | None:
    """State, parent, process group and session of ``pid`` (proc(5)); None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            text = file.read().decode(errors="replace")
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()  # after the command name, which may hold anything
    return fields[0], int(fields[1]), int(fields[2]), int(fields[3])


def _environ(pid: str) -> bytes:
    """The environment ``pid`` started with; b"" when it is not readable (another user's)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as file:
            return file.read()
    except OSError:
        return b""
