"""`evalkit merge` and the provider batches (README "One history for a team: merge and export",
"Batches"): a `run --batch --no-wait` in one CI job's database is collected in the database it
was merged into; merging twice stores each batch once; of a pending and a collected copy of one
batch, the collected one wins; a batch with other content, or a broken batches table, is refused
with nothing written; a source from before the batches table still merges. Real DuckDB files
and a loopback server of OpenAI's Batch API."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from evalkit.store import Store
from tests.batchserver import BatchServer


@pytest.fixture
def pending(cli: Any, write_file: Any, isolated: Path) -> Iterator[Path]:
    """ci-submit.duckdb, as the job that ran `run --batch --no-wait` leaves it: one pending batch of
    a two-prompt set on an openai instance of a batch server, which answers while the test runs."""
    write_file(
        "s.yaml",
        """
        id: ci.batch
        name: Batched in CI
        prompts:
          - {id: hours, prompt: opening hours, assertions: [{contains: hours}]}
          - {id: refund, prompt: refund policy, assertions: [{contains: refund}]}
        """,
    )
    server = BatchServer().start()
    instance = f"{{id: oa, adapter: openai, model: gpt-x, base_url: '{server.url}', max_retries: 0}}"
    write_file("evalkit.yaml", f"default_provider: oa\nproviders: [{instance}]\n")
    source = isolated / "ci-submit.duckdb"
    try:
        submitted = cli("run", "s.yaml", "--batch", "--no-wait", "--db", str(source))
        assert submitted.exit_code == 0, submitted.stderr
        assert batches(source) == [(next(iter(server.batches)), "pending", [])]
        yield source
    finally:
        server.stop()


def batches(db: Path) -> list[tuple[str, str, list[str]]]:
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("select batch_id, state, run_ids from batches order by batch_id").fetchall()
    return [(r[0], r[1], json.loads(r[2])) for r in rows]


def run_ids(db: Path) -> list[str]:
    with duckdb.connect(str(db), read_only=True) as con:
        return [r[0] for r in con.execute("select run_id from runs order by run_id").fetchall()]


def merge(cli: Any, into: Path, *sources: Path) -> list[dict[str, Any]]:
    result = cli("merge", *map(str, sources), "--db", str(into), "--format", "json")
    assert result.exit_code == 0, result.stderr
    merged: list[dict[str, Any]] = json.loads(result.stdout)["merged"]
    return merged


def collected_copy(cli: Any, pending: Path, isolated: Path) -> tuple[Path, str]:
    """The artifact carried to a later job and collected there: ci-collect.duckdb and its run."""
    later = isolated / "ci-collect.duckdb"
    shutil.copyfile(pending, later)
    result = cli("collect", "--db", str(later), "--format", "json")
    assert result.exit_code == 0, result.stderr
    run_id: str = json.loads(result.stdout)["run_id"]
    return later, run_id


def test_a_pending_batch_merged_is_collected_in_the_merged_database(cli: Any, pending: Path, isolated: Path) -> None:
    team = isolated / "team.duckdb"
    ((batch_id, _, _),) = batches(pending)
    assert [m["batches"] for m in merge(cli, team, pending)] == [1]
    assert batches(team) == [(batch_id, "pending", [])]
    collected = cli("collect", "--db", str(team), "--format", "json")
    assert collected.exit_code == 0, collected.stderr
    doc = json.loads(collected.stdout)
    assert (doc["set"], doc["passed_count"]) == ("ci.batch", 2)
    assert doc["batch"]["batch_ids"] == [batch_id]
    assert batches(team) == [(batch_id, "collected", [doc["run_id"]])]
    assert run_ids(team) == [doc["run_id"]]
    assert batches(pending) == [(batch_id, "pending", [])]  # the source is only read


def test_merging_twice_stores_each_batch_once(cli: Any, pending: Path, isolated: Path) -> None:
    team, again = isolated / "team.duckdb", isolated / "again.duckdb"
    shutil.copyfile(pending, again)
    assert [m["batches"] for m in merge(cli, team, pending, again)] == [1, 0]
    said = cli("merge", str(pending), str(again), "--db", str(isolated / "table.duckdb"))
    assert said.exit_code == 0, said.stderr
    assert said.stdout.count("1 provider batch(es) added or marked collected") == 1  # the second adds none
    assert [m["batches"] for m in merge(cli, team, pending)] == [0]
    assert len(batches(team)) == 1
    assert cli("collect", "--db", str(team)).exit_code == 0
    assert [m["batches"] for m in merge(cli, team, again)] == [0]  # collected here stays
    assert batches(team)[0][1] == "collected"


def test_a_collected_copy_wins_over_a_pending_one(cli: Any, pending: Path, isolated: Path) -> None:
    later, run_id = collected_copy(cli, pending, isolated)
    ((batch_id, _, _),) = batches(pending)
    won = [(batch_id, "collected", [run_id])]
    # pending first, then collected: the pending row here becomes the collected one
    first = isolated / "pending-first.duckdb"
    assert [m["batches"] for m in merge(cli, first, pending, later)] == [1, 1]
    assert (batches(first), run_ids(first)) == (won, [run_id])
    # collected first, then pending: the collected row stays
    second = isolated / "collected-first.duckdb"
    assert [m["batches"] for m in merge(cli, second, later, pending)] == [1, 0]
    assert batches(second) == won
    # into the databases themselves: the job that submitted learns its batch was collected
    assert [m["batches"] for m in merge(cli, pending, later)] == [1]
    assert (batches(pending), run_ids(pending)) == (won, [run_id])
    nothing = cli("collect", "--db", str(pending))
    assert (nothing.exit_code, nothing.stderr.strip()) == (0, f"No pending batch in {pending}: nothing to collect.")
    assert [m["batches"] for m in merge(cli, later, first)] == [0]
    assert batches(later) == won


def test_a_batch_with_other_content_is_refused_and_nothing_is_written(cli: Any, pending: Path, isolated: Path) -> None:
    later, _ = collected_copy(cli, pending, isolated)
    forged = isolated / "forged.duckdb"
    shutil.copyfile(pending, forged)
    with duckdb.connect(str(forged)) as con:
        con.execute('update batches set custom_ids = \'{"hours": ["ci.batch", "refund", 0]}\'')
    ((batch_id, _, _),) = batches(pending)
    team = isolated / "team.duckdb"
    result = cli("merge", str(later), str(forged), "--db", str(team))
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"Error: {forged}: batch {batch_id} is also in {later} with other content; nothing was merged "
        "(a batch id names one batch: remove one of the two copies first)"
    )
    assert (batches(team), run_ids(team)) == ([], [])  # not even the first source
    assert cli("merge", str(forged), "--db", str(later)).exit_code == 2
    assert len(run_ids(later)) == 1


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        ("insert into batches select * from batches", "holds batch {0} twice"),
        ("update batches set state = 'lost'", "holds batch {0} in an unknown state 'lost'"),
        ("update batches set state = 'collected'", "holds batch {0} marked collected without the runs"),
        ("drop table batches", "it has no batches table, so it is not a whole evalkit database"),
    ],
)
def test_a_broken_batches_table_is_named_and_nothing_is_written(
    cli: Any, pending: Path, isolated: Path, damage: str, words: str
) -> None:
    ((batch_id, _, _),) = batches(pending)
    broken = isolated / "broken.duckdb"
    shutil.copyfile(pending, broken)
    with duckdb.connect(str(broken)) as con:
        if damage.startswith("insert"):
            con.execute("create table copy as select * from batches")
            con.execute("drop table batches")
            con.execute("create table batches as select * from copy union all select * from copy")
        else:
            con.execute(damage)
    team = isolated / "team.duckdb"
    Store.open(team).close()
    result = cli("merge", str(broken), "--db", str(team))
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"Error: {broken}: "), line
    assert words.format(batch_id) in line
    assert (batches(team), run_ids(team)) == ([], [])


def test_a_source_from_before_the_batches_table_still_merges(cli: Any, pending: Path, isolated: Path) -> None:
    older = isolated / "before-batches.duckdb"
    Store.open(older, upto="m007_shards").close()
    with duckdb.connect(str(older)) as con:
        con.execute(
            "insert into runs (run_id, kind, set_id, grader, provider, model, started_at, item_count, passed_count, "
            "error_count, pass_rate, mean_score, status, privacy) values ('20250101-120000-abcdef', 'prompts', "
            "'old.set', 'deterministic', 'rec', 'replay', now()::timestamp, 0, 0, 0, 0, 0, 'complete', 'none')"
        )
        assert con.execute("select count(*) from duckdb_tables() where table_name = 'batches'").fetchone() == (0,)
    before = older.read_bytes()
    assert [(m["added"], m["batches"]) for m in merge(cli, pending, older)] == [(1, 0)]
    assert run_ids(pending) == ["20250101-120000-abcdef"]
    assert batches(pending)[0][1] == "pending"  # the batch held here is untouched
    assert older.read_bytes() == before  # migrated on a copy aside
