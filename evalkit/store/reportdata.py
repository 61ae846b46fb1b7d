"""What the HTML report draws (README "The HTML report"): every stored run of the sets shown, oldest first, with
the marks the charts need (scope, baseline, accepted, regressed)."""

from __future__ import annotations

from typing import Any

from evalkit.rows import EVERY_RUN, RunFilter, RunRow
from evalkit.store.queries import RUN_COLUMNS, run_filters, run_row
from evalkit.store.store import Store


def report_runs(store: Store, where: RunFilter = EVERY_RUN, run_ids: tuple[str, ...] = ()) -> list[RunRow]:
    """The runs of each set (the newest ``where.limit`` of each), filtered as ``evalkit report``
    filters (``where``: set, provider, model, grader), oldest first; ``run_ids``: only the sets of
    these runs."""
    conditions, params = run_filters(where)
    if run_ids:
        params.append(list(run_ids))
        conditions.append(f"set_id in (select set_id from runs where list_contains(${len(params)}, run_id))")
    recency = "row_number() over (partition by set_id order by started_at desc, run_id desc)"
    sql = f"select {', '.join(RUN_COLUMNS)}, {recency} as recency from runs"
    if conditions:
        sql += " where " + " and ".join(conditions)
    sql = f"select * from ({sql})"
    if where.limit is not None:
        params.append(where.limit)
        sql += f" where recency <= ${len(params)}"
    sql += " order by set_id, started_at, run_id"
    rows: list[Any] = store.con.execute(sql, params).fetchall()
    return [run_row(r) for r in rows]
