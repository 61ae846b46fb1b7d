"""A command retriever: a command line (split like a shell would, run without a shell, in the
config file's folder) that reads the question on stdin and prints ranked ids, one per line.

The command runs in its own process group (a new session), so that at ``timeout_s`` the whole
group is ended, children included: a shell script's ``sleep`` would otherwise hold the output
pipe, and the wait for the output, long after the script itself was killed. Its output is
bounded (MAX_OUTPUT_BYTES of ids; the last MAX_STDERR_BYTES of stderr are kept for the error):
a command that prints more is ended too. Either way the question is an item error with a reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import time
from pathlib import Path

from evalkit.config import RetrieverConfig
from evalkit.errors import InputError, RetrieverError
from evalkit.records import Ranking

MAX_OUTPUT_BYTES = 16 * 1024 * 1024
MAX_STDERR_BYTES = 64 * 1024
_CHUNK = 64 * 1024
_REAP_S = 5.0  # after the group was killed: how long its pipes may stay open (a process that left the group)


class CommandRetriever:
    def __init__(self, config: RetrieverConfig) -> None:
        assert config.command is not None
        self.id = config.id
        try:
            self.argv = shlex.split(config.command)
        except ValueError as exc:
            raise InputError(f"retriever '{config.id}': cannot split command ({exc})") from None
        if not self.argv:
            raise InputError(f"retriever '{config.id}': empty command")
        self.cwd = config.cwd or Path.cwd()
        self.timeout_s = config.timeout_s

    async def search(self, question: str, limit: int) -> Ranking:
        started = time.perf_counter()
        try:
            process = await asyncio.create_subprocess_exec(
                *self.argv,
                cwd=self.cwd,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,  # its own process group: ended as a whole
            )
        except OSError as exc:
            raise RetrieverError(f"retriever '{self.id}': cannot run {self.argv[0]!r} ({exc.strerror})") from None
        try:
            async with asyncio.timeout(self.timeout_s):
                out, err = await _exchange(process, question.encode())
                if out is not None:
                    await process.wait()
        except TimeoutError:
            await _end(process)
            raise RetrieverError(
                f"retriever '{self.id}': timed out after {self.timeout_s:g} s; the command and its children were ended"
            ) from None
        except BaseException:
            await _end(process)
            raise
        if out is None:
            await _end(process)
            raise RetrieverError(
                f"retriever '{self.id}': printed more than {MAX_OUTPUT_BYTES // (1024 * 1024)} MB; "
                "the command was ended (print ranked ids only, one per line)"
            )
        if process.returncode != 0:
            detail = err.decode(errors="replace").strip().splitlines()[-1:] or [""]
            raise RetrieverError(f"retriever '{self.id}': exit status {process.returncode} {detail[0]}".rstrip())
        ids = tuple(line.strip() for line in out.decode(errors="replace").splitlines())
        return Ranking(ids, {}, (time.perf_counter() - started) * 1000.0)  # cut at limit once distinct

    async def aclose(self) -> None:
        return None


async def _exchange(process: asyncio.subprocess.Process, question: bytes) -> tuple[bytes | None, bytes]:
    """Write the question, read stdout (None once it passes MAX_OUTPUT_BYTES) and the tail of
    stderr."""
    stdin, stdout, stderr = process.stdin, process.stdout, process.stderr
    assert stdin is not None
    assert stdout is not None
    assert stderr is not None

    async def feed() -> None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # it need not read the question
            stdin.write(question)
            await stdin.drain()
        stdin.close()

    async def tail() -> bytes:
        kept = bytearray()
        while chunk := await stderr.read(_CHUNK):
            kept += chunk
            del kept[:-MAX_STDERR_BYTES]
        return bytes(kept)

    fed, errors = asyncio.ensure_future(feed()), asyncio.ensure_future(tail())
    try:
        chunks: list[bytes] = []
        size = 0
        while chunk := await stdout.read(_CHUNK):
            size += len(chunk)
            if size > MAX_OUTPUT_BYTES:
                return None, b""
            chunks.append(chunk)
        await fed
        return b"".join(chunks), await errors
    finally:
        fed.cancel()
        errors.cancel()
        await asyncio.gather(fed, errors, return_exceptions=True)


async def _end(process: asyncio.subprocess.Process) -> None:
    """Kill the command's whole process group and reap it, its pipes read to their end; a
    process that left the group and still holds them is waited for a few seconds, then they are
    closed on it."""
    killpg = getattr(os, "killpg", None)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if killpg is not None:
            killpg(process.pid, signal.SIGKILL)  # the group's id is the command's pid (a new session)
        else:  # no process groups (Windows): the command alone
            process.kill()
    try:
        async with asyncio.timeout(_REAP_S):
            for stream in (process.stdout, process.stderr):
                while stream is not None and await stream.read(_CHUNK):
                    pass
            await process.wait()
    except TimeoutError:
        transport = getattr(process, "_transport", None)
        if transport is not None:
            transport.close()
