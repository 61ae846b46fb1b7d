"""``evalkit compare``: two runs item by item, with a paired significance test."""

from __future__ import annotations

import click

from evalkit.cli.options import config_option, db_option, format_option, stdout_console


@click.command("compare")
@click.argument("runs", nargs=-1, metavar="[RUN_A RUN_B]")
@click.option("--set", "set_id", metavar="SET", help="Compare the latest runs of this set on two providers.")
@click.option("--provider", "providers", multiple=True, metavar="ID", help="With --set: a provider instance (twice).")
@db_option
@config_option
@format_option("table", "json", "markdown")
def compare_command(
    runs: tuple[str, ...], set_id: str | None, providers: tuple[str, ...], db: str | None, config: str | None, fmt: str
) -> None:
    """Per-item flips, deltas and whether the difference is statistically meaningful."""
    from evalkit import api
    from evalkit.errors import InputError

    if set_id is None and len(runs) != 2:
        raise InputError("compare needs two run ids, or --set SET --provider A --provider B")
    first, second = (runs[0], runs[1]) if len(runs) == 2 else (None, None)
    result = api.compare_runs(api.load_config(config), first, second, set_id=set_id, providers=providers, db=db)
    if fmt == "json":
        from evalkit.report.jsonout import dumps

        click.echo(dumps(result.as_dict()))
    elif fmt == "markdown":
        from evalkit.report.markdown import comparison_markdown

        click.echo(comparison_markdown(result), nl=False)
    else:
        from evalkit.report.render import render_comparison

        render_comparison(stdout_console(), result)


COMMANDS = [compare_command]
