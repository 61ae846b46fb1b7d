"""`evalkit merge` and `evalkit export` against hostile or broken files: a source cut short or
damaged, without a table, with other column types, with duplicated items or a path for a set id;
a TMPDIR with a quote in its name; an 8 GB sparse file; and kill -9 during an export. Each is
named as the source's fault in one line (exit 2), the target untouched, nothing copied that
was not checked first; a killed export leaves the previous one whole."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from evalkit.store import Store
from evalkit.store import export as export_module
from evalkit.store import merge as merge_module

RUN = "20250101-120000-abcdef"


def evalkit_database(path: Path, *, items: int = 2000, run_id: str = RUN, set_id: str = "team.set") -> Path:
    """A real evalkit database of the current schema: one run with ``items`` items."""
    store = Store.open(path)
    store.con.execute(
        "insert into runs (run_id, kind, set_id, grader, provider, model, reported_model, started_at, item_count, "
        "passed_count, error_count, pass_rate, mean_score, status, privacy) values ($1, 'prompts', $2, "
        "'deterministic', 'rec', 'replay', 'rec-1', now()::timestamp, $3, $3, 0, 1.0, 1.0, 'complete', 'full')",
        [run_id, set_id, items],
    )
    store.con.execute(
        "insert into results (run_id, item_index, item_id, passed, score, response) "
        "select $1, i, 'p' || i, true, 1.0, repeat('x', 100) from range($2) t(i)",
        [run_id, items],
    )
    store.con.execute("checkpoint")
    store.close()
    return path


@pytest.fixture
def target(isolated: Path) -> Path:
    """This project's database, holding one run of its own."""
    (isolated / "evalkit.yaml").write_text("db: here.duckdb\n")
    return evalkit_database(isolated / "here.duckdb", items=3, run_id="20260101-000000-000000")


def held(path: Path) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute(
            "select r.run_id, r.set_id, count(x.item_index) from runs r left join results x using (run_id) "
            "group by all order by all"
        ).fetchall()
    finally:
        con.close()


def refused(cli: Any, target: Path, source: Path, *words: str) -> None:
    """``merge source`` is exit 2 in one line naming the source (never the target), and the target
    holds what it held."""
    before = held(target)
    result = cli("merge", str(source))
    assert result.exit_code == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"Error: {source}: "), line
    assert str(target) not in line
    assert "move it aside" not in line
    for word in words:
        assert word in line, line
    assert result.exception is None
    assert held(target) == before


