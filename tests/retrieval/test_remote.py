"""The http and command retrievers end to end: the wire contract, provenance, the retry policy,
refusals, malformed answers and failing commands (question errors: exit 3, JSON still printed)."""

from __future__ import annotations

import json
import os
import shlex
import socket
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.fakeserver import FakeServer, Recorded, Reply

QUESTIONS = """
id: remote.docs
name: Remote
questions:
  - {id: pie, question: apple pie, form: match, expected: [apple]}
  - {id: bread, question: banana bread, form: gap, expected: [banana], hard_class: paraphrase}
"""
ONE_QUESTION = """
id: remote.one
name: One
questions:
  - {id: pie, question: apple pie, form: match, expected: [apple]}
"""
ANSWERS = {"apple pie": ["apple", "cake"], "banana bread": ["bread", "banana"]}


def http_config(url: str, provenance: dict[str, str] | None = None, retries: int = 2) -> str:
    declared = f"\n    provenance: {json.dumps(provenance)}" if provenance else ""
    return f"""
retrievers:
  - id: vector
    kind: http
    url: {url}
    max_retries: {retries}
    retry_backoff_s: 0
    timeout_s: 10{declared}
"""


def run(cli: Any, target: str = "sets/remote.yaml", *args: str, retriever: str = "vector") -> Any:
    result = cli("retrieval", target, "--retriever", retriever, "--format", "json", *args)
    result.doc = json.loads(result.stdout) if result.stdout.strip() else None
    return result


def run_rows(db: Path) -> list[tuple[Any, ...]]:
    if not db.exists():
        return []
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("select status, error_count, comparison_state from runs order by started_at").fetchall()
    finally:
        con.close()


