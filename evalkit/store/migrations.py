"""Named schema migrations, each applied in one transaction with its bookkeeping row.

Never edit a migration that has shipped: add the next one. The schema is public (users query
it with SQL); the README documents every column.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

MIGRATIONS: tuple[tuple[str, str], ...] = (
    (
        "m001_runs_results_cache",
        """
        create table runs (
            run_id varchar primary key,
            kind varchar not null,
            set_id varchar not null,
            set_name varchar,
            set_fingerprint varchar,
            set_path varchar,
            grader varchar not null,
            provider varchar,
            model varchar,
            reported_model varchar,
            generator_provenance json,
            adapter varchar,
            started_at timestamp not null,
            finished_at timestamp,
            item_count integer not null,
            passed_count integer not null,
            error_count integer not null,
            pass_rate double not null,
            mean_score double not null,
            status varchar not null,
            comparison_state varchar,
            regressed boolean,
            baseline_run_id varchar,
            comparison json,
            tolerances json,
            metrics json,
            provenance json,
            input_tokens bigint,
            output_tokens bigint,
            cost double,
            privacy varchar,
            evalkit_version varchar
        );
        create table results (
            run_id varchar not null,
            item_index integer not null,
            item_id varchar not null,
            passed boolean not null,
            score double not null,
            reason varchar,
            error varchar,
            latency_ms double,
            assertions json,
            prompt varchar,
            system_prompt varchar,
            response varchar,
            serving json,
            adapter varchar,
            input_tokens integer,
            output_tokens integer,
            cached boolean,
            yardstick varchar,
            details json
        );
        create table cache (
            key varchar primary key,
            provider varchar not null,
            model varchar not null,
            response varchar not null,
            serving json not null,
            input_tokens integer,
            output_tokens integer,
            latency_ms double,
            adapter varchar,
            raw json,
            created_at timestamp not null
        );
        """,
    ),
    (
        "m002_retrieval_fingerprints",
        """
        alter table runs add column benchmark_fingerprint varchar;
        alter table runs add column variant_fingerprint varchar;
        """,
    ),
    (
        "m003_repeats",
        """
        alter table runs add column repeats integer default 1;
        alter table results add column repeat_index integer default 0;
        """,
    ),
    (
        # README "Baselines and regressions": a regressed run is a baseline only once it is accepted (evalkit baseline accept)
        "m004_accepted_runs",
        """
        alter table runs add column accepted_at timestamp;
        """,
    ),
    (
        # docs/contract.md "The completion cache": the endpoint an instance pointed at is part of the cache key (older entries,
        # keyed without it, are simply never hit) and is kept beside it for inspection
        "m005_cache_endpoint",
        """
        alter table cache add column endpoint varchar;
        """,
    ),
    (
        # token counts are bigint everywhere, as in runs: one item's count above 2**31 - 1 made
        # the whole run unstorable (and evalkit.records.Usage now drops implausible counts)
        "m006_bigint_tokens",
        """
        alter table results alter column input_tokens type bigint;
        alter table results alter column output_tokens type bigint;
        alter table cache alter column input_tokens type bigint;
        alter table cache alter column output_tokens type bigint;
        """,
    ),
    (
        # README "Larger suites: shards and batches": a shard's part (run --shard I/N) carries its index, the
        # shard count and its run group; the run evalkit gate assembled from them carries the count and group
        "m007_shards",
        """
        alter table runs add column shard_index integer;
        alter table runs add column shard_count integer;
        alter table runs add column run_group varchar;
        """,
    ),
    (
        # README "Batches": a run --batch submission waits here until evalkit collect grades and stores it
        "m008_provider_batches",
        """
        create table batches (
            batch_id varchar primary key,
            submission_id varchar not null,
            provider varchar not null,
            model varchar not null,
            adapter varchar not null,
            state varchar not null,
            submitted_at timestamp not null,
            collected_at timestamp,
            request_count integer not null,
            set_fingerprints json not null,
            plan json not null,
            custom_ids json not null,
            run_ids json
        );
        """,
    ),
    (
        # README "Batches": a submission's judge requests go as batches of their own once its answers are in;
        # the batches submitted before (every one of them a batch of answers) read as answers
        "m009_batch_phases",
        """
        alter table batches add column phase varchar default 'answers';
        """,
    ),
)

MIGRATION_TABLE = "evalkit_migrations"


def applied(con: Any) -> set[str]:
    """Names of the applied migrations (none for a new database; creates nothing)."""
    exists = con.execute("select count(*) from duckdb_tables() where table_name = $1", [MIGRATION_TABLE]).fetchone()
    if not exists or not exists[0]:
        return set()
    return {row[0] for row in con.execute(f"select name from {MIGRATION_TABLE}").fetchall()}


def pending(con: Any, upto: str | None = None) -> list[tuple[str, str]]:
    done = applied(con)
    todo = []
    for name, sql in MIGRATIONS:
        if name not in done:
            todo.append((name, sql))
        if name == upto:
            break
    return todo


def apply_migrations(con: Any, upto: str | None = None) -> list[str]:
    """Apply every pending migration (up to ``upto``), each in its own transaction."""
    names = []
    con.execute(
        f"create table if not exists {MIGRATION_TABLE} (name varchar primary key, applied_at timestamp not null)"
    )
    for name, sql in pending(con, upto):
        con.execute("begin transaction")
        try:
            con.execute(sql)
            con.execute(f"insert into {MIGRATION_TABLE} values (?, ?)", [name, datetime.now(UTC).replace(tzinfo=None)])
            con.execute("commit")
        except BaseException:
            con.execute("rollback")
            raise
        names.append(name)
    return names
