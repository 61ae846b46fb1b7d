"""The DuckDB store on real files: migrations, bulk run writes, reads, baselines, prune."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from evalkit.errors import StoreError
from evalkit.records import ServingRecord
from evalkit.rows import RunFilter, RunRow
from evalkit.store import Store, find_baseline, history, load_run, prune_runs, run_exists, run_summary, save_run
from evalkit.store.migrations import MIGRATIONS
from tests.factories import run_of


def tables(path: Path) -> set[str]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return {r[0] for r in con.execute("select table_name from duckdb_tables()").fetchall()}
    finally:
        con.close()


def test_migrations_from_empty(db_file: Path) -> None:
    with Store.open(db_file) as store:
        assert store.schema_version() == [name for name, _ in MIGRATIONS]
    assert {"runs", "results", "cache", "evalkit_migrations"} <= tables(db_file)


@pytest.mark.parametrize("upto", [name for name, _ in MIGRATIONS])
def test_migrations_from_each_earlier_version_keep_data(db_file: Path, upto: str) -> None:
    with Store.open(db_file, upto=upto) as store:
        assert store.schema_version()[-1] == upto
        store.con.execute(
            "insert into runs (run_id, kind, set_id, grader, started_at, item_count, passed_count, error_count,"
            " pass_rate, mean_score, status) values ('old-run', 'prompts', 'old.set', 'deterministic',"
            " timestamp '2026-01-01 00:00:00', 1, 1, 0, 1.0, 1.0, 'complete')"
        )
    with Store.open(db_file) as store:
        assert store.schema_version() == [name for name, _ in MIGRATIONS]
        assert store.con.execute("select set_id from runs where run_id = 'old-run'").fetchone() == ("old.set",)


def test_batches_stored_before_their_phase_read_as_answers(db_file: Path) -> None:
    from evalkit.store.batches import load_batches

    with Store.open(db_file, upto="m008_provider_batches") as store:
        store.con.execute(
            "insert into batches (batch_id, submission_id, provider, model, adapter, state, submitted_at,"
            " request_count, set_fingerprints, plan, custom_ids) values ('batch_1', 's1', 'oa', 'm', 'openai',"
            " 'pending', timestamp '2026-11-01 00:00:00', 1, '{}', '{}', '{\"a\": [\"set\", \"a\", 0]}')"
        )
    with Store.open(db_file) as store:
        (batch,) = load_batches(store)
    assert (batch.batch_id, batch.phase, batch.custom_ids) == ("batch_1", "answers", {"a": ["set", "a", 0]})


def test_a_failed_migration_leaves_nothing_half_applied(db_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evalkit.store import migrations

    broken = (*MIGRATIONS, ("m999_broken", "create table half_done (x integer); select * from no_such_table;"))
    monkeypatch.setattr(migrations, "MIGRATIONS", broken)
    with pytest.raises(StoreError, match="cannot migrate"):
        Store.open(db_file)
    assert "half_done" not in tables(db_file)
    monkeypatch.setattr(migrations, "MIGRATIONS", MIGRATIONS)
    with Store.open(db_file) as store:
        assert "m999_broken" not in store.schema_version()


def test_run_round_trip(db_file: Path) -> None:
    run = run_of(2, 3)
    with Store.open(db_file) as store:
        save_run(store, run, "full", "test")
        loaded, meta = load_run(store, run.run_id[:18])
    assert loaded.run_id == run.run_id
    assert loaded.generator == run.generator
    assert (loaded.passed_count, loaded.prompt_count, loaded.pass_rate) == (2, 3, run.pass_rate)
    assert [i.id for i in loaded.items] == [i.id for i in run.items]
    assert loaded.items[2].response == "an answer"
    assert meta["privacy"] == "full"


def test_a_run_is_written_in_one_transaction(db_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evalkit.store import runs as runs_module

    run = run_of(1, 2)
    real = runs_module._item_row

    def bad_rows(*args, **kwargs):
        row = list(real(*args, **kwargs))
        row[3] = "not-a-boolean"  # the results insert fails after the run row went in
        return tuple(row)

    monkeypatch.setattr(runs_module, "_item_row", bad_rows)
    with Store.open(db_file) as store, pytest.raises(StoreError, match="nothing was written"):
        save_run(store, run, "metadata", "test")
    with Store.open(db_file) as store:
        assert store.con.execute("select count(*) from runs").fetchone() == (0,)
        assert store.con.execute("select count(*) from results").fetchone() == (0,)


@pytest.mark.parametrize(
    "interrupt",
    [duckdb.InterruptException("INTERRUPT Error: Interrupted!"), RuntimeError("Query interrupted")],
    ids=["interrupt-exception", "runtime-error"],
)
def test_ctrl_c_inside_duckdb_is_a_keyboard_interrupt_and_writes_nothing(
    db_file: Path, monkeypatch: pytest.MonkeyPatch, interrupt: BaseException
) -> None:
    # DuckDB takes the SIGINT itself and raises its own error: evalkit turns it back into Ctrl-C
    # (exit 130, no traceback), and the run's transaction is rolled back.
    from evalkit.store import runs as runs_module

    real = runs_module._item_row
    seen: list[int] = []

    def interrupted_rows(*args, **kwargs):
        seen.append(1)
        if len(seen) == 2:
            raise interrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(runs_module, "_item_row", interrupted_rows)
    with pytest.raises(KeyboardInterrupt), Store.open(db_file) as store:
        save_run(store, run_of(1, 2), "metadata", "test")
    with Store.open(db_file) as store:
        assert store.con.execute("select count(*) from runs").fetchone() == (0,)


def test_a_run_written_in_several_flushes_is_still_one_transaction(
    db_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The appender flushes every APPEND_CHUNK rows: a row refused in a later flush takes back
    the earlier ones and the run row; a run that goes in whole is read back in order."""
    from evalkit.store import runs as runs_module
    from evalkit.store import store as store_module

    monkeypatch.setattr(store_module, "APPEND_CHUNK", 3)
    run = run_of(5, 8)
    with Store.open(db_file) as store:
        save_run(store, run, "metadata", "test")
        stored = store.con.execute("select item_id, passed, assertions from results order by item_index").fetchall()
    assert [(r[0], r[1]) for r in stored] == [(i.id, i.passed) for i in run.items]
    assert [json.loads(r[2]) for r in stored] == [
        [{"type": a.type, "passed": a.passed, "score": a.value, "weight": a.weight} for a in i.assertions]
        for i in run.items
    ]
    real = runs_module._item_row

    def refused_late(run_: object, index: int, *args: object) -> tuple[object, ...]:
        row = list(real(run_, index, *args))  # type: ignore[arg-type]
        if index == 7:
            row[3] = "not-a-boolean"
        return tuple(row)

    monkeypatch.setattr(runs_module, "_item_row", refused_late)
    other = run_of(5, 8)
    with Store.open(db_file) as store, pytest.raises(StoreError, match="nothing was written"):
        save_run(store, other, "metadata", "test")
    with Store.open(db_file) as store:
        assert store.con.execute("select count(*) from runs").fetchone() == (1,)
        assert store.con.execute("select count(*) from results").fetchone() == (8,)


