"""Rich tables for a terminal: a run, the history of a set, the per-set report.

Everything shown is data from users and endpoints (answers, ids, models, error texts): through
``SafeConsole`` and this module's ``Text`` no string is read as markup or emoji codes, and what a
terminal would act on (escape sequences, bidi overrides) is shown as escapes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.style import Style
from rich.table import Table
from rich.text import Text as RichText

from evalkit.records import BaselineFile, Comparison, RetrievalRunResult, RunResult
from evalkit.report.text import (
    clip,
    comparison_lines,
    instance,
    outcome_label,
    percent,
    printable,
    sparkline,
    verdict_label,
)
from evalkit.report.toolcalls import calls_line
from evalkit.rows import RankedModel, RunComparison, RunRow, SetSummary
from evalkit.verdicts import ComparisonState, GateVerdict

MAX_LISTED = 100


class Text(RichText):
    """rich's Text over printable text (``Text.assemble`` appends through ``append`` too)."""

    def __init__(self, text: str = "", *args: Any, **kwargs: Any) -> None:
        super().__init__(printable(text), *args, **kwargs)

    def append(self, text: str | RichText, style: str | Style | None = None) -> RichText:
        return super().append(printable(text) if isinstance(text, str) else text, style)


class SafeConsole(Console):
    """A Console whose strings (cells, titles, printed lines) are text, never markup or emoji
    codes, and printable."""

    def __init__(self, **options: Any) -> None:
        super().__init__(markup=False, emoji=False, **options)

    def render_str(self, text: str, **options: Any) -> RichText:
        return super().render_str(printable(text), **options)


def dollars(amount: float) -> str:
    """A cost in USD: four decimals, or two significant digits below a cent ($0.00042, not $0.0000)."""
    import math

    if 0 < abs(amount) < 0.01:
        return f"${amount:.{max(4, 1 - math.floor(math.log10(abs(amount))))}f}"
    return f"${amount:.4f}"


def verdict_style(state: str | None, regressed: bool | None) -> str:
    if regressed:
        return "bold red"
    known = ComparisonState.read(state)
    if known is None or not known.comparable:
        return "yellow"
    return "cyan" if known.is_baseline else "green"


def _item_table(run: RunResult) -> tuple[Table, int]:
    table = Table(show_edge=False, header_style="bold", pad_edge=False)
    for name, justify in (
        ("prompt", "left"),
        ("result", "left"),
        ("score", "right"),
        ("latency", "right"),
        ("reason", "left"),
    ):
        table.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
    items = run.items
    hidden = 0
    if len(items) > MAX_LISTED:
        failing = [i for i in items if not i.passed]
        hidden = len(items) - len(failing[:MAX_LISTED])
        items = tuple(failing[:MAX_LISTED])
    for item in items:
        if item.errored:
            result = Text("ERROR", style="bold magenta")
        elif item.passed:
            result = Text("PASS", style="green")
        else:
            result = Text("FAIL", style="bold red")
        latency = f"{item.latency_ms:.0f} ms" if item.latency_ms is not None else "—"
        if item.cached:
            latency += " (cached)"
        reason = Text(clip(item.reason, 200))
        if not item.passed and not item.errored and item.response is not None:
            reason.append(f"\nanswer: {clip(item.response, 200)}", style="dim")
        if item.tool_calls:
            reason.append(f"\n{calls_line(item.tool_calls)}", style="dim")
        table.add_row(item.id, result, f"{item.score:.2f}", latency, reason)
    return table, hidden


def _repeat_table(run: RunResult) -> Table:
    from evalkit.report.summary import prompt_outcomes

    table = Table(show_edge=False, header_style="bold", pad_edge=False)
    for name in ("prompt", f"pass@{run.repeats}", f"pass^{run.repeats}", "passed", "flaky", "mean score", "a failure"):
        table.add_column(name, justify="right" if name in ("passed", "mean score") else "left", overflow="fold")
    outcomes = prompt_outcomes(run)
    shown = outcomes if len(outcomes) <= MAX_LISTED else [o for o in outcomes if not o.pass_all][:MAX_LISTED]
    for outcome in shown:
        failing = next((s for s in outcome.samples if not s.passed), None)
        table.add_row(
            outcome.id,
            Text("yes", style="green") if outcome.pass_at_n else Text("no", style="red"),
            Text("yes", style="green") if outcome.pass_all else Text("no", style="red"),
            f"{outcome.passed}/{len(outcome.samples)}",
            Text("flaky", style="yellow") if outcome.flaky else "",
            f"{outcome.mean_score:.2f}",
            clip(failing.reason, 120) if failing else "",
        )
    return table


