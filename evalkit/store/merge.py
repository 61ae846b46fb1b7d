"""Folding other evalkit databases into this one (DESIGN 8.1): ``evalkit merge OTHER.duckdb...``.

Each source is copied aside and opened there (so an older schema is migrated on the copy, never
on the user's file), attached read-only, and checked against this database before anything is
written: a run id present here with other content, or in two sources with different content, is
refused (exit 2, nothing written). Then each source is folded in one transaction: its runs that
are not here yet, with their items (rows as the source stored them: a run kept at privacy
``none`` has no items here either), and the accepted marks of runs present in both. The cache
comes along only when asked (``with_cache``), never replacing an entry held here.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.errors import InputError, StoreError
from evalkit.store.store import Store

# what may differ between two copies of one run: when (and whether) each database accepted it
MARKS = ("accepted_at",)


@dataclass(frozen=True, slots=True)
class Merged:
    source: str
    added: int
    skipped: int
    items: int
    cache_entries: int

    def as_dict(self) -> dict[str, object]:
        return {"source": self.source, "added": self.added, "skipped": self.skipped, "items": self.items,
                "cache_entries": self.cache_entries}  # fmt: skip


def merge(store: Store, sources: Sequence[Path], *, with_cache: bool = False) -> list[Merged]:
    """Fold every run of ``sources`` into ``store`` (see the module's text)."""
    own = store.path.resolve()
    for source in sources:
        if not source.is_file():
            raise InputError(f"{source}: no such database file; give the path of an evalkit .duckdb file")
        if source.resolve() == own:
            raise InputError(f"{source}: this is the database being merged into; give the other databases")
    with tempfile.TemporaryDirectory(prefix="evalkit-merge-") as tmp:
        aliases = []
        for index, source in enumerate(sources):
            copy = Path(tmp) / f"source{index}.duckdb"
            _copy_aside(source, copy)
            _refuse_foreign(store, source, copy)
            try:
                Store.open(copy, wait_s=0).close()  # migrated on the copy, like any older database
            except StoreError as exc:
                raise InputError(f"{source}: {str(exc).split(': ', 1)[-1]}") from None
            alias = f"evalkit_src{index}"
            store.con.execute(f"attach '{copy}' as {alias} (read_only)")
            aliases.append(alias)
        try:
            columns = {t: _columns(store, t) for t in ("runs", "results", "cache")}
            _refuse_conflicts(store, sources, aliases, columns)
            return [_fold(store, s, a, columns, with_cache) for s, a in zip(sources, aliases, strict=True)]
        finally:
            for alias in aliases:
                store.con.execute(f"detach {alias}")


def _copy_aside(source: Path, copy: Path) -> None:
    try:
        shutil.copyfile(source, copy)
        wal = source.with_name(source.name + ".wal")
        if wal.exists():  # a source whose last writer did not checkpoint: its newest rows are here
            shutil.copyfile(wal, copy.with_name(copy.name + ".wal"))
    except OSError as exc:
        raise InputError(f"{source}: cannot read it ({exc.strerror})") from None


def _refuse_foreign(store: Store, source: Path, copy: Path) -> None:
    """A DuckDB file that evalkit did not write (no migrations table) is not a history to merge."""
    import duckdb

    try:
        store.con.execute(f"attach '{copy}' as evalkit_probe (read_only)")
    except duckdb.Error:
        raise InputError(f"{source}: not a DuckDB database file; give the path of an evalkit .duckdb file") from None
    try:
        found = _count(
            store.con,
            "select count(*) from duckdb_tables() where database_name = 'evalkit_probe' "
            "and table_name = 'evalkit_migrations'",
        )
    finally:
        store.con.execute("detach evalkit_probe")
    if not found:
        raise InputError(f"{source}: a DuckDB file, but not an evalkit database (no evalkit_migrations table)")


def _columns(store: Store, table: str) -> list[str]:
    rows = store.con.execute(
        "select column_name from information_schema.columns where table_catalog = current_database() "
        "and table_schema = 'main' and table_name = $1 order by ordinal_position",
        [table],
    ).fetchall()
    return [r[0] for r in rows]


def _refuse_conflicts(store: Store, sources: Sequence[Path], aliases: list[str], columns: dict[str, list[str]]) -> None:
    """A run id held here (or by an earlier source) with other content: exit 2, nothing written."""
    content = ", ".join(c for c in columns["runs"] if c not in MARKS)
    items = ", ".join(columns["results"])
    held = ["main", *aliases]
    ids = {name: {r[0] for r in store.con.execute(f"select run_id from {name}.runs").fetchall()} for name in held}
    for position, alias in enumerate(aliases, start=1):
        for other in held[:position]:
            if not ids[alias] & ids[other]:  # the usual case (another runner's runs): nothing to compare
                continue
            shared = f"(select run_id from {alias}.runs intersect select run_id from {other}.runs)"
            differing = store.con.execute(
                f"""
                select run_id from (
                    (select {content} from {alias}.runs where run_id in {shared}
                     except select {content} from {other}.runs where run_id in {shared})
                    union all
                    (select {content} from {other}.runs where run_id in {shared}
                     except select {content} from {alias}.runs where run_id in {shared})
                )
                union
                select run_id from (
                    (select {items} from {alias}.results where run_id in {shared}
                     except all select {items} from {other}.results where run_id in {shared})
                    union all
                    (select {items} from {other}.results where run_id in {shared}
                     except all select {items} from {alias}.results where run_id in {shared})
                )
                order by run_id limit 1
                """
            ).fetchone()
            if differing:
                where = "this database" if other == "main" else str(sources[held.index(other) - 1])
                raise InputError(
                    f"{sources[position - 1]}: run {differing[0]} is also in {where} with other content; "
                    "nothing was merged (a run id names one run: remove one of the two copies first)"
                )


def _fold(store: Store, source: Path, alias: str, columns: dict[str, list[str]], with_cache: bool) -> Merged:
    runs, results, cache = (", ".join(columns[t]) for t in ("runs", "results", "cache"))
    new = f"(select run_id from {alias}.runs except select run_id from main.runs)"
    with store.transaction() as con:
        total = _count(con, f"select count(*) from {alias}.runs")
        added = _count(con, f"select count(*) from {new}")
        items = _count(con, f"select count(*) from {alias}.results where run_id in {new}")
        # items first: the runs they belong to are not here yet, so `new` still names them
        con.execute(f"insert into results ({results}) select {results} from {alias}.results where run_id in {new}")
        con.execute(f"insert into runs ({runs}) select {runs} from {alias}.runs where run_id in {new}")
        con.execute(
            f"update runs set accepted_at = s.accepted_at from {alias}.runs s "
            "where runs.run_id = s.run_id and runs.accepted_at is null and s.accepted_at is not null"
        )
        entries = 0
        if with_cache:
            fresh = f"select {cache} from {alias}.cache where key not in (select key from main.cache)"
            entries = _count(con, f"select count(*) from ({fresh})")
            con.execute(f"insert into cache ({cache}) {fresh}")
    return Merged(str(source), added, total - added, items, entries)


def _count(con: Any, sql: str) -> int:
    row = con.execute(sql).fetchone()
    return int(row[0]) if row else 0
