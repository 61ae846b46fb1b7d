"""``evalkit import promptfoo``: convert another tool's configuration into evalkit sets."""

from __future__ import annotations

from pathlib import Path

import click

from evalkit.report.text import printable


@click.group("import")
def import_group() -> None:
    """Convert another tool's configuration into evalkit set files."""


@import_group.command("promptfoo")
@click.argument("config", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--out", "out", type=click.Path(path_type=Path, file_okay=False), default=Path("sets"), show_default=True,
    help="Folder the set files are written to.",
)  # fmt: skip
@click.option("--id", "set_id", metavar="ID", help="Set id (with several prompts: the prefix of each set's id).")
@click.option("--force", is_flag=True, help="Overwrite set files that differ from what the import writes.")
@click.option(
    "--allow-outside", "allow_outside", metavar="PATH", multiple=True, type=click.Path(path_type=Path, file_okay=False),
    help="A folder outside the config's own that its file:// references may read (repeatable).",
)  # fmt: skip
def promptfoo_command(
    config: Path, out: Path, set_id: str | None, force: bool, allow_outside: tuple[Path, ...]
) -> None:
    """Write evalkit sets from a promptfoo config; list what is not converted (file:line, hint)."""
    from evalkit.importers.promptfoo import import_promptfoo
    from evalkit.importers.promptfoo.build import NothingToImport

    try:
        report = import_promptfoo(config, out, set_id=set_id, force=force, allow_outside=allow_outside)
    except NothingToImport as exc:
        for line in exc.report.lines()[:-1]:
            click.echo(printable(line), err=True)
        raise
    for line in report.lines():
        click.echo(printable(line))  # file names and hints quote the user's files


COMMANDS = [import_group]
