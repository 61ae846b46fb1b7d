"""``evalkit run``: run prompt sets, grade, compare with the baseline, store, report."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from evalkit.cli.options import (
    GateChoice,
    batch_options,
    config_option,
    db_option,
    fancy_progress,
    format_option,
    gate_options,
    report_file_options,
    stderr_console,
    stdout_console,
)
from evalkit.errors import InputError, RunsNotStored
from evalkit.memory import loading, storing
from evalkit.report.text import printable

if TYPE_CHECKING:
    from evalkit.api import RunPlan
    from evalkit.cli.progress import ProgressHooks
    from evalkit.config import Config


@click.command("run")
@click.argument("targets", nargs=-1, required=True, metavar="SET...")
@click.option(
    "--provider", "providers", multiple=True, metavar="ID",
    help="Provider instance from evalkit.yaml (default: default_provider); repeat it to compare several side by side.",
)  # fmt: skip
@click.option("--model", metavar="ALIAS", help="Model alias to send (overrides the instance's model).")
@click.option("--grader", default="deterministic", show_default=True, help="deterministic | decision.")
@click.option("--judge", metavar="ID", help="Provider instance of the decision grader (default: decision.provider).")
@gate_options()
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
    help="With --fail-on-regression, a drop beyond the tolerance fails when the paired test finds it significant at "
    "ALPHA, or cannot decide (too few changed items: the tolerance verdict stands).",
)  # fmt: skip
@click.option(
    "--shard", metavar="I/N",
    help="Run only shard I of N (a stable split by prompt); evalkit gate compares and gates the merged shards.",
)  # fmt: skip
@click.option(
    "--run-group", metavar="ID",
    help="The sharded run's group (default: $GITHUB_RUN_ID-$GITHUB_RUN_ATTEMPT, else $CI_PIPELINE_ID).",
)  # fmt: skip
@click.option(
    "--batch", is_flag=True,
    help="Send the uncached requests as provider batches (openai, anthropic: half price, answered within 24 h).",
)  # fmt: skip
@click.option("--no-wait", is_flag=True, help="With --batch: return once submitted; evalkit collect finishes the run.")
@batch_options
@db_option
@config_option
@format_option("table", "json", "markdown")
@report_file_options
def run_command(
    targets: tuple[str, ...],
    providers: tuple[str, ...],
    model: str | None,
    grader: str,
    judge: str | None,
    gate: GateChoice,
    concurrency: int | None,
    no_cache: bool,
    repeats: int,
    significance: float | None,
    shard: str | None,
    run_group: str | None,
    batch: bool,
    no_wait: bool,
    max_wait: float | None,
    poll_interval: float | None,
    db: str | None,
    config: str | None,
    fmt: str,
    output: str | None,
    junit: str | None,
    markdown: str | None,
    html_file: str | None,
) -> None:
    """Run prompt sets (files, folders or set ids) against a model endpoint."""
    if not batch and (no_wait or max_wait is not None or poll_interval is not None):
        raise click.UsageError("--no-wait, --max-wait and --poll-interval go with --batch")
    outputs = Outputs(fmt, output, junit, markdown)
    if shard is not None and html_file:
        from evalkit.pipeline.shards import GATE_POINTER  # the pipeline's import waits for a run

        raise InputError(f"--html with --shard: {GATE_POINTER}; give --html to evalkit gate instead")
    check_writable(output, junit, markdown, html_file)
    with loading():  # the CLI's collector policy: evalkit/memory.py (the pipeline's modules imported under it too)
        from evalkit import api

        grader_name = api.resolve_grader_name(grader, strict=True)
        cfg = api.load_config(config)
        sets = api.load_prompt_sets(targets, cfg)
        plan = api.plan_run(
            sets, cfg, provider=providers or None, model=model, grader=grader_name, judge=judge, db=db,
            use_cache=not no_cache, concurrency=concurrency, tolerance_overrides=gate.tolerances,
            fail_on_regression=gate.fail_on_regression, repeats=repeats, significance=significance,
            gate_overrides=gate.minimums, baselines=gate.baselines, shard=shard, run_group=run_group,
        )  # fmt: skip
    announce(plan)
    note_concurrency(plan)
    if batch:
        from evalkit.cli.batches import run_batched

        waiting = (poll_interval or cfg.batch_poll_s, max_wait)
        code = run_batched(plan, cfg, outputs, html_file, no_wait=no_wait, waiting=waiting)
        if code is not None:
            sys.exit(code)
    with storing():  # the collector paused but while the runs call (evalkit/memory.py): they are reported, then exit
        runs = carried_out(plan, cfg, outputs, html_file)
        if gate.fail_on_regression:
            note_gate_power(runs)
        reported(runs, plan, cfg, outputs, html_file)
    code = exit_code(runs)
    if code == 3 and fmt != "table":  # the table says so; JSON and markdown on stdout alone would not
        say_errored(runs)
    sys.exit(code)


def carried_out(plan: RunPlan, cfg: Config, outputs: Outputs, html_file: str | None) -> Sequence[Any]:
    """The plan's runs, with their progress shown. Runs the database refused are reported all the
    same, then ``RunsNotStored`` goes on to its exit 3."""
    from evalkit import api

    try:
        with progress_reporter(plan.repeats * len(plan.targets)) as (on_item, on_start):
            runs = api.execute_plan(plan, progress=on_item, on_start=on_start)
    except RunsNotStored as exc:  # carried out, then the database refused them: reported, exit 3
        warn_fallbacks(exc.runs)
        emit(exc.runs, outputs)
        if html_file:
            write_output(Path(html_file), api.html_report(cfg, db=plan.db, runs=exc.runs), stored_note="")
        raise
    warn_fallbacks(runs)
    return runs


def reported(runs: Sequence[Any], plan: RunPlan, cfg: Config, outputs: Outputs, html_file: str | None) -> None:
    """The stored runs' report, on stdout and in the files; an interrupt says what was kept."""
    from evalkit import api

    try:
        emit(runs, outputs)
        if html_file:  # these runs, with the history of their sets when they were stored
            write_output(Path(html_file), api.html_report(cfg, db=plan.db, runs=runs))
    except KeyboardInterrupt:
        stored = f"the runs were stored ({', '.join(r.run_id for r in runs)})" if plan.db else "no run was stored"
        raise KeyboardInterrupt(f"{stored}; the report was cut short (evalkit show RUN_ID prints it again)") from None