def render_run(console: Console, run: RunResult, gate: GateVerdict | None = None, *, compact: bool = False) -> None:
    gen = run.generator
    served = (
        f"{gen.provider}/{gen.model} (reported {gen.reported_model})"
        if gen
        else f"{run.provider}/{run.model} (model unknown)"
    )
    console.print(Text.assemble((run.set_id, "bold"), f" · {served} · grader {run.grader} · run {run.run_id}"))
    if run.items and not compact and run.repeats > 1:
        console.print(_repeat_table(run))
    elif run.items and not compact:
        table, hidden = _item_table(run)
        console.print(table)
        if hidden:
            console.print(Text(f"{hidden} passing item{'s' if hidden != 1 else ''} not listed", style="dim"))
    summary = (
        f"Pass rate {percent(run.pass_rate)} ({run.passed_count}/{run.sample_count}) · "
        f"mean score {run.mean_score:.3f} · errors {run.error_count}"
    )
    if run.usage.total:
        summary += f" · tokens {run.usage.input_tokens:,} in / {run.usage.output_tokens:,} out"
    if run.judge_calls and run.grader.startswith("judged"):  # a decision run's gradings: the cache note
        from evalkit.report.summary import judge_calls_note

        summary += f" · {judge_calls_note(run)}"
    if run.grader_usage.total:
        summary += f" · judge tokens {run.grader_usage.input_tokens:,} in / {run.grader_usage.output_tokens:,} out"
    if run.cost is not None:
        summary += f" · cost {dollars(run.cost)}"
    if run.batch is not None:  # README "Batches": the batch price, and what it saved
        saving = run.batch.saving(run.cost)
        saved = (
            f", saving {dollars(saving)} of the standard {dollars(run.batch.standard_cost or 0.0)}" if saving else ""
        )
        if saving and run.batch.judge is not None:
            saved += " (the judge's batches included)"
        summary += f" · batch price ×{run.batch.discount:g}{saved}"
    if run.grader_cost is not None:
        summary += f" · judge cost {dollars(run.grader_cost)}"
    if run.items:  # a gate decided on replayed answers says so (docs/contract.md "The completion cache")
        from evalkit.report.summary import cache_note

        summary += f" · {cache_note(run)}"
    console.print(summary)
    if run.repeats > 1 and run.items:
        from evalkit.report.summary import repeat_summary

        rs = repeat_summary(run)
        low, high = rs.pass_rate_ci
        console.print(
            f"Over {run.repeats} repeats: pass rate {percent(run.pass_rate)} (95% CI {percent(low)} … {percent(high)}) · "
            f"pass@{run.repeats} {percent(rs.pass_at_n_rate)} · pass^{run.repeats} {percent(rs.pass_all_rate)} · "
            f"flaky prompts {rs.flaky}"
        )
    from evalkit.report.summary import stale_cache_note

    render_verdict(console, run.comparison, gate, stale_cache_note(run, gate))


def render_verdict(console: Console, comparison: Comparison | None, gate: GateVerdict | None, stale: str = "") -> None:
    """The comparison's verdict in words (``stale``: what it rests on, when that is a cache stored
    before the run), the prompts that flipped, and the gate: every failure when it failed, a line
    when a requested regression gate or an absolute gate held."""
    if comparison is not None:
        reason, style = comparison.reason, verdict_style(comparison.state, comparison.regressed)
        if stale:
            reason, style = f"{reason.rstrip('.')}, {stale}.", "yellow"
        console.print(Text(reason, style=style))
        for line, style in flip_lines(comparison):
            console.print(Text(line, style=style))
    if gate is None:
        return
    if gate.failures:
        console.print(Text("Gate: FAILED", style="bold red"))
        for failure in gate.reasons():
            console.print(Text(f"  - {failure}", style="red"))
    elif gate.fail_on_regression:
        console.print(Text("Gate: passed", style="green"))


def flip_lines(comparison: Comparison) -> list[tuple[str, str]]:
    """One line per kind of flip against the baseline, with its ids (the first MAX_LISTED)."""
    flips = comparison.flips
    if flips is None:
        return []
    lines = []
    for label, ids, style in (
        ("Regressed (passed in the baseline, fail now)", flips.regressed, "bold red"),
        ("Fixed (failed in the baseline, pass now)", flips.fixed, "green"),
        ("Added since the baseline", flips.added, "yellow"),
        ("Removed since the baseline", flips.removed, "yellow"),
    ):
        if ids:
            shown = ", ".join(ids[:MAX_LISTED]) + (f", … ({len(ids)} in all)" if len(ids) > MAX_LISTED else "")
            lines.append((f"{label}: {shown}", style))
    return lines


