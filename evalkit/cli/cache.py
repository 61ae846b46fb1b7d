"""``evalkit cache clear``: empty the completion cache (docs/contract.md "The completion cache")."""

from __future__ import annotations

import click

from evalkit.cli.options import config_option, db_option


@click.group("cache")
def cache_group() -> None:
    """The completion cache in the database."""


@cache_group.command("clear")
@click.option(
    "--older-than",
    "older_than",
    type=click.IntRange(min=1),
    metavar="DAYS",
    help="Only entries older than DAYS days (default: every entry).",
)
@db_option
@config_option
def clear_command(older_than: int | None, db: str | None, config: str | None) -> None:
    """Delete cached completions (all, or those older than DAYS); runs are kept."""
    from evalkit import api

    deleted = api.clear_cache(api.load_config(config), older_than_days=older_than, db=db)
    click.echo(f"Deleted {deleted} cache entr{'y' if deleted == 1 else 'ies'}.")


COMMANDS = [cache_group]
