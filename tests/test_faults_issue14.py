"""Faults and hostile input (issue 14, points 25-30): lone surrogate escapes in a set file,
implausible token counts, a truncated or corrupt database, an API key echoed by the endpoint,
a command retriever whose children outlive it or that prints without end, a null answer, a
capped --concurrency, long literals in error lines, and exit 3 under --format json."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from evalkit.records import MAX_TOKENS_PER_CALL, Usage
from evalkit.store import Store
from evalkit.store.migrations import MIGRATIONS
from tests.fakeserver import FakeServer, Recorded, Reply, last_user_message, openai_reply

THREE = """
id: hostile.three
name: Three
prompts:
  - {id: q0, prompt: question 0, assertions: [{contains: echo}]}
  - {id: q1, prompt: question 1, assertions: [{contains: echo}]}
  - {id: q2, prompt: question 2, assertions: [{contains: echo}]}
"""


def rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def whole_database(db: Path) -> str:
    """Every row of every table, as text."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        names = [r[0] for r in con.execute("select table_name from duckdb_tables()").fetchall()]
        return json.dumps({n: con.execute(f"select * from {n}").fetchall() for n in names}, default=str)
    finally:
        con.close()


# --- 25: lone surrogate escapes are exit 2 at load --------------------------------------------------

SURROGATES = {
    "prompt": ('  - {id: p1, prompt: "bad \\ud800", assertions: [{contains: x}]}\n', "4:", "prompts[0].prompt"),
    "params": (
        '  - {id: p1, prompt: hi, params: {stop: ["\\udc00"]}, assertions: [{contains: x}]}\n',
        "4:",
        "prompts[0].params.stop[0]",
    ),
    "prompt id": ('  - {id: "p\\ud800", prompt: hi, assertions: [{contains: x}]}\n', "4:", "prompts[0].id"),
    "key": ('  - {id: p1, prompt: hi, params: {"k\\udfff": 1}, assertions: [{contains: x}]}\n', "4:", "params"),
}


@pytest.mark.parametrize("where", list(SURROGATES))
def test_a_lone_surrogate_escape_is_exit_2_at_load_from_validate_and_run(
    cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any, db_file: Path, where: str
) -> None:
    line, at, path = SURROGATES[where]
    write_file("sets/s.yaml", f"id: hostile.surrogate\nname: s\nprompts:\n{line}")
    for command in ("validate", "run"):
        result = cli(command, "sets/s.yaml")
        assert result.exit_code == 2, result.stderr
        assert result.exception is None
        assert f"sets/s.yaml:{at}" in result.stderr
        assert path in result.stderr
        assert "lone surrogate escape" in result.stderr
    assert fake_llm.calls == 0
    assert not db_file.exists()


