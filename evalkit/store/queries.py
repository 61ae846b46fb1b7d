"""Read queries: baselines, history and the per-set report. Aggregation happens in SQL."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from evalkit.rows import EVERY_RUN, RunFilter, RunRow, SetSummary, iso_time, trend_of
from evalkit.store.store import Store, age_cutoff

BASELINE_COLUMNS = ("run_id", "pass_rate", "mean_score", "passed_count", "item_count", "set_fingerprint")


def find_baseline(
    store: Store, *, set_id: str, provider: str, model: str, reported_model: str, grader: str
) -> dict[str, Any] | None:
    """The newest stored run of this scope with a verified generator and no errored items that
    did not itself regress, unless it was accepted (README "Baselines and regressions": no ratchet)."""
    cursor = store.con.execute(
        """
        select run_id, pass_rate, mean_score, passed_count, item_count, set_fingerprint
        from runs
        where kind = 'prompts' and set_id = $1 and provider = $2 and model = $3 and reported_model = $4
          and grader = $5 and generator_provenance is not null and error_count = 0 and shard_index is null
          and (regressed is not true or accepted_at is not null)
        order by started_at desc, run_id desc
        limit 1
        """,
        [set_id, provider, model, reported_model, grader],
    )
    row = cursor.fetchone()
    if row is None:
        return None
    return dict(zip(BASELINE_COLUMNS, row, strict=True))


def find_other_baseline(
    store: Store, *, set_id: str, provider: str, model: str, reported_model: str, grader: str
) -> dict[str, Any] | None:
    """The newest run that would be a baseline (as ``find_baseline`` picks one) of the same set and
    grader in another scope (another instance, alias or reported model): for an informational
    delta when a run has no baseline of its own scope."""
    cursor = store.con.execute(
        """
        select run_id, pass_rate, mean_score, passed_count, item_count, set_fingerprint,
               provider, model, reported_model
        from runs
        where kind = 'prompts' and set_id = $1 and grader = $5
          and (provider, model, reported_model) is distinct from ($2, $3, $4)
          and generator_provenance is not null and error_count = 0 and shard_index is null
          and (regressed is not true or accepted_at is not null)
        order by started_at desc, run_id desc
        limit 1
        """,
        [set_id, provider, model, reported_model, grader],
    )
    row = cursor.fetchone()
    if row is None:
        return None
    names = (*BASELINE_COLUMNS, "provider", "model", "reported_model")
    return dict(zip(names, row, strict=True))


def latest_per_scope(store: Store) -> list[str]:
    """The newest prompt run of every scope (set, instance, alias, reported model, grader), by set."""
    rows = store.con.execute(
        """
        select run_id from (
            select run_id, set_id, provider, model, reported_model, grader, row_number() over (
                partition by set_id, provider, model, reported_model, grader order by started_at desc, run_id desc
            ) as recency
            from runs where kind = 'prompts' and shard_index is null
        )
        where recency = 1
        order by set_id, provider, model, reported_model, grader
        """
    ).fetchall()
    return [str(r[0]) for r in rows]


def mark_accepted(store: Store, run_ids: list[str]) -> None:
    """Mark runs accepted as baselines (README "Baselines and regressions"); a run accepted before keeps its first time."""
    now = datetime.now(UTC).replace(tzinfo=None)
    with store.transaction() as con:
        con.execute(
            "update runs set accepted_at = $1 where run_id in (select unnest($2)) and accepted_at is null",
            [now, run_ids],
        )


def history(store: Store, where: RunFilter = EVERY_RUN) -> list[RunRow]:
    """Stored runs, newest first, filtered by set, provider instance, model alias or grader."""
    conditions, params = run_filters(where)
    sql = f"select {', '.join(RUN_COLUMNS)} from runs where " + " and ".join(conditions)
    sql += " order by started_at desc, run_id desc"
    if where.limit is not None:
        params.append(where.limit)
        sql += f" limit ${len(params)}"
    return [run_row(r) for r in store.con.execute(sql, params).fetchall()]


GRADED_RUN = "shard_index is null"  # a shard's part is graded only with the others, by evalkit gate

RUN_COLUMNS = (
    "run_id", "set_id", "kind", "grader", "provider", "model", "reported_model", "pass_rate", "mean_score",
    "item_count", "error_count", "started_at", "comparison_state", "regressed", "baseline_run_id", "accepted_at",
    "privacy", "set_name",
)  # fmt: skip


def run_row(values: Sequence[Any]) -> RunRow:
    """A ``RunRow`` from the ``RUN_COLUMNS`` of a ``runs`` row (its timestamps as ISO text)."""
    row = dict(zip(RUN_COLUMNS, values[: len(RUN_COLUMNS)], strict=True))
    row["started_at"], row["accepted_at"] = str(iso_time(row["started_at"])), iso_time(row["accepted_at"])
    return RunRow(**row)


def run_filters(where: RunFilter) -> tuple[list[str], list[Any]]:
    """``report``'s filters as SQL conditions on runs (``column = $n``) and their parameters; a
    shard's part is never a run of its own in a report (README "Larger suites: shards and batches")."""
    conditions: list[str] = [GRADED_RUN]
    params: list[Any] = []
    for column, value in where.columns().items():
        if value is not None:
            params.append(value)
            conditions.append(f"{column} = ${len(params)}")
    return conditions, params


