"""The DuckDB store: one object holding one connection, opened for short transactions.

DuckDB lets one process hold a database file at a time (a second open fails at once with
"Conflicting lock"), so evalkit never keeps the file open across a run: it opens, does one
short transaction, and closes. When another process holds the file, ``Store.open`` retries
with a bounded wait (30 s by default, ``EVALKIT_DB_WAIT_S`` to change), says so on stderr once
after a second, and then gives up with a StoreError naming the file. Every schema change is a
named migration (see migrations.py); a run is written in one transaction, in bulk, so a crash
never leaves half a run.
"""

from __future__ import annotations

import os
import random
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from itertools import islice
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn

from evalkit.errors import SchemaOutdatedError, StoreError
from evalkit.store.migrations import apply_migrations, pending

DEFAULT_WAIT_S = 30.0
APPEND_CHUNK = 10_000  # rows buffered by the appender between flushes
WAIT_NOTICE_AFTER_S = 1.0
_NO_EXTENSIONS: dict[str, str | bool | int | float | list[str]] = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
}
NOT_A_DATABASE = "{path}: not a DuckDB database file (it holds other data); choose another --db path"
DAMAGED = (
    "{path}: the database could not be opened: the file is damaged or truncated ({detail}); "
    "move it aside (evalkit then starts a new one) or restore it from a backup"
)


def lock_wait_s() -> float:
    try:
        return float(os.environ.get("EVALKIT_DB_WAIT_S", DEFAULT_WAIT_S))
    except ValueError:
        return DEFAULT_WAIT_S


def age_cutoff(older_than_days: int) -> datetime:
    """The moment ``older_than_days`` ago (UTC, naive, as stored); an age reaching back past the
    year 1 is the year 1, before which nothing is stored."""
    try:
        return datetime.now(UTC).replace(tzinfo=None) - timedelta(days=older_than_days)
    except OverflowError:  # past datetime.min, or more days than timedelta holds
        return datetime.min


def _interrupted(exc: BaseException) -> bool:
    """DuckDB takes Ctrl-C during a query and raises its own error (an InterruptException, or a
    RuntimeError "Query interrupted" while it reads the query's parameters) instead."""
    import duckdb

    return isinstance(exc, duckdb.InterruptException) or (
        isinstance(exc, RuntimeError) and str(exc) == "Query interrupted"
    )


def _reraise(exc: BaseException, failed: str, path: Path) -> NoReturn:
    """``exc`` raised again as evalkit sees it: Ctrl-C inside DuckDB as Ctrl-C, any other DuckDB
    error as a StoreError saying ``failed`` and why, everything else as it is."""
    import duckdb

    if _interrupted(exc):
        raise KeyboardInterrupt from None
    if _damaged(exc):
        raise _damage(path, exc) from None
    if isinstance(exc, duckdb.Error):
        raise StoreError(f"{failed} ({_first_line(exc, path)})") from None
    raise exc


def _damaged(exc: BaseException) -> bool:
    """A DuckDB error saying the file is cut short or its blocks fail their checksums."""
    import duckdb

    text = str(exc)
    return isinstance(exc, duckdb.Error) and ("Could not read enough bytes" in text or "Corrupt database file" in text)


def _damage(path: Path, exc: BaseException) -> StoreError:
    """The error for a damaged file, saying how DuckDB found out (its message is two lines of
    numbers)."""
    found = "a block fails its checksum" if "Corrupt database file" in str(exc) else "a read past the end of the file"
    return StoreError(DAMAGED.format(path=path, detail=found))


def _foreign_file(path: Path) -> bool:
    """An existing file holding something else (CSV, JSON, SQLite, text): every DuckDB file has
    "DUCK" at byte 8. DuckDB 2 would open CSV or JSON as an in-memory database over that data,
    where every run stored vanishes at close."""
    try:
        with path.open("rb") as handle:
            head = handle.read(12)
    except OSError:  # a folder, no file yet, no permission: DuckDB's own error says which
        return False
    return bool(head) and head[8:12] != b"DUCK"


def waiting_message(path: Path, exc: BaseException, wait_s: float) -> str:
    """What a command waiting for the database says: which file, which process holds it (DuckDB's
    lock error names its PID) and how long it waits."""
    pid = re.search(r"\(PID (\d+)\)", str(exc))
    holder = f" (PID {pid.group(1)})" if pid else ""
    return f"Waiting for {path}, held by another process{holder}; giving up after {wait_s:g} s…"


