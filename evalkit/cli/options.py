"""Options shared by several commands, one decorator each, and output helpers."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from decimal import Decimal
from typing import Any, TypeVar

import click

from evalkit.errors import ToleranceError

F = TypeVar("F", bound=Callable[..., Any])


def db_option(f: F) -> F:
    return click.option(
        "--db",
        "db",
        metavar="PATH",
        help="DuckDB file (default from evalkit.yaml, EVALKIT_DB or .evalkit/evalkit.duckdb).",
    )(f)


def config_option(f: F) -> F:
    return click.option(
        "--config", "config", metavar="PATH", help="evalkit.yaml to use (default: EVALKIT_CONFIG or the nearest one)."
    )(f)


def format_option(*choices: str) -> Callable[[F], F]:
    def decorate(f: F) -> F:
        return click.option(
            "--format", "fmt", type=click.Choice(choices), default="table", show_default=True, help="Output format."
        )(f)

    return decorate


def parse_tolerance_option(name: str, value: str | None) -> Decimal | None:
    """A tolerance option's value, or ToleranceError (exit 2) naming the option and 0..1."""
    if value is None:
        return None
    from evalkit.records import parse_tolerance

    try:
        return parse_tolerance(value)
    except ValueError:
        raise ToleranceError(f"{name}: must be a finite number in 0..1, got {value!r}") from None


def tolerance_overrides(**options: str | None) -> dict[str, Decimal]:
    """Tolerance options given on the command line (``max_top1_drop="0.2"``), each checked."""
    parsed = {name: parse_tolerance_option("--" + name.replace("_", "-"), value) for name, value in options.items()}
    return {name: value for name, value in parsed.items() if value is not None}


def stdout_console() -> Any:
    from evalkit.report.render import SafeConsole

    terminal = sys.stdout.isatty()
    return SafeConsole(width=None if terminal else 160, no_color=bool(os.environ.get("NO_COLOR")), soft_wrap=False)


def stderr_console() -> Any:
    from evalkit.report.render import SafeConsole

    return SafeConsole(stderr=True, no_color=bool(os.environ.get("NO_COLOR")))


def fancy_progress() -> bool:
    """A live progress bar only on a terminal without NO_COLOR."""
    return sys.stderr.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