class Attempts:
    """Counts calls per question (the server answers on several threads)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: dict[str, int] = {}

    def next(self, question: str) -> int:
        with self.lock:
            self.counts[question] = self.counts.get(question, 0) + 1
            return self.counts[question]


@pytest.fixture
def http(write_file: Any, fake_llm: FakeServer) -> FakeServer:
    write_file("evalkit.yaml", http_config(f"{fake_llm.url}/search"))
    write_file("sets/remote.yaml", QUESTIONS)
    write_file("sets/one.yaml", ONE_QUESTION)
    fake_llm.handler = lambda request: Reply(
        json={"ids": ANSWERS.get(request.json["question"], []), "provenance": {"corpus_revision": "docs-1"}}
    )
    return fake_llm


# ---------------------------------------------------------------- http: the contract


def test_http_posts_question_and_limit(cli: Any, http: FakeServer) -> None:
    result = run(cli, "sets/remote.yaml", "--limit", "5")
    assert result.exit_code == 0, result.stderr
    assert sorted((r.method, r.path, r.json["question"], r.json["limit"]) for r in http.requests) == [
        ("POST", "/search", "apple pie", 5),
        ("POST", "/search", "banana bread", 5),
    ]
    assert set(http.requests[0].json) == {"question", "limit"}
    assert http.requests[0].headers["content-type"] == "application/json"
    assert [(i["id"], i["top1_hit"], i["top3_hit"], i["retrieved"]) for i in result.doc["items"]] == [
        ("pie", True, True, ["apple", "cake"]),
        ("bread", False, True, ["bread", "banana"]),
    ]
    assert run(cli).exit_code == 0
    assert {r.json["limit"] for r in http.requests[2:]} == {12}  # the default


def test_returned_provenance_makes_the_benchmark_known(cli: Any, http: FakeServer) -> None:
    first = run(cli)
    assert first.doc["provenance"] == {
        "corpus_revision": "docs-1",
        "model_revision": None,
        "chunking": None,
        "pipeline": None,
    }
    assert first.doc["benchmark_fingerprint"] is not None
    assert first.doc["comparison"]["state"] == "baseline"
    http.handler = lambda request: Reply(json={"ids": ANSWERS[request.json["question"]]})
    unknown = run(cli, "sets/remote.yaml", "--fail-on-regression")
    assert (unknown.exit_code, unknown.doc["comparison"]["state"]) == (1, "unknown")
    assert unknown.doc["benchmark_fingerprint"] is None


def test_returned_provenance_wins_over_the_config(cli: Any, http: FakeServer, write_file: Any) -> None:
    declared = {"corpus_revision": "docs-1", "model_revision": "e5-v1", "chunking": "c512"}
    write_file("evalkit.yaml", http_config(f"{http.url}/search", declared))
    http.handler = lambda request: Reply(
        json={"ids": ANSWERS[request.json["question"]], "provenance": {"model_revision": "e5-v3", "pipeline": ""}}
    )
    doc = run(cli).doc
    assert doc["provenance"] == {
        "corpus_revision": "docs-1",
        "model_revision": "e5-v3",
        "chunking": "c512",
        "pipeline": None,
    }


def test_provenance_that_differs_between_answers_is_unknown(cli: Any, http: FakeServer) -> None:
    http.handler = lambda request: Reply(
        json={
            "ids": ANSWERS[request.json["question"]],
            "provenance": {"corpus_revision": f"docs-{len(request.json['question'])}", "chunking": "c512"},
        }
    )
    result = run(cli, "sets/remote.yaml", "--fail-on-regression")
    assert result.doc["provenance"]["corpus_revision"] is None
    assert result.doc["provenance"]["chunking"] == "c512"
    assert (result.exit_code, result.doc["comparison"]["state"]) == (1, "unknown")


def test_returned_treatment_change_is_compared_and_reported(cli: Any, http: FakeServer) -> None:
    def answer(chunking: str) -> Any:
        return lambda request: Reply(
            json={
                "ids": ANSWERS[request.json["question"]],
                "provenance": {"corpus_revision": "docs-1", "chunking": chunking, "pipeline": "hybrid"},
            }
        )

    http.handler = answer("c512")
    first = run(cli)
    http.handler = answer("c256")
    second = run(cli, "sets/remote.yaml", "--fail-on-regression")
    comparison = second.doc["comparison"]
    assert (second.exit_code, comparison["state"], comparison["treatment_changed"]) == (0, "compared", True)
    assert comparison["baseline_run_id"] == first.doc["run_id"]
    assert comparison["reason"].endswith("Treatment changed: chunking c512 -> c256.")
    table = cli("retrieval", "sets/remote.yaml", "--retriever", "vector")
    assert "Treatment changed" not in table.stdout  # same treatment as the run before
    assert "No regression: top-1 +0.0 pp, top-3 +0.0 pp" in table.stdout


# ---------------------------------------------------------------- http: retries, refusals, malformed answers


def test_transient_failure_is_retried(cli: Any, http: FakeServer) -> None:
    attempts = Attempts()

    def flaky(request: Recorded) -> Reply:
        question = request.json["question"]
        if attempts.next(question) == 1:
            return Reply(status=503, json={"error": "warming up"})
        return Reply(json={"ids": ANSWERS[question], "provenance": {"corpus_revision": "docs-1"}})

    http.handler = flaky
    result = run(cli)
    assert result.exit_code == 0, result.stderr
    assert attempts.counts == {"apple pie": 2, "banana bread": 2}
    assert (result.doc["error_count"], result.doc["top3_hit_rate"]) == (0, 1.0)


def test_retries_run_out_into_a_question_error(cli: Any, http: FakeServer, db_file: Path) -> None:
    attempts = Attempts()

    def down_for_bread(request: Recorded) -> Reply:
        question = request.json["question"]
        attempts.next(question)
        if question == "banana bread":
            return Reply(status=503, json={"error": "overloaded"})
        return Reply(json={"ids": ANSWERS[question], "provenance": {"corpus_revision": "docs-1"}})

    http.handler = down_for_bread
    result = run(cli)
    assert result.exit_code == 3
    assert attempts.counts == {"apple pie": 1, "banana bread": 3}  # max_retries: 2 after the first attempt
    items = {i["id"]: i for i in result.doc["items"]}
    assert items["pie"]["top1_hit"] is True
    assert "error" not in items["pie"]
    assert (items["bread"]["top1_hit"], items["bread"]["top3_hit"], items["bread"]["retrieved"]) == (False, False, [])
    assert "HTTP 503" in items["bread"]["error"]
    assert "(after 3 attempts)" in items["bread"]["error"]
    assert (result.doc["error_count"], result.doc["comparison"]["state"]) == (1, "unknown")
    assert run_rows(db_file) == [("errored", 1, "unknown")]


@pytest.mark.parametrize("status", [401, 403, 404])
def test_refusal_aborts_the_run(cli: Any, http: FakeServer, db_file: Path, status: int) -> None:
    http.handler = lambda request: Reply(status=status, json={"error": {"message": "no entry"}})
    result = cli("retrieval", "sets/one.yaml", "--retriever", "vector", "--format", "json")
    assert result.exit_code == 3
    assert result.stderr.startswith(f"Error: retriever 'vector': HTTP {status}: no entry")
    assert result.stdout == ""
    assert http.calls == 1  # never retried
    assert run_rows(db_file) == []


@pytest.mark.parametrize("status", [401, 404])
def test_refusal_hint_fits_a_retriever(cli: Any, http: FakeServer, status: int) -> None:
    http.handler = lambda request: Reply(status=status, json={"error": {"message": "no entry"}})
    result = cli("retrieval", "sets/one.yaml", "--retriever", "vector")
    assert result.exit_code == 3
    assert "api_key_env" not in result.stderr  # the retriever schema rejects api_key_env
    assert "model alias" not in result.stderr  # retrievers have none
    assert "base_url" not in result.stderr  # a retriever has a url


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (Reply(json={"documents": ["apple"]}), 'the response needs "ids": a list of strings'),
        (Reply(json={"ids": "apple"}), 'the response needs "ids": a list of strings'),
        (Reply(json={"ids": ["apple", 7]}), 'the response needs "ids": a list of strings'),
        (Reply(json={"ids": None}), 'the response needs "ids": a list of strings'),
        (Reply(json=["apple"]), "expected a JSON object in the response body"),
        (Reply(body=b"apple\ncake"), "malformed JSON in the response body"),
    ],
    ids=["no-ids", "ids-a-string", "ids-not-strings", "ids-null", "json-array", "not-json"],
)
def test_malformed_answer_is_a_question_error(
    cli: Any, http: FakeServer, db_file: Path, reply: Reply, message: str
) -> None:
    def answer(request: Recorded) -> Reply:
        if request.json["question"] == "banana bread":
            return reply
        return Reply(json={"ids": ["apple"], "provenance": {"corpus_revision": "docs-1"}})

    http.handler = answer
    result = run(cli)
    assert result.exit_code == 3
    assert result.doc is not None  # the JSON of the run is printed whatever the exit code
    items = {i["id"]: i for i in result.doc["items"]}
    assert items["pie"]["top1_hit"] is True
    assert message in items["bread"]["error"]
    assert items["bread"]["error"].startswith("retriever 'vector': ")
    assert (result.doc["error_count"], result.doc["comparison"]["state"]) == (1, "unknown")
    assert http.calls == 2  # a malformed answer is not retried
    assert run_rows(db_file) == [("errored", 1, "unknown")]


def test_unreachable_endpoint_is_a_question_error(cli: Any, write_file: Any) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    write_file("evalkit.yaml", http_config(f"http://127.0.0.1:{port}/search", retries=0))
    write_file("sets/one.yaml", ONE_QUESTION)
    result = run(cli, "sets/one.yaml")
    assert result.exit_code == 3
    assert "connection error" in result.doc["items"][0]["error"]


def test_an_unusable_environment_proxy_is_exit_2_before_any_search(
    cli: Any, http: FakeServer, db_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALL_PROXY", "ftp://proxy.example:21")
    checked = cli("validate")
    assert checked.exit_code == 2
    assert "retrievers[0].url: $ALL_PROXY 'ftp://proxy.example:21': a ftp:// proxy cannot be used" in checked.stderr
    result = cli("retrieval", "sets/one.yaml", "--retriever", "vector")
    assert result.exit_code == 2, result.stderr
    assert "retriever 'vector': $ALL_PROXY 'ftp://proxy.example:21': a ftp:// proxy cannot be used" in result.stderr
    assert http.calls == 0
    assert run_rows(db_file) == []


# ---------------------------------------------------------------- command retriever

SEARCH_SCRIPT = r"""
import json
import sys