def say_errored(runs: Sequence[Any]) -> None:
    """One stderr line for an exit 3: how many items errored, in which runs."""
    errored = sum(r.error_count for r in runs)
    total = sum(len(r.items) for r in runs)
    where = ", ".join(f"{printable(r.set_id)} {r.run_id}: {r.error_count}" for r in runs if r.error_count)
    click.echo(
        f"Error: {errored} of {total} item{'' if total == 1 else 's'} errored ({where}); each item's error says why",
        err=True,
    )


def note_gate_power(runs: Sequence[Any]) -> None:
    """One stderr line per set too small for its regression gate to catch the drop its
    tolerance allows (said once, however many providers ran it)."""
    from evalkit.compare import power_note

    first: dict[str, Any] = {}
    for run in runs:
        first.setdefault(run.set_id, run)
    for run in first.values():
        note = power_note(run)
        if note is not None:
            click.echo(printable(note), err=True)


def announce(plan: Any) -> None:
    if plan.provider.implicit:
        where = (
            "the local model (no provider configured)"
            if plan.provider.adapter == "local"
            else "OpenAI from the environment"
        )
        click.echo(f"Using {where}: {plan.provider.id}/{printable(plan.alias)}", err=True)


def note_concurrency(plan: Any) -> None:
    """One stderr line when --concurrency asks for more calls in flight than an HTTP instance's
    max_concurrency allows: its connections cap them, and a silent cap reads as a slow endpoint."""
    if plan.concurrency is None:
        return
    capped = [
        f"'{printable(t.provider.id)}' ({t.provider.max_concurrency})"
        for t in plan.targets
        if t.provider.adapter in ("openai", "anthropic") and plan.concurrency > t.provider.max_concurrency
    ]
    if capped:
        click.echo(
            f"Note: --concurrency {plan.concurrency} is above max_concurrency of {', '.join(capped)}: "
            "at most that many calls are in flight (raise max_concurrency in evalkit.yaml)",
            err=True,
        )


