"""``evalkit gate``: a run group's merged shards assembled, compared, gated, stored and reported
as ``run`` reports (README "Larger suites: shards and batches")."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from evalkit.cli.options import config_option, db_option, format_option, report_file_options, tolerance_overrides
from evalkit.cli.run import Outputs, check_writable, emit, exit_code, say_errored, write_output
from evalkit.errors import RunsNotStored


@click.command("gate")
@click.option(
    "--run-group", metavar="ID",
    help="The group the shards ran in (default: $GITHUB_RUN_ID-$GITHUB_RUN_ATTEMPT, else $CI_PIPELINE_ID).",
)  # fmt: skip
@click.option("--fail-on-regression", is_flag=True, help="Exit 1 on a regression or a run that cannot be compared.")
@click.option("--max-pass-rate-drop", metavar="X", help="Tolerated pass-rate drop, 0..1 (default 0.1 or the set's).")
@click.option("--max-mean-score-drop", metavar="X", help="Tolerated mean-score drop, 0..1 (default 0.1 or the set's).")
@click.option(
    "--min-pass-rate", metavar="X", help="Exit 1 when the pass rate is below X, 0..1 (default: the set's gate:)."
)
@click.option(
    "--min-mean-score", metavar="X", help="Exit 1 when the mean score is below X, 0..1 (default: the set's gate:)."
)
@click.option(
    "--baselines", metavar="DIR",
    help="Folder of the accepted baseline files (default: baselines: in evalkit.yaml, else baselines/).",
)  # fmt: skip
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
    fail_on_regression: bool,
    max_pass_rate_drop: str | None,
    max_mean_score_drop: str | None,
    min_pass_rate: str | None,
    min_mean_score: str | None,
    baselines: str | None,
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

    overrides = tolerance_overrides(max_pass_rate_drop=max_pass_rate_drop, max_mean_score_drop=max_mean_score_drop)
    minimums = tolerance_overrides(min_pass_rate=min_pass_rate, min_mean_score=min_mean_score)
    outputs = Outputs(fmt, output, junit, markdown)
    check_writable(output, junit, markdown, html_file)
    cfg = api.load_config(config)
    gate = api.plan_gate(
        cfg, group=run_group, db=db, fail_on_regression=fail_on_regression, tolerance_overrides=overrides,
        gate_overrides=minimums, significance=significance, baselines=baselines,
    )  # fmt: skip
    try:
        runs = api.gate_group(gate)
    except RunsNotStored as exc:  # assembled, then the database refused them: reported, exit 3
        emit(exc.runs, outputs)
        raise
    emit(runs, outputs)
    if html_file:
        write_output(Path(html_file), api.html_report(cfg, db=gate.plan.db, runs=runs))
    code = exit_code(runs)
    if code == 3 and fmt != "table":
        say_errored(runs)
    sys.exit(code)


COMMANDS = [gate_command]
