"""``evalkit init``: scaffold evalkit.yaml (local model) and an example set."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("init")
@click.option("--force", is_flag=True, help="Overwrite existing files; also start a project inside another one.")
def init_command(force: bool) -> None:
    """Write evalkit.yaml (using the local model), example sets in sets/ and baselines/ here."""
    from evalkit.sets.scaffold import scaffold

    for path, done in scaffold(Path.cwd(), force=force):
        click.echo(f"{done} {path}")
    click.echo("Next: evalkit run sets/, then evalkit baseline accept to commit the baselines")


COMMANDS = [init_command]
