"""Markdown for a CI comment: a run, the history of a set, the per-set report."""

from __future__ import annotations

import re
from collections.abc import Sequence

from evalkit.records import RetrievalRunResult, RunResult
from evalkit.report.text import clip, instance, outcome_label, percent, printable, sparkline, verdict_label
from evalkit.report.toolcalls import calls_line
from evalkit.rows import RunComparison, RunRow, SetSummary
from evalkit.verdicts import ComparisonState

_MARKUP = re.compile(r"([\\`*_\[\]!~|])")  # what makes inline markup: links and images need [ ]
# An @ that could start a mention: GitHub links one only after a character that is not a word
# character, so the @ inside a name (``claude-3@20240620``, ``a@b.c``) stays as written.
_MENTION = re.compile(r"(?<![A-Za-z0-9_])@")


def _one_line(text: str) -> str:
    """Every line break a space (CR included), terminal controls as escapes."""
    return printable(" ".join(text.split()))


def _inline(text: str) -> str:
    """Data as plain text on one markdown line: no HTML (a ``<!--`` in an answer would hide the
    rest of a comment), no markup (an image, a link, emphasis: every markdown punctuation is
    escaped) and no @-mention (an ``@`` that could start one is set as code, which GitHub never
    links; one inside a word, as in a model name, is left whole)."""
    text = _one_line(text).replace("&", "&amp;").replace("<", "&lt;")
    return _MENTION.sub("`@`", _MARKUP.sub(r"\\\1", text))


def _cell(text: str) -> str:
    return _inline(text)


def _code(text: str) -> str:
    """``text`` as inline code (nothing in it is markup), its fence longer than any run of
    backticks inside."""
    text = _one_line(text)
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    return f"{fence} {text} {fence}" if "`" in text else f"`{text}`"


def run_markdown(run: RunResult) -> str:
    """One run as a pull-request comment section: scope, verdict, rates against the baseline,
    the gate's failures, the flipped prompts and the failing prompts with short reasons."""
    gen = run.generator
    served = (
        f"{gen.provider}/{_inline(gen.model)} (reported {_code(gen.reported_model or '')})"
        if gen
        else f"{run.provider}/{_inline(run.model)} (model unknown)"
    )
    failures = run.gate.reasons() if run.gate is not None else []
    verdict = _verdict(run, failures) + _stale(run)
    lines = [
        f"### {_inline(run.set_id)} · run `{run.run_id}`",
        "",
        f"{verdict} · {served} · grader {_code(run.grader)}",
        "",
        f"**Pass rate {percent(run.pass_rate)}** ({run.passed_count}/{run.sample_count}){_delta(run, 'pass')} · "
        f"mean score {run.mean_score:.3f}{_delta(run, 'score')} · errors {run.error_count}" + _cached(run),
    ]
    lines += _judge_lines(run)
    if run.comparison is not None:
        lines += ["", f"> {_inline(run.comparison.reason)}"]
    if failures:
        label = "Gate failures" if run.error_count else "Gate failed"  # an incomplete run has no verdict
        lines += ["", f"**{label}:**", *[f"- {_inline(f)}" for f in failures]]
    lines += _flip_lines(run)
    failing = [i for i in run.items if not i.passed]
    if failing:
        lines += ["", "| prompt | result | score | reason |", "|---|---|---:|---|"]
        for item in failing[:MAX_ROWS]:
            result = "error" if item.errored else "fail"
            why = clip(item.reason, 160) + (f" · {calls_line(item.tool_calls)}" if item.tool_calls else "")
            lines.append(f"| {_cell(item.id)} | {result} | {item.score:.2f} | {_cell(why)} |")
        if len(failing) > MAX_ROWS:
            lines.append(f"| … {len(failing) - MAX_ROWS} more | | | |")
    return "\n".join(lines) + "\n"


MAX_ROWS = 50


def _judge_lines(run: RunResult) -> list[str]:
    """The judges' calls, tokens and cost, apart from the generator's (README "Model-graded assertions")."""
    from evalkit.report.summary import judge_calls_note

    note = judge_calls_note(run)
    if not note:
        return []
    usage = run.grader_usage
    cost = f" · cost ${run.grader_cost:.4f}" if run.grader_cost is not None else ""
    return ["", f"Judge: {note} · tokens {usage.input_tokens:,} in / {usage.output_tokens:,} out{cost}"]


def _verdict(run: RunResult, failures: list[str]) -> str:
    """The run's verdict as an icon and a word or two."""
    comparison = run.comparison
    if run.error_count:  # exit 3: not a quality verdict (docs/ci.md "Exit codes")
        return f"❌ **could not complete**: {_errored(run.error_count, len(run.items))}"
    if failures:
        return "❌ **gate failed**"
    if comparison is not None and comparison.regressed:
        return "⚠️ **regressed**"
    if comparison is None or comparison.state is ComparisonState.NOT_COMPARED:
        return "⚠️ **not compared**"
    shard = run.shard  # a shard's part: README "Larger suites: shards and batches"
    if comparison.state is ComparisonState.SHARD and shard is not None:
        return f"➗ **shard {shard.index}/{shard.count}**: gated with the other shards by `evalkit gate`"
    return "✅ **baseline recorded**" if comparison.state.is_baseline else "✅ **no regression**"


def _errored(errored: int, total: int) -> str:
    return f"{errored} of {total} item{'' if total == 1 else 's'} errored"