def test_bulk_write_of_ten_thousand_items(db_file: Path) -> None:
    run = run_of(9_000, 10_000)
    with Store.open(db_file) as store:
        save_run(store, run, "metadata", "test")
        assert store.con.execute("select count(*), sum(passed::int) from results").fetchone() == (10_000, 9_000)


def test_baseline_scope(db_file: Path) -> None:
    base = run_of(3, 4, started_at="2026-11-01T00:00:00+00:00")
    other_instance = run_of(
        1, 4, serving=ServingRecord("other", "alias-1", "model-1"), started_at="2026-11-02T00:00:00+00:00"
    )
    other_alias = run_of(
        1, 4, serving=ServingRecord("fake", "alias-2", "model-1"), started_at="2026-11-03T00:00:00+00:00"
    )
    other_model = run_of(
        1, 4, serving=ServingRecord("fake", "alias-1", "model-2"), started_at="2026-11-04T00:00:00+00:00"
    )
    other_grader = run_of(1, 4, grader="decision:judge:m:v1", started_at="2026-11-05T00:00:00+00:00")
    errored = run_of(1, 4, errors=1, started_at="2026-11-06T00:00:00+00:00")
    unverified = run_of(1, 4, serving=ServingRecord("fake", "alias-1", None), started_at="2026-11-07T00:00:00+00:00")
    with Store.open(db_file) as store:
        for run in (base, other_instance, other_alias, other_model, other_grader, errored, unverified):
            save_run(store, run, "metadata", "test")
        found = find_baseline(
            store, set_id="demo.set", provider="fake", model="alias-1", reported_model="model-1", grader="deterministic"
        )
        assert found is not None
        assert found["run_id"] == base.run_id
        assert find_baseline(
            store, set_id="demo.set", provider="other", model="alias-1", reported_model="model-1", grader="deterministic"
        )["run_id"] == other_instance.run_id  # fmt: skip
        assert find_baseline(
            store, set_id="other.set", provider="fake", model="alias-1", reported_model="model-1", grader="deterministic"
        ) is None  # fmt: skip


