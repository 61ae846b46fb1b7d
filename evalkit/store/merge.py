"""Folding other evalkit databases into this one (README "One history for a team: merge and export"):
``evalkit merge OTHER.duckdb...``.

A source is a file the user hands us, maybe a CI artifact cut short, maybe hostile, so it is
checked whole before anything is written, and every fault it has is named as its own:

1. its header (every DuckDB file has ``DUCK`` at byte 8), before any byte is copied;
2. attached read-only where it lies (its path a query parameter, never quoted into SQL); an
   older schema alone makes it copied aside (checked first against the free space there) and
   migrated on the copy, never on the user's file;
3. its tables: ``runs``, ``results``, ``cache`` and ``batches`` with this database's columns and
   types;
4. its rows, as strictly as a run's own writes: every block read once (a damaged one is found
   here, and named as the source's), set ids that are set ids, known kinds, each item once, no
   item without its run, each batch once in a known state;
5. against this database: a run id (or a provider batch id) present here with other content, or
   in two sources with different content, is refused (exit 2, nothing written).

Then each source is folded in one transaction: its runs that are not here yet, with their items
(rows as the source stored them: a run kept at privacy ``none`` has no items here either), and
the accepted marks of runs present in both; its provider batches not held here, and the
collected copy of a batch still pending here (``store.batches.fold_batches``). The cache comes
along only when asked (``with_cache``), never replacing an entry held here.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.errors import InputError, StoreError
from evalkit.records import SET_ID
from evalkit.store.batches import SUBMITTED, fold_batches, source_checks
from evalkit.store.migrations import MIGRATION_TABLE, MIGRATIONS
from evalkit.store.store import Store, _damaged, _foreign_file, _is_lock_error

# what may differ between two copies of one run: when (and whether) each database accepted it
MARKS = ("accepted_at",)
TABLES = ("runs", "results", "cache", "batches")
KINDS = ("prompts", "retrieval")
# room left beside a copy aside: an older source is copied only when this much stays free
COPY_HEADROOM_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Merged:
    source: str
    added: int
    skipped: int
    items: int
    cache_entries: int
    batches: int  # provider batches added, or marked collected

    def as_dict(self) -> dict[str, object]:
        return {"source": self.source, "added": self.added, "skipped": self.skipped, "items": self.items,
                "cache_entries": self.cache_entries, "batches": self.batches}  # fmt: skip


def merge(store: Store, sources: Sequence[Path], *, with_cache: bool = False) -> list[Merged]:
    """Fold every run of ``sources`` into ``store`` (see the module's text)."""
    own = store.path.resolve()
    for source in sources:
        if not source.is_file():
            raise InputError(f"{source}: no such database file; give the path of an evalkit .duckdb file")
        if source.resolve() == own:
            raise InputError(f"{source}: this is the database being merged into; give the other databases")
        if _foreign_file(source):  # read 12 bytes, before anything is attached or copied
            raise InputError(f"{source}: not a DuckDB database file; give the path of an evalkit .duckdb file")
    columns = {t: _columns(store, t) for t in TABLES}
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="evalkit-merge-")))
        aliases = []
        for index, source in enumerate(sources):
            alias = f"evalkit_src{index}"
            stack.enter_context(_attached(store, source, alias, tmp / f"source{index}.duckdb"))
            _check_tables(store, source, alias, columns)
            _check_rows(store, source, alias)
            aliases.append(alias)
        _refuse_conflicts(store, sources, aliases, columns)
        return [_fold(store, s, a, columns, with_cache) for s, a in zip(sources, aliases, strict=True)]


@contextmanager
def _attached(store: Store, source: Path, alias: str, aside: Path) -> Iterator[None]:
    """``source`` attached read-only as ``alias`` (an older schema: its migrated copy at ``aside``),
    detached again when the merge ends."""
    _attach(store, source, alias)
    try:
        if not _is_evalkit(store, alias):
            raise InputError(f"{source}: a DuckDB file, but not an evalkit database (no {MIGRATION_TABLE} table)")
        if _outdated(store, source, alias):
            store.con.execute(f"detach {alias}")
            _migrate_aside(source, aside)
            _attach(store, aside, alias, shown=source)
    except BaseException:
        _detach(store, alias)
        raise
    try:
        yield
    finally:
        _detach(store, alias)


