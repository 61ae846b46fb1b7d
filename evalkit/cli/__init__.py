"""The ``evalkit`` command line: the only package that imports click.

Each command parses options, calls the core and renders. User errors (``EvalkitError``) are
caught once, here, and printed as one ``Error: ...`` line with the class's exit code; anything
else is a bug and keeps its traceback. Ctrl-C exits 130.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import Any, NoReturn

import click

from evalkit._version import __version__
from evalkit.errors import EvalkitError
from evalkit.report.text import printable


class EvalkitGroup(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except EvalkitError as exc:
            click.echo(f"Error: {printable(str(exc))}", err=True)  # it may quote an endpoint or a file
            ctx.exit(exc.exit_code)
        except click.UsageError as exc:  # one line, like every other user error
            hint = f" (see {_command_path(exc.ctx)} --help)" if exc.ctx is not None else ""
            click.echo(f"Error: {printable(exc.format_message())}{hint}", err=True)
            ctx.exit(2)
        except KeyboardInterrupt as exc:  # the core may say what was kept; by default nothing was stored
            kept = str(exc.args[0]) if exc.args else "nothing of this command was stored"
            click.echo(f"Interrupted: {kept}.", err=True)
            ctx.exit(130)


def _command_path(ctx: click.Context) -> str:
    """``evalkit cache clear``: the words a user typed to reach ``ctx``'s command, whatever the
    program was called (click's own path begins with the invoked name)."""
    words: list[str] = []
    while ctx.parent is not None:
        words.insert(0, ctx.info_name or "")
        ctx = ctx.parent
    return " ".join(["evalkit", *words])


@click.group(cls=EvalkitGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="evalkit")
def cli() -> None:
    """Measure LLM answers and retrieval; catch regressions in CI."""


def _register() -> None:
    from evalkit.cli import baseline, cache, compare, history, init, models, retrieval, run, validate

    for module in (run, retrieval, validate, history, compare, models, init, baseline, cache):
        for command in module.COMMANDS:
            cli.add_command(command)


_register()


def main() -> None:
    try:
        cli.main(prog_name="evalkit", standalone_mode=True)
    except SystemExit as exc:
        if isinstance(exc.code, int) and threading.active_count() == 1:
            hard_exit(exc.code)
        raise


def hard_exit(code: int) -> NoReturn:
    """Exit without the interpreter's teardown (as mypy does): freeing every object and module of
    a finished run took ~90 ms, longer than some whole commands. Only once the command's files
    and database are closed and no other thread runs (``main`` checks); the output streams are
    flushed after the atexit handlers have run, as the interpreter does."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        if stream is None:  # started with the descriptor closed (>&-), or under pythonw
            continue
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (evalkit ... | head): nothing left to deliver
            code = code or 1
    os._exit(code)
