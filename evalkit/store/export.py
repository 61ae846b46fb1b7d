"""The history as Parquet (DESIGN 8.1): ``evalkit export --parquet DIR``.

Three tables, each a folder partitioned by set in the Hive layout (``runs/set_id=faq/...``):
``runs`` (the runs table as it is), ``results`` (the items of prompt runs, with their set id)
and ``retrieval`` (the questions of retrieval runs, their details as columns). A whole export
replaces the folders, so exporting twice writes the same rows; ``since`` writes only the runs
started on or after that day (and their items) into files of their own beside the earlier ones.
DuckDB's own COPY writes them, in one read of the database.
"""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path
from typing import Any

from evalkit.store.store import Store

RESULTS = """
select r.set_id, x.run_id, x.item_index, x.item_id, x.repeat_index, x.passed, x.score, x.reason, x.error,
       x.latency_ms, x.assertions, x.prompt, x.system_prompt, x.response, x.serving, x.adapter, x.input_tokens,
       x.output_tokens, x.cached, x.yardstick, x.details, r.started_at
from results x join runs r using (run_id)
where r.kind = 'prompts' {since}
"""
RETRIEVAL = """
select r.set_id, x.run_id, x.item_index, x.item_id as question_id, x.error,
       x.details ->> 'form' as form, x.details ->> 'hard_class' as hard_class,
       cast(x.details ->> 'top1_hit' as boolean) as top1_hit, cast(x.details ->> 'top3_hit' as boolean) as top3_hit,
       cast(x.details -> 'retrieved' as varchar[]) as retrieved, r.provider as retriever, r.started_at
from results x join runs r using (run_id)
where r.kind = 'retrieval' {since}
"""
EXPORT_MEMORY = "400MB"
RUNS = "select * from runs where true {since} order by set_id, started_at, run_id"


def export_parquet(store: Store, folder: Path, since: date | None = None) -> dict[str, int]:
    """Write the three tables under ``folder``; the number of rows written to each."""
    condition = "and r.started_at >= $1" if since is not None else ""
    params: list[Any] = [since] if since is not None else []
    counts = {}
    # COPY keeps each partition's row groups in memory; in order, and unbounded, a million result
    # rows took the process to 1 GB: rows in any order, and DuckDB told to spill past a bound
    store.con.execute("set preserve_insertion_order = false")
    store.con.execute(f"set memory_limit = '{EXPORT_MEMORY}'")
    for table, query in (("runs", RUNS), ("results", RESULTS), ("retrieval", RETRIEVAL)):
        sql = query.format(since=condition.replace("r.", "") if table == "runs" else condition)
        counts[table] = _count(store, sql, params)
        target = folder / table
        if since is None:
            options = "overwrite true, filename_pattern 'all_{i}'"
        else:  # an increment beside the earlier files; the same increment again replaces its own files
            options = f"overwrite_or_ignore true, filename_pattern 'since-{since:%Y%m%d}_{{i}}'"
        if counts[table] == 0:  # nothing to write: a whole export leaves no stale rows behind
            if since is None and target.exists():
                shutil.rmtree(target)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        store.con.execute(
            f"copy ({sql}) to '{_quoted(target)}' (format parquet, partition_by (set_id), {options})", params
        )
    return counts


def _count(store: Store, sql: str, params: list[Any]) -> int:
    row = store.con.execute(f"select count(*) from ({sql})", params).fetchone()
    return int(row[0]) if row else 0


def _quoted(path: Path) -> str:
    return str(path).replace("'", "''")