def set_summaries(store: Store, trend_length: int = 12) -> list[SetSummary]:
    """Per set: the latest run, its verdict, its baseline and the recent pass-rate trend of the
    latest run's scope (instance, alias, reported model, grader: a matrix of providers is not one
    trend)."""
    latest = ", ".join(f"r.{c}" for c in RUN_COLUMNS)
    rows = store.con.execute(
        f"""
        with graded as (select * from runs where {GRADED_RUN}),
        ranked as (
            select *, row_number() over (partition by set_id order by started_at desc, run_id desc) as recency
            from graded
        ),
        scoped as (
            select r.set_id, r.pass_rate, r.started_at, r.run_id,
                   row_number() over (partition by r.set_id order by r.started_at desc, r.run_id desc) as recency
            from graded r join ranked l
              on l.recency = 1 and r.set_id = l.set_id and r.provider = l.provider and r.grader = l.grader
             and r.model is not distinct from l.model and r.reported_model is not distinct from l.reported_model
        ),
        trends as (
            select set_id, list(pass_rate order by started_at, run_id) as trend
            from scoped where recency <= $1 group by set_id
        ),
        totals as (select set_id, count(*) as total_runs from graded group by set_id)
        select {latest}, t.trend, o.total_runs
        from ranked r join trends t using (set_id) join totals o using (set_id)
        where r.recency = 1
        order by r.set_id
        """,
        [trend_length],
    ).fetchall()
    return [SetSummary(run_row(r), trend_of(r[-2]), int(r[-1])) for r in rows]


def prune_runs(store: Store, older_than_days: int) -> int:
    """Delete whole runs (run row and item rows) started more than ``older_than_days`` ago."""
    cutoff = age_cutoff(older_than_days)
    with store.transaction() as con:
        row = con.execute("select count(*) from runs where started_at < $1", [cutoff]).fetchone()
        con.execute("delete from results where run_id in (select run_id from runs where started_at < $1)", [cutoff])
        con.execute("delete from runs where started_at < $1", [cutoff])
    return int(row[0]) if row else 0


def instance_quality(store: Store, provider: str, model: str) -> tuple[float | None, int]:
    """(mean over sets of the latest verified deterministic run's mean_score, number of sets).
    The mean is rounded to 12 places, so three sets at 0.7 measure 0.7 and not 0.6999999999999998.

    Scoped to the provider instance and its alias; a run counts when its generator was verified
    and no item errored. No such run: (None, 0) - unknown, never zero.
    """
    row = store.con.execute(
        """
        with latest as (
            select set_id, mean_score,
                   row_number() over (partition by set_id order by started_at desc, run_id desc) as recency
            from runs
            where kind = 'prompts' and grader = 'deterministic' and provider = $1 and model = $2
              and generator_provenance is not null and error_count = 0 and shard_index is null
        )
        select round(avg(mean_score), 12), count(*) from latest where recency = 1
        """,
        [provider, model],
    ).fetchone()
    if row is None or not row[1]:
        return None, 0
    return float(row[0]), int(row[1])


def item_outcomes(store: Store, run_id: str) -> list[tuple[str, bool, float]]:
    """(item id, passed, score) of every stored item sample of a run (none at privacy none)."""
    rows = store.con.execute(
        "select item_id, passed, score from results where run_id = $1 order by item_index", [run_id]
    ).fetchall()
    return [(str(i), bool(p), float(s)) for i, p, s in rows]


def run_summary(store: Store, run_id: str) -> RunRow:
    """One stored run without its items (the run must exist: resolve its id first)."""
    row = store.con.execute(f"select {', '.join(RUN_COLUMNS)} from runs where run_id = $1", [run_id]).fetchone()
    if row is None:
        raise KeyError(run_id)
    return run_row(row)


def run_exists(store: Store, run_id: str) -> bool:
    """Whether a run of this exact id is stored."""
    row = store.con.execute("select count(*) from runs where run_id = $1", [run_id]).fetchone()
    return bool(row and row[0])


def latest_run_id(store: Store, set_id: str, provider: str) -> str | None:
    row = store.con.execute(
        "select run_id from runs where set_id = $1 and provider = $2 and shard_index is null "
        "order by started_at desc, run_id desc limit 1",
        [set_id, provider],
    ).fetchone()
    return str(row[0]) if row else None
