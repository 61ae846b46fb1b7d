"""``evalkit gate``: a run group's merged shards assembled, compared, gated, stored and reported
as ``run`` reports (README "Larger suites: shards and batches")."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from evalkit.cli.options import GateChoice, config_option, db_option, format_option, gate_options, report_file_options
from evalkit.cli.run import Outputs, check_writable, emit, exit_code, say_errored, write_output
from evalkit.errors import RunsNotStored


@click.command("gate")
@click.option(
    "--run-group", metavar="ID",
    help="The group the shards ran in (default: $GITHUB_RUN_ID-$GITHUB_RUN_ATTEMPT, else $CI_PIPELINE_ID).",
)  # fmt: skip
@gate_options()
@click.option(
    "--significance", type=float, metavar="ALPHA",
    help="With --fail-on-regression, a drop beyond the tolerance fails when the paired test finds it significant.",
)  # fmt: skip
@db_option
@config_option
@format_option("table", "json", "markdown")
@report_file_options
def gate_command(
    run_group: str | None,
    gate: GateChoice,
    significance: float | None,
    db: str | None,
    config: str | None,
    fmt: str,
    output: str | None,
    junit: str | None,
    markdown: str | None,
    html_file: str | None,
) -> None:
    """Assemble the merged shards of a run group (evalkit merge shard-*.duckdb), then compare and gate them."""
    from evalkit import api

    outputs = Outputs(fmt, output, junit, markdown)
    check_writable(output, junit, markdown, html_file)
    cfg = api.load_config(config)
    planned = api.plan_gate(
        cfg, group=run_group, db=db, fail_on_regression=gate.fail_on_regression, tolerance_overrides=gate.tolerances,
        gate_overrides=gate.minimums, significance=significance, baselines=gate.baselines,
    )  # fmt: skip
    try:
        runs = api.gate_group(planned)
    except RunsNotStored as exc:  # assembled, then the database refused them: reported, exit 3
        emit(exc.runs, outputs)
        raise
    emit(runs, outputs)
    if html_file:
        write_output(Path(html_file), api.html_report(cfg, db=planned.plan.db, runs=runs))
    code = exit_code(runs)
    if code == 3 and fmt != "table":
        say_errored(runs)
    sys.exit(code)


COMMANDS = [gate_command]
