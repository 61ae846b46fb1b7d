"""The completion cache in the database, seen by the runner as a ``CompletionCache``.

A run touches the database only briefly: the entries it may need are read in one query before
it starts (``preload``), and fresh completions are buffered and written in bulk every few
seconds and when the run ends or is interrupted (``flush``). The writes during a run happen in a
background thread (``_Write``), so the event loop never waits for the database: a write of
1,000 entries took 0.07 s on a quiet machine and 0.15 s on a busy one, during which no answer
was read and no call sent (bench/README.md, session 10). ``flush`` waits for it, then writes the
rest. A hit replays the original text, usage and serving record, marked ``cached``. Entries older
than the TTL (``cache_ttl_days``) are not read; the endpoint identity the key was made with is
kept beside each entry.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evalkit.errors import StoreError
from evalkit.records import Completion, ServingRecord, Usage
from evalkit.store.store import Store, age_cutoff

CACHE_COLUMNS = (
    "key", "provider", "model", "response", "serving", "input_tokens", "output_tokens", "latency_ms",
    "adapter", "raw", "created_at", "endpoint",
)  # fmt: skip
FLUSH_EVERY_S = 5.0
FLUSH_EVERY_N = 2000


Pending = dict[str, tuple[Completion, str | None]]  # key -> (completion, endpoint identity)

CACHE_READ = (
    "select key, response, serving, input_tokens, output_tokens, latency_ms, adapter, raw, created_at from cache"
)


def read_entries(store: Store, keys: Iterable[str], ttl_days: int | None = None) -> dict[str, Completion]:
    """The entries among ``keys``, leaving out those older than ``ttl_days``."""
    wanted = list(dict.fromkeys(keys))
    if not wanted:
        return {}
    rows = store.con.execute(
        f"{CACHE_READ} where key in (select unnest($1)) and created_at >= $2", [wanted, _ttl_cutoff(ttl_days)]
    ).fetchall()
    return _completions(rows)


def read_instance_entries(
    store: Store, provider: str, model: str, ttl_days: int | None = None
) -> dict[str, Completion]:
    """Every entry of one instance and alias (for calls whose keys cannot be known ahead: a judge's),
    leaving out those older than ``ttl_days``."""
    rows = store.con.execute(
        f"{CACHE_READ} where provider = $1 and model = $2 and created_at >= $3",
        [provider, model, _ttl_cutoff(ttl_days)],
    ).fetchall()
    return _completions(rows)


def _ttl_cutoff(ttl_days: int | None) -> datetime:
    return datetime.min if ttl_days is None else age_cutoff(ttl_days)


def _completions(rows: list[tuple[Any, ...]]) -> dict[str, Completion]:
    found = {}
    for key, response, serving, tokens_in, tokens_out, latency, adapter, raw, created_at in rows:
        record = json.loads(serving)
        found[key] = Completion(
            text=response,
            serving=ServingRecord(
                record["provider"], record["model"], record.get("reported_model"), record.get("version", 1)
            ),
            usage=Usage(tokens_in or 0, tokens_out or 0),
            latency_ms=latency or 0.0,
            adapter=adapter or "",
            cached=True,
            raw=json.loads(raw) if raw else None,
            # an entry read from the database was stored before this run (README "JSON output")
            cached_at=created_at.replace(tzinfo=UTC).isoformat(timespec="seconds"),
        )
    return found


def write_entries(store: Store, entries: Pending) -> None:
    now = datetime.now(UTC).replace(tzinfo=None)
    rows = [
        (
            key,
            c.serving.provider,
            c.serving.model,
            c.text,
            json.dumps(c.serving.as_dict()),
            c.usage.input_tokens,
            c.usage.output_tokens,
            c.latency_ms,
            c.adapter,
            json.dumps(dict(c.raw)) if c.raw else None,
            now,
            endpoint,
        )
        for key, (c, endpoint) in entries.items()
    ]
    with store.transaction():
        store.insert_rows("cache", CACHE_COLUMNS, rows, replace=True)


def prune_cache(store: Store, older_than_days: int) -> int:
    cutoff = age_cutoff(older_than_days)
    row = store.con.execute("select count(*) from cache where created_at < $1", [cutoff]).fetchone()
    store.con.execute("delete from cache where created_at < $1", [cutoff])
    return int(row[0]) if row else 0


def clear_cache(store: Store, older_than_days: int | None) -> int:
    """Delete every cache entry (or those older than ``older_than_days``) in one transaction;
    returns how many were deleted."""
    where, args = ("where created_at < $1", [age_cutoff(older_than_days)]) if older_than_days is not None else ("", [])
    with store.transaction():
        row = store.con.execute(f"select count(*) from cache {where}", args).fetchone()
        store.con.execute(f"delete from cache {where}", args)
    return int(row[0]) if row else 0


class StoreCache:
    """Preloaded reads, buffered writes; ``flush`` is safe to call at any time. Entries older than
    ``ttl_days`` are not read (None: any age)."""

    def __init__(self, path: Path, ttl_days: int | None = None) -> None:
        self.path = path
        self.ttl_days = ttl_days
        self._entries: dict[str, Completion] = {}
        self._pending: Pending = {}
        self._writing: _Write | None = None  # the background write under way, if any
        self._last_flush = time.monotonic()

    def preload(self, store: Store, keys: Iterable[str]) -> int:
        """Read every entry among ``keys`` from an open store; returns how many exist."""
        found = read_entries(store, keys, self.ttl_days)
        self._entries.update(found)
        return len(found)

    def preload_instance(self, store: Store, provider: str, model: str) -> int:
        """Read every entry of one instance and alias from an open store."""
        entries = read_instance_entries(store, provider, model, self.ttl_days)
        self._entries.update(entries)
        return len(entries)

    @property
    def unwritten(self) -> int:
        """Completions received but not yet written to the database."""
        writing = self._writing
        return len(self._pending) + (len(writing.entries) if writing is not None else 0)

    def get(self, key: str) -> Completion | None:
        return self._entries.get(key)

    def put(self, key: str, completion: Completion, endpoint: str | None = None) -> None:
        self._pending[key] = (completion, endpoint)
        self._entries[key] = Completion(
            completion.text, completion.serving, completion.usage, completion.latency_ms,
            completion.adapter, True, completion.raw,
        )  # fmt: skip
        due = time.monotonic() - self._last_flush >= FLUSH_EVERY_S or len(self._pending) >= FLUSH_EVERY_N
        if due and (self._writing is None or self._writing.done.is_set()):
            self.wait()
            pending, self._pending = self._pending, {}
            self._last_flush = time.monotonic()
            self._writing = _Write(self.path, pending)

    def wait(self) -> None:
        """Wait for the background write; what it could not write is buffered again. A busy or
        unusable database only defers the write (``flush`` says so); another failure is raised."""
        writing = self._writing
        if writing is None:
            return
        writing.thread.join()
        self._writing = None
        if writing.failure is not None:
            self._pending = {**writing.entries, **self._pending}
            if not isinstance(writing.failure, StoreError):
                raise writing.failure

    def flush(self, wait_s: float | None = None, store: Store | None = None) -> None:
        """Write buffered entries (into ``store`` when one is open), once the background write has
        ended; with ``wait_s=0`` a busy database just defers the write."""
        self.wait()
        if not self._pending:
            return
        pending, self._pending = self._pending, {}
        try:
            if store is not None:
                write_entries(store, pending)
            else:
                with Store.open(self.path, wait_s=wait_s) as opened:
                    write_entries(opened, pending)
        except BaseException as exc:  # Ctrl-C too: what was not written is still unwritten
            self._pending = {**pending, **self._pending}
            if not isinstance(exc, StoreError) or wait_s != 0.0:
                raise
        self._last_flush = time.monotonic()


class _Write:
    """Entries written in a thread of their own, in one short session that never waits for a
    database another process holds (it is tried again at the next write). Not a daemon: a
    process never exits while the thread is inside DuckDB."""

    def __init__(self, path: Path, entries: Pending) -> None:
        self.path = path
        self.entries = entries
        self.failure: BaseException | None = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="evalkit-cache-write")
        self.thread.start()

    def _run(self) -> None:
        try:
            with Store.open(self.path, wait_s=0.0) as opened:
                write_entries(opened, self.entries)
        except BaseException as exc:  # handed to the event loop's thread by StoreCache.wait
            self.failure = exc
        finally:
            self.done.set()
