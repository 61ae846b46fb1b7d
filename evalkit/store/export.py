"""The history as Parquet (README "One history for a team: merge and export"): ``evalkit export --parquet DIR``.

Three tables, each a folder partitioned by set in the Hive layout (``runs/set_id=faq/...``):
``runs`` (the runs table as it is), ``results`` (the items of prompt runs, with their set id)
and ``retrieval`` (the questions of retrieval runs, their details as columns). A whole export
replaces the folders, so exporting twice writes the same rows; ``since`` writes only the runs
started on or after that day (and their items) into files of their own beside the earlier ones.
DuckDB's own COPY writes them, in one read of the database, with every path a query parameter.

An export is written aside first, in a hidden staging folder inside DIR (``.evalkit-export-*``,
which Hive readers skip), and swapped in only once every table is whole: a table folder is
exchanged with its new version in one ``renameat2(RENAME_EXCHANGE)`` on Linux, so a reader or a
``kill -9`` meets the old export or the new one, never a mix or nothing. Where the exchange is not
available (another OS or file system) the old folder is renamed into the staging folder and the
new one into place; a kill between those two renames is mended by the next export, which puts
an old table back before it starts. An increment's files are moved in one by one with
``os.replace``: each file is whole, old or new.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import tempfile
from datetime import date
from pathlib import Path
from typing import Any

from evalkit.errors import InputError, StoreError
from evalkit.store.store import Store, _first_line

RESULTS = """
select r.set_id, x.run_id, x.item_index, x.item_id, x.repeat_index, x.passed, x.score, x.reason, x.error,
       x.latency_ms, x.assertions, x.prompt, x.system_prompt, x.response, x.serving, x.adapter, x.input_tokens,
       x.output_tokens, x.cached, x.yardstick, x.details, r.started_at
from results x join runs r using (run_id)
where r.kind = 'prompts' {since}
"""
RETRIEVAL = """
select r.set_id, x.run_id, x.item_index, x.item_id as question_id, x.error,
       x.details ->> 'form' as form, x.details ->> 'hard_class' as hard_class,
       cast(x.details ->> 'top1_hit' as boolean) as top1_hit, cast(x.details ->> 'top3_hit' as boolean) as top3_hit,
       cast(x.details -> 'retrieved' as varchar[]) as retrieved, r.provider as retriever, r.started_at
from results x join runs r using (run_id)
where r.kind = 'retrieval' {since}
"""
EXPORT_MEMORY = "400MB"
RUNS = "select * from runs where true {since} order by set_id, started_at, run_id"
TABLES = (("runs", RUNS), ("results", RESULTS), ("retrieval", RETRIEVAL))
STAGING = ".evalkit-export-"
OLD = "old-"  # a table folder moved aside into the staging folder, while the exchange is not atomic


def export_parquet(store: Store, folder: Path, since: date | None = None) -> dict[str, int]:
    """Write the three tables under ``folder``; the number of rows written to each."""
    import duckdb

    try:
        return _export(store, folder, since)
    except OSError as exc:
        raise InputError(f"{folder}: cannot write the export there ({exc.strerror}); choose another folder") from None
    except duckdb.Error as exc:
        raise StoreError(f"{folder}: the export failed, the previous export is kept ({_first_line(exc)})") from None


def _export(store: Store, folder: Path, since: date | None) -> dict[str, int]:
    condition = "and r.started_at >= $1" if since is not None else ""
    params: list[Any] = [since] if since is not None else []
    counts = {}
    # COPY keeps each partition's row groups in memory; in order, and unbounded, a million result
    # rows took the process to 1 GB: rows in any order, and DuckDB told to spill past a bound
    store.con.execute("set preserve_insertion_order = false")
    store.con.execute(f"set memory_limit = '{EXPORT_MEMORY}'")
    folder.mkdir(parents=True, exist_ok=True)
    recover(folder)
    staging = Path(tempfile.mkdtemp(dir=folder, prefix=STAGING))
    try:
        for table, query in TABLES:
            sql = query.format(since=condition.replace("r.", "") if table == "runs" else condition)
            counts[table] = _count(store, sql, params)
            if counts[table] == 0:
                continue
            if since is None:
                options = "overwrite true, filename_pattern 'all_{i}'"
            else:  # an increment beside the earlier files; the same increment again replaces its own files
                options = f"overwrite_or_ignore true, filename_pattern 'since-{since:%Y%m%d}_{{i}}'"
            target = len(params) + 1
            store.con.execute(
                f"copy ({sql}) to ${target} (format parquet, partition_by (set_id), {options})",
                [*params, str(staging / table)],
            )
        for table, _ in TABLES:
            if since is not None:
                _move_files_in(staging / table, folder / table)
            elif counts[table]:
                _swap_in(staging / table, folder / table, staging)
            elif (folder / table).exists():  # nothing to write: a whole export leaves no stale rows behind
                (folder / table).rename(staging / f"{OLD}{table}")
    finally:  # done, failed or interrupted: an old table moved aside and not replaced goes back
        recover(folder)
    return counts


def recover(folder: Path) -> None:
    """Put back a table folder that an export moved aside and did not replace (it was killed
    between two renames), and drop the staging folders."""
    for staging in folder.glob(f"{STAGING}*"):
        for table, _ in TABLES:
            old = staging / f"{OLD}{table}"
            if old.is_dir() and not (folder / table).exists():
                old.rename(folder / table)
        shutil.rmtree(staging, ignore_errors=True)


def _swap_in(new: Path, target: Path, staging: Path) -> None:
    if not target.exists():
        new.rename(target)
        return
    if _exchange(new, target):  # the old table is now at `new`, and goes with the staging folder
        return
    target.rename(staging / f"{OLD}{target.name}")
    new.rename(target)


def _move_files_in(new: Path, target: Path) -> None:
    if not new.is_dir():
        return
    for file in sorted(new.rglob("*.parquet")):
        destination = target / file.relative_to(new)
        destination.parent.mkdir(parents=True, exist_ok=True)
        os.replace(file, destination)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(first: Path, second: Path) -> bool:
    """Swap two paths in one step (Linux renameat2); False where that is not available."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):  # not Linux, or a C library without it
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    result = renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE)
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):  # a kernel or file system without it
        return False
    raise OSError(code, os.strerror(code), str(second))


def _count(store: Store, sql: str, params: list[Any]) -> int:
    row = store.con.execute(f"select count(*) from ({sql})", params).fetchone()
    return int(row[0]) if row else 0
