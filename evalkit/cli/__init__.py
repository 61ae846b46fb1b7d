"""The ``evalkit`` command line: the only package that imports click.

Each command parses options, calls the core and renders. User errors (``EvalkitError``) are
caught once, here, and printed as one ``Error: ...`` line with the class's exit code; anything
else is a bug and keeps its traceback. Ctrl-C exits 130.
"""

from __future__ import annotations

import atexit
import itertools
import os
import sys
import threading
from typing import Any, NoReturn

import click
from click.exceptions import NoArgsIsHelpError

from evalkit.errors import EvalkitError
from evalkit.memory import collector_policy
from evalkit.report.text import printable

# the first day's commands lead `evalkit --help`, in the order the README's Commands table uses them
FIRST_COMMANDS = ("init", "run", "validate", "report")


class EvalkitGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        names = super().list_commands(ctx)
        return [n for n in FIRST_COMMANDS if n in names] + [n for n in names if n not in FIRST_COMMANDS]

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # the group's own options, before the command: --version reads --verbose from them
        # whichever comes first (an eager option runs before the others are parsed)
        ctx.meta[_OWN_ARGS] = tuple(itertools.takewhile(lambda a: a.startswith("-"), args))
        try:
            return super().parse_args(ctx, args)
        except NoArgsIsHelpError:  # plain `evalkit`: the help, as click shows it
            raise
        except click.UsageError as exc:  # the group's own options: one line, as for a command's
            click.echo(f"Error: {printable(exc.format_message())} (see evalkit --help)", err=True)
            ctx.exit(2)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            with collector_policy():  # a command is a process of its own: evalkit/memory.py
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


_OWN_ARGS = "evalkit.own_args"


def _show_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from evalkit.cli.about import version_lines

    for line in version_lines(verbose="--verbose" in ctx.meta.get(_OWN_ARGS, ())):
        click.echo(printable(line))  # a plugin's name or error is third-party text
    ctx.exit()


def _verbose_alone(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:  # with --version, that option has already exited
        raise click.UsageError("--verbose goes with --version: evalkit --version --verbose", ctx)


@click.group(cls=EvalkitGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_show_version,
    help="Show the version and exit.",
)
@click.option(
    "--verbose",
    is_flag=True,
    expose_value=False,
    callback=_verbose_alone,
    help="With --version: also list the built-in assertion types, adapters and retriever kinds, and the "
    "installed plugins (and which fail to load).",
)
def cli() -> None:
    """Measure LLM answers and retrieval; catch regressions in CI."""


def _register() -> None:
    from evalkit.cli import (
        baseline,
        batches,
        cache,
        compare,
        history,
        importer,
        init,
        models,
        retrieval,
        run,
        team,
        validate,
    )
    from evalkit.cli import gate as gating

    modules = (
        run,
        batches,
        retrieval,
        validate,
        history,
        compare,
        models,
        init,
        baseline,
        cache,
        importer,
        team,
        gating,
    )
    for module in modules:
        for command in module.COMMANDS:
            cli.add_command(command)
    _whole_summaries(cli)


def _whole_summaries(group: click.Group) -> None:
    """Each command's summary in --help is its docstring's first sentence whole: click cuts it at
    the width left beside the longest name and ends it with "...", mid-sentence."""
    for command in group.commands.values():
        command.short_help = command.short_help or command.get_short_help_str(limit=sys.maxsize)
        if isinstance(command, click.Group):
            _whole_summaries(command)


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
