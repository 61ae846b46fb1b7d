"""``evalkit run``: run prompt sets, grade, compare with the baseline, store, report."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from evalkit.cli.options import (
    collector_paused,
    config_option,
    db_option,
    fancy_progress,
    format_option,
    stderr_console,
    stdout_console,
    tolerance_overrides,
)
from evalkit.errors import RunsNotStored
from evalkit.report.text import printable


@click.command("run")
@click.argument("targets", nargs=-1, required=True, metavar="SET...")
@click.option(
    "--provider", "providers", multiple=True, metavar="ID",
    help="Provider instance from evalkit.yaml (default: default_provider); repeat it to compare several side by side.",
)  # fmt: skip
@click.option("--model", metavar="ALIAS", help="Model alias to send (overrides the instance's model).")
@click.option("--grader", default="deterministic", show_default=True, help="deterministic | decision.")
@click.option("--judge", metavar="ID", help="Provider instance of the decision grader (default: decision.provider).")
@click.option("--fail-on-regression", is_flag=True, help="Exit 1 on a regression or a run that cannot be compared.")
@click.option("--max-pass-rate-drop", metavar="X", help="Tolerated pass-rate drop, 0..1 (default 0.1 or the set's).")
@click.option("--max-mean-score-drop", metavar="X", help="Tolerated mean-score drop, 0..1 (default 0.1 or the set's).")
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    metavar="N",
    help="Calls in flight (default: the instance's max_concurrency).",
)
@click.option("--no-cache", is_flag=True, help="Do not replay cached completions (fresh answers are still cached).")
@click.option(
    "--repeat", "repeats", type=click.IntRange(min=1), default=1, metavar="N", help="Sample each prompt N times."
)
@click.option(
    "--significance", type=float, metavar="ALPHA",
    help="With --fail-on-regression, fail only on a drop beyond the tolerance that is also significant at ALPHA.",
)  # fmt: skip
@db_option
@config_option
@format_option("table", "json")
@click.option("--output", type=click.Path(dir_okay=False), metavar="FILE", help="Also write the JSON report to FILE.")
@click.option("--junit", type=click.Path(dir_okay=False), metavar="FILE", help="Also write JUnit XML to FILE.")
def run_command(
    targets: tuple[str, ...],
    providers: tuple[str, ...],
    model: str | None,
    grader: str,
    judge: str | None,
    fail_on_regression: bool,
    max_pass_rate_drop: str | None,
    max_mean_score_drop: str | None,
    concurrency: int | None,
    no_cache: bool,
    repeats: int,
    significance: float | None,
    db: str | None,
    config: str | None,
    fmt: str,
    output: str | None,
    junit: str | None,
) -> None:
    """Run prompt sets (files, folders or set ids) against a model endpoint."""
    from evalkit import api

    overrides = tolerance_overrides(max_pass_rate_drop=max_pass_rate_drop, max_mean_score_drop=max_mean_score_drop)
    check_writable(output, junit)
    grader_name = api.resolve_grader_name(grader, strict=True)
    with collector_paused():
        cfg = api.load_config(config)
        sets = api.load_prompt_sets(targets, cfg)
        plan = api.plan_run(
            sets, cfg, provider=providers or None, model=model, grader=grader_name, judge=judge, db=db,
            use_cache=not no_cache, concurrency=concurrency, tolerance_overrides=overrides,
            fail_on_regression=fail_on_regression, repeats=repeats, significance=significance,
        )  # fmt: skip
    announce(plan)
    total = sum(len(s.prompts) for s in plan.sets) * plan.repeats * len(plan.targets)
    try:
        with progress_reporter(total) as (on_item, on_start):
            runs = api.execute_plan(plan, progress=on_item, on_start=on_start)
    except RunsNotStored as exc:  # carried out, then the database refused them: reported, exit 3
        emit(exc.runs, plan.fail_on_regression, fmt, output, junit)
        raise
    try:
        emit(runs, plan.fail_on_regression, fmt, output, junit)
    except KeyboardInterrupt:
        stored = f"the runs were stored ({', '.join(r.run_id for r in runs)})" if plan.db else "no run was stored"
        raise KeyboardInterrupt(f"{stored}; the report was cut short (evalkit show RUN_ID prints it again)") from None
    sys.exit(exit_code(runs, plan.fail_on_regression))


def announce(plan: Any) -> None:
    if plan.provider.implicit:
        where = (
            "the local model (no provider configured)"
            if plan.provider.adapter == "local"
            else "OpenAI from the environment"
        )
        click.echo(f"Using {where}: {plan.provider.id}/{printable(plan.alias)}", err=True)


@contextmanager
def progress_reporter(total: int) -> Iterator[tuple[Callable[[Any], None], Callable[[Any], None]]]:
    """A rich progress bar on a terminal; one plain line per set otherwise."""
    if not fancy_progress():

        def start_plain(prompt_set: Any) -> None:
            click.echo(f"Running {prompt_set.id}: {len(prompt_set.prompts)} prompts", err=True)

        yield (lambda item: None), start_plain
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=stderr_console(), transient=True,
    ) as bar:  # fmt: skip
        task = bar.add_task("running", total=total)

        def start(prompt_set: Any) -> None:
            bar.update(task, description=prompt_set.id)

        yield (lambda item: bar.advance(task)), start


def emit(runs: Sequence[Any], fail_on_regression: bool, fmt: str, output: str | None, junit: str | None) -> None:
    from evalkit.compare import gate_of
    from evalkit.report.jsonout import documents, envelope

    gates = [gate_of(r.comparison, fail_on_regression) for r in runs]
    envelopes = [envelope(r, g) for r, g in zip(runs, gates, strict=True)]
    if fmt == "json":
        click.echo(documents(envelopes))
    else:
        from evalkit.report.render import render_any, render_matrix

        console = stdout_console()
        side_by_side = len({r.set_id for r in runs}) < len(runs)
        if side_by_side:
            render_matrix(console, runs)
        for index, (run, gate) in enumerate(zip(runs, gates, strict=True)):
            if index and not side_by_side:
                console.print()
            render_any(console, run, gate, compact=side_by_side)
    if output:
        write_output(Path(output), documents(envelopes) + "\n")
    if junit:
        from evalkit.report.junit import junit_xml

        write_output(Path(junit), junit_xml(runs))


def check_writable(*paths: str | None) -> None:
    """--output and --junit must be writable before anything runs (exit 2 otherwise)."""
    from evalkit.errors import InputError

    for path in filter(None, paths):
        target = Path(path)
        try:
            folder = target.resolve().parent
            while not folder.exists():
                folder = folder.parent
            usable = folder.is_dir() and os.access(folder, os.W_OK) and not target.is_dir()
            usable = usable and (not target.exists() or os.access(target, os.W_OK))
        except OSError as exc:  # a name too long for the file system, a loop of links
            raise InputError(f"{path}: cannot write this file ({exc.strerror}); choose another path") from None
        if not usable:
            raise InputError(f"{path}: cannot write this file; choose another path")


def write_output(path: Path, text: str) -> None:
    from evalkit.errors import RunError

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise RunError(f"{path}: cannot write ({exc.strerror}); the run itself was stored") from exc


def exit_code(runs: Sequence[Any], fail_on_regression: bool) -> int:
    """3 when items errored; 1 when a requested gate failed; else 0."""
    from evalkit.compare import gate_passed

    if any(r.error_count for r in runs):
        return 3
    if not all(gate_passed(r.comparison, fail_on_regression) for r in runs):
        return 1
    return 0


COMMANDS = [run_command]
