"""The completion cache tells the truth (docs/contract.md "The completion cache"): keyed by the endpoint an instance points at,
never by a key or header; replay answers are not cached; old entries are not read
(``cache_ttl_days``); ``evalkit cache clear`` empties it; every run says how many of its answers
came from it; ``--no-cache`` skips reading it, not writing it."""

from __future__ import annotations

import hashlib
import json
import socket
from pathlib import Path
from typing import Any

import duckdb
import pytest

from evalkit.config import ProviderConfig
from evalkit.providers import endpoint_identity
from tests.fakeserver import FakeServer, Recorded, Reply, openai_reply

THREE = """
id: honest.three
name: Three
prompts:
  - {id: a, prompt: alpha, assertions: [{contains: echo}]}
  - {id: b, prompt: beta, assertions: [{contains: echo}]}
  - {id: c, prompt: gamma, assertions: [{contains: echo}]}
"""


def dead_url() -> str:
    """A loopback URL nothing listens on (connections to it are refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    return f"http://127.0.0.1:{port}/v1"


def write_config(
    write_file: Any, base_url: str, extra: str = "", provider: str = "", adapter: str = "openai", fields: str = ""
) -> Path:
    """evalkit.yaml with the instance ``fake`` at ``base_url`` (``fields``: more of its lines),
    ``extra`` top-level lines and ``provider``: another instance's entry."""
    more = "".join(f"\n    {line}" for line in fields.splitlines())
    return write_file(
        "evalkit.yaml",
        f"default_provider: fake\n{extra}\nproviders:\n  - id: fake\n    adapter: {adapter}\n"
        f"    base_url: {base_url}\n    model: fake-alias\n    max_retries: 1\n    retry_backoff_s: 0.01\n"
        f"    timeout_s: 5{more}\n{provider}\n",
    )


