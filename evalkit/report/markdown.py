"""Markdown for a CI comment: a run, the history of a set, the per-set report."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from evalkit.records import RetrievalRunResult, RunResult
from evalkit.report.text import clip, instance, percent, printable, sparkline


def _inline(text: str) -> str:
    """Data on one markdown line: every line break a space (CR included), no HTML (a ``<!--``
    in an answer would hide the rest of a comment), terminal controls as escapes."""
    return printable(" ".join(text.split())).replace("&", "&amp;").replace("<", "&lt;")


def _cell(text: str) -> str:
    return _inline(text).replace("|", "\\|")


def _code(text: str) -> str:
    """``text`` as inline code, its fence longer than any run of backticks inside."""
    text = _inline(text)
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    return f"{fence} {text} {fence}" if "`" in text else f"`{text}`"


def run_markdown(run: RunResult) -> str:
    gen = run.generator
    served = (
        f"{gen.provider}/{_inline(gen.model)} (reported {_code(gen.reported_model or '')})"
        if gen
        else f"{run.provider}/{_inline(run.model)} (model unknown)"
    )
    lines = [
        f"### {run.set_id} · run `{run.run_id}`",
        "",
        f"{served} · grader `{run.grader}`",
        "",
        f"**Pass rate {percent(run.pass_rate)}** ({run.passed_count}/{run.sample_count}) · mean score {run.mean_score:.3f} · errors {run.error_count}",
    ]
    if run.comparison is not None:
        lines += ["", f"> {_inline(run.comparison.reason)}"]
    failing = [i for i in run.items if not i.passed]
    if failing:
        lines += ["", "| prompt | result | score | reason |", "|---|---|---:|---|"]
        for item in failing:
            result = "error" if item.errored else "fail"
            lines.append(f"| {_cell(item.id)} | {result} | {item.score:.2f} | {_cell(clip(item.reason, 160))} |")
    return "\n".join(lines) + "\n"


def history_markdown(set_id: str, rows: Sequence[dict[str, Any]]) -> str:
    lines = [f"### {set_id}", "", f"trend {sparkline([r['pass_rate'] for r in reversed(rows)])}", ""]
    lines += [
        "| run | started | provider/model | grader | pass rate | mean | verdict |",
        "|---|---|---|---|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| `{r['run_id']}` | {r['started_at']} | {_cell(instance(r['provider'], r['model']))} | {_cell(r['grader'])} "
            f"| {percent(r['pass_rate'])} | {r['mean_score']:.3f} | {r['comparison_state'] or '—'} |"
        )
    return "\n".join(lines) + "\n"


def summaries_markdown(rows: Sequence[dict[str, Any]]) -> str:
    lines = ["| set | latest run | pass rate | mean | trend | verdict |", "|---|---|---:|---:|---|---|"]
    for r in rows:
        verdict = "**regressed**" if r["regressed"] else (r["comparison_state"] or "—")
        lines.append(
            f"| {_cell(r['set_id'])} | `{r['run_id']}` | {percent(r['pass_rate'])} | {r['mean_score']:.3f} "
            f"| {sparkline(r['trend'])} | {verdict} |"
        )
    return "\n".join(lines) + "\n"


def retrieval_markdown(run: RetrievalRunResult) -> str:
    lines = [
        f"### {run.set_id} · retriever `{run.retriever}` · run `{run.run_id}`",
        "",
        f"**Top-1 {percent(run.top1_hit_rate)}** ({run.top1_hits}/{run.question_count}) · "
        f"top-3 {percent(run.top3_hit_rate)} ({run.top3_hits}/{run.question_count}) · "
        + " · ".join(f"{k} {v:.3f}" for k, v in run.metrics.items()),
    ]
    if run.comparison is not None:
        lines += ["", f"> {_inline(run.comparison.reason)}"]
    lines += ["", "| form / hard class | questions | top-1 | top-3 |", "|---|---:|---:|---:|"]
    for group, rates in {**run.by_form, **run.by_hard_class}.items():
        lines.append(
            f"| {_cell(group)} | {rates['questions']} | {percent(float(rates['top1_hit_rate']))} | {percent(float(rates['top3_hit_rate']))} |"
        )
    return "\n".join(lines) + "\n"


def any_markdown(run: RunResult | RetrievalRunResult) -> str:
    return retrieval_markdown(run) if isinstance(run, RetrievalRunResult) else run_markdown(run)


def comparison_markdown(result: Any) -> str:
    from evalkit.report.text import comparison_lines

    first, second = result.first, result.second
    lines = [
        f"### Compare `{first['run_id']}` -> `{second['run_id']}`",
        "",
        f"{first['set_id']}: {_cell(instance(first['provider'], first['model']))} -> {_cell(instance(second['provider'], second['model']))}",
        "",
        *[f"- {_inline(line)}" for line in comparison_lines(result)],
    ]
    if result.flips:
        lines += ["", "| item | first | second | score delta |", "|---|---|---|---:|"]
        for flip in result.flips:
            lines.append(
                f"| {_cell(flip.id)} | {percent(flip.first_pass_rate)} | {percent(flip.second_pass_rate)} | {flip.second_score - flip.first_score:+.3f} |"
            )
    return "\n".join(lines) + "\n"
