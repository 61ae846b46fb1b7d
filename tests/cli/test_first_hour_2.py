"""Issue 14, "the first hour" (points 9-15): what a newcomer met in the first hour of evalkit.

The privacy hint of ``show``, the lock-wait message of every command (a real second process holds
the database), a ``--db`` into a missing folder, the README's query and API examples and
``evalkit init``'s example set on the real local model, "did you mean" and the indentation
message, retrieval wording in ``report`` and ``compare`` and the default retriever, and the run
id's time being the run's start.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from evalkit.store import Store
from tests.conftest import REPO
from tests.fakeserver import FakeServer, openai_reply

ONE_PROMPT = """
id: hour.one
name: One prompt
prompts:
  - id: greet
    prompt: Say hi
    assertions: [{contains: hi}]
"""


def fake_project(write_file: Any, server: FakeServer, extra: str = "") -> None:
    write_file(
        "evalkit.yaml",
        f"""
        {extra}
        providers:
          - id: fake
            adapter: openai
            base_url: {server.url}/v1
            model: fake-alias
            max_retries: 0
        """,
    )
    write_file("sets/one.yaml", ONE_PROMPT)
    server.handler = lambda request: openai_reply("hi there")


def run_json(cli: Any, *args: str) -> dict[str, Any]:
    result = cli("run", *args, "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


# ---------------------------------------------------------------- 9: show says why there are no answers


@pytest.mark.parametrize(
    ("level", "hint"),
    [
        (
            "metadata",
            "No answers shown: this run was stored at privacy 'metadata' (no prompt or answer text). Set privacy: "
            "redacted (texts with secrets masked) or privacy: full in evalkit.yaml to keep them in later runs.",
        ),
        (
            "none",
            "No items shown: this run was stored at privacy 'none' (aggregates only). Set privacy: metadata in "
            "evalkit.yaml to keep per-item verdicts in later runs, or redacted / full to keep the answers too.",
        ),
    ],
)
def test_show_says_which_privacy_level_would_keep_the_answers(
    cli: Any, write_file: Any, fake_llm: FakeServer, level: str, hint: str
) -> None:
    fake_project(write_file, fake_llm, f"privacy: {level}")
    run_id = run_json(cli, "sets/one.yaml")["run_id"]
    table = cli("show", run_id)
    assert table.exit_code == 0, table.stderr
    assert " ".join(table.stdout.split()).endswith(hint)
    as_json = cli("show", run_id, "--format", "json")
    assert as_json.exit_code == 0
    json.loads(as_json.stdout)  # stdout stays one JSON document; the note goes to stderr
    assert as_json.stderr == f"Note: {hint}\n"


def test_show_of_a_full_run_has_no_privacy_note(cli: Any, write_file: Any, fake_llm: FakeServer) -> None:
    fake_project(write_file, fake_llm, "privacy: full")
    run_id = run_json(cli, "sets/one.yaml")["run_id"]
    for fmt in ("table", "json"):
        result = cli("show", run_id, "--format", fmt)
        assert result.exit_code == 0
        assert "privacy" not in result.stdout.replace('"privacy"', "")
        assert result.stderr == ""


# ---------------------------------------------------------------- 10: every command says it waits for the lock


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


# ---------------------------------------------------------------- 11: --db into a missing folder


COMMANDS_WITH_DB = [
    ["report"],
    ["show", "x"],
    ["compare", "a", "b"],
    ["models"],
    ["prune"],
    ["cache", "clear"],
    ["baseline", "accept"],
    ["run", "sets/one.yaml"],
    ["retrieval", "sets/fruit.yaml", "--retriever", "lexical"],
]


@pytest.mark.parametrize("args", COMMANDS_WITH_DB, ids=lambda args: " ".join(args[:2]))
def test_db_in_a_missing_folder_is_refused(
    cli: Any, write_file: Any, fake_llm: FakeServer, isolated: Path, args: list[str]
) -> None:
    fake_project(write_file, fake_llm)
    write_file("sets/fruit.yaml", FRUIT)
    write_file("sets/docs.jsonl", FRUIT_DOCS)
    result = cli(*args, "--db", "histroy/evalkit.duckdb")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == "Error: folder histroy does not exist; create it or fix --db\n"
    assert not (isolated / "histroy").exists()
    assert fake_llm.calls == 0


def test_evalkit_db_and_the_config_db_into_a_missing_folder_are_refused(
    cli: Any, write_file: Any, fake_llm: FakeServer, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_project(write_file, fake_llm)
    monkeypatch.setenv("EVALKIT_DB", "nope/x.duckdb")
    result = cli("run", "sets/one.yaml")
    assert (result.exit_code, result.stderr) == (2, "Error: folder nope does not exist; create it or fix EVALKIT_DB\n")
    monkeypatch.delenv("EVALKIT_DB")
    fake_project(write_file, fake_llm, "db: nope/x.duckdb")
    for args in (["run", "sets/one.yaml"], ["report"]):
        result = cli(*args)
        assert result.exit_code == 2
        assert result.stderr == (
            f"Error: folder {isolated / 'nope'} does not exist; create it or fix db: in {isolated / 'evalkit.yaml'}\n"
        )
    assert not (isolated / "nope").exists()
    assert fake_llm.calls == 0


def test_the_default_evalkit_folder_is_still_created(
    cli: Any, write_file: Any, fake_llm: FakeServer, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_project(write_file, fake_llm)
    monkeypatch.delenv("EVALKIT_DB")
    report = cli("report", "--format", "json")  # a read-only command on no database: empty, nothing made
    assert (report.exit_code, json.loads(report.stdout)) == (0, {"runs": []})
    assert not (isolated / ".evalkit").exists()
    assert run_json(cli, "sets/one.yaml")["comparison"]["state"] == "baseline"
    assert (isolated / ".evalkit" / "evalkit.duckdb").is_file()
    explicit = cli("run", "sets/one.yaml", "--db", ".evalkit/second.duckdb", "--format", "json")
    assert explicit.exit_code == 0, explicit.stderr
    nested = cli("report", "--db", "missing/.evalkit/x.duckdb")  # a .evalkit/ inside a typo is the typo
    assert (nested.exit_code, nested.stderr) == (
        2,
        f"Error: folder {Path('missing/.evalkit')} does not exist; create it or fix --db\n",
    )


# ---------------------------------------------------------------- 12: the README's examples and init's set


def readme() -> str:
    return (REPO / "README.md").read_text(encoding="utf-8")


def test_readme_queries_the_database_with_what_pip_installs(
    cli: Any, write_file: Any, fake_llm: FakeServer, isolated: Path
) -> None:
    assert "duckdb .evalkit" not in readme()  # no DuckDB command line comes with pip install evalkit
    assert importlib.util.find_spec("duckdb.__main__") is None  # and there is no python -m duckdb
    (line,) = [x for x in readme().splitlines() if x.startswith('python -c "import duckdb')]
    fake_project(write_file, fake_llm)
    run_json(cli, "sets/one.yaml", "--db", ".evalkit/evalkit.duckdb")
    assert line.startswith('python -c "')
    assert line.endswith('"')
    code = line.removeprefix('python -c "').removesuffix('"')
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=isolated, capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    assert "hour.one" in out.stdout
    assert "pass_rate" in out.stdout


def local_evalkit(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evalkit", *args], cwd=cwd, capture_output=True, text=True, timeout=600, check=False
    )


@pytest.mark.model
@pytest.mark.usefixtures("local_model")
def test_init_example_set_passes_on_the_local_model(isolated: Path) -> None:
    assert local_evalkit("init", cwd=isolated).returncode == 0
    result = local_evalkit("run", "sets/example.yaml", "--format", "json", cwd=isolated)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert (doc["passed_count"], doc["prompt_count"]) == (3, 3), [i["reason"] for i in doc["items"]]


@pytest.mark.model
@pytest.mark.usefixtures("local_model")
def test_readme_api_example_set_passes_on_the_local_model(isolated: Path) -> None:
    (named,) = re.findall(r'evalkit\.load_set\("([^"]+)"\)', readme())
    result = local_evalkit("run", str(REPO / named), "--format", "json", cwd=isolated)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["pass_rate"] == 1.0, [i["reason"] for i in doc["items"] if not i["passed"]]


# ---------------------------------------------------------------- 13: did you mean, and indentation


def one_assertion(kind: str, prompt_key: str = "") -> str:
    return f"""
    id: t.a
    name: A
    prompts:
      - id: p
        prompt: hi{prompt_key}
        assertions:
          - {kind}: x
    """


def test_unknown_names_get_a_suggestion_only_when_it_is_a_typo(cli: Any, write_file: Any) -> None:
    write_file("negated.yaml", one_assertion("not_containz"))
    write_file("valid_negation.yaml", one_assertion("not_contains"))
    write_file("vars.yaml", one_assertion("contains", "\n        inputs: {a: 1}"))
    write_file("typo.yaml", one_assertion("containz"))
    write_file("cfg/evalkit.yaml", "providers: [{id: x, adapter: openia, base_url: 'http://127.0.0.1:9/v1'}]\n")
    expected = "(expected one of: contains, contains_all, contains_any, contains_json, context_contains, cost, equals_json, exact, icontains, icontains_all, icontains_any, json_schema, latency_ms, levenshtein, python, regex, starts_with, tool_call_f1, tool_called, tool_sequence, valid_tool_calls, word_count; each also as not_<type>)"
    assert cli("validate", "valid_negation.yaml").exit_code == 0  # not_contains exists (README "Negation")
    assert cli("validate", "negated.yaml").stderr.splitlines()[0] == (
        f"negated.yaml:7:9: prompts[0].assertions[0]: unknown assertion type 'not_containz' {expected}; "
        "did you mean 'not_contains'?"
    )
    assert cli("validate", "vars.yaml").stderr.splitlines()[0] == (
        "vars.yaml:6:5: prompts[0].inputs: unknown key 'inputs' "
        "(expected one of: assertions, critical, id, messages, params, prompt, reference, system, threshold, tool_choice, tools, vars)"
    )
    assert cli("validate", "typo.yaml").stderr.splitlines()[0] == (
        f"typo.yaml:7:9: prompts[0].assertions[0]: unknown assertion type 'containz' {expected}; "
        "did you mean 'contains'?"
    )
    assert cli("validate", "cfg/evalkit.yaml").stderr.splitlines()[0] == (
        "cfg/evalkit.yaml:1:30: providers[0].adapter: 'openia' is not one of: openai, anthropic, replay, local, http, python, command; "
        "did you mean 'openai'?"
    )


def test_suggestions_never_name_the_opposite_or_a_stripped_form() -> None:
    from evalkit.sets.validation import suggest

    assert suggest("not_contains", ["contains", "exact"]) is None
    assert suggest("contains", ["not_contains"]) is None
    assert suggest("vars", ["params", "prompt"]) is None
    assert suggest("strict_exact", ["exact"]) is None
    assert suggest("regx", ["regex"]) == "regex"
    assert suggest("metdata", ["none", "metadata", "redacted", "full"]) == "metadata"
    assert suggest("api_key", ["api_key_env", "base_url"]) == "api_key_env"


def test_a_wrong_indent_is_called_inconsistent_indentation(cli: Any, write_file: Any) -> None:
    write_file(
        "indent.yaml",
        """
        id: t.i
        name: I
        prompts:
          - id: p
            prompt: hi
          assertions:
              - contains: x
        """,
    )
    result = cli("validate", "indent.yaml")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == (
        "indent.yaml:6:3: YAML error: the indentation is inconsistent at line 6: indent it like the other keys "
        "(or list items) of the block it belongs to"
    )
    assert "'?'" not in result.stderr


# ---------------------------------------------------------------- 14: retrieval in report and compare

FRUIT = """
id: fruit.docs
name: Fruit
corpus: docs.jsonl
questions:
  - {id: pie, question: the apple pie, form: match, expected: [apple]}
  - {id: bread, question: banana bread, form: gap, expected: [banana]}
  - {id: loaf, question: a loaf of apple bread, form: gap, expected: [banana]}
