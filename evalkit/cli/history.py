"""``evalkit report``, ``show`` and ``prune``: the stored history."""

from __future__ import annotations

from pathlib import Path

import click

from evalkit.cli.options import config_option, db_option, format_option, stdout_console
from evalkit.verdicts import GateVerdict


@click.command("report")
@click.argument("set_id", required=False)
@click.option("--provider", metavar="ID", help="Only runs of this provider instance.")
@click.option("--model", metavar="ALIAS", help="Only runs that sent this model alias.")
@click.option("--grader", metavar="NAME", help="Only runs stored under this grader.")
@click.option("--limit", type=click.IntRange(min=1), metavar="N", help="At most N runs (with --html: of each set).")
@click.option(
    "--html", "html_file", type=click.Path(dir_okay=False), metavar="FILE",
    help="Write a self-contained HTML report (charts, prompt tables, baseline diffs) to FILE.",
)  # fmt: skip
@db_option
@config_option
@format_option("table", "json", "markdown")
def report_command(
    set_id: str | None, provider: str | None, model: str | None, grader: str | None, limit: int | None,
    html_file: str | None, db: str | None, config: str | None, fmt: str,
) -> None:  # fmt: skip
    """History, trend and baseline per set (or one set's history)."""
    from evalkit import api
    from evalkit.report import jsonout, markdown, render

    cfg = api.load_config(config)
    if html_file is not None:
        from evalkit.cli.run import check_writable, write_output

        check_writable(html_file)
        page = api.html_report(cfg, db=db, set_id=set_id, provider=provider, model=model, grader=grader, limit=limit)
        write_output(Path(html_file), page, stored_note="")
        click.echo(f"wrote {html_file} ({len(page.encode()) / 1e6:.2f} MB)", err=fmt == "json")
        if fmt != "json":
            return
    filtered = set_id or provider or model or grader or limit
    rows = api.history(cfg, db=db, set_id=set_id, provider=provider, model=model, grader=grader, limit=limit)
    if fmt == "json":
        click.echo(jsonout.dumps({"runs": [r.history_dict() for r in rows]}))
    elif filtered and fmt == "markdown":
        click.echo(markdown.history_markdown(set_id or "runs", rows), nl=False)
    elif filtered:
        render.render_history(stdout_console(), set_id or "runs", rows)
    elif fmt == "markdown":
        click.echo(markdown.summaries_markdown(api.set_report(cfg, db=db)), nl=False)
    else:
        render.render_summaries(stdout_console(), api.set_report(cfg, db=db))


@click.command("show")
@click.argument("run_id")
@db_option
@config_option
@format_option("table", "json", "markdown")
def show_command(run_id: str, db: str | None, config: str | None, fmt: str) -> None:
    """One stored run, per item (texts only as the privacy level kept them)."""
    from evalkit import api
    from evalkit.report import jsonout, markdown, render

    run, meta = api.show_run(api.load_config(config), run_id, db=db)
    level = meta.get("privacy")
    hint = render.privacy_hint(level) if meta.get("kind") == "prompts" or level == "none" else None
    if fmt == "json":
        click.echo(jsonout.dumps(jsonout.envelope(run, GateVerdict.stored(meta.get("gate")))))
    elif fmt == "markdown":
        click.echo(markdown.any_markdown(run), nl=False)
    else:
        console = stdout_console()
        render.render_any(console, run, GateVerdict.stored(meta.get("gate")))
        if hint:
            console.print(render.Text(hint, style="dim"))
        return
    if hint:  # stdout carries only the JSON or markdown
        click.echo(f"Note: {hint}", err=True)


@click.command("prune")
@click.option(
    "--older-than",
    "older_than",
    type=click.IntRange(min=1),
    metavar="DAYS",
    help="Age in days (default: retention_days).",
)
@db_option
@config_option
def prune_command(older_than: int | None, db: str | None, config: str | None) -> None:
    """Delete whole stored runs (and cache entries) older than the retention."""
    from evalkit import api

    cfg = api.load_config(config)
    days = older_than if older_than is not None else cfg.retention_days
    runs, entries = api.prune(cfg, older_than_days=days, db=db)
    click.echo(
        f"Deleted {runs} run{'s' if runs != 1 else ''} and {entries} cache entr{'ies' if entries != 1 else 'y'} older than {days} days."
    )


COMMANDS = [report_command, show_command, prune_command]
