"""Faults around a run: Ctrl-C around storing (what the message says was kept is what was kept),
a database held at store time (the run carried out is still reported), a foreign database file
(no extension is ever installed), an endpoint that trickles its answer (timeout_s bounds the
whole call)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import duckdb
import pytest

from evalkit.errors import StoreError
from tests.conftest import write
from tests.fakeserver import FakeServer, Recorded, Reply, openai_reply

PROMPTS = "\n".join(f"  - {{id: q{i}, prompt: 'question {i}', assertions: [{{contains: ok}}]}}" for i in range(3))

HOLDER = """
import sys, duckdb
con = duckdb.connect(sys.argv[1])
print("locked", flush=True)
sys.stdin.readline()
con.close()
"""


def query(db: Path, sql: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def project(root: Path, base_url: str, **provider: Any) -> Path:
    extra = "".join(f"    {k}: {v}\n" for k, v in provider.items())
    write(root / "sets/s.yaml", f"id: review.s\nname: s\nprompts:\n{PROMPTS}\n")
    (root / "evalkit.yaml").write_text(
        "default_provider: fake\nproviders:\n  - id: fake\n    adapter: openai\n"
        f"    base_url: {base_url}/v1\n    model: alias-1\n    max_concurrency: 1\n{extra}",
        encoding="utf-8",
    )
    return root


class HeldAtTheEnd:
    """Answers every request; before answering the last one, another process takes the database."""

    def __init__(self, db: Path, last: int) -> None:
        self.db = db
        self.last = last
        self.holder: subprocess.Popen[str] | None = None

    def __call__(self, request: Recorded) -> Reply:
        index = int(request.json["messages"][-1]["content"].split()[-1])
        if index == self.last and self.holder is None:
            self.holder = subprocess.Popen(
                [sys.executable, "-c", HOLDER, str(self.db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
            assert self.holder.stdout is not None
            assert self.holder.stdout.readline().strip() == "locked"
        return openai_reply("ok")

    def release(self) -> None:
        holder, self.holder = self.holder, None
        if holder is not None:
            holder.communicate("go\n", timeout=30)


@pytest.fixture
def held_at_the_end(isolated: Path, fake_llm: FakeServer, db_file: Path) -> Iterator[HeldAtTheEnd]:
    project(isolated, fake_llm.url)
    handler = HeldAtTheEnd(db_file, last=2)
    fake_llm.handler = handler
    try:
        yield handler
    finally:
        handler.release()


def test_ctrl_c_while_waiting_to_store_does_not_claim_lost_answers_were_cached(
    cli: Any, held_at_the_end: HeldAtTheEnd, db_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalkit.store import store as store_module

    def ctrl_c(seconds: float) -> None:  # the user presses Ctrl-C while evalkit waits for the lock
        raise KeyboardInterrupt

    # only the store's waits: subprocess waits (the holder's) sleep too
    monkeypatch.setattr(store_module, "time", SimpleNamespace(sleep=ctrl_c, monotonic=time.monotonic))
    result = cli("run", "sets/s.yaml")
    held_at_the_end.release()
    assert result.exit_code == 130, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert query(db_file, "select count(*) from cache")[0][0] == 0
    assert last == (
        "Interrupted: no run of this command was stored; 3 answers received could not be cached: "
        f"{db_file} was held by another process or could not be opened."
    )


def test_a_database_held_at_store_time_still_prints_the_run_that_was_carried_out(
    cli: Any, held_at_the_end: HeldAtTheEnd, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALKIT_DB_WAIT_S", "0")
    result = cli("run", "sets/s.yaml", "--format", "json")
    assert result.exit_code == 3, result.stderr
    assert "held by another" in result.stderr
    document = json.loads(result.stdout)  # README "Commands": a run carried out prints its JSON, whatever the exit code
    assert document["prompt_count"] == 3
    assert document["passed_count"] == 3
    assert document["comparison"]["state"] == "not_compared"
    assert document["comparison"]["reason"].startswith("Not compared: the run could not be stored (")
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .endswith("; 1 of 1 runs were not stored; 3 answers received were not cached")
    )


@pytest.mark.slow
def test_ctrl_c_after_the_run_was_stored_does_not_say_nothing_was_stored(
    isolated: Path, fake_llm: FakeServer, db_file: Path
) -> None:
    project(isolated, fake_llm.url)
    fifo = isolated / "report.json"
    os.mkfifo(fifo)  # writing --output blocks until a reader comes: the run is stored by then
    proc = subprocess.Popen(
        [sys.executable, "-m", "evalkit", "run", "sets/s.yaml", "--output", str(fifo)],
        cwd=isolated,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def stored_runs() -> int:
            try:
                return int(query(db_file, "select count(*) from runs")[0][0])
            except duckdb.Error:  # not created yet, or held by the run for a moment
                return 0

        deadline = time.monotonic() + 60
        while stored_runs() == 0:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run was never stored"
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        # The kernel may hand SIGINT to one of DuckDB's threads: the main thread then learns of it
        # only when its blocked open() returns, so a reader is opened to let it return.
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        try:
            _out, err = proc.communicate(timeout=60)
        finally:
            os.close(reader)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    (run_id,) = query(db_file, "select run_id from runs")[0]
    assert err.strip().splitlines()[-1] == (
        f"Interrupted: the runs were stored ({run_id}); the report was cut short (evalkit show RUN_ID prints it again)."
    )


def test_an_interrupted_cache_flush_keeps_its_entries_unwritten(db_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evalkit.records import Completion, ServingRecord
    from evalkit.store import cache as cache_module
    from evalkit.store.cache import StoreCache

    cache = StoreCache(db_file)
    monkeypatch.setattr(cache_module, "FLUSH_EVERY_S", 1e9)
    cache.put("k", Completion("ok", ServingRecord("fake", "alias-1", "m")))

    def interrupted(store: Any, entries: Any) -> None:  # a second Ctrl-C while the first one's flush writes
        raise KeyboardInterrupt

    monkeypatch.setattr(cache_module, "write_entries", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cache.flush(wait_s=2.0)
    assert cache.unwritten == 1  # what Ctrl-C's message counts as not cached


def test_a_sqlite_file_as_database_is_refused_without_installing_extensions(
    db_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalkit.store.store import Store

    con = sqlite3.connect(db_file)
    con.execute("create table notes (x)")
    con.commit()
    con.close()
    real_connect = duckdb.connect
    risky: list[dict[str, Any]] = []

    def guarded_connect(database: str = ":memory:", read_only: bool = False, config: Any = None) -> Any:
        config = dict(config or {})
        if (
            config.get("autoinstall_known_extensions") is not False
            or config.get("autoload_known_extensions") is not False
        ):
            # Never let the test reach the network: this open could download sqlite_scanner.
            risky.append(config)
            raise duckdb.IOException("refused by the test: extension auto-install/auto-load left on")
        return real_connect(database, read_only=read_only, config=config)

    monkeypatch.setattr(duckdb, "connect", guarded_connect)
    with pytest.raises(StoreError):
        Store.open(db_file)
    assert risky == []
    with contextlib.closing(sqlite3.connect(db_file)) as con:  # the user's file is left as it was
        assert con.execute("select name from sqlite_master").fetchall() == [("notes",)]


class TricklingServer:
    """Answers one OpenAI-style completion, its body a few bytes at a time, each well within the
    client's timeout, the whole far beyond it."""

    def __init__(self, chunks: int, every_s: float) -> None:
        self.chunks = chunks
        self.every_s = every_s
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        body = json.dumps(openai_reply("ok").json).encode()
        body = body + b" " * max(0, self.chunks - len(body))
        step = max(1, len(body) // self.chunks)
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if self.stopped.is_set():  # the wake-up connection of ``stop``
                conn.close()
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                if b"\r\n\r\n" not in data:
                    continue
                head, rest = data.split(b"\r\n\r\n", 1)
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                while len(rest) < length:
                    rest += conn.recv(65536)
                try:
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                        + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                    )
                    for start in range(0, len(body), step):
                        if self.stopped.wait(self.every_s):
                            return
                        conn.sendall(body[start : start + step])
                except OSError:  # the client gave up: that is the point
                    continue

    def stop(self) -> None:
        self.stopped.set()
        with socket.create_connection(self.sock.getsockname()):  # wakes a blocked accept()
            pass
        self.thread.join(timeout=30)
        self.sock.close()


@pytest.mark.slow
def test_timeout_s_bounds_a_call_whose_answer_trickles_in(cli: Any, isolated: Path) -> None:
    server = TricklingServer(chunks=60, every_s=0.05)  # ~3 s in all, never 1 s without a byte
    try:
        project(isolated, server.url, timeout_s=1, max_retries=0)
        write(
            isolated / "sets/s.yaml",
            "id: review.s\nname: s\nprompts:\n  - {id: q0, prompt: hi, assertions: [{contains: ok}]}\n",
        )
        result = cli("run", "sets/s.yaml", "--format", "json", "--no-cache")
    finally:
        server.stop()
    document = json.loads(result.stdout)
    assert result.exit_code == 3, result.stderr
    assert "timed out" in (document["items"][0]["error"] or "")