"""
FRUIT_DOCS = "".join(
    json.dumps(d) + "\n"
    for d in [{"id": "apple", "text": "apple pie recipes"}, {"id": "banana", "text": "banana bread and the loaf"}]
)


@pytest.fixture
def fruit(write_file: Any) -> None:
    write_file("sets/fruit.yaml", FRUIT)
    write_file("sets/docs.jsonl", FRUIT_DOCS)


def retrieval_json(cli: Any, *args: str) -> dict[str, Any]:
    result = cli("retrieval", "sets/fruit.yaml", *args, "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


@pytest.mark.usefixtures("fruit")
def test_retriever_defaults_to_lexical_when_no_other_is_configured(cli: Any, write_file: Any) -> None:
    assert retrieval_json(cli)["retriever"] == "lexical"
    write_file("evalkit.yaml", "retrievers: [{id: lexical, kind: lexical, language: none}]\n")
    assert retrieval_json(cli)["retriever"] == "lexical"
    write_file("evalkit.yaml", "retrievers: [{id: vector, kind: http, url: 'http://127.0.0.1:9/search'}]\n")
    result = cli("retrieval", "sets/fruit.yaml")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (
        f"Error: --retriever ID is needed: {Path('evalkit.yaml').resolve()} configures vector besides the built-in "
        "lexical; name one, e.g. --retriever lexical\n"
    )


@pytest.mark.usefixtures("fruit")
def test_report_labels_the_hit_rates_of_retrieval_runs(cli: Any) -> None:
    retrieval_json(cli)
    for args in (["report"], ["report", "fruit.docs"]):
        result = cli(*args)
        assert result.exit_code == 0
        (row,) = [line for line in result.stdout.splitlines() if "lexical/" in line]
        assert "(top-1)" in row, result.stdout
        assert "(top-3)" in row, result.stdout


@pytest.mark.usefixtures("fruit")
def test_compare_of_retrieval_runs_speaks_of_hit_rates(cli: Any, write_file: Any) -> None:
    first = retrieval_json(cli)["run_id"]
    write_file("sets/docs.jsonl", FRUIT_DOCS.replace("banana bread and the loaf", "banana and a loaf of bread"))
    second = retrieval_json(cli)["run_id"]
    result = cli("compare", first, second)
    assert result.exit_code == 0, result.stderr
    assert "pass rate" not in result.stdout
    assert "mean score" not in result.stdout
    lines = result.stdout.splitlines()
    assert lines[2].startswith("Paired questions: 3 (0 only in the first run, 0 only in the second)")
    assert lines[3].startswith("top-1 hit rate ")
    assert lines[4].startswith("top-3 hit rate ")
    assert lines[5].startswith("Whole runs: top-1 hit rate ")
    assert "top-3 hit rate" in lines[5]


def test_stdlib_no_answer_questions_are_documented_misses_for_lexical(
    cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    result = cli("retrieval", "sets/stdlib_docs.yaml", "--format", "json")  # lexical by default
    doc = json.loads(result.stdout)
    no_answer = [i for i in doc["items"] if i["hard_class"] == "no-answer"]
    assert len(no_answer) == 9
    assert all(i["retrieved"] and not i["top3_hit"] for i in no_answer)
    said = "count as misses for it"
    assert said in " ".join((REPO / "sets" / "stdlib_docs.yaml").read_text(encoding="utf-8").replace("#", "").split())
    assert said in " ".join(readme().split())


# ---------------------------------------------------------------- 15: the run id is the start


class SteppingClock(datetime):
    """Every reading a minute after the previous one: a run that reads the clock twice shows it."""

    readings = 0

    @classmethod
    def now(cls, tz: Any = None) -> SteppingClock:  # type: ignore[override]
        cls.readings += 1
        moment = datetime(2026, 11, 30, 13, 15, 2, 250000, tzinfo=UTC) + timedelta(minutes=cls.readings)
        return cls.fromtimestamp(moment.timestamp(), tz or UTC)


def test_run_id_time_is_the_stored_and_reported_start(
    cli: Any, write_file: Any, fake_llm: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import evalkit.runner

    fake_project(write_file, fake_llm)
    monkeypatch.setattr(evalkit.runner, "datetime", SteppingClock)
    doc = run_json(cli, "sets/one.yaml")
    started = datetime.fromisoformat(doc["started_at"])
    assert doc["run_id"][:15] == f"{started:%Y%m%d-%H%M%S}"
    assert doc["finished_at"] > doc["started_at"]
    (row,) = json.loads(cli("report", "--format", "json").stdout)["runs"]
    assert row["run_id"] == doc["run_id"]
    assert f"{datetime.fromisoformat(row['started_at']):%Y%m%d-%H%M%S}" == doc["run_id"][:15]
