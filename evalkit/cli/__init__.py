"""The ``evalkit`` command line: the only package that imports click.

Each command parses options, calls the core and renders. User errors (``EvalkitError``) are
caught once, here, and printed as one ``Error: ...`` line with the class's exit code; anything
else is a bug and keeps its traceback. Ctrl-C exits 130.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from evalkit._version import __version__
from evalkit.errors import EvalkitError


class EvalkitGroup(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except EvalkitError as exc:
            click.echo(f"Error: {exc}", err=True)
            ctx.exit(exc.exit_code)
        except click.UsageError as exc:  # one line, like every other user error
            hint = f" (see evalkit {exc.ctx.info_name} --help)" if exc.ctx is not None and exc.ctx.info_name else ""
            click.echo(f"Error: {exc.format_message()}{hint}", err=True)
            ctx.exit(2)
        except KeyboardInterrupt:
            click.echo(
                "Interrupted: no run of this command was stored; answers received so far stay in the cache.", err=True
            )
            ctx.exit(130)


@click.group(cls=EvalkitGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="evalkit")
def cli() -> None:
    """Measure LLM answers and retrieval; catch regressions in CI."""


def _register() -> None:
    from evalkit.cli import compare, history, init, models, retrieval, run, validate

    for module in (run, retrieval, validate, history, compare, models, init):
        for command in module.COMMANDS:
            cli.add_command(command)


_register()


def main() -> None:
    cli.main(prog_name="evalkit", standalone_mode=True)
    sys.exit(0)