def _attach(store: Store, path: Path, alias: str, *, shown: Path | None = None) -> None:
    import duckdb

    try:
        store.con.execute(f"attach $1 as {alias} (read_only)", [str(path)])
    except duckdb.Error as exc:
        raise _source_error(shown or path, exc) from None


def _detach(store: Store, alias: str) -> None:
    import duckdb

    with contextlib.suppress(duckdb.Error):  # never attached, or already detached
        store.con.execute(f"detach {alias}")


def _source_error(source: Path, exc: Exception) -> InputError:
    """A DuckDB error met while reading a source, said of the source: this database is untouched."""
    if _damaged(exc):
        why = "it is damaged or truncated (a read failed its checksum or ran past its end)"
    elif _is_lock_error(exc):
        why = "another process holds it open; merge it once that process has finished"
    else:
        why = f"it cannot be read ({str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__})"
    return InputError(f"{source}: {why}; nothing was merged, this database is unchanged")


def _is_evalkit(store: Store, alias: str) -> bool:
    return bool(
        _count(
            store.con,
            "select count(*) from duckdb_tables() where database_name = $1 and table_name = $2",
            [alias, MIGRATION_TABLE],
        )
    )


def _outdated(store: Store, source: Path, alias: str) -> bool:
    """The source lacks a migration this evalkit applies."""
    import duckdb

    try:
        done = {r[0] for r in store.con.execute(f"select name from {alias}.{MIGRATION_TABLE}").fetchall()}
    except duckdb.Error as exc:
        raise _source_error(source, exc) from None
    return any(name not in done for name, _ in MIGRATIONS)


def _migrate_aside(source: Path, aside: Path) -> None:
    """Copy an older source aside and migrate the copy; refused when the copy would leave less than
    COPY_HEADROOM_BYTES free where it is written."""
    wal = source.with_name(source.name + ".wal")
    try:
        size = source.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
        free = shutil.disk_usage(aside.parent).free
    except OSError as exc:
        raise InputError(f"{source}: cannot read it ({exc.strerror})") from None
    if size + COPY_HEADROOM_BYTES > free:
        raise InputError(
            f"{source}: its older schema must be migrated on a copy of {size / 1e6:.0f} MB, but only "
            f"{free / 1e6:.0f} MB are free in {aside.parent}; set TMPDIR to a folder with room"
        )
    try:
        shutil.copyfile(source, aside)
        if wal.exists():  # a source whose last writer did not checkpoint: its newest rows are here
            shutil.copyfile(wal, aside.with_name(aside.name + ".wal"))
    except OSError as exc:
        raise InputError(f"{source}: cannot read it ({exc.strerror})") from None
    try:
        Store.open(aside, wait_s=0).close()
    except StoreError as exc:
        raise InputError(f"{source}: {str(exc).split(': ', 1)[-1]}") from None


def _columns(store: Store, table: str) -> list[str]:
    return [name for name, _ in _typed_columns(store, None, table)]


def _typed_columns(store: Store, database: str | None, table: str) -> list[tuple[str, str]]:
    """``table``'s columns and types in ``database`` (None: this database)."""
    rows = store.con.execute(
        "select column_name, data_type from information_schema.columns "
        "where table_catalog = coalesce($1, current_database()) and table_schema = 'main' and table_name = $2 "
        "order by ordinal_position",
        [database, table],
    ).fetchall()
    return [(r[0], r[1]) for r in rows]


def _check_tables(store: Store, source: Path, alias: str, columns: dict[str, list[str]]) -> None:
    """The source holds runs, results, cache and batches with this database's columns and types."""
    for table in TABLES:
        own = dict(_typed_columns(store, None, table))
        theirs = dict(_typed_columns(store, alias, table))
        if not theirs:
            raise InputError(
                f"{source}: it has no {table} table, so it is not a whole evalkit database; nothing was merged"
            )
        for name in columns[table]:
            if name not in theirs:
                raise InputError(f"{source}: its {table} table has no column {name}; nothing was merged")
            if theirs[name] != own[name]:
                raise InputError(
                    f"{source}: its {table}.{name} column is {theirs[name]} where evalkit keeps {own[name]}; "
                    "nothing was merged"
                )


