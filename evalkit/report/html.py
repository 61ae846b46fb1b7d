"""The self-contained HTML report (README "The HTML report"): one file, no network, charts by Chart.js.

Chart.js 4 (MIT, evalkit/report/vendor/chart.umd.min.js, from the npm package ``chart.js``) is
embedded whole: about 210 KB, it draws lines and bars on a canvas offline, and its charts are
configured from data, not drawn by us. The page's own script only reads the embedded data,
hands it to Chart.js and filters the prompt tables.

Untrusted text (answers, prompts, ids, reasons, model names) reaches the page in two ways, both
inert: HTML written by Jinja2 with autoescaping (``<`` becomes ``&lt;``), and the charts' data
as JSON in a ``<script type="application/json">`` with ``<``, ``>`` and ``&`` written as
``\\u003c`` and so on, read with ``JSON.parse`` and drawn on a canvas. Control and bidirectional
formatting characters are shown as ``⟨U+202E⟩``, not obeyed, so they cannot reorder or hide the
rest of the page.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from evalkit.records import tool_calls_of
from evalkit.report import cells
from evalkit.report.toolcalls import calls_line
from evalkit.rows import RunRow
from evalkit.verdicts import ComparisonState

HERE = Path(__file__).resolve().parent
# C0 and C1 controls but tab and newline, DEL, and the bidirectional and zero-width formatting marks
_INVISIBLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")
MARKS = {"baseline": "rectRot", "accepted": "star", "regressed": "crossRot"}
FIRST_ROWS = 100  # a prompt table's rows laid out at load; the rest when shown, filtered or searched
PALETTE = ("#1f6feb", "#d4572a", "#2da44e", "#8250df", "#116329", "#0a7ea4", "#cf222e", "#57606a")
ERROR_COLOR = "#bf8700"  # amber, as the page writes "error"; no line has it


def visible(text: object) -> str:
    """``text`` with every control and formatting character shown as its code point."""
    if text is None:
        return ""
    return _INVISIBLE.sub(lambda m: f"⟨U+{ord(m.group()):04X}⟩", str(text))


def script_json(value: Any) -> str:
    """JSON that can sit inside a <script> element: nothing in it can end the element."""
    text = json.dumps(value, ensure_ascii=True, allow_nan=False, default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


@lru_cache(maxsize=1)
def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(HERE / "templates")),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["visible"] = visible
    env.filters["name"] = lambda v: cells.short(visible(v))
    env.filters["pct"] = lambda v: "—" if v is None else f"{100 * float(v):.1f}%"
    env.filters["num"] = lambda v, digits=3: "—" if v is None else f"{float(v):.{digits}f}"
    env.filters["ms"] = lambda v: "—" if v is None else f"{float(v):,.0f} ms"
    return env


@lru_cache(maxsize=1)
def chart_library() -> str:
    return (HERE / "vendor" / "chart.umd.min.js").read_text(encoding="utf-8")


def scope_of(run: RunRow) -> str:
    """One trend line per scope: instance, alias, reported model, grader (README "Baselines and regressions")."""
    reported = run.reported_model or "unverified"
    # drawn on a canvas as well as written in the page: shown, never obeyed; an endpoint's name cut
    names = (run.provider, run.model, reported, run.grader)
    return " · ".join(cells.short(visible(name)) for name in names)


def trend_chart(runs: Sequence[RunRow], baseline_ids: set[str], retrieval: bool = False) -> dict[str, Any]:
    """Chart.js line data: pass rate and mean score per run (a retrieval set: its top-1 and top-3
    hit rates), one pair of lines per scope, the baseline, accepted and regressed runs marked
    (runs oldest first). A run with errors measures no quality (evalkit compares none): it is
    left off the lines and drawn as a bar of the share of its answers that errored."""
    names = ("top-1 hit rate", "top-3 hit rate") if retrieval else ("pass rate", "mean score")
    labels = [visible(f"{r.started_at[:16].replace('T', ' ')} {r.run_id[-6:]}") for r in runs]
    scopes: dict[str, int] = {}
    for run in runs:
        if not errored(run):
            scopes.setdefault(scope_of(run), len(scopes))
    datasets = [
        _line(runs, scope, PALETTE[index % len(PALETTE)], metric, baseline_ids)
        | {"label": f"{names[0] if metric == 'pass_rate' else names[1]} · {scope}"}
        for scope, index in scopes.items()
        for metric in ("pass_rate", "mean_score")
    ]
    if any(errored(r) for r in runs):
        datasets.append(_error_bars(runs, "questions" if retrieval else "answers"))
    return {"labels": labels, "datasets": datasets}


def errored(run: RunRow) -> bool:
    return bool(run.error_count)


def _line(runs: Sequence[RunRow], scope: str, color: str, metric: str, baseline_ids: set[str]) -> dict[str, Any]:
    """One scope's line of ``metric``: a point per run of the scope without errors."""
    points, styles, radii, fills, notes = [], [], [], [], []
    for run in runs:
        mine = scope_of(run) == scope and not errored(run)
        points.append((run.pass_rate if metric == "pass_rate" else run.mean_score) if mine else None)
        mark = _mark(run, baseline_ids) if mine else None
        styles.append(MARKS[mark] if mark else "circle")
        radii.append(7 if mark else 3)
        fills.append("#cf222e" if mark == "regressed" else color)
        notes.append(mark or "")
    return {
        "data": points,
        "borderColor": color,
        "backgroundColor": fills,
        "pointStyle": styles,
        "pointRadius": radii,
        "borderDash": [] if metric == "pass_rate" else [6, 4],
        "spanGaps": True,
        "clip": 8,  # a mark at 0% or 100% drawn whole
        "marks": notes,
    }


