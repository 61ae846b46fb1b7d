"""`evalkit merge` and `evalkit export --parquet` (README "One history for a team: merge and export") on real DuckDB files: runs folded in
idempotently, conflicts refused with nothing written, an old schema migrated on the way, privacy
kept, the cache only when asked; the export's layout, its repeatability, increments, and the
README's queries over it checked against what evalkit itself reports."""

from __future__ import annotations

import itertools
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest

from evalkit.store import Store

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.fixture(autouse=True)
def own_databases(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each project folder keeps its own database (.evalkit/evalkit.duckdb), as a CI runner does."""
    monkeypatch.delenv("EVALKIT_DB")


def project(folder: Path, *, privacy: str = "full", answers: dict[str, str] | None = None) -> None:
    """A replay project: set `team.set` of three prompts, one instance `rec`."""
    folder.mkdir(parents=True, exist_ok=True)
    replies = answers or {"a": "yes", "b": "yes", "c": "no"}
    (folder / "answers.jsonl").write_text(
        "".join(json.dumps({"id": k, "response": v, "model": "rec-1"}) + "\n" for k, v in replies.items())
    )
    (folder / "evalkit.yaml").write_text(
        f"privacy: {privacy}\ndefault_provider: rec\nproviders:\n  - {{id: rec, adapter: replay, path: answers.jsonl}}\n"
    )
    prompts = "".join(f"  - {{id: {k}, prompt: 'Q {k}', assertions: [{{contains: 'yes'}}]}}\n" for k in "abc")
    (folder / "set.yaml").write_text(f"id: team.set\nname: Team\nprompts:\n{prompts}")


def run_in(cli: Any, folder: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> dict[str, Any]:
    monkeypatch.chdir(folder)
    result = cli("run", "set.yaml", "--format", "json", *args)
    assert result.exit_code in (0, 1), result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def runs_of(cli: Any, *args: str) -> list[dict[str, Any]]:
    result = cli("report", "--format", "json", *args)
    assert result.exit_code == 0, result.stderr
    rows: list[dict[str, Any]] = json.loads(result.stdout)["runs"]
    return rows


def db_of(folder: Path) -> Path:
    return folder / ".evalkit" / "evalkit.duckdb"


@pytest.fixture
def two_sources(isolated: Path, cli: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, list[str]]:
    first, second = isolated / "ci-1", isolated / "ci-2"
    project(first)
    project(second, answers={"a": "yes", "b": "no", "c": "no"})
    ids = [run_in(cli, first, monkeypatch)["run_id"], run_in(cli, second, monkeypatch)["run_id"]]
    ids.append(run_in(cli, first, monkeypatch)["run_id"])
    project(isolated / "main")
    monkeypatch.chdir(isolated / "main")
    return db_of(first), db_of(second), ids


@pytest.mark.slow  # several runs into several databases
def test_merge_folds_every_run_once(cli: Any, two_sources: tuple[Path, Path, list[str]]) -> None:
    first, second, ids = two_sources
    assert json.loads(cli("models", "--format", "json").stdout)["models"][0]["quality"] is None  # nothing here yet
    result = cli("merge", str(first), str(second), "--format", "json")
    assert result.exit_code == 0, result.stderr
    merged = json.loads(result.stdout)["merged"]
    assert [(m["added"], m["skipped"], m["items"]) for m in merged] == [(2, 0, 6), (1, 0, 3)]
    assert [r["run_id"] for r in runs_of(cli)] == ids[::-1]  # newest first, all three
    again = json.loads(cli("merge", str(first), str(second), "--format", "json").stdout)["merged"]
    assert [(m["added"], m["skipped"]) for m in again] == [(0, 2), (0, 1)]
    assert len(runs_of(cli)) == 3
    shown = json.loads(cli("show", ids[1], "--format", "json").stdout)
    assert [i["response"] for i in shown["items"]] == ["yes", "no", "no"]  # the items came along
    compared = json.loads(cli("compare", ids[0], ids[1], "--format", "json").stdout)
    assert [f["id"] for f in compared["flips"]] == ["b"]
    (ranked,) = json.loads(cli("models", "--format", "json").stdout)["models"]
    assert (ranked["provider"], ranked["sets"]) == ("rec", 1)  # measured on the merged runs alone
    assert ranked["quality"] is not None
    # the next run here compares with the newest merged run of its scope, as if made here
    doc = json.loads(cli("run", "set.yaml", "--format", "json").stdout)
    assert doc["comparison"]["baseline_run_id"] == ids[2]


@pytest.mark.slow  # several runs into several databases
def test_a_conflicting_run_is_refused_and_nothing_is_written(
    cli: Any, two_sources: tuple[Path, Path, list[str]], isolated: Path
) -> None:
    first, second, ids = two_sources
    forged = isolated / "forged.duckdb"
    forged.write_bytes(second.read_bytes())
    con = duckdb.connect(str(forged))
    con.execute("update runs set pass_rate = 0.99 where run_id = $1", [ids[1]])
    con.close()
    result = cli("merge", str(first), str(second), str(forged))
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"Error: {forged}: run {ids[1]} is also in {second} with other content; nothing was merged "
        "(a run id names one run: remove one of the two copies first)"
    )
    assert runs_of(cli) == []  # not even the first two sources
    assert cli("merge", str(second)).exit_code == 0
    items = duckdb.connect(str(forged))
    items.execute("update runs set pass_rate = (select pass_rate from runs limit 1)")  # the run as it was
    items.execute("update results set reason = 'edited' where item_id = 'b'")  # but one item edited
    items.close()
    edited = cli("merge", str(forged))
    assert edited.exit_code == 2
    assert f"run {ids[1]} is also in this database with other content" in edited.stderr


def test_what_is_not_an_evalkit_database_is_refused(cli: Any, isolated: Path, write_file: Any) -> None:
    project(isolated)
    write_file("notes.duckdb", "just some text\n")
    other = duckdb.connect(str(isolated / "other.duckdb"))
    other.execute("create table t (x int)")
    other.close()
    for args, message in (
        (("missing.duckdb",), "missing.duckdb: no such database file"),
        (("notes.duckdb",), "notes.duckdb: not a DuckDB database file"),
        (("other.duckdb",), "other.duckdb: a DuckDB file, but not an evalkit database"),
        ((str(db_of(isolated)),), "this is the database being merged into"),
    ):
        if "merged into" in message:
            Store.open(db_of(isolated)).close()
        result = cli("merge", *args)
        assert result.exit_code == 2, (args, result.stderr)
        assert message in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1


def first_release_database(path: Path) -> str:
    """A database as the first release wrote it: only m001's tables, one run of two items."""
    Store.open(path, upto="m001_runs_results_cache").close()
    con = duckdb.connect(str(path))
    run_id = "20250101-120000-abcdef"
    con.execute(
        "insert into runs (run_id, kind, set_id, set_name, grader, provider, model, reported_model, "
        "generator_provenance, started_at, item_count, passed_count, error_count, pass_rate, mean_score, status, "
        "comparison_state, privacy, evalkit_version) values ($1, 'prompts', 'team.set', 'Team', 'deterministic', "
        "'rec', 'replay', 'rec-1', '{}', $2, 2, 1, 0, 0.5, 0.5, 'complete', 'baseline', 'full', '0.1.0')",
        [run_id, datetime(2025, 1, 1, 12, tzinfo=UTC).replace(tzinfo=None)],
    )
    con.execute(
        "insert into results (run_id, item_index, item_id, passed, score, reason, response) values "
        "($1, 0, 'a', true, 1.0, 'ok', 'yes'), ($1, 1, 'b', false, 0.0, 'no', 'no')",
        [run_id],
    )
    con.close()
    return run_id


def test_an_old_schema_is_migrated_on_a_copy_not_on_the_source(cli: Any, isolated: Path) -> None:
    project(isolated)
    old = isolated / "first-release.duckdb"
    run_id = first_release_database(old)
    before = old.read_bytes()
    result = cli("merge", str(old))
    assert result.exit_code == 0, result.stderr
    assert old.read_bytes() == before  # the source was read, never migrated in place
    (row,) = runs_of(cli)
    assert (row["run_id"], row["pass_rate"]) == (run_id, 0.5)
    shown = json.loads(cli("show", run_id, "--format", "json").stdout)
    assert [(i["id"], i["passed"]) for i in shown["items"]] == [("a", True), ("b", False)]


@pytest.mark.slow  # several runs into several databases
def test_privacy_is_never_raised_by_a_merge(cli: Any, isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kept_none = isolated / "laptop"
    project(kept_none, privacy="none")
    run_id = run_in(cli, kept_none, monkeypatch)["run_id"]
    project(isolated / "main", privacy="full")
    monkeypatch.chdir(isolated / "main")
    assert cli("merge", str(db_of(kept_none))).exit_code == 0
    con = duckdb.connect(str(db_of(isolated / "main")), read_only=True)
    assert con.execute("select count(*) from results where run_id = $1", [run_id]).fetchone() == (0,)
    assert con.execute("select privacy from runs where run_id = $1", [run_id]).fetchone() == ("none",)
    con.close()


def test_the_cache_comes_only_when_asked(cli: Any, isolated: Path) -> None:
    project(isolated)
    source = isolated / "cached.duckdb"
    for path, keys in ((source, ["k1", "k2"]), (db_of(isolated), ["k2"])):
        Store.open(path).close()
        con = duckdb.connect(str(path))
        for key in keys:
            con.execute(
                "insert into cache (key, provider, model, response, serving, created_at) values ($1, 'p', 'm', $2, '{}', now())",
                [key, f"{key} from {path.name}"],
            )
        con.close()
    assert json.loads(cli("merge", str(source), "--format", "json").stdout)["merged"][0]["cache_entries"] == 0
    with_cache = json.loads(cli("merge", str(source), "--with-cache", "--format", "json").stdout)
    assert with_cache["merged"][0]["cache_entries"] == 1
    con = duckdb.connect(str(db_of(isolated)), read_only=True)
    assert con.execute("select key, response from cache order by key").fetchall() == [
        ("k1", "k1 from cached.duckdb"),
        ("k2", "k2 from evalkit.duckdb"),  # held here: kept
    ]
    con.close()


# --- export ------------------------------------------------------------------------------------


def parquet_rows(folder: Path, table: str) -> list[tuple[Any, ...]]:
    return duckdb.sql(
        f"select * from read_parquet('{folder}/{table}/*/*.parquet', hive_partitioning = true) order by all"
    ).fetchall()


@pytest.fixture
def history(isolated: Path, cli: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    project(isolated)
    ids = [run_in(cli, isolated, monkeypatch)["run_id"]]
    project(isolated, answers={"a": "yes", "b": "no", "c": "yes"})
    ids.append(run_in(cli, isolated, monkeypatch)["run_id"])
    project(isolated)
    ids.append(run_in(cli, isolated, monkeypatch)["run_id"])
    (isolated / "corpus.jsonl").write_text('{"id": "d1", "text": "the forum is in may"}\n')
    (isolated / "q.yaml").write_text(
        "id: team.retrieval\nname: R\ncorpus: corpus.jsonl\nquestions:\n"
        "  - {id: q1, question: when is the forum, form: match, expected: [d1], hard_class: dates}\n"
    )
    assert cli("retrieval", "q.yaml", "--retriever", "lexical").exit_code == 0
    return ids


@pytest.mark.slow  # several runs into several databases
def test_export_writes_three_tables_by_set_and_the_same_rows_twice(
    cli: Any, history: list[str], isolated: Path
) -> None:
    result = cli("export", "--parquet", "export", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["rows"] == {"runs": 4, "results": 9, "retrieval": 1}
    folders = sorted(str(p.relative_to(isolated / "export")) for p in (isolated / "export").glob("*/*"))
    assert folders == ["results/set_id=team.set", "retrieval/set_id=team.retrieval", "runs/set_id=team.retrieval",
                       "runs/set_id=team.set"]  # fmt: skip
    first = {t: parquet_rows(isolated / "export", t) for t in ("runs", "results", "retrieval")}
    assert cli("export", "--parquet", "export").exit_code == 0
    assert {t: parquet_rows(isolated / "export", t) for t in first} == first
    (question,) = duckdb.sql(
        f"select question_id, form, hard_class, top1_hit, retrieved from read_parquet('{isolated}/export/retrieval/*/*.parquet')"
    ).fetchall()
    assert question == ("q1", "match", "dates", True, ["d1"])
    types = dict(duckdb.sql(f"describe select * from read_parquet('{isolated}/export/runs/*/*.parquet')").fetchall()[i][:2]
                 for i in range(3))  # fmt: skip
    assert types == {"run_id": "VARCHAR", "kind": "VARCHAR", "set_name": "VARCHAR"}
    started = duckdb.sql(
        f"select typeof(started_at) from read_parquet('{isolated}/export/runs/*/*.parquet') limit 1"
    ).fetchall()
    assert started == [("TIMESTAMP",)]


@pytest.mark.slow  # several runs into several databases
def test_export_since_writes_an_increment_beside_the_earlier_files(
    cli: Any, history: list[str], isolated: Path
) -> None:
    assert cli("export", "--parquet", "export", "--since", "2999-01-01").exit_code == 0
    assert not (isolated / "export" / "runs").exists()  # nothing that new: nothing written
    assert cli("export", "--parquet", "export").exit_code == 0
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    assert cli("export", "--parquet", "increment", "--since", today).exit_code == 0
    assert parquet_rows(isolated / "increment", "runs") == parquet_rows(isolated / "export", "runs")
    assert cli("export", "--parquet", "export", "--since", today).exit_code == 0
    names = sorted(p.name for p in (isolated / "export" / "runs" / "set_id=team.set").iterdir())
    assert names == ["all_0.parquet", f"since-{today.replace('-', '')}_0.parquet"]
    bad = cli("export", "--parquet", "export", "--since", "yesterday")
    assert bad.exit_code == 2


def readme_queries() -> dict[str, str]:
    blocks = re.findall(r"```sql\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    return {block.splitlines()[0].removeprefix("-- ").split(":")[0]: block for block in blocks}


@pytest.mark.slow  # several runs into several databases
def test_the_readme_queries_agree_with_evalkit(
    cli: Any, history: list[str], isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    queries = readme_queries()
    assert set(queries) == {"trend", "latest baseline per scope", "flakiest prompts"}
    assert cli("export", "--parquet", "export").exit_code == 0
    monkeypatch.chdir(isolated)
    trend = duckdb.sql(queries["trend"]).fetchall()
    reported = list(reversed(runs_of(cli, "team.set")))
    assert [(t[0], t[6], t[7], t[8]) for t in trend] == [
        (r["set"], r["run_id"], r["pass_rate"], r["mean_score"]) for r in reported
    ]
    (baseline,) = duckdb.sql(queries["latest baseline per scope"]).fetchall()
    project(isolated)
    doc = run_in(cli, isolated, monkeypatch)  # what evalkit compares a new run with
    assert baseline[-1] == doc["comparison"]["baseline_run_id"] == history[-1]
    flaky = duckdb.sql(queries["flakiest prompts"]).fetchall()
    verdicts: dict[str, list[bool]] = {}
    for run_id in history:
        for item in json.loads(cli("show", run_id, "--format", "json").stdout)["items"]:
            verdicts.setdefault(item["id"], []).append(item["passed"])
    expected = [("team.set", k, sum(a != b for a, b in itertools.pairwise(v)), len(v)) for k, v in verdicts.items()]
    assert flaky == sorted([e for e in expected if e[2]], key=lambda e: (-e[2], e[0], e[1]))
    assert flaky == [("team.set", "b", 2, 3), ("team.set", "c", 2, 3)]
