"""Options shared by several commands, one decorator each, and output helpers."""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
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


UNITS = {"s": 1, "m": 60, "h": 3600}


def duration(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    """``--max-wait``: ``90s``, ``10m``, ``2h`` (a bare number is seconds)."""
    if value is None:
        return None
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", value)
    if not match or float(match[1]) <= 0:
        raise click.BadParameter(f"{value!r} is not a duration: write it as 90s, 10m or 2h", ctx, param)
    return float(match[1]) * UNITS[match[2] or "s"]


def batch_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--max-wait`` and ``--poll-interval``, shared by ``run --batch`` and ``collect``."""
    f = click.option(
        "--poll-interval", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
        help="Longest pause between two polls of a batch (default: batch_poll_s in evalkit.yaml, else 60).",
    )(f)  # fmt: skip
    return click.option(
        "--max-wait", callback=duration, metavar="DURATION",
        help="Stop waiting after DURATION (90s, 10m, 2h); the batch stays pending for evalkit collect.",
    )(f)  # fmt: skip


def report_file_options(command: F) -> F:
    """``--output``, ``--junit``, ``--markdown`` and ``--html``: the report's copies, as run, gate
    and collect write them (README "Commands")."""
    for option in reversed((
        click.option("--output", type=click.Path(dir_okay=False), metavar="FILE", help="Also write the JSON report to FILE."),
        click.option("--junit", type=click.Path(dir_okay=False), metavar="FILE", help="Also write JUnit XML to FILE."),
        click.option(
            "--markdown", type=click.Path(dir_okay=False), metavar="FILE",
            help="Also write the report as markdown to FILE (a pull-request comment).",
        ),
        click.option(
            "--html", "html_file", type=click.Path(dir_okay=False), metavar="FILE",
            help="Also write a self-contained HTML report of these runs and their sets' history to FILE.",
        ),
    )):  # fmt: skip
        command = option(command)
    return command


@dataclass(frozen=True, slots=True)
class GateChoice:
    """The gate options of run, gate and collect, checked (README "Baselines and regressions")."""

    fail_on_regression: bool
    tolerances: dict[str, Decimal]  # --max-pass-rate-drop, --max-mean-score-drop given
    minimums: dict[str, Decimal]  # --min-pass-rate, --min-mean-score given
    baselines: str | None

    @property
    def asked(self) -> bool:
        """Whether a gate was asked for on the command line."""
        return self.fail_on_regression or bool(self.minimums)


def gate_options(defaults: str | None = None) -> Callable[[F], F]:
    """``--fail-on-regression``, the tolerance and minimum options and ``--baselines``, handed to
    the command as one checked ``gate: GateChoice``. ``defaults`` says where an option not given
    comes from (default: the set's); ``--baselines`` defaults to evalkit.yaml's ``baselines:``."""
    drops = f"default: {defaults}" if defaults else "default 0.1 or the set's"
    minimum = f"default: {defaults}" if defaults else "default: the set's gate:"
    options = (
        click.option("--fail-on-regression", is_flag=True, help="Exit 1 on a regression or a run that cannot be compared."),
        click.option("--max-pass-rate-drop", metavar="X", help=f"Tolerated pass-rate drop, 0..1 ({drops})."),
        click.option("--max-mean-score-drop", metavar="X", help=f"Tolerated mean-score drop, 0..1 ({drops})."),
        click.option("--min-pass-rate", metavar="X", help=f"Exit 1 when the pass rate is below X, 0..1 ({minimum})."),
        click.option("--min-mean-score", metavar="X", help=f"Exit 1 when the mean score is below X, 0..1 ({minimum})."),
        click.option("--baselines", metavar="DIR", help="Folder of the accepted baseline files (default: baselines: in evalkit.yaml, else baselines/)."),
    )  # fmt: skip

    def decorate(command: F) -> F:
        @functools.wraps(command)
        def checked(*args: Any, **kwargs: Any) -> Any:
            kwargs["gate"] = GateChoice(
                kwargs.pop("fail_on_regression"),
                tolerance_overrides(
                    max_pass_rate_drop=kwargs.pop("max_pass_rate_drop"),
                    max_mean_score_drop=kwargs.pop("max_mean_score_drop"),
                ),
                tolerance_overrides(
                    min_pass_rate=kwargs.pop("min_pass_rate"), min_mean_score=kwargs.pop("min_mean_score")
                ),
                kwargs.pop("baselines"),
            )
            return command(*args, **kwargs)

        wrapped: Any = checked
        for option in reversed(options):
            wrapped = option(wrapped)
        return wrapped  # type: ignore[no-any-return]

    return decorate