def render_history(console: Console, set_id: str, rows: Sequence[RunRow]) -> None:
    if not rows:
        console.print(f"No stored runs for {set_id}.")
        return
    console.print(
        Text.assemble(
            (set_id, "bold"),
            f" · {len(rows)} run{'s' if len(rows) != 1 else ''} · trend {sparkline([r.pass_rate for r in reversed(rows)])}",
        )
    )
    names = ("run", "started", "provider/model", "reported", "grader", "pass rate", "mean", "errors", "verdict")
    cells: list[list[str | RichText]] = [
        [
            r.run_id, r.started_at, instance(r.provider, r.model), r.reported_model or "—", r.grader,
            rate_cell(r), mean_cell(r), str(r.error_count),
            Text(verdict_label(r.comparison_state, r.regressed), style=verdict_style(r.comparison_state, r.regressed)),
        ]
        for r in rows
    ]  # fmt: skip
    print_fitted(console, None, names, cells, numeric=("pass rate", "mean", "errors"))


def rate_cell(row: RunRow) -> str:
    """A history row's pass rate; a retrieval run's is its top-1 hit rate and says so."""
    text = percent(row.pass_rate)
    return f"{text} (top-1)" if row.kind == "retrieval" else text


def mean_cell(row: RunRow) -> str:
    """A history row's mean score; a retrieval run's is its top-3 hit rate and says so."""
    text = f"{row.mean_score:.3f}"
    return f"{text} (top-3)" if row.kind == "retrieval" else text


def privacy_hint(level: str | None) -> str | None:
    """Why ``show`` prints no answers (or no items) for a run, and which level would keep them."""
    if level == "metadata":
        return (
            "No answers shown: this run was stored at privacy 'metadata' (no prompt or answer text). "
            "Set privacy: redacted (texts with secrets masked) or privacy: full in evalkit.yaml to keep "
            "them in later runs."
        )
    if level == "none":
        return (
            "No items shown: this run was stored at privacy 'none' (aggregates only). Set privacy: metadata "
            "in evalkit.yaml to keep per-item verdicts in later runs, or redacted / full to keep the answers too."
        )
    return None


def render_summaries(console: Console, summaries: Sequence[SetSummary]) -> None:
    if not summaries:
        console.print("No stored runs yet. Run a set with: evalkit run sets/")
        return
    names = ("set", "latest run", "provider/model", "grader", "pass rate", "mean", "trend", "baseline", "verdict")
    cells: list[list[str | RichText]] = []
    for summary in summaries:
        r = summary.latest
        verdict = verdict_label(r.comparison_state, r.regressed)
        cells.append([
            r.set_id, r.run_id, instance(r.provider, r.model), r.grader, rate_cell(r),
            mean_cell(r), sparkline(summary.trend), r.baseline_run_id or "—",
            Text(verdict, style=verdict_style(r.comparison_state, r.regressed)),
        ])  # fmt: skip
    print_fitted(console, "Latest run per set", names, cells, numeric=("pass rate", "mean"))


WHOLE = ("set", "run", "latest run", "baseline", "verdict", "pass rate", "mean", "errors")  # never cut or folded
NARROWEST_FOLD = 8  # a column that wraps is not folded narrower than this to make a table fit


def print_fitted(
    console: Console,
    title: str | None,
    names: Sequence[str],
    rows: Sequence[Sequence[str | RichText]],
    *,
    numeric: Sequence[str] = (),
) -> None:
    """A table whose ids, verdicts and figures are never cut (the other columns fold), when the
    console is wide enough for that; else one block per row, ids whole on their own lines, so an
    id can always be copied into ``show`` or ``compare``."""
    from rich.cells import cell_len

    def width(cell: str | RichText) -> int:
        plain = cell.plain if isinstance(cell, RichText) else printable(cell)
        return max((cell_len(line) for line in plain.splitlines()), default=0)

    needed = 3 * (len(names) - 1)  # padding and the rule between columns
    for index, name in enumerate(names):
        widest = max([width(name), *(width(row[index]) for row in rows)])
        needed += widest if name in WHOLE else min(widest, NARROWEST_FOLD)
    if needed <= console.width:
        table = Table(show_edge=False, header_style="bold", pad_edge=False, title=title, title_justify="left")
        for name in names:
            table.add_column(
                name, justify="right" if name in numeric else "left", overflow="fold", no_wrap=name in WHOLE
            )  # fmt: skip
        for row in rows:
            table.add_row(*row)
        console.print(table)
        return
    if title:
        console.print(Text(title, style="bold"))
    ids = [i for i, name in enumerate(names) if i and name in ("latest run", "baseline")]
    for row in rows:
        head = Text(row[0], style="bold") if isinstance(row[0], str) else row[0]
        console.print(Text.assemble(head, "  ", row[-1]) if names[-1] == "verdict" else head)
        rest = [i for i in range(1, len(names) - (names[-1] == "verdict")) if i not in ids]
        for part in ([ids] if ids else []) + [rest]:
            joined = Text(" · ").join(Text.assemble(f"{names[i]} ", row[i]) for i in part)
            for line in joined.wrap(console, max(1, console.width - 2)):
                line.rstrip()
                console.print(Text.assemble("  ", line))


