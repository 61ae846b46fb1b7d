"""The completion cache's writes during a run: in a thread of their own, so the event loop never
waits for the database; ``wait`` and ``flush`` take over what that write could not do."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from evalkit.records import Completion, ServingRecord
from evalkit.store import Store
from evalkit.store import cache as cache_module
from evalkit.store.cache import StoreCache, read_entries
from tests.conftest import write
from tests.fakeserver import FakeServer
from tests.store.test_processes import HOLDER


def answer(text: str) -> Completion:
    return Completion(text, ServingRecord("fake", "alias-1", "m"))


def stored(db_file: Path, keys: list[str]) -> dict[str, str]:
    with Store.open(db_file) as store:
        return {key: entry.text for key, entry in read_entries(store, keys).items()}


def test_a_due_write_runs_in_its_own_thread_while_put_returns(db_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module, "FLUSH_EVERY_N", 2)
    release = threading.Event()
    writers: list[str] = []
    real_write = cache_module.write_entries

    def held_write(store: Store, entries: Any) -> None:
        writers.append(threading.current_thread().name)
        assert release.wait(30), "put waited for the write it started"
        real_write(store, entries)

    monkeypatch.setattr(cache_module, "write_entries", held_write)
    cache = StoreCache(db_file)
    cache.put("k1", answer("one"))
    cache.put("k2", answer("two"))  # due: handed to the writer, which waits for the test
    cache.put("k3", answer("three"))  # put returns while the first write is under way
    assert cache.unwritten == 3
    release.set()
    cache.wait()
    assert writers == ["evalkit-cache-write"]
    assert cache.unwritten == 1
    assert stored(db_file, ["k1", "k2", "k3"]) == {"k1": "one", "k2": "two"}
    cache.flush()
    assert cache.unwritten == 0
    assert stored(db_file, ["k1", "k2", "k3"]) == {"k1": "one", "k2": "two", "k3": "three"}


def test_a_database_held_by_another_process_defers_the_background_write(
    db_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache_module, "FLUSH_EVERY_N", 2)
    Store.open(db_file).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db_file)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        cache = StoreCache(db_file)
        cache.put("k1", answer("one"))
        cache.put("k2", answer("two"))
        cache.wait()  # the write gave up at once: its entries are buffered again, nothing raised
        assert cache.unwritten == 2
    finally:
        holder.communicate("go\n", timeout=30)
    cache.flush()
    assert cache.unwritten == 0
    assert stored(db_file, ["k1", "k2"]) == {"k1": "one", "k2": "two"}


def test_a_background_write_that_fails_otherwise_is_raised_and_keeps_its_entries(
    db_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache_module, "FLUSH_EVERY_N", 2)

    def broken(store: Store, entries: Any) -> None:
        raise RuntimeError("a bug in the writer")

    monkeypatch.setattr(cache_module, "write_entries", broken)
    cache = StoreCache(db_file)
    cache.put("k1", answer("one"))
    cache.put("k2", answer("two"))
    with pytest.raises(RuntimeError, match="a bug in the writer"):
        cache.wait()
    assert cache.unwritten == 2


def test_a_run_writing_the_cache_as_it_goes_keeps_every_answer(
    cli: Any, fake_llm: FakeServer, isolated: Path, db_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache_module, "FLUSH_EVERY_N", 3)  # several writes during the run
    prompts = "\n".join(f"  - {{id: q{i}, prompt: 'question {i}', assertions: [{{contains: ok}}]}}" for i in range(20))
    write(isolated / "sets/a.yaml", f"id: writes.a\nname: a\nprompts:\n{prompts}\n")
    write(
        isolated / "evalkit.yaml",
        f"providers:\n  - {{id: fake, adapter: openai, base_url: '{fake_llm.url}/v1', model: alias-1, "
        "max_concurrency: 4}\n",
    )
    result = cli("run", "sets/a.yaml", "--no-cache", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert [t.name for t in threading.enumerate() if t.name == "evalkit-cache-write"] == []
    with Store.open(db_file) as store:
        assert store.con.execute("select count(*) from cache").fetchone() == (20,)
    again = cli("run", "sets/a.yaml", "--format", "json")  # every answer replayed from the cache
    assert again.exit_code == 0, again.stderr
    assert fake_llm.calls == 20