def _stale(run: RunResult) -> str:
    """The headline's warning when the verdict rests on answers cached before the run."""
    from evalkit.report.summary import stale_cache_note

    note = stale_cache_note(run)
    return f" · ⚠️ **{_inline(note)}**" if note else ""


def _cached(run: RunResult) -> str:
    from evalkit.report.summary import cache_note, cached_counts

    answers, gradings = cached_counts(run)
    return f" · {cache_note(run)}" if answers or gradings else ""


def _delta(run: RunResult, which: str) -> str:
    comparison = run.comparison
    if comparison is None or not comparison.state.is_compared:
        return ""
    if which == "pass" and comparison.pass_rate_delta is not None:
        return f" ({comparison.pass_rate_delta * 100:+.1f} pp against the baseline)"
    if which == "score" and comparison.mean_score_delta is not None:
        return f" ({comparison.mean_score_delta:+.3f})"
    return ""


def _flip_lines(run: RunResult) -> list[str]:
    flips = run.comparison.flips if run.comparison is not None else None
    if flips is None:
        return []
    lines = []
    for label, ids in (
        ("Regressed (passed in the baseline, fail now)", flips.regressed),
        ("Fixed", flips.fixed),
        ("Added since the baseline", flips.added),
        ("Removed since the baseline", flips.removed),
    ):
        if ids:
            shown = ", ".join(_code(i) for i in ids[:MAX_ROWS]) + (
                f", … ({len(ids)} in all)" if len(ids) > MAX_ROWS else ""
            )
            lines.append(f"- **{label}:** {shown}")
    return ["", *lines] if lines else []


def runs_markdown(runs: Sequence[RunResult | RetrievalRunResult]) -> str:
    """``run --format markdown`` / ``--markdown FILE``: every run of the command, one section each."""
    gated = [r for r in runs if r.gate is not None]
    failed = sum(1 for r in gated if r.gate is not None and not r.gate.passed)
    errored = sum(r.error_count for r in runs)
    head = f"## evalkit: {len(runs)} run{'s' if len(runs) != 1 else ''}, " + (
        f"could not complete: {_errored(errored, sum(len(r.items) for r in runs))}"
        if errored
        else (f"gate failed for {failed}" if failed else "gate passed")
    )
    return "\n".join([head, "", *[any_markdown(r) for r in runs]])


def history_markdown(set_id: str, rows: Sequence[RunRow]) -> str:
    lines = [f"### {set_id}", "", f"trend {sparkline([r.pass_rate for r in reversed(rows)])}", ""]
    lines += [
        "| run | started | provider/model | grader | pass rate | mean | verdict |",
        "|---|---|---|---|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| `{r.run_id}` | {r.started_at} | {_cell(instance(r.provider, r.model))} | {_cell(r.grader)} "
            f"| {percent(r.pass_rate)} | {r.mean_score:.3f} | {_verdict_cell(r)} |"
        )
    return "\n".join(lines) + "\n"


def _verdict_cell(row: RunRow) -> str:
    label = verdict_label(row.comparison_state, row.regressed)
    return f"**{label}**" if row.regressed else label


def summaries_markdown(summaries: Sequence[SetSummary]) -> str:
    lines = ["| set | latest run | pass rate | mean | trend | verdict |", "|---|---|---:|---:|---|---|"]
    for summary in summaries:
        r = summary.latest
        lines.append(
            f"| {_cell(r.set_id)} | `{r.run_id}` | {percent(r.pass_rate)} | {r.mean_score:.3f} "
            f"| {sparkline(summary.trend)} | {_verdict_cell(r)} |"
        )
    return "\n".join(lines) + "\n"


def retrieval_markdown(run: RetrievalRunResult) -> str:
    lines = [
        f"### {run.set_id} · retriever {_code(run.retriever)} · run `{run.run_id}`",
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


def comparison_markdown(result: RunComparison) -> str:
    from evalkit.report.text import comparison_lines

    first, second = result.first, result.second
    lines = [
        f"### Compare `{first.run_id}` -> `{second.run_id}`",
        "",
        f"{first.set_id}: {_cell(instance(first.provider, first.model))} -> {_cell(instance(second.provider, second.model))}",
        "",
        *[f"- {_inline(line)}" for line in comparison_lines(result)],
    ]
    if result.flips:
        lines += ["", *_flip_table(result)]
    return "\n".join(lines) + "\n"


def _flip_table(result: RunComparison) -> list[str]:
    """The items that changed, in the words of ``compare``'s table (pass / fail, hit / miss)."""
    if result.first.kind == "retrieval":  # passed = top-1 hit, score = top-3 hit
        lines = ["| question | first top-1 | second top-1 | first top-3 | second top-3 |", "|---|---|---|---|---|"]
        for flip in result.flips:
            rates = (flip.first_pass_rate, flip.second_pass_rate, flip.first_score, flip.second_score)
            lines.append(f"| {_cell(flip.id)} | " + " | ".join(outcome_label(r, retrieval=True) for r in rates) + " |")
        return lines
    lines = ["| item | first | second | score delta |", "|---|---|---|---:|"]
    for flip in result.flips:
        lines.append(
            f"| {_cell(flip.id)} | {outcome_label(flip.first_pass_rate)} | {outcome_label(flip.second_pass_rate)} "
            f"| {flip.second_score - flip.first_score:+.3f} |"
        )
    return lines
