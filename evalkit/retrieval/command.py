"""A command retriever: a command line (split like a shell would, run without a shell, in the
config file's folder) that reads the question on stdin and prints ranked ids, one per line.

The command runs in a session of its own (``evalkit.procs``), so that at ``timeout_s`` everything
it started is ended, children included, even one that called ``setsid``: a shell script's
``sleep`` would otherwise hold the output pipe, and the wait for the output, long after the
script itself was killed, and outlive evalkit. Its output is
bounded (MAX_OUTPUT_BYTES of ids; the last MAX_STDERR_BYTES of stderr are kept for the error):
a command that prints more is ended too. Either way the question is an item error with a reason.
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path

from evalkit import procs
from evalkit.config import RetrieverConfig
from evalkit.errors import InputError, RetrieverError
from evalkit.records import Ranking

MAX_OUTPUT_BYTES = 16 * 1024 * 1024
MAX_STDERR_BYTES = 64 * 1024


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
            done = await procs.run(
                self.argv,
                self.cwd,
                question.encode(),
                timeout_s=self.timeout_s,
                max_output=MAX_OUTPUT_BYTES,
                max_stderr=MAX_STDERR_BYTES,
            )
        except TimeoutError:
            raise RetrieverError(
                f"retriever '{self.id}': timed out after {self.timeout_s:g} s; the command and its children were ended"
            ) from None
        except OSError as exc:  # (TimeoutError is an OSError: it is caught first)
            raise RetrieverError(f"retriever '{self.id}': cannot run {self.argv[0]!r} ({exc.strerror})") from None
        if done.out is None:
            raise RetrieverError(
                f"retriever '{self.id}': printed more than {MAX_OUTPUT_BYTES // (1024 * 1024)} MB; "
                "the command was ended (print ranked ids only, one per line)"
            )
        if done.status != 0:
            detail = done.err.decode(errors="replace").strip().splitlines()[-1:] or [""]
            raise RetrieverError(f"retriever '{self.id}': exit status {done.status} {detail[0]}".rstrip())
        ids = tuple(line.strip() for line in done.out.decode(errors="replace").splitlines())
        return Ranking(ids, {}, (time.perf_counter() - started) * 1000.0)  # cut at limit once distinct

    async def aclose(self) -> None:
        return None
