"""What the HTML report draws (README "The HTML report"): every stored run of the sets shown, oldest first, with
the marks the charts need (scope, baseline, accepted, regressed)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from evalkit.store.queries import run_filters
from evalkit.store.store import Store

REPORT_COLUMNS = (
    "run_id", "set_id", "set_name", "kind", "grader", "provider", "model", "reported_model", "pass_rate",
    "mean_score", "item_count", "error_count", "started_at", "comparison_state", "regressed", "baseline_run_id",
    "accepted_at", "privacy",
)  # fmt: skip


def report_runs(
    store: Store, *, limit: int | None = None, run_ids: tuple[str, ...] = (), **filters: str | None
) -> list[dict[str, Any]]:
    """The runs of each set (the newest ``limit`` of each), filtered as ``evalkit report`` filters
    (``filters``: set_id, provider, model, grader), oldest first; ``run_ids``: only the sets of
    these runs."""
    where, params = run_filters(**filters)
    if run_ids:
        params.append(list(run_ids))
        where.append(f"set_id in (select set_id from runs where list_contains(${len(params)}, run_id))")
    recency = "row_number() over (partition by set_id order by started_at desc, run_id desc)"
    sql = f"select {', '.join(REPORT_COLUMNS)}, {recency} as recency from runs"
    if where:
        sql += " where " + " and ".join(where)
    sql = f"select * from ({sql})"
    if limit is not None:
        params.append(limit)
        sql += f" where recency <= ${len(params)}"
    sql += " order by set_id, started_at, run_id"
    rows = store.con.execute(sql, params).fetchall()
    out = []
    for row in rows:
        entry = dict(zip((*REPORT_COLUMNS, "recency"), row, strict=True))
        for key in ("started_at", "accepted_at"):
            moment = entry[key]
            if isinstance(moment, datetime):
                entry[key] = moment.replace(tzinfo=UTC).isoformat(timespec="seconds")
        out.append(entry)
    return out