def test_history_filters_and_order(db_file: Path) -> None:
    runs = [run_of(i, 4, started_at=f"2026-11-0{i + 1}T00:00:00+00:00") for i in range(4)]
    with Store.open(db_file) as store:
        for run in runs:
            save_run(store, run, "metadata", "test")
        rows = history(store, RunFilter(set_id="demo.set", limit=3))
        assert history(store, RunFilter(set_id="other.set")) == []
        assert history(store, RunFilter(provider="fake", grader="judge")) == []
    assert [r.run_id for r in rows] == [runs[3].run_id, runs[2].run_id, runs[1].run_id]
    newest = rows[0]
    assert isinstance(newest, RunRow)
    assert (newest.set_id, newest.kind, newest.provider, newest.started_at) == (
        "demo.set", "prompts", "fake", "2026-11-04T00:00:00+00:00"
    )  # fmt: skip
    assert (newest.item_count, newest.privacy, newest.accepted_at) == (4, "metadata", None)
    # `evalkit report --format json` keeps its keys and their order (README "JSON output")
    assert list(newest.history_dict()) == [
        "run_id", "set", "kind", "grader", "provider", "model", "reported_model", "pass_rate", "mean_score",
        "item_count", "error_count", "started_at", "comparison_state", "regressed",
    ]  # fmt: skip


def test_run_summary_and_run_exists_are_typed(db_file: Path) -> None:
    run = run_of(1, 3)
    with Store.open(db_file) as store:
        save_run(store, run, "redacted", "test")
        summary = run_summary(store, run.run_id)
        assert run_exists(store, run.run_id)
        assert not run_exists(store, run.run_id[:-1])
    assert isinstance(summary, RunRow)
    assert (summary.run_id, summary.set_id, summary.privacy, summary.item_count) == (
        run.run_id,
        "demo.set",
        "redacted",
        3,
    )
    assert summary.pass_rate == run.pass_rate


def test_prune_deletes_whole_runs(db_file: Path) -> None:
    old = run_of(1, 3, started_at="2020-01-01T00:00:00+00:00")
    new = run_of(2, 3)
    with Store.open(db_file) as store:
        save_run(store, old, "metadata", "test")
        save_run(store, new, "metadata", "test")
        assert prune_runs(store, 30) == 1
        assert store.con.execute("select run_id from runs").fetchall() == [(new.run_id,)]
        assert store.con.execute("select distinct run_id from results").fetchall() == [(new.run_id,)]


def test_garbage_file_is_a_store_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.duckdb"
    bad.write_text("not a database" * 100)
    with pytest.raises(StoreError, match=r"bad\.duckdb: not a DuckDB database file"):
        Store.open(bad)


def test_generator_provenance_is_a_separate_column_at_every_level(db_file: Path) -> None:
    with Store.open(db_file) as store:
        for level in ("none", "metadata", "redacted", "full"):
            save_run(store, run_of(1, 1), level, "test")
        rows = store.con.execute("select privacy, generator_provenance from runs").fetchall()
    assert {level for level, _ in rows} == {"none", "metadata", "redacted", "full"}
    for _, provenance in rows:
        assert json.loads(provenance) == {
            "version": 1,
            "provider": "fake",
            "model": "alias-1",
            "reported_model": "model-1",
        }


@pytest.mark.parametrize(
    ("name", "data"),
    [("history.csv", "a,b\n1,2\n"), ("runs.json", '{"a": 1}\n'), ("runs.db", "SQLite format 3\x00" + "x" * 90)],
)
@pytest.mark.parametrize("read_only", [False, True])
def test_a_csv_or_json_file_is_not_taken_for_a_database(tmp_path: Path, name: str, data: str, read_only: bool) -> None:
    # DuckDB 2 would open it as an in-memory database over that data: every run stored would vanish
    path = tmp_path / name
    path.write_text(data)
    with pytest.raises(StoreError) as raised:
        Store.open(path, read_only=read_only)
    assert str(raised.value) == f"{path}: not a DuckDB database file (it holds other data); choose another --db path"
    assert path.read_text() == data