def _check_rows(store: Store, source: Path, alias: str) -> None:
    """Every block of the source read once, and its rows held to a run's own writes."""
    import duckdb

    pattern = SET_ID.pattern
    checks = (
        *((f"select sum(hash(t)) from {alias}.{table} t", None) for table in TABLES),  # every block read
        (
            f"select set_id from {alias}.runs where not regexp_full_match(set_id, $1) limit 1",
            "a run whose set id {0!r} is not a set id (lowercase letters, digits, _ and dots)",
        ),
        (
            f"select kind from {alias}.runs where kind not in {KINDS} limit 1",
            "a run of an unknown kind {0!r} (evalkit writes prompts and retrieval runs)",
        ),
        (
            f"select run_id, item_index from {alias}.results group by run_id, item_index, repeat_index "
            "having count(*) > 1 limit 1",
            "item {1} of run {0} twice (a run holds each item once)",
        ),
        (
            f"select run_id from {alias}.results where run_id not in (select run_id from {alias}.runs) limit 1",
            "items of run {0}, which it does not hold",
        ),
        *source_checks(alias),
    )
    for sql, found in checks:
        try:
            params = [pattern] if "$1" in sql else []
            row = store.con.execute(sql, params).fetchone()
        except duckdb.Error as exc:
            raise _source_error(source, exc) from None
        if found is not None and row is not None:
            raise InputError(f"{source}: it holds {found.format(*row)}; nothing was merged, this database is unchanged")


def _refuse_conflicts(store: Store, sources: Sequence[Path], aliases: list[str], columns: dict[str, list[str]]) -> None:
    """A run id or a batch id held here (or by an earlier source) with other content: exit 2,
    nothing written."""
    identities = (
        # a run: its row but for its marks, and its items
        ("run", "run_id", {"runs": [c for c in columns["runs"] if c not in MARKS], "results": columns["results"]}),
        # a provider batch: its submission (a pending and a collected copy are one batch)
        ("batch", "batch_id", {"batches": list(SUBMITTED)}),
    )
    held = ["main", *aliases]
    for what, key, compared in identities:
        owner = next(iter(compared))
        ids = {name: {r[0] for r in store.con.execute(f"select {key} from {name}.{owner}").fetchall()} for name in held}
        for position, alias in enumerate(aliases, start=1):
            for other in held[:position]:
                if not ids[alias] & ids[other]:  # the usual case (another runner's runs): nothing to compare
                    continue
                differing = _differing(store, key, compared, alias, other)
                if differing:
                    where = "this database" if other == "main" else str(sources[held.index(other) - 1])
                    raise InputError(
                        f"{sources[position - 1]}: {what} {differing} is also in {where} with other content; "
                        f"nothing was merged (a {what} id names one {what}: remove one of the two copies first)"
                    )


def _differing(store: Store, key: str, compared: dict[str, list[str]], alias: str, other: str) -> str | None:
    """The first ``key`` held by both ``alias`` and ``other`` whose rows in ``compared`` (table ->
    columns; the first table holds the keys) differ."""
    owner = next(iter(compared))
    shared = f"(select {key} from {alias}.{owner} intersect select {key} from {other}.{owner})"
    differences = []
    for table, listed in compared.items():
        select = f"select {', '.join(listed)} from {{}}.{table} where {key} in {shared}"
        mine, theirs = select.format(alias), select.format(other)
        differences.append(f"select {key} from (({mine} except all {theirs}) union all ({theirs} except all {mine}))")
    row = store.con.execute(" union ".join(differences) + f" order by {key} limit 1").fetchone()
    return str(row[0]) if row else None


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
        batches = fold_batches(con, alias)
    return Merged(str(source), added, total - added, items, entries, batches)


def _count(con: Any, sql: str, params: Sequence[object] = ()) -> int:
    row = con.execute(sql, list(params)).fetchone()
    return int(row[0]) if row else 0
