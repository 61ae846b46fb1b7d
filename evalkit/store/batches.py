"""Pending provider batches (README "Batches", "Database schema"): written at submit (the
answers' batches) and when the answers are in (the judge's), read by ``evalkit collect``, marked
collected in the same session that stores their runs, and folded in by ``evalkit merge`` (README
"One history for a team: merge and export")."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from evalkit.records import PendingBatch
from evalkit.records.batches import PHASE_ANSWERS
from evalkit.store.store import Store

COLUMNS = (
    "batch_id", "submission_id", "provider", "model", "adapter", "state", "submitted_at", "collected_at",
    "request_count", "set_fingerprints", "plan", "custom_ids", "run_ids", "phase",
)  # fmt: skip
PENDING = "pending"
COLLECTED = "collected"
# what collecting changes; the rest is the submission, the same in every copy of a batch
OUTCOME = ("state", "collected_at", "run_ids")
SUBMITTED = tuple(c for c in COLUMNS if c not in OUTCOME)


def _naive(moment: str) -> datetime:
    return datetime.fromisoformat(moment).astimezone(UTC).replace(tzinfo=None)


def save_batches(store: Store, batches: Sequence[PendingBatch]) -> None:
    """A submission's batches, in one transaction."""
    rows = [
        (
            b.batch_id, b.submission_id, b.provider, b.model, b.adapter, b.state, _naive(b.submitted_at), None,
            b.request_count, json.dumps(b.set_fingerprints), json.dumps(b.plan), json.dumps(b.custom_ids),
            json.dumps(list(b.run_ids)), b.phase,
        )
        for b in batches
    ]  # fmt: skip
    with store.transaction():
        store.insert_rows("batches", COLUMNS, rows)


def load_batches(store: Store, batch_ids: Sequence[str] = (), *, pending_only: bool = True) -> list[PendingBatch]:
    """The batches named (every batch of their submissions), else every pending one; oldest first."""
    where = "state = $1" if pending_only else "true"
    params: list[object] = [PENDING] if pending_only else []
    if batch_ids:
        params.append(list(batch_ids))
        where += f" and submission_id in (select submission_id from batches where batch_id = any(${len(params)}))"
    rows = store.con.execute(
        f"select {', '.join(COLUMNS)} from batches where {where} order by submitted_at, submission_id, batch_id",
        params,
    ).fetchall()
    return [_batch(row) for row in rows]


def known_batch_ids(store: Store, batch_ids: Sequence[str]) -> dict[str, str]:
    """The state of each named batch the database holds."""
    rows = store.con.execute("select batch_id, state from batches where batch_id = any($1)", [list(batch_ids)])
    return {str(r[0]): str(r[1]) for r in rows.fetchall()}


def mark_collected(store: Store, submission_id: str, run_ids: Sequence[str]) -> None:
    with store.transaction():
        store.con.execute(
            "update batches set state = $1, collected_at = $2, run_ids = $3 where submission_id = $4",
            [COLLECTED, datetime.now(UTC).replace(tzinfo=None), json.dumps(list(run_ids)), submission_id],
        )


def source_checks(alias: str) -> tuple[tuple[str, str], ...]:
    """What ``evalkit merge`` checks of a source's batches (attached as ``alias``), besides reading
    every block: each query finds a first fault, said by its sentence."""
    return (
        (
            f"select batch_id from {alias}.batches group by batch_id having count(*) > 1 limit 1",
            "batch {0} twice (a batch id names one provider batch)",
        ),
        (
            f"select batch_id, state from {alias}.batches where state not in ('{PENDING}', '{COLLECTED}') limit 1",
            "batch {0} in an unknown state {1!r} (evalkit writes pending and collected batches)",
        ),
        (
            f"select batch_id from {alias}.batches where state = '{COLLECTED}' "
            "and (collected_at is null or coalesce(json_array_length(run_ids), 0) = 0) limit 1",
            "batch {0} marked collected without the runs its collect stored",
        ),
    )


def fold_batches(con: Any, alias: str) -> int:
    """Inside ``evalkit merge``'s transaction: the batches of the source ``alias`` not held here, and
    the collected copy of a batch still pending here (collected wins: it names the runs its
    collect stored, which the merge brings along; a batch collected here stays as it is). The
    number of batches added or marked collected."""
    listed = ", ".join(COLUMNS)
    new = f"select {listed} from {alias}.batches where batch_id not in (select batch_id from main.batches)"
    # the source's collected batches that are pending here
    won = f"select s.* from {alias}.batches s join main.batches b using (batch_id) where b.state = $1 and s.state = $2"
    added = con.execute(f"select count(*) from ({new})").fetchone()[0]
    marked = con.execute(f"select count(*) from ({won})", [PENDING, COLLECTED]).fetchone()[0]
    con.execute(f"insert into batches ({listed}) {new}")
    con.execute(
        f"update batches set {', '.join(f'{c} = w.{c}' for c in OUTCOME)} from ({won}) w "
        "where batches.batch_id = w.batch_id",
        [PENDING, COLLECTED],
    )
    return int(added) + int(marked)


def _batch(row: Sequence[object]) -> PendingBatch:
    values = dict(zip(COLUMNS, row, strict=True))
    submitted = values["submitted_at"]
    collected = values["collected_at"]
    return PendingBatch(
        batch_id=str(values["batch_id"]),
        submission_id=str(values["submission_id"]),
        provider=str(values["provider"]),
        model=str(values["model"]),
        adapter=str(values["adapter"]),
        state=str(values["state"]),
        submitted_at=submitted.replace(tzinfo=UTC).isoformat() if isinstance(submitted, datetime) else str(submitted),
        request_count=int(str(values["request_count"])),
        set_fingerprints=json.loads(str(values["set_fingerprints"])),
        plan=json.loads(str(values["plan"])),
        custom_ids=json.loads(str(values["custom_ids"])),
        run_ids=tuple(json.loads(str(values["run_ids"] or "[]"))),
        collected_at=collected.replace(tzinfo=UTC).isoformat() if isinstance(collected, datetime) else None,
        phase=str(values["phase"] or PHASE_ANSWERS),
    )
