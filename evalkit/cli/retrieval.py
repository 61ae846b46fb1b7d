"""``evalkit retrieval``: run a question set against a retriever; hit rates, breakdowns, provenance."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from evalkit.cli.options import config_option, db_option, format_option, tolerance_overrides
from evalkit.cli.run import Outputs, check_writable, emit, exit_code
from evalkit.errors import RunsNotStored
from evalkit.memory import loading
from evalkit.report.text import printable

if TYPE_CHECKING:
    from evalkit.config import Config


@click.command("retrieval")
@click.argument("target", metavar="SET")
@click.option(
    "--retriever",
    metavar="ID",
    help="Retriever id from evalkit.yaml, or the built-in 'lexical' (the default when no other is configured).",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=12,
    show_default=True,
    metavar="N",
    help="Ids asked of the retriever per question.",
)
@click.option(
    "--fail-on-regression", is_flag=True, help="Exit 1 on a regression, a changed benchmark or an unknown one."
)
@click.option("--max-top1-drop", metavar="X", help="Tolerated top-1 hit-rate drop, 0..1 (default 0.1 or the set's).")
@click.option("--max-top3-drop", metavar="X", help="Tolerated top-3 hit-rate drop, 0..1 (default 0.1 or the set's).")
@db_option
@config_option
@format_option("table", "json")
@click.option("--output", type=click.Path(dir_okay=False), metavar="FILE", help="Also write the JSON report to FILE.")
@click.option("--junit", type=click.Path(dir_okay=False), metavar="FILE", help="Also write JUnit XML to FILE.")
def retrieval_command(
    target: str, retriever: str | None, limit: int, fail_on_regression: bool, max_top1_drop: str | None,
    max_top3_drop: str | None, db: str | None, config: str | None, fmt: str, output: str | None, junit: str | None,
) -> None:  # fmt: skip
    """Measure a retriever on a labelled question set (a file or a set id)."""
    from evalkit import api

    overrides = tolerance_overrides(max_top1_drop=max_top1_drop, max_top3_drop=max_top3_drop)
    check_writable(output, junit)
    with loading():  # the CLI's collector policy: evalkit/memory.py
        cfg = api.load_config(config)
        plan = api.plan_retrieval(
            target, cfg, retriever=retriever or default_retriever(cfg), limit=limit, db=db, tolerance_overrides=overrides,
            fail_on_regression=fail_on_regression,
        )  # fmt: skip
    for warning in plan.warnings:
        click.echo(f"Warning: {printable(warning)}", err=True)
    try:
        run = api.execute_retrieval(plan)
    except RunsNotStored as exc:  # carried out, then the database refused it: reported, exit 3
        emit(exc.runs, Outputs(fmt, output, junit))
        raise
    emit([run], Outputs(fmt, output, junit))
    sys.exit(exit_code([run]))


def default_retriever(config: Config) -> str:
    """``lexical`` when it is the only retriever there is; with others configured, the user picks."""
    from evalkit.errors import InputError

    others = sorted(r.id for r in config.retrievers if r.id != "lexical")
    if others:
        raise InputError(
            f"--retriever ID is needed: {config.path} configures {', '.join(others)} besides the built-in lexical; "
            "name one, e.g. --retriever lexical"
        )
    return "lexical"


COMMANDS = [retrieval_command]