def test_an_escaped_surrogate_pair_is_the_character_it_encodes(
    cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    # YAML is a superset of JSON, and JSON reads "\ud83d\ude00" as one character
    write_file(
        "sets/s.yaml",
        'id: hostile.pair\nname: s\nprompts:\n  - {id: p1, prompt: "smile \\ud83d\\ude00", assertions: [{contains: x}]}\n',
    )
    assert cli("validate", "sets/s.yaml").exit_code == 0
    assert cli("run", "sets/s.yaml").exit_code == 0
    assert last_user_message(fake_llm.requests[0]) == "smile \U0001f600"


# --- 26: implausible usage values are dropped with a note; the run is stored -----------------------


@pytest.mark.parametrize(
    ("value", "counted"),
    [
        (12, 12),
        (12.0, 12),
        (MAX_TOKENS_PER_CALL, MAX_TOKENS_PER_CALL),
        (2**31, 0),
        (-5, 0),
        (1.5, 0),
        ("12", 0),
        (True, 0),
        (float("inf"), 0),
        (10**5000, 0),
    ],
    ids=["12", "12.0", "max", "2**31", "-5", "1.5", "'12'", "True", "inf", "10**5000"],
)
def test_usage_keeps_plausible_counts_and_notes_the_others(value: object, counted: int) -> None:
    usage = Usage.from_body({"prompt_tokens": value, "completion_tokens": 3}, "prompt_tokens", "completion_tokens")
    assert (usage.input_tokens, usage.output_tokens) == (counted, 3)
    assert bool(usage.dropped) is (counted != value or isinstance(value, bool | str))
    assert all(len(note) < 60 for note in usage.dropped)


def test_an_absurd_token_count_is_dropped_with_a_note_and_the_run_is_stored(
    cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any, db_file: Path
) -> None:
    def answer(request: Recorded) -> Reply:
        text = last_user_message(request)
        return openai_reply(f"echo: {text}", prompt_tokens=2**31 if text.endswith("1") else 10)

    fake_llm.handler = answer
    write_file("sets/three.yaml", THREE)
    result = cli("run", "sets/three.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    items = {i["id"]: i for i in doc["items"]}
    assert "implausible token counts from the endpoint not counted: prompt_tokens 2147483648" in items["q1"]["reason"]
    assert "implausible" not in items["q0"]["reason"]
    stored = rows(db_file, "select item_id, input_tokens, output_tokens from results order by item_id")
    assert stored == [("q0", 10, 5), ("q1", 0, 5), ("q2", 10, 5)]
    assert rows(db_file, "select input_tokens from runs") == [(20,)]
    again = cli("run", "sets/three.yaml", "--format", "json")  # every answer was cached: none is paid twice
    assert (again.exit_code, json.loads(again.stdout)["cached_count"], fake_llm.calls) == (0, 3, 3)


def test_m006_makes_every_token_column_bigint_and_keeps_the_rows(db_file: Path) -> None:
    assert [name for name, _ in MIGRATIONS][-1] == "m006_bigint_tokens"
    with Store.open(db_file, upto="m005_cache_endpoint") as store:
        store.con.execute(
            "insert into results (run_id, item_index, item_id, passed, score, input_tokens, output_tokens)"
            " values ('old', 0, 'a', true, 1.0, 7, 8)"
        )
    with Store.open(db_file) as store:
        assert store.schema_version()[-1] == "m006_bigint_tokens"
        store.con.execute(
            "insert into results (run_id, item_index, item_id, passed, score, input_tokens, output_tokens)"
            " values ('new', 0, 'a', true, 1.0, 2147483648, 2147483648)"
        )
    types = rows(
        db_file,
        "select table_name, column_name, data_type from information_schema.columns"
        " where column_name in ('input_tokens', 'output_tokens') order by 1, 2",
    )
    assert {t for _, _, t in types} == {"BIGINT"}
    assert {table for table, _, _ in types} == {"cache", "results", "runs"}
    assert rows(db_file, "select run_id, input_tokens from results order by 1") == [("new", 2**31), ("old", 7)]


# --- 27: a truncated or corrupt database is exit 3 for every command --------------------------------


@pytest.fixture
def stored_run(cli: Any, fake_config: Path, write_file: Any, db_file: Path) -> str:
    write_file("sets/three.yaml", THREE)
    result = cli("run", "sets/three.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    return str(json.loads(result.stdout)["run_id"])


def commands(run_id: str) -> list[tuple[str, ...]]:
    return [
        ("report",),
        ("report", "--format", "json"),
        ("show", run_id),
        ("run", "sets/three.yaml"),
        ("compare", run_id, run_id),
        ("models",),
        ("prune",),
        ("baseline", "accept"),
        ("cache", "clear"),
    ]


@pytest.mark.slow
def test_a_truncated_database_is_exit_3_for_every_command(
    cli: Any, fake_llm: FakeServer, stored_run: str, db_file: Path
) -> None:
    whole = db_file.read_bytes()
    calls = fake_llm.calls
    for size in (100, 20_000, len(whole) // 3):
        for args in commands(stored_run):
            db_file.write_bytes(whole[:size])
            result = cli(*args)
            assert result.exception is None, (size, args, result.exception)
            assert result.exit_code == 3, (size, args, result.stderr)
            (line,) = result.stderr.strip().splitlines()[-1:]
            assert line == (
                f"Error: {db_file}: the database could not be opened: the file is damaged or truncated "
                "(a read past the end of the file); move it aside (evalkit then starts a new one) "
                "or restore it from a backup"
            )
    assert fake_llm.calls == calls  # no call was made on a database that cannot be opened


@pytest.mark.slow
def test_a_block_failing_its_checksum_is_exit_3_never_a_traceback(cli: Any, stored_run: str, db_file: Path) -> None:
    whole = db_file.read_bytes()
    block = int.from_bytes(whole[8192 + 40 : 8192 + 48], "little")  # the block size in the database header
    assert block > 0
    damaged = 0
    for offset in range(3 * 4096 + 200, len(whole), block):  # one corrupt block at a time
        corrupt = bytearray(whole)
        corrupt[offset : offset + 8] = b"\xff" * 8
        for args in (("report",), ("show", stored_run), ("compare", stored_run, stored_run)):
            db_file.write_bytes(bytes(corrupt))
            result = cli(*args)
            assert result.exception is None, (offset, args, result.exception)
            assert result.exit_code in (0, 3), (offset, args, result.stderr)
            if result.exit_code == 3:
                damaged += 1
                assert "the database could not be opened: the file is damaged" in result.stderr
    assert damaged


# --- 28: the API key is masked wherever endpoint text goes -------------------------------------------

KEY = "Zq8Kx2Lm9Pw4Rt6Yv3Nb7Hc"  # nothing the redaction patterns would take for a key


@pytest.mark.slow
def test_an_api_key_echoed_by_the_endpoint_is_masked_everywhere(
    cli: Any, fake_llm: FakeServer, write_file: Any, db_file: Path, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ECHO_KEY", KEY)

    def echo_key(request: Recorded) -> Reply:
        bearer = request.headers["authorization"].removeprefix("Bearer ")
        return openai_reply(f"echo: your key is {bearer}", model=f"model-{bearer}", **{"logprobs": {"key": bearer}})

    fake_llm.handler = echo_key
    write_file(
        "evalkit.yaml",
        f"""
        privacy: full
        providers:
          - id: fake
            adapter: openai
            base_url: {fake_llm.url}/v1
            model: alias-1
            api_key_env: ECHO_KEY
        """,
    )
    write_file("sets/three.yaml", THREE)
    outputs = []
    for fmt in ("json", "table", "markdown"):
        result = cli("run", "sets/three.yaml", "--format", fmt, "--output", "out.json", "--markdown", "out.md")
        assert result.exit_code == 0, result.stderr
        outputs += [
            result.stdout,
            result.stderr,
            (isolated / "out.json").read_text(),
            (isolated / "out.md").read_text(),
        ]
    assert fake_llm.requests[0].headers["authorization"] == f"Bearer {KEY}"  # it was sent, and echoed
    doc = json.loads(outputs[0])
    assert doc["generator"]["reported_model"] == "model-***"
    assert doc["items"][0]["reason"]
    report = cli("report", "--format", "json")
    assert report.exit_code == 0, (report.stderr, report.exception)
    runs = [r["run_id"] for r in json.loads(report.stdout)["runs"]]
    for args in (
        ("report",),
        ("report", "--format", "json"),
        ("show", runs[0]),
        ("show", runs[0], "--format", "json"),
        ("compare", runs[0], runs[-1]),
        ("models",),
    ):
        result = cli(*args)
        assert result.exit_code == 0, (args, result.stderr)
        outputs += [result.stdout, result.stderr]
    assert "your key is ***" in outputs[0]
    for text in outputs:
        assert KEY not in text
    database = whole_database(db_file)
    assert "model-***" in database
    assert "your key is ***" in database
    assert KEY not in database


# --- 29: the command retriever's process group and output are bounded -------------------------------

ONE_QUESTION = """
id: hostile.docs
name: Docs
questions:
  - {id: q, question: apple pie, form: match, expected: [apple]}
"""


def retrieval(cli: Any, write_file: Any, script: str, timeout_s: float) -> Any:
    write_file("search.sh", script)
    Path("search.sh").chmod(0o755)
    write_file(
        "evalkit.yaml",
        f"retrievers: [{{id: mine, kind: command, command: ./search.sh, timeout_s: {timeout_s}, "
        "provenance: {corpus_revision: x}}]\n",
    )
    write_file("sets/docs.yaml", ONE_QUESTION)
    result = cli("retrieval", "sets/docs.yaml", "--retriever", "mine", "--format", "json")
    result.doc = json.loads(result.stdout)
    return result


def alive(pid: int) -> bool:
    """Running (a zombie nobody reaped is not running)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return False
    return fields[0] not in ("Z", "X")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
@pytest.mark.timeout(60)  # before the fix the wait for the child's output lasted as long as the child
def test_a_command_timeout_ends_the_whole_process_group(cli: Any, write_file: Any, isolated: Path) -> None:
    script = "#!/bin/sh\nsleep 1000 &\necho $! > child.pid\nwait\n"
    result = retrieval(cli, write_file, script, timeout_s=0.5)
    assert result.exit_code == 3, result.stderr
    assert result.doc["items"][0]["error"] == (
        "retriever 'mine': timed out after 0.5 s; the command and its children were ended"
    )
    child = int((isolated / "child.pid").read_text())
    assert not alive(child)


@pytest.mark.timeout(60)
def test_a_command_printing_without_end_is_ended_with_a_reason(cli: Any, write_file: Any) -> None:
    python = shlex.quote(sys.executable)
    script = f"#!/bin/sh\nexec {python} -c 'import sys\nwhile True: sys.stdout.write(\"doc-1\\n\" * 4096)'\n"
    result = retrieval(cli, write_file, script, timeout_s=600)
    assert result.exit_code == 3, result.stderr
    assert result.doc["items"][0]["error"] == (
        "retriever 'mine': printed more than 16 MB; the command was ended (print ranked ids only, one per line)"
    )


# --- 30: null content, capped concurrency, long literals, exit 3 under --format json -----------------


def test_null_content_is_an_item_error_and_is_not_cached(
    cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    def answer(request: Recorded) -> Reply:
        if last_user_message(request).endswith("1"):
            reply = openai_reply("")
            reply.json["choices"][0]["message"]["content"] = None
            return reply
        return openai_reply(f"echo: {last_user_message(request)}")

    fake_llm.handler = answer
    write_file("sets/three.yaml", THREE)
    for _ in range(2):
        result = cli("run", "sets/three.yaml", "--format", "json")
        assert result.exit_code == 3
        items = {i["id"]: i for i in json.loads(result.stdout)["items"]}
        assert items["q1"]["error"] == (
            "provider 'fake': choices[0].message.content is null (finish_reason 'stop'): the endpoint gave no answer"
        )
        assert items["q0"]["error"] is None
    q1_calls = [r for r in fake_llm.requests if last_user_message(r).endswith("1")]
    assert len(q1_calls) == 2  # asked again: a missing answer is never replayed from the cache


def test_an_exit_3_run_under_format_json_says_on_stderr_how_many_items_errored(
    cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    def answer(request: Recorded) -> Reply:
        if last_user_message(request).endswith("2"):
            return Reply(status=400, json={"error": {"message": "bad request"}})
        return openai_reply(f"echo: {last_user_message(request)}")

    fake_llm.handler = answer
    write_file("sets/three.yaml", THREE)
    result = cli("run", "sets/three.yaml", "--format", "json")
    assert result.exit_code == 3
    run_id = json.loads(result.stdout)["run_id"]
    assert result.stderr.splitlines()[-1] == (
        f"Error: 1 of 3 items errored (hostile.three {run_id}: 1); each item's error says why"
    )
    assert result.stderr.count("errored") == 1


def test_concurrency_above_max_concurrency_is_said_once(cli: Any, fake_llm: FakeServer, write_file: Any) -> None:
    write_file(
        "evalkit.yaml",
        f"""
        default_provider: fake
        providers:
          - id: fake
            adapter: openai
            base_url: {fake_llm.url}/v1
            model: alias-1
            max_concurrency: 2
        """,
    )
    write_file("sets/three.yaml", THREE)
    write_file("sets/other.yaml", THREE.replace("hostile.three", "hostile.other"))
    result = cli("run", "sets/three.yaml", "sets/other.yaml", "--concurrency", "8", "--format", "json")
    assert result.exit_code == 0, result.stderr
    notes = [line for line in result.stderr.splitlines() if "max_concurrency" in line]
    assert notes == [
        "Note: --concurrency 8 is above max_concurrency of 'fake' (2): at most that many calls are in flight "
        "(raise max_concurrency in evalkit.yaml)"
    ]
    for args in (("--concurrency", "2"), ()):
        quiet = cli("run", "sets/three.yaml", *args, "--format", "json")
        assert "max_concurrency" not in quiet.stderr


@pytest.mark.parametrize(
    "text",
    [
        "id: hostile.long\nname: x\nparams: {max_tokens: "
        + "9" * 5000
        + "}\nprompts: [{id: p, prompt: hi, assertions: [{contains: x}]}]\n",
        "id: hostile.long\nname: x\nprompts:\n  - {id: "
        + "P" * 100_000
        + ", prompt: hi, assertions: [{contains: x}]}\n"
        "  - {id: " + "P" * 100_000 + ", prompt: hi, assertions: [{contains: x}]}\n",
        "id: " + "a" * 100_000 + "\nname: x\nprompts: [{id: p, prompt: hi, assertions: [{contains: x}]}]\n",
    ],
    ids=["5000-digit integer", "100000-character prompt id", "100000-character set id"],
)
def test_long_literals_in_error_lines_are_cut(cli: Any, fake_config: Path, write_file: Any, text: str) -> None:
    write_file("sets/long.yaml", text)
    for command in ("validate", "run"):
        result = cli(command, "sets/long.yaml")
        assert result.exception is None
        if command == "run":
            assert result.exit_code == 2, result.stderr
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert all(len(line) < 400 for line in lines), max(lines, key=len)[:500]


def test_a_set_id_too_long_for_the_file_system_is_exit_2(cli: Any, fake_config: Path, fake_llm: FakeServer) -> None:
    result = cli("run", "a" * 100_000)  # the file system refuses the name: it is a set id, and unknown
    assert (result.exit_code, result.exception) == (2, None)
    assert "is neither a file, a folder nor a set id" in result.stderr
    assert fake_llm.requests == []


def test_a_set_id_longer_than_200_characters_is_refused(cli: Any, write_file: Any) -> None:
    write_file(
        "sets/long.yaml",
        "id: " + "a" * 201 + "\nname: x\nprompts: [{id: p, prompt: hi, assertions: [{contains: x}]}]\n",
    )
    result = cli("validate", "sets/long.yaml")
    assert result.exit_code == 2
    assert "sets/long.yaml:1:5: id: " in result.stdout + result.stderr
    assert "is too long" in result.stdout + result.stderr