def warn_fallbacks(runs: Sequence[Any]) -> None:
    """One stderr line per run whose fallback answered some prompts: a silent fallback would pass
    off another model's answers as the primary's."""
    for run in runs:
        served: dict[str, int] = {}
        for item in run.items:
            if item.serving is not None and item.serving.provider != run.provider:
                served[item.serving.provider] = served.get(item.serving.provider, 0) + 1
        if served:
            noun = "prompt" if run.repeats == 1 else "sample"
            total = len(run.items)
            to = " and ".join(f"'{printable(name)}' for {count}" for name, count in served.items())
            click.echo(
                f"Warning: {run.set_id}: provider '{printable(run.provider)}' fell back to {to} "
                f"of {total} {noun}{'' if total == 1 else 's'} (its own calls failed)",
                err=True,
            )


def progress_reporter(samples_per_prompt: int) -> AbstractContextManager[ProgressHooks]:
    """A rich bar per set on a terminal; plain lines on stderr otherwise (README "Commands")."""
    from evalkit.cli.progress import progress_reporter as reporter

    fancy = fancy_progress()
    return reporter(samples_per_prompt, fancy=fancy, console=stderr_console() if fancy else None)


ECHOED_PARTS = 1_000  # parts of a JSON report joined per write to stdout


@dataclass(frozen=True, slots=True)
class Outputs:
    """Where a report goes: the format on stdout and the files asked for."""

    fmt: str
    output: str | None = None
    junit: str | None = None
    markdown: str | None = None


def emit(runs: Sequence[Any], outputs: Outputs) -> None:
    """The report of runs whose gate is decided (``run.gate``), on stdout and in the files."""
    from evalkit.report.jsonout import document_parts, envelope

    envelopes = [envelope(r, r.gate, lazy=True) for r in runs]
    parts = document_parts(envelopes) if outputs.fmt == "json" or outputs.output else []
    if outputs.fmt == "json":
        for start in range(0, len(parts), ECHOED_PARTS):  # the text never joined whole
            click.echo("".join(parts[start : start + ECHOED_PARTS]), nl=False)
        click.echo()
    elif outputs.fmt == "markdown":
        from evalkit.report.markdown import runs_markdown

        click.echo(runs_markdown(runs), nl=False)
    else:
        from evalkit.report.render import render_any, render_matrix

        console = stdout_console()
        side_by_side = len({r.set_id for r in runs}) < len(runs)
        if side_by_side:
            render_matrix(console, runs)
        for index, run in enumerate(runs):
            if index and not side_by_side:
                console.print()
            render_any(console, run, run.gate, compact=side_by_side)
    if outputs.output:
        write_output(Path(outputs.output), [*parts, "\n"])
    if outputs.junit:
        from evalkit.report.junit import junit_xml

        write_output(Path(outputs.junit), junit_xml(runs))
    if outputs.markdown:
        from evalkit.report.markdown import runs_markdown

        write_output(Path(outputs.markdown), runs_markdown(runs))


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


def write_output(path: Path, text: str | list[str], stored_note: str = "; the run itself was stored") -> None:
    """``text``, or its parts one after the other, written to ``path``."""
    from evalkit.errors import RunError

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as handle:
            handle.writelines([text] if isinstance(text, str) else text)
    except OSError as exc:
        raise RunError(f"{path}: cannot write ({exc.strerror}){stored_note}") from exc


def exit_code(runs: Sequence[Any]) -> int:
    """3 when items errored; 1 when a gate failed (a requested regression gate, or an absolute
    gate, which every run has); else 0."""
    if any(r.error_count for r in runs):
        return 3
    if not all(r.gate is None or r.gate.passed for r in runs):
        return 1
    return 0


COMMANDS = [run_command]
