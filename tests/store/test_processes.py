"""Real processes on one database file: concurrent writers, kill -9, Ctrl-C, a held lock."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from evalkit.store import Store
from tests.conftest import write
from tests.fakeserver import FakeServer, Recorded, Reply, openai_reply
from tests.retrieval.test_cli import FRUIT, FRUIT_DOCS

PROMPTS = "\n".join(f"  - {{id: q{i}, prompt: 'question {i}', assertions: [{{contains: ok}}]}}" for i in range(40))


def evalkit(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "evalkit", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str], timeout: float = 120) -> int:
    proc.communicate(timeout=timeout)
    return proc.returncode


def wait_for(condition, timeout: float = 60.0) -> None:
    """Poll a condition on shared state (not a sleep standing in for synchronisation)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.01)


def query(db: Path, sql: str) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.fixture
def project(isolated: Path, fake_llm: FakeServer) -> Path:
    for name in ("a", "b"):
        write(isolated / f"sets/{name}.yaml", f"id: proc.{name}\nname: {name}\nprompts:\n{PROMPTS}\n")
    write(
        isolated / "evalkit.yaml",
        f"""
        providers:
          - id: fake
            adapter: openai
            base_url: {fake_llm.url}/v1
            model: alias-1
            max_concurrency: 4
        """,
    )
    return isolated


@pytest.mark.slow
def test_two_processes_writing_one_database_both_succeed(project: Path, fake_llm: FakeServer, db_file: Path) -> None:
    fake_llm.handler = lambda request: Reply(json=openai_reply("ok").json, delay_s=0.005)
    first = evalkit(project, "run", "sets/a.yaml", "--no-cache")
    second = evalkit(project, "run", "sets/b.yaml", "--no-cache")
    for proc in (first, second):
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert "Traceback" not in err
    assert sorted(query(db_file, "select set_id, item_count from runs")) == [("proc.a", 40), ("proc.b", 40)]
    assert query(db_file, "select count(*) from results") == [(80,)]


@pytest.mark.slow
def test_kill_9_midway_leaves_the_database_readable_with_earlier_runs(
    project: Path, fake_llm: FakeServer, db_file: Path
) -> None:
    done = evalkit(project, "run", "sets/a.yaml")
    assert finish(done) == 0
    before = query(db_file, "select run_id, item_count from runs")
    for stop_after in (5, 17, 33):
        fake_llm.requests.clear()
        fake_llm.handler = lambda request: Reply(json=openai_reply("ok").json, delay_s=0.02)
        proc = evalkit(project, "run", "sets/b.yaml", "--no-cache")
        wait_for(lambda n=stop_after: fake_llm.calls >= n)
        proc.send_signal(signal.SIGKILL)
        finish(proc, timeout=30)
        assert query(db_file, "select run_id, item_count from runs") == before
    assert query(db_file, "select count(*) from results") == [(40,)]
    again = evalkit(project, "run", "sets/b.yaml")
    assert finish(again) == 0


@pytest.mark.slow
def test_ctrl_c_keeps_received_answers_in_the_cache_and_stores_no_run(
    project: Path, fake_llm: FakeServer, db_file: Path
) -> None:
    write(
        project / "evalkit.yaml",
        (project / "evalkit.yaml").read_text().replace("max_concurrency: 4", "max_concurrency: 1"),
    )

    def slow_after_ten(request: Recorded) -> Reply:
        index = int(request.json["messages"][-1]["content"].split()[-1])
        return Reply(json=openai_reply("ok").json, delay_s=0 if index < 10 else 30)

    fake_llm.handler = slow_after_ten
    proc = evalkit(project, "run", "sets/a.yaml")
    wait_for(lambda: fake_llm.calls >= 11)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Interrupted" in err
    assert "Traceback" not in err
    assert query(db_file, "select count(*) from runs") == [(0,)]
    assert query(db_file, "select count(*) from cache") == [(10,)]
    # The re-run calls only what is missing.
    fake_llm.requests.clear()
    fake_llm.handler = lambda request: openai_reply("ok")
    rerun = evalkit(project, "run", "sets/a.yaml", "--format", "json")
    out, err = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, err
    assert fake_llm.calls == 30
    assert json.loads(out)["passed_count"] == 40


@pytest.mark.slow
def test_a_held_database_is_waited_for_then_given_up_with_exit_3(
    project: Path, fake_llm: FakeServer, db_file: Path
) -> None:
    holder = duckdb.connect(str(db_file))
    try:
        proc = evalkit(project, "run", "sets/a.yaml", env={"EVALKIT_DB_WAIT_S": "1"})
        _out, err = proc.communicate(timeout=60)
    finally:
        holder.close()
    assert proc.returncode == 3
    assert err.strip().splitlines()[-1] == (
        f"Error: {db_file}: the database is held by another process; gave up after 1 s "
        "(set EVALKIT_DB_WAIT_S to wait longer)"
    )
    assert fake_llm.calls == 0


@pytest.mark.slow
def test_without_cache_replay_a_held_database_is_still_waited_for_before_any_call(
    project: Path, fake_llm: FakeServer, db_file: Path
) -> None:
    holder = duckdb.connect(str(db_file))
    try:
        proc = evalkit(project, "run", "sets/a.yaml", "--no-cache", env={"EVALKIT_DB_WAIT_S": "1"})
        _out, err = proc.communicate(timeout=60)
    finally:
        holder.close()
    assert proc.returncode == 3
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        f"Error: {db_file}: the database is held by another process; gave up after 1 s "
        "(set EVALKIT_DB_WAIT_S to wait longer)"
    )
    assert fake_llm.calls == 0
    assert query(db_file, "select count(*) from information_schema.tables where table_name = 'runs'") == [(0,)]