question = sys.stdin.buffer.read().decode("utf-8")
with open("questions.log", "a", encoding="utf-8") as log:  # relative: proves the working folder
    log.write(json.dumps(question) + "\n")
with open("answers.json", encoding="utf-8") as handle:
    answers = json.load(handle)
if question in answers["fail"]:
    print("loading the index", file=sys.stderr)
    print("index unavailable", file=sys.stderr)
    sys.exit(4)
sys.stdout.buffer.write("\n".join(answers["ids"].get(question, [])).encode("utf-8"))
"""
COMMAND_QUESTIONS = """
id: command.docs
name: Command
questions:
  - {id: pie, question: apple pie, form: match, expected: [apple]}
  - {id: street, question: Wie heißt die Straße?, form: gap, expected: [straße.md]}
  - {id: none, question: nothing at all, form: gap, expected: []}
"""


def command_project(write_file: Any, *, ids: dict[str, list[str]], fail: tuple[str, ...] = ()) -> None:
    """A config in project/ whose command runs project/search.py; the CLI runs from the folder above."""
    python = shlex.quote(sys.executable)
    write_file(
        "project/evalkit.yaml",
        f"""
        retrievers:
          - id: mine
            kind: command
            command: {python} search.py
            provenance: {{corpus_revision: idx-7, pipeline: grep-v1}}
        """,
    )
    write_file("project/search.py", SEARCH_SCRIPT)
    write_file("project/answers.json", json.dumps({"ids": ids, "fail": list(fail)}, ensure_ascii=False))
    write_file("project/sets/command.yaml", COMMAND_QUESTIONS)


def run_command(cli: Any, *args: str) -> Any:
    result = cli(
        "retrieval", "project/sets/command.yaml", "--retriever", "mine", "--config", "project/evalkit.yaml",
        "--format", "json", *args,
    )  # fmt: skip
    result.doc = json.loads(result.stdout) if result.stdout.strip() else None
    return result


def test_command_reads_stdin_prints_ids_and_runs_in_the_config_folder(
    cli: Any, write_file: Any, isolated: Path
) -> None:
    command_project(
        write_file,
        ids={
            "apple pie": ["cake", "", "apple", "cake", "  ", "pie"],
            "Wie heißt die Straße?": ["straße.md", "weg.md"],
        },
    )
    result = run_command(cli)
    assert result.exit_code == 0, result.stderr
    logged = (isolated / "project" / "questions.log").read_text(encoding="utf-8").splitlines()
    assert sorted(json.loads(line) for line in logged) == sorted(
        ["apple pie", "Wie heißt die Straße?", "nothing at all"]
    )
    assert not (isolated / "questions.log").exists()
    items = {i["id"]: i for i in result.doc["items"]}
    assert (items["pie"]["top1_hit"], items["pie"]["top3_hit"], items["pie"]["retrieved"]) == (
        False,
        True,
        ["cake", "apple", "pie"],
    )
    assert (items["street"]["top1_hit"], items["street"]["retrieved"]) == (True, ["straße.md", "weg.md"])
    assert (items["none"]["top1_hit"], items["none"]["retrieved"]) == (True, [])
    assert result.doc["provenance"]["corpus_revision"] == "idx-7"
    assert result.doc["comparison"]["state"] == "baseline"
    again = run_command(cli, "--fail-on-regression")
    assert (again.exit_code, again.doc["comparison"]["state"]) == (0, "compared")


def test_command_output_is_cut_at_the_limit(cli: Any, write_file: Any) -> None:
    command_project(write_file, ids={"apple pie": ["a", "b", "c", "apple"]})
    result = run_command(cli, "--limit", "3")
    assert result.doc["items"][0]["retrieved"] == ["a", "b", "c"]
    assert result.doc["items"][0]["top3_hit"] is False


def test_failing_command_is_a_question_error(cli: Any, write_file: Any, db_file: Path) -> None:
    command_project(write_file, ids={"apple pie": ["apple"]}, fail=("Wie heißt die Straße?",))
    result = run_command(cli)
    assert result.exit_code == 3
    items = {i["id"]: i for i in result.doc["items"]}
    assert items["street"]["error"] == "retriever 'mine': exit status 4 index unavailable"
    assert (items["street"]["top1_hit"], items["street"]["top3_hit"]) == (False, False)
    assert items["pie"]["top1_hit"] is True
    assert "error" not in items["pie"]
    assert (result.doc["error_count"], result.doc["comparison"]["state"]) == (1, "unknown")
    assert run_rows(db_file) == [("errored", 1, "unknown")]


def test_missing_program_is_a_question_error(cli: Any, write_file: Any) -> None:
    write_file(
        "evalkit.yaml",
        "retrievers: [{id: mine, kind: command, command: ./no-such-search --fast, provenance: {corpus_revision: x}}]\n",
    )
    write_file("sets/one.yaml", ONE_QUESTION)
    result = run(cli, "sets/one.yaml", retriever="mine")
    assert result.exit_code == 3
    assert result.doc["items"][0]["error"].startswith("retriever 'mine': cannot run './no-such-search'")


def test_hanging_command_times_out_into_a_question_error(cli: Any, write_file: Any) -> None:
    python = shlex.quote(sys.executable)
    write_file(
        "evalkit.yaml",
        f"retrievers: [{{id: slow, kind: command, command: \"{python} -c 'import time; time.sleep(60)'\", "
        "timeout_s: 0.3}]\n",
    )
    write_file("sets/one.yaml", ONE_QUESTION)
    result = run(cli, "sets/one.yaml", retriever="slow")
    assert result.exit_code == 3
    assert result.doc["items"][0]["error"] == (
        "retriever 'slow': timed out after 0.3 s; the command and its children were ended"
    )


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
@pytest.mark.timeout(60)
def test_a_timed_out_command_ends_a_child_that_called_setsid(cli: Any, write_file: Any, isolated: Path) -> None:
    # the child leaves the command's session, then the command exits: the child holds the output
    os.mkfifo(isolated / "ready")  # the command ends only once the child is in its own session
    script = "#!/bin/sh\nsetsid sh -c 'echo $$ > ready; exec sleep 600' &\nread pid < ready\necho $pid > child.pid\n"
    write_file("search.sh", script).chmod(0o755)
    write_file("evalkit.yaml", "retrievers: [{id: mine, kind: command, command: ./search.sh, timeout_s: 0.5}]\n")
    write_file("sets/one.yaml", ONE_QUESTION)
    result = run(cli, "sets/one.yaml", retriever="mine")
    assert result.exit_code == 3
    assert result.doc["items"][0]["error"] == (
        "retriever 'mine': timed out after 0.5 s; the command and its children were ended"
    )
    stat = Path("/proc") / (isolated / "child.pid").read_text().strip() / "stat"
    assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")  # gone, or a zombie


def test_command_without_declared_corpus_revision_is_unknown(cli: Any, write_file: Any) -> None:
    python = shlex.quote(sys.executable)
    write_file("evalkit.yaml", f"retrievers: [{{id: echo, kind: command, command: \"{python} -c 'print(1)'\"}}]\n")
    write_file("sets/one.yaml", ONE_QUESTION)
    result = run(cli, "sets/one.yaml", "--fail-on-regression", retriever="echo")
    assert (result.exit_code, result.doc["comparison"]["state"]) == (1, "unknown")
    assert result.doc["items"][0]["retrieved"] == ["1"]


def test_blank_lines_and_repeats_do_not_use_up_the_limit(cli: Any, write_file: Any) -> None:
    # --limit counts distinct, non-blank ids, as the lexical retriever's do
    command_project(write_file, ids={"apple pie": ["cake", "", "  ", "cake", "cake", "apple"]})
    result = run_command(cli, "--limit", "2")
    assert result.exit_code == 0, result.stderr
    pie = next(i for i in result.doc["items"] if i["id"] == "pie")
    assert (pie["retrieved"], pie["top3_hit"]) == (["cake", "apple"], True)
    result = run_command(cli, "--limit", "1")
    pie = next(i for i in result.doc["items"] if i["id"] == "pie")
    assert (pie["retrieved"], pie["top3_hit"]) == (["cake"], False)


@pytest.mark.slow
def test_a_retriever_without_a_model_revision_reads_as_a_dash_in_every_report(cli: Any, write_file: Any) -> None:
    command_project(write_file, ids={"apple pie": ["apple"]})
    for _ in range(2):
        assert run_command(cli).exit_code == 0
    runs = [r["run_id"] for r in json.loads(cli("report", "--format", "json").stdout)["runs"]]
    assert len(runs) == 2
    for args in (("report",), ("report", "command.docs", "--format", "markdown"), ("compare", *runs)):
        result = cli(*args)
        assert result.exit_code == 0, result.output
        assert "mine/—" in result.stdout
        assert "None" not in result.stdout
    markdown = cli("compare", *runs, "--format", "markdown")
    assert markdown.exit_code == 0, markdown.output
    assert "command.docs: mine/— -> mine/—" in markdown.stdout
