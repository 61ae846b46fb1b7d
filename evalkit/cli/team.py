"""``evalkit merge`` and ``evalkit export``: one history from several databases, and the history
for a warehouse (README "One history for a team: merge and export")."""

from __future__ import annotations

import datetime

import click

from evalkit.cli.options import config_option, db_option, format_option


@click.command("merge")
@click.argument("sources", nargs=-1, required=True, metavar="OTHER.duckdb...")
@click.option("--with-cache", is_flag=True, help="Also fold in their cached completions (entries held here are kept).")
@db_option
@config_option
@format_option("table", "json")
def merge_command(sources: tuple[str, ...], with_cache: bool, db: str | None, config: str | None, fmt: str) -> None:
    """Fold every run of other evalkit databases (CI artifacts, a colleague's file) into this one."""
    from evalkit import api
    from evalkit.report import jsonout

    merged = api.merge_databases(api.load_config(config), sources, db=db, with_cache=with_cache)
    if fmt == "json":
        click.echo(jsonout.dumps({"merged": merged}))
        return
    for entry in merged:
        cache = f", {entry['cache_entries']} cache entries" if with_cache else ""
        batches = f", {entry['batches']} provider batch(es) added or marked collected" if entry.get("batches") else ""
        click.echo(
            f"{entry['source']}: {entry['added']} run(s) added with {entry['items']} item(s), "
            f"{entry['skipped']} already here{cache}{batches}"
        )


@click.command("export")
@click.option(
    "--parquet", "folder", required=True, type=click.Path(file_okay=False), metavar="DIR",
    help="Write runs, results and retrieval as Parquet under DIR, partitioned by set.",
)  # fmt: skip
@click.option(
    "--since", type=click.DateTime(formats=["%Y-%m-%d"]), metavar="DATE",
    help="Only the runs started on or after DATE (YYYY-MM-DD), in files of their own beside earlier ones.",
)  # fmt: skip
@db_option
@config_option
@format_option("table", "json")
def export_command(folder: str, since: datetime.datetime | None, db: str | None, config: str | None, fmt: str) -> None:
    """The stored history as Parquet, for DuckDB and the engines of a warehouse."""
    from evalkit import api
    from evalkit.report import jsonout

    counts = api.export_parquet(api.load_config(config), folder, db=db, since=since.date() if since else None)
    if fmt == "json":
        click.echo(jsonout.dumps({"folder": folder, "rows": counts}))
        return
    click.echo(f"wrote {folder}: " + ", ".join(f"{table} {count} rows" for table, count in counts.items()))


COMMANDS = [merge_command, export_command]