def query(db: Path, sql: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def execute(db: Path, sql: str) -> None:
    con = duckdb.connect(str(db))
    try:
        con.execute(sql)
    finally:
        con.close()


def run_json(cli: Any, *args: str) -> tuple[int, dict[str, Any]]:
    result = cli("run", "sets/three.yaml", "--format", "json", *args)
    assert result.exception is None, result.exception
    return result.exit_code, json.loads(result.stdout)


# --- the endpoint is part of the key --------------------------------------------------------------


def test_a_moved_base_url_is_not_served_from_the_cache(cli: Any, fake_llm: FakeServer, write_file: Any) -> None:
    write_file("sets/three.yaml", THREE)
    write_config(write_file, f"{fake_llm.url}/v1")
    code, doc = run_json(cli)
    assert (code, doc["cached_count"], fake_llm.calls) == (0, 0, 3)
    write_config(write_file, dead_url())  # same instance id and alias, another (dead) endpoint
    moved = cli("run", "sets/three.yaml", "--format", "json")
    assert moved.exit_code == 3, moved.stdout
    doc = json.loads(moved.stdout)  # the run was carried out: every item errored, none came from the cache
    assert (doc["error_count"], doc["cached_count"]) == (3, 0)
    # the first endpoint again, spelt with a trailing slash (the same URL on the wire): a hit
    write_config(write_file, f"{fake_llm.url}/v1/")
    code, doc = run_json(cli)
    assert (code, doc["cached_count"], doc["error_count"], fake_llm.calls) == (0, 3, 0, 3)


def test_another_adapter_at_the_same_url_is_not_served_from_the_cache(
    cli: Any, fake_llm: FakeServer, write_file: Any
) -> None:
    write_file("sets/three.yaml", THREE)
    write_config(write_file, f"{fake_llm.url}/v1")
    assert run_json(cli)[0] == 0
    write_config(write_file, f"{fake_llm.url}/v1", adapter="anthropic")
    code, doc = run_json(cli)
    assert (code, doc["cached_count"], fake_llm.calls) == (0, 0, 6)
    assert fake_llm.requests[-1].path == "/v1/messages"


def test_keys_and_header_values_are_not_part_of_the_key(
    cli: Any, fake_llm: FakeServer, write_file: Any, db_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_file("sets/three.yaml", THREE)
    url = f"{fake_llm.url}/v1"
    keyed = "api_key_env: EVALKIT_TEST_KEY\nheaders: {{X-Team-Token: {}}}"
    write_config(write_file, url, fields=keyed.format("header-secret-1"))
    monkeypatch.setenv("EVALKIT_TEST_KEY", "sk-secret-1")
    assert run_json(cli)[0] == 0
    assert fake_llm.requests[0].headers.get("x-team-token") == "header-secret-1"  # the header was sent
    write_config(write_file, url, fields=keyed.format("header-secret-2"))
    monkeypatch.setenv("EVALKIT_TEST_KEY", "sk-secret-2")
    code, doc = run_json(cli)
    assert (code, doc["cached_count"], fake_llm.calls) == (0, 3, 3)  # a rotated key keeps the cache
    assert query(db_file, "select distinct endpoint from cache") == [(f"openai {url}",)]
    stored = json.dumps([[str(v) for v in row] for row in query(db_file, "select * from cache")])
    assert "secret" not in stored


def test_the_endpoint_identity_is_the_url_as_sent() -> None:
    def of(adapter: str, url: str | None) -> str:
        return endpoint_identity(ProviderConfig("x", adapter, base_url=url))

    assert of("openai", "HTTP://Example.COM:80/v1/") == "openai http://example.com/v1"
    assert of("openai", "https://user:pass@api.example.com:443/v1") == "openai https://api.example.com/v1"
    query = hashlib.sha256(b"api-version=2").hexdigest()[:16]
    assert of("openai", "https://api.example.com:8443/v1?api-version=2") == (
        f"openai https://api.example.com:8443/v1?sha256:{query}"
    )  # a query may hold a key: it counts, as a hash
    assert "key-1" not in of("openai", "https://api.example.com/v1?key=key-1")
    assert of("openai", "https://api.example.com/v1?key=key-1") != of("openai", "https://api.example.com/v1?key=key-2")
    assert of("openai", "https://bücher.example/v1") == "openai https://xn--bcher-kva.example/v1"
    assert of("openai", None) == "openai https://api.openai.com/v1"
    assert of("anthropic", None) == "anthropic https://api.anthropic.com/v1"
    assert of("openai", "http://127.0.0.1:8000/v1") != of("openai", "http://127.0.0.1:8001/v1")


def test_a_local_model_is_keyed_by_its_content_hash_read_once_per_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalkit.providers import local

    hashed: list[int] = []
    real = hashlib.sha256

    def counting(*args: Any) -> Any:
        hashed.append(1)
        return real(*args)

    monkeypatch.setattr(local, "_HASHES", {})
    monkeypatch.setattr(local.hashlib, "sha256", counting)
    one, twin, other = tmp_path / "one.gguf", tmp_path / "twin.gguf", tmp_path / "other.gguf"
    one.write_bytes(b"weights-1")
    twin.write_bytes(b"weights-1")
    other.write_bytes(b"weights-2")

    def of(path: Path) -> str:
        return endpoint_identity(ProviderConfig("m", "local", model_path=path))

    first = of(one)
    settings = "temperature=0 seed=42 n_ctx=2048"
    assert first == f"local sha256:{real(b'weights-1').hexdigest()} {settings}"
    assert of(one) == first
    assert local.model_id(one) == f"one@{real(b'weights-1').hexdigest()[:12]}"
    assert len(hashed) == 1  # the provider's model id and the cache key share one read of the file
    assert of(twin) == first  # the content, not the file name or path
    assert of(other) != first
    one.write_bytes(b"weights-1, fine-tuned")
    assert of(one) == f"local sha256:{real(b'weights-1, fine-tuned').hexdigest()} {settings}"
    hotter = endpoint_identity(ProviderConfig("m", "local", model_path=one, temperature=1.5, seed=99))
    assert hotter == f"local sha256:{real(b'weights-1, fine-tuned').hexdigest()} temperature=1.5 seed=99 n_ctx=2048"


# --- replay answers are not cached -----------------------------------------------------------------


def test_replay_answers_are_never_cached(cli: Any, write_file: Any, db_file: Path) -> None:
    write_file("sets/three.yaml", THREE)
    write_file("evalkit.yaml", "providers:\n  - {id: rec, adapter: replay, path: answers.jsonl}\n")
    write_file("answers.jsonl", "".join(json.dumps({"id": i, "response": "echo", "model": "m"}) + "\n" for i in "abc"))
    for _ in range(2):
        code, doc = run_json(cli, "--provider", "rec")
        assert (code, doc["passed_count"], doc["cached_count"]) == (0, 3, 0)
    assert query(db_file, "select count(*) from cache") == [(0,)]
    assert query(db_file, "select count(*) from runs") == [(2,)]


# --- cache_ttl_days --------------------------------------------------------------------------------


@pytest.mark.slow
def test_entries_older_than_the_ttl_are_not_read(
    cli: Any, fake_llm: FakeServer, write_file: Any, db_file: Path
) -> None:
    write_file("sets/three.yaml", THREE)
    url = f"{fake_llm.url}/v1"
    write_config(write_file, url, "cache_ttl_days: 30")
    assert run_json(cli)[0] == 0
    execute(
        db_file, "update cache set created_at = created_at - interval 10 day where key in (select min(key) from cache)"
    )
    code, doc = run_json(cli)  # ten days old, within 30
    assert (code, doc["cached_count"], fake_llm.calls) == (0, 3, 3)
    write_config(write_file, url, "cache_ttl_days: 7")
    code, doc = run_json(cli)  # ten days old, past 7: asked again (and cached afresh)
    assert (code, doc["cached_count"], fake_llm.calls) == (0, 2, 4)
    code, doc = run_json(cli)
    assert (code, doc["cached_count"], fake_llm.calls) == (0, 3, 4)


def test_the_default_ttl_is_thirty_days(cli: Any, fake_llm: FakeServer, write_file: Any, db_file: Path) -> None:
    write_file("sets/three.yaml", THREE)
    write_config(write_file, f"{fake_llm.url}/v1")
    assert run_json(cli)[0] == 0
    execute(db_file, "update cache set created_at = created_at - interval 29 day")
    assert run_json(cli)[1]["cached_count"] == 3
    execute(db_file, "update cache set created_at = created_at - interval 2 day")
    assert run_json(cli)[1]["cached_count"] == 0
    assert fake_llm.calls == 6


# --- evalkit cache clear ---------------------------------------------------------------------------


def test_cache_clear_on_a_database_that_does_not_exist_creates_nothing(cli: Any, tmp_path: Path) -> None:
    target = tmp_path / ".evalkit" / "e.duckdb"  # another missing folder is exit 2
    result = cli("cache", "clear", "--db", str(target))
    assert (result.exit_code, result.stdout, result.stderr) == (0, "Deleted 0 cache entries.\n", "")
    assert not target.parent.exists()


def test_cache_clear_deletes_old_entries_then_all_and_keeps_the_runs(
    cli: Any, fake_llm: FakeServer, write_file: Any, tmp_path: Path
) -> None:
    db = tmp_path / "other.duckdb"
    write_file("sets/three.yaml", THREE)
    write_config(write_file, f"{fake_llm.url}/v1")
    assert run_json(cli, "--db", str(db))[0] == 0
    execute(db, "update cache set created_at = created_at - interval 10 day where key in (select min(key) from cache)")
    assert cli("cache", "clear", "--older-than", "11", "--db", str(db)).stdout == "Deleted 0 cache entries.\n"
    one = cli("cache", "clear", "--older-than", "9", "--db", str(db))
    assert (one.exit_code, one.stdout) == (0, "Deleted 1 cache entry.\n")
    rest = cli("cache", "clear", "--db", str(db), "--config", "evalkit.yaml")
    assert (rest.exit_code, rest.stdout) == (0, "Deleted 2 cache entries.\n")
    assert query(db, "select count(*) from cache") == [(0,)]
    assert query(db, "select count(*) from runs") == [(1,)]
    assert run_json(cli, "--db", str(db))[1]["cached_count"] == 0
    assert fake_llm.calls == 6


@pytest.mark.parametrize("days", ["0", "-3", "soon"])
def test_cache_clear_needs_a_positive_number_of_days(cli: Any, days: str, db_file: Path) -> None:
    result = cli("cache", "clear", "--older-than", days)
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: Invalid value for '--older-than'")
    assert not db_file.exists()


# --- every run says how many answers came from the cache -------------------------------------------


def test_the_table_footer_says_how_many_answers_came_from_the_cache(
    cli: Any, fake_llm: FakeServer, write_file: Any
) -> None:
    write_file("sets/three.yaml", THREE)
    write_config(write_file, f"{fake_llm.url}/v1")
    first = cli("run", "sets/three.yaml")
    assert first.exit_code == 0, first.stderr
    assert "answers from the cache: 0 of 3" in first.stdout
    write_file("sets/three.yaml", THREE.replace("prompt: gamma", "prompt: delta"))
    again = cli("run", "sets/three.yaml")
    assert again.exit_code == 0, again.stderr
    assert "answers from the cache: 2 of 3" in again.stdout
    assert fake_llm.calls == 4


def test_a_retrieval_run_says_nothing_of_the_completion_cache(cli: Any, fake_llm: FakeServer, write_file: Any) -> None:
    def search(request: Recorded) -> Reply:
        return Reply(json={"ids": ["doc1"]})

    fake_llm.handler = search
    write_file("evalkit.yaml", f"retrievers:\n  - {{id: vector, kind: http, url: {fake_llm.url}/search}}\n")
    write_file(
        "sets/q.yaml",
        "id: honest.q\nname: Q\nquestions:\n  - {id: q1, question: where, form: match, expected: [doc1]}\n",
    )
    doc = cli("retrieval", "sets/q.yaml", "--retriever", "vector", "--format", "json")
    assert doc.exit_code == 0, doc.stderr
    assert "cached_count" not in json.loads(doc.stdout)
    table = cli("retrieval", "sets/q.yaml", "--retriever", "vector")
    assert table.exit_code == 0, table.stderr
    assert "from the cache" not in table.stdout


# --- the decision grader's judge -------------------------------------------------------------------


@pytest.mark.slow
def test_a_judge_moved_to_another_endpoint_is_asked_again(
    cli: Any, fake_llm: FakeServer, write_file: Any, db_file: Path
) -> None:
    def judge(request: Recorded) -> Reply:
        text = request.json["messages"][-1]["content"]
        if "echo: " not in text:  # the readiness probe
            return openai_reply("OK", model="judge-1", prompt_tokens=0, completion_tokens=0)
        return openai_reply(json.dumps({"level": 4, "justification": "Right."}), model="judge-1")

    judges = [FakeServer(), FakeServer()]
    for server in judges:
        server.handler = judge
        server.start()
    try:
        write_file("sets/three.yaml", THREE)

        def configure(server: FakeServer) -> None:
            judge_entry = (
                f"  - {{id: judge, adapter: openai, base_url: '{server.url}/v1', model: judge-alias, max_retries: 0}}"
            )
            write_config(write_file, f"{fake_llm.url}/v1", "decision: {provider: judge}", judge_entry)

        def gradings(server: FakeServer) -> int:
            return sum("echo: " in r.json["messages"][-1]["content"] for r in server.requests)

        configure(judges[0])
        assert run_json(cli, "--grader", "decision")[0] == 0
        assert run_json(cli, "--grader", "decision")[0] == 0
        assert (gradings(judges[0]), gradings(judges[1])) == (3, 0)  # the second run's verdicts were cached
        configure(judges[1])
        code, doc = run_json(cli, "--grader", "decision")
        assert code == 0
        assert (gradings(judges[0]), gradings(judges[1])) == (3, 3)
        assert doc["cached_count"] == 3  # the generator's answers still came from the cache
        endpoints = {row[0] for row in query(db_file, "select endpoint from cache where provider = 'judge'")}
        assert endpoints == {f"openai {judges[0].url}/v1", f"openai {judges[1].url}/v1"}
    finally:
        for server in judges:
            server.stop()


# --- a gate decided on a cache stored before the run says so -----------------------------------


def test_a_gate_on_answers_cached_before_the_run_says_so_in_its_verdict_and_headline(
    cli: Any, fake_llm: FakeServer, write_file: Any, db_file: Path, tmp_path: Path
) -> None:
    """The committed (or restored) database of a CI job: its cache answers for a degraded
    endpoint, and the gate passes; the verdict and the PR comment's headline say what it rests on."""
    write_file("sets/three.yaml", THREE)
    write_config(write_file, f"{fake_llm.url}/v1")
    code, fresh = run_json(cli, "--fail-on-regression")
    assert (code, fresh["cached_count"], fresh["cached_before_run_count"]) == (0, 0, 0)
    execute(db_file, "update cache set created_at = timestamp '2026-11-20 10:00:00'")  # written days ago
    fake_llm.handler = lambda _: openai_reply("degraded", model=fake_llm.model)  # no "echo" now
    md = tmp_path / "evalkit.md"
    table = cli("run", "sets/three.yaml", "--fail-on-regression", "--markdown", str(md))
    assert (table.exit_code, fake_llm.calls) == (0, 3)  # the endpoint was not asked: the gate held on the cache
    note = (
        "on 3 of 3 answers cached before this run (the oldest 2026-11-20 10:00 UTC), not on the endpoint now: "
        "gate with --no-cache"
    )
    assert f"No regression: pass rate +0.0 pp, mean score +0.000 against run {fresh['run_id']}, {note}." in " ".join(
        table.stdout.split()
    )
    (headline,) = [line for line in md.read_text(encoding="utf-8").splitlines() if line.startswith("✅")]
    assert headline.startswith(f"✅ **no regression** · ⚠️ **{note}** · fake/fake-alias")
    code, doc = run_json(cli, "--fail-on-regression")
    assert (code, doc["cached_count"], doc["cached_before_run_count"]) == (0, 3, 3)
    # without the cache the endpoint is asked, and the drop is found
    code, asked = run_json(cli, "--fail-on-regression", "--no-cache")
    assert (code, asked["cached_before_run_count"], asked["comparison"]["regressed"]) == (1, 0, True)


def test_answers_cached_before_the_run_are_not_flagged_without_the_regression_gate(
    cli: Any, fake_llm: FakeServer, write_file: Any, tmp_path: Path
) -> None:
    write_file("sets/three.yaml", THREE)
    write_config(write_file, f"{fake_llm.url}/v1")
    assert run_json(cli)[0] == 0
    md = tmp_path / "evalkit.md"
    table = cli("run", "sets/three.yaml", "--markdown", str(md))
    assert table.exit_code == 0
    assert "cached before this run" not in table.stdout + md.read_text(encoding="utf-8")
    assert run_json(cli)[1]["cached_before_run_count"] == 3  # counted all the same


# --- --no-cache skips reading, not writing ---------------------------------------------------------


def test_no_cache_still_stores_fresh_answers(cli, fake_config, fake_llm: FakeServer, write_file) -> None:
    write_file(
        "sets/c.yaml", "id: cache.c\nname: C\nprompts:\n  - {id: a, prompt: hi, assertions: [{contains: echo}]}\n"
    )
    assert cli("run", "sets/c.yaml", "--no-cache").exit_code == 0
    assert cli("run", "sets/c.yaml", "--no-cache").exit_code == 0
    assert fake_llm.calls == 2
    assert cli("run", "sets/c.yaml").exit_code == 0
    assert fake_llm.calls == 2
