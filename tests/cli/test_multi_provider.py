"""`evalkit run` with several --provider options: the same set on each instance concurrently,
a prompts x providers matrix, one JSON envelope and one stored run per provider."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.conftest import write
from tests.fakeserver import FakeServer, Recorded, Reply, last_user_message, openai_reply

PROMPTS = ("a", "b", "c")


@pytest.fixture
def second_llm() -> Iterator[FakeServer]:
    server = FakeServer().start()
    try:
        yield server
    finally:
        server.stop()


def answering(model: str, wrong: set[str]) -> Any:
    def answer(request: Recorded) -> Reply:
        name = last_user_message(request).split()[-1]
        return openai_reply("wrong" if name in wrong else "right", model=model)

    return answer


@pytest.fixture
def project(isolated: Path, fake_llm: FakeServer, second_llm: FakeServer) -> tuple[FakeServer, FakeServer]:
    """Instance 'one' answers everything right; 'two' gets prompt b wrong."""
    write(
        isolated / "sets/multi.yaml",
        "id: multi.set\nname: Multi\nprompts:\n"
        + "".join(f"  - {{id: {p}, prompt: 'question {p}', assertions: [{{contains: right}}]}}\n" for p in PROMPTS),
    )
    write(
        isolated / "evalkit.yaml",
        f"""
        default_provider: one
        providers:
          - id: one
            adapter: openai
            base_url: {fake_llm.url}/v1
            model: alias-one
            max_retries: 0
          - id: two
            adapter: openai
            base_url: {second_llm.url}/v1
            model: alias-two
            max_retries: 0
        """,
    )
    fake_llm.handler = answering("model-one", set())
    second_llm.handler = answering("model-two", {"b"})
    return fake_llm, second_llm


BOTH = ("--provider", "one", "--provider", "two")


def table_rows(stdout: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.split("│")] for line in stdout.splitlines() if "│" in line]


def test_table_prints_a_prompts_by_providers_matrix(cli: Any, project: tuple[FakeServer, FakeServer]) -> None:
    result = cli("run", "sets/multi.yaml", *BOTH)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].strip() == "multi.set: prompts x providers"
    assert [cell.strip() for cell in lines[1].split("┃")] == ["prompt", "one/alias-one", "two/alias-two"]
    assert table_rows(result.stdout) == [
        ["a", "PASS", "PASS"],
        ["b", "PASS", "FAIL"],
        ["c", "PASS", "PASS"],
        ["pass rate", "100.0%", "66.7%"],
        ["mean score", "1.000", "0.667"],
    ]
    # then one compact summary per provider
    assert "multi.set · one/alias-one (reported model-one) · grader deterministic" in result.stdout
    assert "multi.set · two/alias-two (reported model-two) · grader deterministic" in result.stdout
    assert "Pass rate 100.0% (3/3)" in result.stdout
    assert "Pass rate 66.7% (2/3)" in result.stdout


def test_json_is_an_array_with_one_envelope_per_provider(cli: Any, project: tuple[FakeServer, FakeServer]) -> None:
    one, two = project
    result = cli("run", "sets/multi.yaml", *BOTH, "--format", "json")
    assert result.exit_code == 0, result.stderr
    docs = json.loads(result.stdout)
    assert isinstance(docs, list)
    assert [(d["set"], d["provider"], d["model"]) for d in docs] == [
        ("multi.set", "one", "alias-one"),
        ("multi.set", "two", "alias-two"),
    ]
    assert [d["generator"] for d in docs] == [
        {"provider": "one", "model": "alias-one", "reported_model": "model-one"},
        {"provider": "two", "model": "alias-two", "reported_model": "model-two"},
    ]
    assert [(d["passed_count"], d["pass_rate"]) for d in docs] == [(3, 1.0), (2, pytest.approx(2 / 3))]
    assert [[i["passed"] for i in d["items"]] for d in docs] == [[True, True, True], [True, False, True]]
    assert [d["comparison"]["state"] for d in docs] == ["baseline", "baseline"]
    assert docs[0]["run_id"] != docs[1]["run_id"]
    # each instance was asked every prompt once, with its own alias
    assert (one.calls, two.calls) == (3, 3)
    assert {r.json["model"] for r in one.requests} == {"alias-one"}
    assert {r.json["model"] for r in two.requests} == {"alias-two"}


def test_one_run_is_stored_per_provider(cli: Any, project: tuple[FakeServer, FakeServer], db_file: Path) -> None:
    docs = json.loads(cli("run", "sets/multi.yaml", *BOTH, "--format", "json").stdout)
    con = duckdb.connect(str(db_file), read_only=True)
    try:
        runs = con.execute(
            "select run_id, set_id, provider, model, reported_model, item_count, passed_count from runs order by provider"
        ).fetchall()
        items = con.execute("select run_id, count(*) from results group by run_id order by run_id").fetchall()
    finally:
        con.close()
    assert runs == [
        (docs[0]["run_id"], "multi.set", "one", "alias-one", "model-one", 3, 3),
        (docs[1]["run_id"], "multi.set", "two", "alias-two", "model-two", 3, 2),
    ]
    assert sorted(items) == sorted([(docs[0]["run_id"], 3), (docs[1]["run_id"], 3)])


def test_each_provider_is_compared_with_its_own_baseline(cli: Any, project: tuple[FakeServer, FakeServer]) -> None:
    first = json.loads(cli("run", "sets/multi.yaml", *BOTH, "--format", "json").stdout)
    _, two = project
    two.handler = answering("model-two", {"a", "b", "c"})
    result = cli("run", "sets/multi.yaml", *BOTH, "--format", "json", "--no-cache", "--fail-on-regression")
    assert result.exit_code == 1
    second = json.loads(result.stdout)
    assert [d["comparison"]["baseline_run_id"] for d in second] == [first[0]["run_id"], first[1]["run_id"]]
    assert [d["comparison"]["regressed"] for d in second] == [False, True]
    assert [d["gate"]["passed"] for d in second] == [True, False]


def test_providers_run_concurrently(cli: Any, project: tuple[FakeServer, FakeServer]) -> None:
    # Each server holds its first answer until the other server has been asked too: a
    # sequential run would leave the first provider waiting for a request that never comes,
    # and (after the safety timeout) answer 500, so its items would error and the run exit 3.
    one, two = project
    asked = {"one": threading.Event(), "two": threading.Event()}

    def held(name: str, other: str, model: str, wrong: set[str]) -> Any:
        inner = answering(model, wrong)

        def answer(request: Recorded) -> Reply:
            asked[name].set()
            if not asked[other].wait(timeout=10):
                return Reply(status=500, json={"error": {"message": "the other provider was never asked"}})
            return inner(request)

        return answer

    one.handler = held("one", "two", "model-one", set())
    two.handler = held("two", "one", "model-two", {"b"})
    result = cli("run", "sets/multi.yaml", *BOTH, "--format", "json", "--concurrency", "1")
    assert result.exit_code == 0, result.stdout
    assert [d["error_count"] for d in json.loads(result.stdout)] == [0, 0]


def test_model_with_two_providers_is_refused(cli: Any, project: tuple[FakeServer, FakeServer], db_file: Path) -> None:
    one, two = project
    result = cli("run", "sets/multi.yaml", *BOTH, "--model", "x")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "Error: --model applies to one provider instance; give each instance its model: in evalkit.yaml"
    )
    assert result.stdout == ""
    assert (one.calls, two.calls) == (0, 0)
    assert not db_file.exists()


def test_an_unknown_provider_among_several_is_refused_before_any_call(
    cli: Any, project: tuple[FakeServer, FakeServer], db_file: Path
) -> None:
    one, two = project
    result = cli("run", "sets/multi.yaml", "--provider", "one", "--provider", "nobody")
    assert result.exit_code == 2
    assert "Error: unknown provider instance 'nobody' (known: one, two)" in result.stderr
    assert (one.calls, two.calls) == (0, 0)
    assert not db_file.exists()


def test_the_same_provider_twice_runs_once(cli: Any, project: tuple[FakeServer, FakeServer]) -> None:
    one, _ = project
    result = cli("run", "sets/multi.yaml", "--provider", "one", "--provider", "one", "--format", "json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert isinstance(doc, dict)  # one run: one envelope, not an array
    assert doc["provider"] == "one"
    assert one.calls == 3


def test_matrix_with_repeats_counts_passes(cli: Any, project: tuple[FakeServer, FakeServer]) -> None:
    result = cli("run", "sets/multi.yaml", *BOTH, "--repeat", "2")
    assert result.exit_code == 0, result.stderr
    rows = table_rows(result.stdout)
    assert rows[:3] == [["a", "2/2", "2/2"], ["b", "2/2", "0/2"], ["c", "2/2", "2/2"]]


def test_a_failing_provider_does_not_stop_the_other(
    cli: Any, project: tuple[FakeServer, FakeServer], db_file: Path
) -> None:
    _, two = project
    two.handler = lambda request: Reply(status=500, json={"error": {"message": "boom"}})
    result = cli("run", "sets/multi.yaml", *BOTH, "--format", "json")
    assert result.exit_code == 3
    docs = json.loads(result.stdout)  # printed whatever the exit code
    assert [(d["provider"], d["error_count"], d["comparison"]["state"]) for d in docs] == [
        ("one", 0, "baseline"),
        ("two", 3, "not_compared"),
    ]
    con = duckdb.connect(str(db_file), read_only=True)
    try:
        assert con.execute("select provider, error_count from runs order by provider").fetchall() == [
            ("one", 0),
            ("two", 3),
        ]
    finally:
        con.close()
    table = cli("run", "sets/multi.yaml", *BOTH)
    assert table.exit_code == 3
    assert table_rows(table.stdout)[:3] == [["a", "PASS", "ERROR"], ["b", "PASS", "ERROR"], ["c", "PASS", "ERROR"]]


def test_ctrl_c_between_two_stored_runs_names_the_one_kept(
    cli: Any, project: tuple[FakeServer, FakeServer], db_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalkit.pipeline import persist

    real = persist.keep
    saved: list[str] = []

    def interrupted_second(ending: Any, store: Any, run: Any) -> Any:
        if saved:
            raise KeyboardInterrupt
        saved.append(run.run_id)
        return real(ending, store, run)

    monkeypatch.setattr(persist, "keep", interrupted_second)
    result = cli("run", "sets/multi.yaml", *BOTH)
    assert result.exit_code == 130
    assert result.stderr.strip().splitlines()[-1] == (
        f"Interrupted: 1 of 2 runs of this command were stored ({saved[0]}); the others were not; "
        "the answers received are in the cache."
    )
    con = duckdb.connect(str(db_file), read_only=True)
    try:
        assert con.execute("select run_id from runs").fetchall() == [(saved[0],)]
    finally:
        con.close()
