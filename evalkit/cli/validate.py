"""``evalkit validate``: check set and config files; nothing runs."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from evalkit.cli.options import config_option
from evalkit.memory import loading
from evalkit.report.text import printable


@click.command("validate")
@click.argument("paths", nargs=-1, metavar="[PATH...]")
@config_option
def validate_command(paths: tuple[str, ...], config: str | None) -> None:
    """Validate set files, folders and evalkit.yaml; lists every error (exit 0 or 2)."""
    from evalkit.sets.check import validate_paths

    with loading():  # the CLI's collector policy: evalkit/memory.py
        report = validate_paths([Path(p) for p in paths], config)
    for issue in report.issues:
        click.echo(printable(str(issue)), err=True)  # an issue may quote the file's content
    noun = "file" if report.files == 1 else "files"
    if report.issues:
        click.echo(
            f"{len(report.issues)} error{'s' if len(report.issues) != 1 else ''} in {report.files} {noun}", err=True
        )
        sys.exit(2)
    click.echo(f"{report.files} {noun} valid ({report.sets} set{'s' if report.sets != 1 else ''})")


COMMANDS = [validate_command]