def _rates_table(title: str, rows: Mapping[str, Mapping[str, float | int]]) -> Table:
    table = Table(show_edge=False, header_style="bold", pad_edge=False, title=title, title_justify="left")
    for name in ("group", "questions", "top-1", "top-3"):
        table.add_column(name, justify="left" if name == "group" else "right")
    for group, rates in rows.items():
        table.add_row(
            group,
            str(rates["questions"]),
            percent(float(rates["top1_hit_rate"])),
            percent(float(rates["top3_hit_rate"])),
        )
    return table


def render_retrieval(console: Console, run: RetrievalRunResult, gate: GateVerdict | None = None) -> None:
    console.print(Text.assemble((run.set_id, "bold"), f" · retriever {run.retriever} · run {run.run_id}"))
    table = Table(show_edge=False, header_style="bold", pad_edge=False)
    for name in ("question", "form", "hard class", "top-1", "top-3", "retrieved"):
        table.add_column(name, overflow="fold")
    items = run.items if len(run.items) <= MAX_LISTED else tuple(i for i in run.items if not i.top3_hit)[:MAX_LISTED]
    for item in items:
        table.add_row(
            item.id, item.form, item.hard_class or "—",
            Text("hit", style="green") if item.top1_hit else Text("miss", style="red"),
            Text("hit", style="green") if item.top3_hit else Text("miss", style="red"),
            Text(f"error: {clip(item.error, 120)}", style="magenta") if item.error else ", ".join(item.retrieved) or "(nothing)",
        )  # fmt: skip
    console.print(table)
    if len(items) < len(run.items):
        unlisted = len(run.items) - len(items)
        plural = "s" if unlisted != 1 else ""
        console.print(Text(f"{unlisted} question{plural} with a top-3 hit not listed", style="dim"))
    console.print(
        f"Top-1 hit rate {percent(run.top1_hit_rate)} ({run.top1_hits}/{run.question_count}) · "
        f"top-3 hit rate {percent(run.top3_hit_rate)} ({run.top3_hits}/{run.question_count}) · errors {run.error_count}"
    )
    metrics = " · ".join(f"{name} {value:.3f}" for name, value in run.metrics.items())
    left_out = f"; {run.left_out} without expected ids left out" if run.left_out else ""
    console.print(f"{metrics} (over {run.scored} question{'s' if run.scored != 1 else ''}{left_out})")
    console.print(_rates_table("By form", run.by_form))
    if run.by_hard_class:
        console.print(_rates_table("By hard class", run.by_hard_class))
    prov = run.provenance
    console.print(
        Text(
            f"corpus {prov.get('corpus_revision') or 'unknown'} · model {prov.get('model_revision') or 'unknown'} · "
            f"chunking {prov.get('chunking') or 'unknown'} · pipeline {prov.get('pipeline') or 'unknown'} · "
            f"benchmark {run.benchmark_fingerprint or 'unknown'}",
            style="dim",
        )
    )
    render_verdict(console, run.comparison, gate)


def render_any(
    console: Console,
    run: RunResult | RetrievalRunResult,
    gate: GateVerdict | None = None,
    *,
    compact: bool = False,
) -> None:
    if isinstance(run, RetrievalRunResult):
        render_retrieval(console, run, gate)
    else:
        render_run(console, run, gate, compact=compact)