def _say_on_stderr(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


# Every command opens the database here, so this is the one place that says it waits (once, after
# WAIT_NOTICE_AFTER_S): a command that sits silent for seconds looks hung. Replaceable by an
# embedding program; the store imports no UI library.
lock_wait_notice: Callable[[str], None] = _say_on_stderr


def _is_lock_error(exc: Exception) -> bool:
    text = str(exc)
    return "Conflicting lock" in text or "Could not set lock" in text


class Store:
    """An open database. Use ``with Store.open(path) as store:``."""

    def __init__(self, con: Any, path: Path, read_only: bool) -> None:
        self.con = con
        self.path = path
        self.read_only = read_only

    @classmethod
    def open(
        cls, path: Path, *, read_only: bool = False, wait_s: float | None = None, upto: str | None = None
    ) -> Store:
        """Open (creating and migrating when writable), waiting for another process's lock."""
        import duckdb

        if not read_only:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"{path}: cannot create the database folder ({exc.strerror})") from None
        if _foreign_file(path):
            raise StoreError(NOT_A_DATABASE.format(path=path))
        began = time.monotonic()
        deadline = began + (lock_wait_s() if wait_s is None else wait_s)
        delay = 0.02
        waiting_said = False
        while True:
            try:
                # never install or load an extension: DuckDB would fetch one from the network to
                # read a SQLite file given as the database, and then write into that file
                con = duckdb.connect(str(path), read_only=read_only, config=_NO_EXTENSIONS)
                break
            except duckdb.Error as exc:
                if _damaged(exc):
                    raise _damage(path, exc) from None
                if not _is_lock_error(exc):
                    raise StoreError(f"{path}: cannot open the database ({_first_line(exc, path)})") from None
                if not waiting_said and time.monotonic() - began >= WAIT_NOTICE_AFTER_S:
                    waiting_said = True
                    lock_wait_notice(waiting_message(path, exc, deadline - began))
                if time.monotonic() >= deadline:
                    raise StoreError(
                        f"{path}: the database is held by another process; gave up after "
                        f"{lock_wait_s() if wait_s is None else wait_s:g} s (set EVALKIT_DB_WAIT_S to wait longer)"
                    ) from None
                time.sleep(delay * random.uniform(0.5, 1.5))
                delay = min(delay * 2, 0.5)
        store = cls(con, path, read_only)
        try:
            if not read_only:
                apply_migrations(con, upto)
            elif pending(con):
                raise SchemaOutdatedError(
                    f"{path}: the database schema is older than this evalkit; run any writing command once"
                )
        except BaseException as exc:
            con.close()
            _reraise(exc, f"{path}: cannot migrate the database", path)
        return store

    def __enter__(self) -> Store:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
        if exc is not None and _interrupted(exc):  # Ctrl-C, as Python would have raised it
            raise KeyboardInterrupt from None
        if exc is not None and _damaged(exc):  # a damaged block met by any read, in any command
            raise _damage(self.path, exc) from None

    def close(self) -> None:
        self.con.close()

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """One transaction: committed when the block ends, rolled back on any exception."""
        import duckdb

        self.con.execute("begin transaction")
        try:
            yield self.con
        except BaseException as exc:
            self.con.execute("rollback")
            _reraise(exc, f"{self.path}: write failed, nothing was written", self.path)
        try:
            self.con.execute("commit")
        except duckdb.Error as exc:
            if _damaged(exc):
                raise _damage(self.path, exc) from None
            raise StoreError(f"{self.path}: commit failed ({_first_line(exc, self.path)})") from None

    def insert_rows(
        self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]], *, replace: bool = False
    ) -> None:
        """Bulk insert (or, with ``replace``, upsert by the table's key) through DuckDB's appender,
        in the open transaction: each value converted as an executemany parameter is, without a
        statement per row. Flushed every ``APPEND_CHUNK`` rows, so ``rows`` may be made as they
        are taken and neither side holds them all (100,000 results: one statement unnesting a
        list per column took 2.2 s and 330 MB more, the appender 0.7 s; bench/README.md, session 10)."""
        appender = self.con.appender(table, columns=list(columns), action="upsert" if replace else "insert")
        taken = iter(rows)
        try:
            while chunk := list(islice(taken, APPEND_CHUNK)):
                appender.append_rows(chunk)
                appender.flush()
        except BaseException:
            appender.clear()  # the rows a refused flush kept go with the transaction's rollback
            raise

    def schema_version(self) -> list[str]:
        rows = self.con.execute("select name from evalkit_migrations order by name").fetchall()
        return [r[0] for r in rows]


def _first_line(exc: BaseException, path: Path | None = None) -> str:
    """DuckDB's message, first line, without the path the message around it already names."""
    line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return line.replace(f' from file "{path}"', "").replace(f'"{path}"', "the file") if path is not None else line