def _error_bars(runs: Sequence[RunRow], what: str) -> dict[str, Any]:
    """Per run with errors, the share of its answers (questions) that errored, and the scope."""
    shares, notes = [], []
    for run in runs:
        count, total = run.error_count, run.item_count
        shares.append(min(1.0, count / total) if count and total else None)
        notes.append(f"{count} of {total} {what} errored · {scope_of(run)}" if count else "")
    return {
        "type": "bar",
        "label": f"errors · share of a run's {what} that errored",
        "data": shares,
        "backgroundColor": ERROR_COLOR + "66",  # see-through: the lines stay readable across it
        "borderColor": ERROR_COLOR,
        "borderWidth": 1,
        "barPercentage": 0.4,
        "marks": notes,
    }


def _mark(run: RunRow, baseline_ids: set[str]) -> str | None:
    if run.regressed:
        return "regressed"
    if run.accepted_at:
        return "accepted"
    if run.run_id in baseline_ids:
        return "baseline"
    return None


def item_rows(latest: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for item in latest.get("items") or []:
        status = "error" if item.get("error") else ("pass" if item.get("passed") else "fail")
        tools = calls_line(tool_calls_of(item.get("tool_calls")))
        rows.append({**item, "status": status, "note": _note(item), "tools": tools})
    return rows


def diff_rows(latest: Mapping[str, Any], baseline: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The prompts in both runs whose verdict or score changed, side by side: the flipped ones
    first, then by the size of the change (the unchanged ones are counted, not listed)."""
    if baseline is None:
        return []
    before = {i["id"]: i for i in baseline.get("items") or []}
    rows = []
    for item in latest.get("items") or []:
        old = before.get(item["id"])
        if old is None:
            continue
        flipped = bool(old.get("passed")) != bool(item.get("passed"))
        change = float(item.get("score") or 0) - float(old.get("score") or 0)
        if not flipped and abs(change) < 1e-9:
            continue
        was, now = {**old, "note": _note(old)}, {**item, "note": _note(item)}
        rows.append({"id": item["id"], "flipped": flipped, "change": change, "before": was, "after": now})
    rows.sort(key=lambda r: (not r["flipped"], -abs(r["change"])))
    return rows


def _note(item: Mapping[str, Any]) -> str:
    """What a row says of its verdict: the error, or else the reason."""
    return str(item.get("error") or item.get("reason") or "")


def _verdict(latest: Mapping[str, Any] | None) -> str:
    return str(((latest or {}).get("comparison") or {}).get("reason") or "Not compared.")


def _was_compared(latest: Mapping[str, Any] | None) -> bool:
    """Whether the latest run was compared with a baseline (its state read into the enum)."""
    state = ComparisonState.read(((latest or {}).get("comparison") or {}).get("state"))
    return state is not None and state.is_compared


def _text_spots(sections: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], str]]:
    """Every text cell of the page, as (row, key): prompts, reasons, errors, answers and tool calls."""
    spots = []
    for section in sections:
        for row in section["rows"]:
            spots += [(row, key) for key in ("prompt", "note", "response") if row.get(key) is not None]
            spots += [(row, "tools")] if row.get("tools") else []
        for diff in section["diff"]:
            spots += [(diff["before"], "note"), (diff["after"], "note")]
    return spots


def _in_both(latest: Mapping[str, Any] | None, baseline: Mapping[str, Any] | None) -> int:
    if not latest or not baseline:
        return 0
    return len({i["id"] for i in latest.get("items") or []} & {i["id"] for i in baseline.get("items") or []})


def retrieval_charts(latest: Mapping[str, Any]) -> dict[str, Any]:
    """Chart.js bar data: top-1 and top-3 hit rates by question form and by hard class."""

    def bars(groups: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        names = sorted(groups)
        return {
            "labels": [visible(n) for n in names],
            "datasets": [
                {"label": "top-1 hit rate", "data": [groups[n].get("top1_hit_rate") for n in names]},
                {"label": "top-3 hit rate", "data": [groups[n].get("top3_hit_rate") for n in names]},
            ],
        }

    return {"by_form": bars(latest.get("by_form") or {}), "by_hard_class": bars(latest.get("by_hard_class") or {})}


def render(sets: Sequence[Mapping[str, Any]], models: Sequence[Mapping[str, Any]], *, source: str) -> str:
    """The whole page. ``sets``: per set, ``runs`` (``RunRow``, oldest first), ``latest`` and ``baseline``
    (envelopes as ``--format json`` prints them, or None)."""
    sections = []
    charts: dict[str, Any] = {}
    for index, entry in enumerate(sets):
        runs, latest, baseline = entry["runs"], entry["latest"], entry.get("baseline")
        key = f"set-{index}"
        baseline_ids = {r.baseline_run_id for r in runs if r.baseline_run_id}
        retrieval = latest is not None and latest.get("kind") == "retrieval"
        charts[key] = {"trend": trend_chart(runs, baseline_ids, retrieval)}
        if retrieval:
            charts[key].update(retrieval_charts(latest))
        sections.append(
            {
                "key": key,
                "id": entry["set_id"],
                "name": entry.get("set_name") or entry["set_id"],
                "runs": runs,
                "latest": latest,
                "retrieval": retrieval,
                "rows": item_rows(latest) if latest and not retrieval else [],
                "diff": diff_rows(latest, baseline) if latest and not retrieval else [],
                "compared": _in_both(latest, baseline),
                "verdict": cells.alone(visible, _verdict(latest)),  # it names the scope, which may be long
                "was_compared": _was_compared(latest),
                "baseline": baseline,
                "scopes": sorted({scope_of(r) for r in runs}),
            }
        )
    cells.fill(_text_spots(sections), visible)  # cut, so the file stays small whatever the answers
    page = _environment().get_template("report.html.j2")
    return str(
        page.render(
            sections=sections,
            models=models,
            source=source,
            generated=datetime.now(UTC).isoformat(timespec="seconds"),
            data=script_json(charts),
            first_rows=FIRST_ROWS,
            chart_js=chart_library(),
        )
    )
