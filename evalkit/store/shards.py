"""The parts of a sharded run, as ``evalkit gate`` finds them (README "Larger suites: shards and
batches"): every part stored under a run group, with the set and the instance and alias it was
asked to run on."""

from __future__ import annotations

from dataclasses import dataclass

from evalkit.store.store import Store


@dataclass(frozen=True, slots=True)
class ShardPart:
    """One stored shard's part of a set's run."""

    run_id: str
    set_id: str
    set_path: str | None
    provider: str  # the instance requested (the run row's provider is the one that answered)
    model: str  # the alias requested
    index: int
    count: int


def group_parts(store: Store, group: str) -> list[ShardPart]:
    """Every part stored under ``group``, by set, instance, alias and shard."""
    rows = store.con.execute(
        """
        select run_id, set_id, set_path,
               coalesce(json_extract_string(metrics, '$.requested_provider'), provider),
               coalesce(json_extract_string(metrics, '$.requested_model'), model),
               shard_index, shard_count
        from runs
        where run_group = $1 and shard_index is not null
        order by set_id, 4, 5, shard_index, started_at, run_id
        """,
        [group],
    ).fetchall()
    return [ShardPart(str(r[0]), str(r[1]), r[2], str(r[3]), str(r[4]), int(r[5]), int(r[6])) for r in rows]


def run_groups(store: Store, limit: int = 5) -> list[str]:
    """The newest run groups that have shards stored, newest first."""
    rows = store.con.execute(
        """
        select run_group from runs where shard_index is not null
        group by run_group order by max(started_at) desc, run_group limit $1
        """,
        [limit],
    ).fetchall()
    return [str(r[0]) for r in rows]