def test_without_cache_replay_an_unopenable_database_is_exit_3(project: Path, fake_llm: FakeServer) -> None:
    folder = project / "a-folder.duckdb"
    folder.mkdir()
    proc = evalkit(project, "run", "sets/a.yaml", "--no-cache", "--db", str(folder))
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3
    assert "Traceback" not in err
    assert "cannot open the database" in err.strip().splitlines()[-1]


@pytest.mark.slow
@pytest.mark.parametrize("wait", ["60", "0"])
def test_ctrl_c_while_another_process_holds_the_database_does_not_wait_for_it(
    project: Path, fake_llm: FakeServer, db_file: Path, wait: str
) -> None:
    def slow_after_ten(request: Recorded) -> Reply:
        index = int(request.json["messages"][-1]["content"].split()[-1])
        return Reply(json=openai_reply("ok").json, delay_s=0 if index < 10 else 30)

    fake_llm.handler = slow_after_ten
    proc = evalkit(project, "run", "sets/a.yaml", env={"EVALKIT_DB_WAIT_S": wait})
    wait_for(lambda: fake_llm.calls >= 11)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db_file)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)  # the flush gives up after 2 s, not the 60 s lock wait
    finally:
        holder.communicate("go\n", timeout=30)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last == (
        "Interrupted: no run of this command was stored; 10 answers received could not be cached: "
        f"{db_file} was held by another process or could not be opened."
    )


HOLDER = """
import sys, duckdb
con = duckdb.connect(sys.argv[1])
print("locked", flush=True)
sys.stdin.readline()
con.close()
print("released", flush=True)
"""


def test_open_waits_for_another_process_then_succeeds(db_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evalkit.store import store as store_module

    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db_file)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None
    assert holder.stdin is not None
    assert holder.stdout.readline().strip() == "locked"
    waits: list[float] = []

    def release_on_first_wait(seconds: float) -> None:
        # The first open failed on the lock (that is why we wait): now let the holder go.
        if not waits:
            holder.stdin.write("go\n")
            holder.stdin.flush()
            assert holder.stdout.readline().strip() == "released"
        waits.append(seconds)

    monkeypatch.setattr(store_module.time, "sleep", release_on_first_wait)
    with store_module.Store.open(db_file, wait_s=30) as store:
        assert store.schema_version()
    holder.communicate(timeout=30)
    assert len(waits) == 1


# --- every command says once that it waits for the lock --------------------------------------------

ONE_PROMPT = """
id: hour.one
name: One prompt
prompts:
  - id: greet
    prompt: Say hi
    assertions: [{contains: hi}]
"""


@pytest.fixture
def holder(db_file: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the database file until a line arrives on its stdin."""
    Store.open(db_file).close()  # an evalkit database, migrated
    script = "import duckdb, sys; c = duckdb.connect(sys.argv[1]); print('held', flush=True); sys.stdin.readline()"
    with subprocess.Popen(
        [sys.executable, "-c", script, str(db_file)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as proc:
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline() == "held\n"
            yield proc
        finally:
            if proc.poll() is None:
                proc.kill()


def waits_then_proceeds(args: list[str], cwd: Path, db_file: Path, holder: subprocess.Popen[str]) -> str:
    """Run evalkit while ``holder`` holds the database; release it once evalkit says it waits.
    Returns evalkit's whole stderr."""
    env = {**os.environ, "EVALKIT_DB": str(db_file), "EVALKIT_DB_WAIT_S": "60"}
    with subprocess.Popen(
        [sys.executable, "-m", "evalkit", *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    ) as proc:  # fmt: skip
        assert proc.stderr is not None
        assert holder.stdin is not None
        first = proc.stderr.readline()  # evalkit blocks on the lock until the holder lets go
        holder.stdin.write("go\n")
        holder.stdin.flush()
        _, rest = proc.communicate(timeout=120)
    assert first == f"Waiting for {db_file}, held by another process (PID {holder.pid}); giving up after 60 s…\n"
    return first + rest


@pytest.mark.slow
def test_report_says_it_waits_for_a_database_another_process_holds(
    isolated: Path, db_file: Path, holder: subprocess.Popen[str]
) -> None:
    stderr = waits_then_proceeds(["report", "--format", "json"], isolated, db_file, holder)
    assert stderr.count("Waiting for") == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ["show", "nosuchrun"],
        ["compare", "a", "b"],
        ["models"],
        ["prune"],
        ["cache", "clear"],
        ["baseline", "accept"],
        ["run", "sets/one.yaml"],
        ["retrieval", "sets/fruit.yaml"],
    ],
    ids=lambda args: " ".join(args[:2]),
)
def test_every_command_says_it_waits_once(
    isolated: Path, db_file: Path, holder: subprocess.Popen[str], write_file: Any, args: list[str]
) -> None:
    write_file("evalkit.yaml", "providers: [{id: recorded, adapter: replay, path: answers.jsonl}]\n")
    write_file("answers.jsonl", '{"id": "greet", "response": "hi", "model": "m"}\n')
    write_file("sets/one.yaml", ONE_PROMPT)
    write_file("sets/fruit.yaml", FRUIT)
    write_file("sets/docs.jsonl", FRUIT_DOCS)
    stderr = waits_then_proceeds(args, isolated, db_file, holder)
    assert stderr.count("Waiting for") == 1, stderr