def test_a_truncated_source_is_named_and_the_target_is_untouched(cli: Any, isolated: Path, target: Path) -> None:
    data = evalkit_database(isolated / "good.duckdb").read_bytes()
    cut = isolated / "cut.duckdb"
    cut.write_bytes(data[: len(data) // 2])
    refused(cli, target, cut, "damaged or truncated", "this database is unchanged")


def test_a_corrupted_source_is_named_and_the_target_is_untouched(cli: Any, isolated: Path, target: Path) -> None:
    data = bytearray(evalkit_database(isolated / "good.duckdb").read_bytes())
    for offset in range(12288 + 100, len(data), 65536):  # a few bytes flipped in every block
        data[offset : offset + 64] = bytes(b ^ 0xFF for b in data[offset : offset + 64])
    bad = isolated / "bad.duckdb"
    bad.write_bytes(bytes(data))
    refused(cli, target, bad, "damaged or truncated")


def test_a_source_without_the_results_table_is_named(cli: Any, isolated: Path, target: Path) -> None:
    source = evalkit_database(isolated / "partial.duckdb", items=3)
    con = duckdb.connect(str(source))
    con.execute("drop table results")
    con.close()
    refused(cli, target, source, "it has no results table")


def test_a_source_whose_column_types_differ_is_named(cli: Any, isolated: Path, target: Path) -> None:
    source = evalkit_database(isolated / "typed.duckdb", items=3)
    con = duckdb.connect(str(source))
    con.execute("alter table results alter column score type varchar")
    con.close()
    refused(cli, target, source, "results.score column is VARCHAR where evalkit keeps DOUBLE")


def test_duplicated_items_are_refused(cli: Any, isolated: Path, target: Path) -> None:
    source = evalkit_database(isolated / "twice.duckdb", items=3)
    con = duckdb.connect(str(source))
    con.execute("insert into results select * from results where item_index = 1")
    con.close()
    refused(cli, target, source, f"item 1 of run {RUN} twice")


def test_a_path_like_set_id_is_refused_and_baseline_accept_never_meets_it(
    cli: Any, isolated: Path, target: Path
) -> None:
    source = evalkit_database(isolated / "path.duckdb", items=3, set_id="../x")
    refused(cli, target, source, "set id '../x' is not a set id")
    accepted = cli("baseline", "accept")
    assert (accepted.exit_code, accepted.exception) == (2, None), accepted.stderr
    assert accepted.stderr.endswith(": no prompt run is stored; run the sets first (evalkit run)\n")
    assert not (isolated / "x.json").exists()


def test_items_without_their_run_are_refused(cli: Any, isolated: Path, target: Path) -> None:
    source = evalkit_database(isolated / "orphans.duckdb", items=3)
    con = duckdb.connect(str(source))
    con.execute("update results set run_id = 'elsewhere'")
    con.close()
    refused(cli, target, source, "items of run elsewhere, which it does not hold")


@pytest.mark.parametrize("folder", ["it's", "a'; drop table runs; --"])
def test_paths_with_quotes_are_parameters_never_quoted_sql(
    cli: Any, isolated: Path, target: Path, monkeypatch: pytest.MonkeyPatch, folder: str
) -> None:
    tmp = isolated / folder / "tmp"
    tmp.mkdir(parents=True)
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
    source = evalkit_database(isolated / folder / "source.duckdb", items=3)
    result = cli("merge", str(source), "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["merged"][0]["added"] == 1
    exported = cli("export", "--parquet", str(isolated / folder / "export"))
    assert exported.exit_code == 0, exported.stderr
    assert (isolated / folder / "export" / "runs" / "set_id=team.set").is_dir()


def test_a_source_of_the_current_schema_is_read_in_place_never_copied(
    cli: Any, isolated: Path, target: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_copy(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"copied {args}")

    monkeypatch.setattr(merge_module.shutil, "copyfile", no_copy)
    source = evalkit_database(isolated / "current.duckdb", items=3)
    before = source.read_bytes()
    result = cli("merge", str(source))
    assert result.exit_code == 0, result.stderr
    assert source.read_bytes() == before


def test_a_huge_sparse_file_is_refused_by_its_header_before_any_copy(
    cli: Any, isolated: Path, target: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(merge_module.shutil, "copyfile", lambda *a, **k: pytest.fail("copied"))
    sparse = isolated / "sparse.duckdb"
    with sparse.open("wb") as handle:
        handle.truncate(8 * 1024**3)  # 8 GB of holes: no disk used, and nothing read past its header
    refused(cli, target, sparse, "not a DuckDB database file")


def test_an_older_source_is_copied_only_when_there_is_room(
    cli: Any, isolated: Path, target: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = isolated / "old.duckdb"
    Store.open(old, upto="m001_runs_results_cache").close()
    monkeypatch.setattr(merge_module, "COPY_HEADROOM_BYTES", 1 << 62)
    refused(cli, target, old, "set TMPDIR to a folder with room")


# --- export: a killed export leaves the previous one whole ---------------------------------------

KILLED_EXPORT = """
import os, signal, sys
from pathlib import Path
from evalkit.store import Store
from evalkit.store import export

where, step, database, folder = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
calls = 0

def killing(real):
    def hook(*args):
        global calls
        result = real(*args)
        if where == "rename" and not args[1].name.startswith(export.OLD):
            return result
        calls += 1
        if calls == step:
            os.kill(os.getpid(), signal.SIGKILL)
        return result
    return hook

if where == "rename":  # where the exchange is not atomic: killed right after the old table moved aside
    export._exchange = lambda first, second: False
    Path.rename = killing(Path.rename)
else:
    setattr(export, where, killing(getattr(export, where)))
with Store.open(database, read_only=True) as store:
    export.export_parquet(store, folder)
"""


def parquet_runs(folder: Path) -> list[tuple[Any, ...]]:
    return duckdb.sql(
        "select run_id, set_id from read_parquet($1, hive_partitioning = true) order by all",
        params=[f"{folder}/runs/*/*.parquet"],
    ).fetchall()


@pytest.mark.parametrize(
    ("where", "step"), [("_count", 1), ("_count", 3), ("_exchange", 1), ("_exchange", 2), ("rename", 1)]
)
def test_kill_9_during_an_export_leaves_the_previous_export_whole(isolated: Path, where: str, step: int) -> None:
    database = evalkit_database(isolated / "db.duckdb", items=50)
    folder = isolated / "export"
    with Store.open(database, read_only=True) as store:
        export_module.export_parquet(store, folder)
    previous = parquet_runs(folder)
    store = Store.open(database)
    store.con.execute(
        "insert into runs select * replace ('20250202-000000-000000' as run_id, 'other.set' as set_id) from runs"
    )
    store.close()
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_EXPORT, where, str(step), str(database), str(folder)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    if where == "rename":  # killed between the two renames: the next export (or recover) puts it back
        assert not (folder / "runs").exists()
        export_module.recover(folder)
    assert parquet_runs(folder) in (previous, [*previous, ("20250202-000000-000000", "other.set")])
    with Store.open(database, read_only=True) as store:  # the next export completes, and tidies up
        export_module.export_parquet(store, folder)
    assert len(parquet_runs(folder)) == 2
    assert [p.name for p in folder.iterdir() if p.name.startswith(".")] == []


def test_an_interrupted_export_puts_back_what_it_moved_aside(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    database = evalkit_database(isolated / "db.duckdb", items=5)
    folder = isolated / "export"
    monkeypatch.setattr(export_module, "_exchange", lambda first, second: False)
    real = Path.rename

    def interrupted_between(self: Path, target: Path) -> Path:
        moved = real(self, target)
        if target.name.startswith(export_module.OLD):
            raise KeyboardInterrupt  # Ctrl-C between the two renames
        return moved

    with Store.open(database, read_only=True) as store:
        export_module.export_parquet(store, folder)
        previous = parquet_runs(folder)
        monkeypatch.setattr(Path, "rename", interrupted_between)
        with pytest.raises(KeyboardInterrupt):
            export_module.export_parquet(store, folder)
    assert parquet_runs(folder) == previous
    assert [p.name for p in folder.iterdir() if p.name.startswith(".")] == []
