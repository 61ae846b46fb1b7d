"""DuckDB storage: runs, item results, the completion cache and named migrations.

duckdb is imported only inside this package, and only when a database is opened.
"""

from evalkit.store.cache import StoreCache, clear_cache, prune_cache
from evalkit.store.queries import (
    find_baseline,
    find_other_baseline,
    history,
    instance_quality,
    item_outcomes,
    latest_per_scope,
    latest_run_id,
    mark_accepted,
    prune_runs,
    run_exists,
    run_summary,
    set_summaries,
)
from evalkit.store.retrieval_runs import load_retrieval_run, previous_retrieval, save_retrieval_run
from evalkit.store.runs import as_kept, load_run, resolve_run_id, run_kind, save_run
from evalkit.store.shards import ShardPart, group_parts, run_groups
from evalkit.store.store import Store

__all__ = [
    "ShardPart",
    "Store",
    "StoreCache",
    "as_kept",
    "clear_cache",
    "find_baseline",
    "find_other_baseline",
    "group_parts",
    "history",
    "instance_quality",
    "item_outcomes",
    "latest_per_scope",
    "latest_run_id",
    "load_retrieval_run",
    "load_run",
    "mark_accepted",
    "previous_retrieval",
    "prune_cache",
    "prune_runs",
    "resolve_run_id",
    "run_exists",
    "run_groups",
    "run_kind",
    "run_summary",
    "save_retrieval_run",
    "save_run",
    "set_summaries",
]
