"""``evalkit models``: rank the configured provider instances by measured quality."""

from __future__ import annotations

import click

from evalkit.cli.options import config_option, db_option, format_option, stdout_console


@click.command("models")
@click.option(
    "--policy", type=click.Choice(["priority", "quality", "balanced", "economy"]), default="priority",
    show_default=True, help="Ranking policy.",
)  # fmt: skip
@click.option("--min-quality", type=click.FloatRange(0, 1), metavar="X", help="Drop instances below X or without data.")
@db_option
@config_option
@format_option("table", "json")
def models_command(policy: str, min_quality: float | None, db: str | None, config: str | None, fmt: str) -> None:
    """Rank provider instances by quality (latest verified deterministic run per set)."""
    from evalkit import api
    from evalkit.report import jsonout

    ranked = api.rank_models(policy, min_quality, config=api.load_config(config), db=db)
    if fmt == "json":
        click.echo(jsonout.dumps({"policy": policy, "models": [r.as_dict() for r in ranked]}))
        return
    from evalkit.report.render import render_models

    render_models(stdout_console(), policy, ranked)


COMMANDS = [models_command]
