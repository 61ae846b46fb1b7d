"""``run --batch`` and ``evalkit collect``: provider batches submitted now, graded and reported
later exactly like ``run`` (README "Batches")."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from evalkit.cli.options import (
    GateChoice,
    batch_options,
    config_option,
    db_option,
    format_option,
    gate_options,
    report_file_options,
)
from evalkit.cli.run import Outputs, check_writable, emit, exit_code, note_gate_power, say_errored, write_output
from evalkit.report.text import printable

if TYPE_CHECKING:
    from evalkit.config import Config
    from evalkit.pipeline.collect import Collected
    from evalkit.providers.batches import BatchStatus
    from evalkit.records import PendingBatch

STATUS_EVERY_S = 10.0  # off a terminal, a progress line at least this often (README "Commands")


class StatusLines:
    """A batch's progress on stderr: when it changes, and at least every 10 s."""

    def __init__(self) -> None:
        self._said: dict[str, tuple[int, float]] = {}

    def __call__(self, batch: PendingBatch, status: BatchStatus, waited: float) -> None:
        last = self._said.get(batch.batch_id)
        now = time.monotonic()
        if last is not None and last[0] == status.done and now - last[1] < STATUS_EVERY_S:
            return
        self._said[batch.batch_id] = (status.done, now)
        total = status.total or batch.request_count
        click.echo(
            f"{_label(batch)} {batch.batch_id} ('{printable(batch.provider)}'): {status.done}/{total} requests done "
            f"({printable(status.detail)}), {waited:.0f} s",
            err=True,
        )


def _label(batch: PendingBatch) -> str:
    return "judge batch" if batch.phase == "judge" else "batch"


def say_submitted(batches: Sequence[PendingBatch]) -> None:
    """A line on stderr for each batch just submitted: the prompts', or the judge's."""
    for batch in batches:
        click.echo(
            f"Submitted {_label(batch)} {batch.batch_id}: {batch.request_count} "
            f"{'judge ' if batch.phase == 'judge' else ''}requests to '{printable(batch.provider)}'",
            err=True,
        )


def run_batched(
    plan: Any,
    cfg: Config,
    outputs: Outputs,
    html_file: str | None,
    *,
    no_wait: bool,
    waiting: tuple[float, float | None],
) -> int | None:
    """``run --batch``: submit, then (unless ``no_wait``) wait, collect and report. None when the
    cache answers every request: the run goes on as a plain run."""
    from evalkit import api

    batches = api.submit_batches(plan)
    if not batches:
        click.echo("Every answer is in the cache: no batch was needed.", err=True)
        return None
    if all(b.phase == "judge" for b in batches):
        click.echo("Every answer is in the cache: only the judge's requests go as batches.", err=True)
    say_submitted(batches)
    ids = " ".join(b.batch_id for b in batches)
    if no_wait:
        click.echo(f"submitted: collect with `evalkit collect` (or evalkit collect {ids})", err=True)
        return 0
    try:
        collected = api.collect_batches(
            cfg, batches, db=plan.db, wait=True, poll_interval=waiting[0], max_wait=waiting[1],
            on_status=StatusLines(), plan=plan, on_submit=say_submitted,
        )  # fmt: skip
    except KeyboardInterrupt:
        raise KeyboardInterrupt(f"the batch stays pending; collect it with `evalkit collect {ids}`") from None
    gate_asked = plan.fail_on_regression or bool(plan.gate_overrides)
    return report_collected(collected, cfg, outputs, html_file, db=plan.db, waited=True, gate_asked=gate_asked)


def report_collected(
    collected: Sequence[Collected],
    cfg: Config,
    outputs: Outputs,
    html_file: str | None,
    *,
    db: Path | None,
    waited: bool,
    gate_asked: bool,
) -> int:
    """The collected runs reported like ``run``'s; the rest said on stderr. The exit code."""
    from evalkit import api

    for item in collected:
        ids = " ".join(b.batch_id for b in item.batches)
        if item.earlier:
            stored = ", ".join(item.batches[0].run_ids) or "no run"
            click.echo(f"Batch {ids} was collected before ({stored}): nothing stored again.", err=True)
        elif item.pending:
            click.echo(
                f"Batch {ids}: {_progress(item)}; it stays pending: collect it later with `evalkit collect {ids}`",
                err=True,
            )
    runs = [r for item in collected for r in item.runs]
    code = 0
    if runs:
        if any(r.gate is not None and r.gate.fail_on_regression for r in runs):
            note_gate_power(runs)
        emit(runs, outputs)
        if html_file:
            write_output(Path(html_file), api.html_report(cfg, db=db, runs=runs))
        code = exit_code(runs)
        if code == 3 and outputs.fmt != "table":
            say_errored(runs)
    if waited and gate_asked and any(item.pending for item in collected):
        code = max(code, 3)  # a gate was asked for and there is no verdict yet
    return code


def _progress(item: Collected) -> str:
    """How far a pending submission is: its answers, or once they are in, its judge's requests."""
    judging = [b for b in item.batches if b.phase == "judge"]
    shown = judging or item.batches
    done = sum(item.statuses[b.batch_id].done for b in shown)
    total = sum(item.statuses[b.batch_id].total or b.request_count for b in shown)
    if judging:
        return f"the answers are in, the judge's batches are in progress ({done}/{total} judge requests done)"
    return f"still in progress ({done}/{total} requests done)"


@click.command("collect")
@click.argument("batch_ids", nargs=-1, metavar="[BATCH_ID...]")
@click.option("--wait", is_flag=True, help="Wait for batches still in progress (see --max-wait).")
@batch_options
@gate_options(defaults="as submitted")
@db_option
@config_option
@format_option("table", "json", "markdown")
@report_file_options
def collect_command(
    batch_ids: tuple[str, ...],
    wait: bool,
    max_wait: float | None,
    poll_interval: float | None,
    gate: GateChoice,
    db: str | None,
    config: str | None,
    fmt: str,
    output: str | None,
    junit: str | None,
    markdown: str | None,
    html_file: str | None,
) -> None:
    """Fetch finished provider batches (default: every pending one), then grade, store, compare and gate."""
    from evalkit import api
    from evalkit.config import db_path

    outputs = Outputs(fmt, output, junit, markdown)
    check_writable(output, junit, markdown, html_file)
    cfg = api.load_config(config)
    batches = api.pending_batches(cfg, batch_ids, db=db)
    if not batches:
        click.echo(f"No pending batch in {db_path(cfg, db)}: nothing to collect.", err=True)
        sys.exit(0)
    try:
        collected = api.collect_batches(
            cfg, batches, db=db, fail_on_regression=gate.fail_on_regression, tolerance_overrides=gate.tolerances,
            gate_overrides=gate.minimums, baselines=gate.baselines, wait=wait, poll_interval=poll_interval,
            max_wait=max_wait, on_status=StatusLines(), on_submit=say_submitted,
        )  # fmt: skip
    except KeyboardInterrupt:
        ids = " ".join(dict.fromkeys(b.batch_id for b in batches if b.state == "pending"))
        raise KeyboardInterrupt(f"the batches stay pending; collect them with `evalkit collect {ids}`") from None
    gate_asked = gate.asked or any(b.plan.get("fail_on_regression") or b.plan.get("gate_overrides") for b in batches)
    sys.exit(
        report_collected(collected, cfg, outputs, html_file, db=db_path(cfg, db), waited=wait, gate_asked=gate_asked)
    )


COMMANDS = [collect_command]
