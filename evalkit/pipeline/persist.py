"""Persist: each run stored in its own transaction, by one path for prompt and retrieval runs.

The runs were carried out, so a database that refuses them still sees them reported: the ones
stored before the fault are kept, the others are reported not compared and ``RunsNotStored``
carries them all (README "Commands"). Ctrl-C says what was kept; the answers received go to the
cache first.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from evalkit.errors import RunsNotStored, StoreError
from evalkit.pipeline.verdict import Ending, R, refused, verdict
from evalkit.records import RetrievalRunResult, RunResult

if TYPE_CHECKING:
    from evalkit.store import Store, StoreCache

INTERRUPTED_FLUSH_WAIT_S = 2.0


def persist(db: Path | None, runs: Sequence[R], ending: Ending[R], cache: StoreCache | None = None) -> list[R]:
    """The fresh answers cached, and each run compared with its baseline, gated and stored, in
    one short database session; without a database, each run compared with nothing and gated."""
    from evalkit.store import Store

    if db is None:
        return [verdict(ending, None, run) for run in runs]
    stored: list[R] = []  # each run is its own transaction: the ones before a fault are kept
    try:
        if cache is not None:
            cache.wait()  # the cache's background write ends before this session begins
        with Store.open(db) as store:
            if cache is not None:
                cache.flush(store=store)
            for run in runs:
                stored.append(keep(ending, store, run))
    except KeyboardInterrupt:
        raise interrupted(len(runs), stored, cache) from None
    except StoreError as exc:  # the runs were carried out: they are still reported (README "Commands")
        if cache is not None:
            cache.flush(wait_s=0.0)  # once more, without waiting: a busy database keeps them pending
        lost: list[R] = [refused(ending, run, str(exc)) for run in runs[len(stored) :]]
        unwritten = f"; {answers(cache.unwritten)} were not cached" if cache is not None and cache.unwritten else ""
        what = f"{len(lost)} of {len(runs)} runs were not stored" if ending.counted else "the run was not stored"
        raise RunsNotStored(f"{exc}; {what}{unwritten}", (*stored, *lost)) from None
    return stored


def keep(ending: Ending[R], store: Store, run: R) -> R:
    """One run compared, gated and saved (one transaction)."""
    run = verdict(ending, store, run)
    ending.save(store, run)
    return run


def answers(count: int) -> str:
    return f"{count} answer{'' if count == 1 else 's'} received"


def interrupted(
    total: int, stored: Sequence[RunResult | RetrievalRunResult], cache: StoreCache | None
) -> KeyboardInterrupt:
    """Ctrl-C, saying what was kept. The answers received are written to the cache first, but a
    user who pressed Ctrl-C does not wait long for a database another process holds."""
    from evalkit.store.store import lock_wait_s

    if stored:
        ids = ", ".join(r.run_id for r in stored)
        others = "" if len(stored) == total else "; the others were not"
        kept = f"{len(stored)} of {total} runs of this command were stored ({ids}){others}"
    else:
        kept = "no run of this command was stored"
    if cache is not None:
        with contextlib.suppress(StoreError, KeyboardInterrupt):  # a second Ctrl-C: stop waiting
            cache.flush(wait_s=min(INTERRUPTED_FLUSH_WAIT_S, lock_wait_s()))
        if cache.unwritten:
            kept += (
                f"; {answers(cache.unwritten)} could not be cached: "
                f"{cache.path} was held by another process or could not be opened"
            )
        else:
            kept += "; the answers received are in the cache"
    return KeyboardInterrupt(kept)