def render_matrix(console: Console, runs: Sequence[RunResult]) -> None:
    """Prompts x providers, one table per set run on several instances."""
    by_set: dict[str, list[RunResult]] = {}
    for run in runs:
        by_set.setdefault(run.set_id, []).append(run)
    for set_id, group in by_set.items():
        if len(group) < 2:
            continue
        table = Table(
            show_edge=False,
            header_style="bold",
            pad_edge=False,
            title=f"{set_id}: prompts x providers",
            title_justify="left",
        )
        table.add_column("prompt")
        for run in group:
            table.add_column(f"{run.provider}/{run.model}", justify="center")
        cells: dict[str, dict[str, Text]] = {}
        for run in group:
            grouped: dict[str, list[Any]] = {}
            for item in run.items:
                grouped.setdefault(item.id, []).append(item)
            for item_id, samples in grouped.items():
                passed = sum(1 for s in samples if s.passed)
                if any(s.errored for s in samples):
                    cell = Text("ERROR", style="magenta")
                elif len(samples) > 1:
                    cell = Text(
                        f"{passed}/{len(samples)}",
                        style="green" if passed == len(samples) else "red" if not passed else "yellow",
                    )
                else:
                    cell = Text("PASS", style="green") if passed else Text("FAIL", style="bold red")
                cells.setdefault(item_id, {})[run.run_id] = cell
        for item_id, row in cells.items():
            table.add_row(item_id, *(row.get(run.run_id, Text("—")) for run in group))
        table.add_row(Text("pass rate", style="bold"), *(Text(percent(run.pass_rate), style="bold") for run in group))
        table.add_row("mean score", *(f"{run.mean_score:.3f}" for run in group))
        console.print(table)
        console.print()


def render_models(console: Console, policy: str, ranked: Sequence[RankedModel[Any]]) -> None:
    if not ranked:
        console.print("No provider instances to rank (none configured, or none above --min-quality).")
        return
    table = Table(
        show_edge=False, header_style="bold", pad_edge=False, title=f"Models by {policy}", title_justify="left"
    )
    for name in ("rank", "provider", "model", "priority", "quality", "sets", "cost in/out per Mtok"):
        table.add_column(name, justify="right" if name in ("rank", "priority", "quality", "sets") else "left")
    for r in ranked:
        cost = f"${r.cost['input_per_mtok']:g} / ${r.cost['output_per_mtok']:g}" if r.cost else "—"
        quality = "unknown" if r.quality is None else f"{r.quality:.3f}"
        table.add_row(str(r.rank), r.provider, r.model, str(r.priority), quality, str(r.sets), cost)
    console.print(table)


def render_comparison(console: Console, result: RunComparison) -> None:
    for label, run in (("first ", result.first), ("second", result.second)):
        console.print(
            f"{label} {run.run_id} · {run.set_id} · {instance(run.provider, run.model)} · {run.grader} · {run.started_at}"
        )
    for line in comparison_lines(result):
        console.print(line)
    if not result.flips:
        console.print("No item changed.")
        return
    table = Table(
        show_edge=False, header_style="bold", pad_edge=False, title="Items that changed", title_justify="left"
    )
    if result.first.kind == "retrieval":  # passed = top-1 hit, score = top-3 hit
        for name in ("question", "first top-1", "second top-1", "first top-3", "second top-3"):
            table.add_column(name)
        for flip in result.flips:
            table.add_row(
                flip.id, *(_hit_cell(rate) for rate in (flip.first_pass_rate, flip.second_pass_rate)),
                *(_hit_cell(score) for score in (flip.first_score, flip.second_score)),
            )  # fmt: skip
        console.print(table)
        return
    for name in ("item", "first", "second", "score delta"):
        table.add_column(name, justify="right" if name == "score delta" else "left")
    for flip in result.flips:
        table.add_row(
            flip.id,
            _pass_cell(flip.first_pass_rate),
            _pass_cell(flip.second_pass_rate),
            f"{flip.second_score - flip.first_score:+.3f}",
        )
    console.print(table)


def _hit_cell(rate: float) -> Text:
    return _pass_cell(rate, retrieval=True)


def _pass_cell(rate: float, retrieval: bool = False) -> Text:
    style = ("red", "green")[int(rate)] if rate in (0.0, 1.0) else "yellow"
    return Text(outcome_label(rate, retrieval), style=style)


def render_baselines(console: Console, files: Sequence[BaselineFile], set_id: str | None) -> None:
    """``evalkit baseline show``: every accepted entry, per set."""
    if not files:
        console.print(f"No baseline file for {set_id}." if set_id else "No baseline files.")
        return
    table = Table(show_edge=False, header_style="bold", pad_edge=False)
    for name in ("set", "provider/model", "reported model", "grader", "run", "pass rate", "mean", "accepted"):
        table.add_column(name, overflow="fold", justify="right" if name in ("pass rate", "mean") else "left")
    for baseline_file in files:
        for e in baseline_file.entries:
            table.add_row(
                baseline_file.set_id, instance(e.provider, e.model), e.reported_model, e.grader, e.run_id,
                f"{percent(e.pass_rate)} ({e.passed_count}/{e.prompt_count * e.repeats})", f"{e.mean_score:.3f}",
                e.accepted_at,
            )  # fmt: skip
    console.print(table)
