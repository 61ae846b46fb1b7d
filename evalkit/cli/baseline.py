"""``evalkit baseline accept`` / ``baseline show``: the baselines kept in the repository."""

from __future__ import annotations

import click

from evalkit.cli.options import config_option, db_option, format_option
from evalkit.report.text import percent, printable


def baselines_option(f: click.decorators.FC) -> click.decorators.FC:
    return click.option(
        "--baselines",
        metavar="DIR",
        help="Folder of the baseline files (default: baselines: in evalkit.yaml, else baselines/).",
    )(f)


@click.group("baseline")
def baseline_group() -> None:
    """Accepted baselines kept in the repository, one JSON file per set (reviewed like code)."""


@baseline_group.command("accept")
@click.argument("run_ids", nargs=-1, metavar="[RUN_ID...]")
@baselines_option
@db_option
@config_option
@format_option("table", "json")
def accept_command(
    run_ids: tuple[str, ...], baselines: str | None, db: str | None, config: str | None, fmt: str
) -> None:
    """Write runs (default: the latest run of every scope) into their sets' baseline files."""
    from evalkit import api
    from evalkit.report.jsonout import dumps

    result = api.accept_baselines(api.load_config(config), list(run_ids), db=db, baselines=baselines)
    accepted = result.accepted
    for reason in result.skipped:
        click.echo(f"Skipped: {printable(reason)}", err=True)
    if fmt == "json":
        click.echo(dumps({"accepted": [a.as_dict() for a in accepted], "skipped": list(result.skipped)}))
        return
    for a in accepted:
        entry = a.as_dict()
        click.echo(
            f"Accepted run {entry['run_id']} as the baseline of {entry['set']} on "
            f"{printable(entry['provider'])}/{printable(entry['model'])} (reported {printable(entry['reported_model'])}), "
            f"graded by {entry['grader']}: pass rate {percent(entry['pass_rate'])}, mean score "
            f"{entry['mean_score']:.3f} -> {a.path}"
        )
    folders = sorted({str(a.path.parent) for a in accepted})
    click.echo(f"Commit {', '.join(folders)} so that CI gates on these baselines.", err=True)


@baseline_group.command("show")
@click.argument("set_id", required=False)
@baselines_option
@config_option
@format_option("table", "json")
def show_command(set_id: str | None, baselines: str | None, config: str | None, fmt: str) -> None:
    """List the accepted baselines (of one set, or of every set)."""
    from evalkit import api

    files = api.baseline_files(api.load_config(config), set_id, baselines=baselines)
    if fmt == "json":
        from evalkit.report.jsonout import baselines_json, dumps

        click.echo(dumps(baselines_json(files)))
        return
    from evalkit.cli.options import stdout_console
    from evalkit.report.render import render_baselines

    render_baselines(stdout_console(), files, set_id)


COMMANDS = [baseline_group]
