"""A command retriever: a command line (split like a shell would, run without a shell, in the
config file's folder) that reads the question on stdin and prints ranked ids, one per line."""

from __future__ import annotations

import asyncio
import shlex
import time
from pathlib import Path

from evalkit.config import RetrieverConfig
from evalkit.errors import InputError, RetrieverError
from evalkit.records import Ranking


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
            )
        except OSError as exc:
            raise RetrieverError(f"retriever '{self.id}': cannot run {self.argv[0]!r} ({exc.strerror})") from None
        try:
            out, err = await asyncio.wait_for(process.communicate(question.encode()), self.timeout_s)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise RetrieverError(f"retriever '{self.id}': timed out after {self.timeout_s:g} s") from None
        if process.returncode != 0:
            detail = err.decode(errors="replace").strip().splitlines()[-1:] or [""]
            raise RetrieverError(f"retriever '{self.id}': exit status {process.returncode} {detail[0]}".rstrip())
        ids = tuple(line.strip() for line in out.decode(errors="replace").splitlines())
        return Ranking(ids, {}, (time.perf_counter() - started) * 1000.0)  # cut at limit once distinct

    async def aclose(self) -> None:
        return None
