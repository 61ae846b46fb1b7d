"""The replay adapter: recorded answers from JSONL, scoped by set, checked before anything runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalkit.api import run_set
from evalkit.records import ServingRecord
from tests.fakeserver import FakeServer

SET = """
id: replay.demo
name: Replayed answers
prompts:
  - id: opening-hours
    prompt: When is the office open?
    assertions: [{contains: Monday}]
  - id: sunday
    prompt: Open on Sundays?
    assertions: [{exact: "no"}]
  - id: contact
    prompt: Contact as JSON
    assertions: [{json_schema: {type: object, required: [email]}}]
"""


@pytest.fixture
def replay_config(write_file: Any) -> Path:
    write_file("sets/demo.yaml", SET)
    return write_file(
        "evalkit.yaml",
        """
        default_provider: recorded
        providers:
          - id: recorded
            adapter: replay
            path: answers.jsonl
        """,
    )


def write_answers(isolated: Path, *records: dict[str, Any] | str) -> Path:
    path = isolated / "answers.jsonl"
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def items(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["id"]: item for item in doc["items"]}


def test_answers_by_prompt_id(cli: Any, replay_config: Path, isolated: Path) -> None:
    write_answers(
        isolated,
        {"id": "sunday", "response": " no\n", "model": "gpt-recorded"},
        {"id": "contact", "response": '{"email": "a@b.c"}', "model": "gpt-recorded"},
        {"id": "opening-hours", "response": "Monday to Friday", "model": "gpt-recorded"},
    )
    result = cli("run", "sets/demo.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert [(i["id"], i["passed"]) for i in doc["items"]] == [
        ("opening-hours", True),
        ("sunday", True),
        ("contact", True),
    ]
    assert doc["generator"] == {"provider": "recorded", "model": "replay", "reported_model": "gpt-recorded"}
    assert doc["comparison"]["state"] == "baseline"


@pytest.mark.parametrize("scoped_first", [True, False])
def test_a_set_scoped_record_wins_over_an_unscoped_one(replay_config: Path, isolated: Path, scoped_first: bool) -> None:
    unscoped = {"id": "sunday", "response": "yes", "model": "m1"}
    scoped = {"id": "sunday", "set": "replay.demo", "response": "no", "model": "m1"}
    elsewhere = {"id": "sunday", "set": "other.set", "response": "maybe", "model": "m1"}
    ordered = [scoped, unscoped] if scoped_first else [unscoped, scoped]
    write_answers(
        isolated,
        {"id": "opening-hours", "response": "Monday", "model": "m1"},
        {"id": "contact", "response": "{}", "model": "m1"},
        *ordered,
        elsewhere,
    )
    run = run_set("sets/demo.yaml")
    answers = {item.id: item.response for item in run.items}
    assert answers == {"opening-hours": "Monday", "sunday": "no", "contact": "{}"}
    assert {item.serving for item in run.items} == {ServingRecord("recorded", "replay", "m1")}


def test_an_edited_answers_file_is_read_again(cli: Any, replay_config: Path, isolated: Path) -> None:
    write_answers(
        isolated,
        {"id": "opening-hours", "response": "Monday", "model": "m1"},
        {"id": "sunday", "response": "no", "model": "m1"},
        {"id": "contact", "response": '{"email": "x"}', "model": "m1"},
    )
    assert cli("run", "sets/demo.yaml").exit_code == 0
    write_answers(
        isolated,
        {"id": "opening-hours", "response": "Sunday only", "model": "m2"},
        {"id": "sunday", "response": "yes", "model": "m2"},
        {"id": "contact", "response": "none", "model": "m2"},
    )
    result = cli("run", "sets/demo.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["passed_count"] == 0  # graded on the new answers, not replayed from a cache
    assert doc["generator"]["reported_model"] == "m2"


def test_a_record_scoped_to_another_set_does_not_answer(cli: Any, replay_config: Path, isolated: Path) -> None:
    write_answers(
        isolated,
        {"id": "opening-hours", "response": "Monday", "model": "m1"},
        {"id": "sunday", "set": "other.set", "response": "no", "model": "m1"},
        {"id": "contact", "response": '{"email": "x"}', "model": "m1"},
    )
    result = cli("run", "sets/demo.yaml", "--format", "json")
    assert result.exit_code == 2
    assert "no recorded answer for prompt 'sunday' in answers.jsonl" in result.stderr


def test_a_record_without_model_gives_no_serving_proof(cli: Any, replay_config: Path, isolated: Path) -> None:
    write_answers(
        isolated,
        {"id": "opening-hours", "response": "Monday", "model": "m1"},
        {"id": "sunday", "response": "no"},
        {"id": "contact", "response": '{"email": "x"}', "model": "m1"},
    )
    result = cli("run", "sets/demo.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["generator"] is None
    assert doc["comparison"]["state"] == "not_compared"
    assert doc["passed_count"] == 3
    run = run_set("sets/demo.yaml")
    assert {item.id: item.serving for item in run.items}["sunday"] == ServingRecord("recorded", "replay", None)


def test_records_of_different_models_give_no_generator(cli: Any, replay_config: Path, isolated: Path) -> None:
    write_answers(
        isolated,
        {"id": "opening-hours", "response": "Monday", "model": "m1"},
        {"id": "sunday", "response": "no", "model": "m2"},
        {"id": "contact", "response": '{"email": "x"}', "model": "m1"},
    )
    result = cli("run", "sets/demo.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["generator"] is None
    assert doc["comparison"]["state"] == "not_compared"


def test_a_prompt_without_a_record_is_an_input_error_before_any_answer(
    cli: Any, replay_config: Path, isolated: Path, db_file: Path
) -> None:
    """validate says so at exit 2, and run refuses the set before any item: not an item error at exit 3."""
    write_answers(
        isolated,
        {"id": "opening-hours", "response": "Tuesday", "model": "m1"},
        {"id": "contact", "response": '{"email": "x"}', "model": "m1"},
    )
    line = (
        "sets/demo.yaml:{}: no recorded answer for prompt 'sunday' in answers.jsonl (replay instance 'recorded'); "
        'add a line {{"id": "sunday", "response": "..."}} to it, or run another provider'
    )
    where = next(n for n, text in enumerate(SET.strip("\n").splitlines(), 1) if "id: sunday" in text)
    validated = cli("validate")
    assert validated.exit_code == 2
    assert validated.stderr.splitlines()[0].endswith(line.format(f"{where}:5"))  # the set folder's path
    result = cli("run", "sets/demo.yaml", "--format", "json")
    assert result.exit_code == 2
    assert result.exception is None
    assert result.stderr.splitlines() == ["Error: " + line.format(f"{where}:5")]
    assert result.stdout == ""
    assert not db_file.exists()
    write_answers(
        isolated,
        {"id": "opening-hours", "response": "Tuesday", "model": "m1"},
        {"id": "contact", "response": '{"email": "x"}', "model": "m1"},
        {"id": "sunday", "response": "no", "model": "m1"},
    )
    assert cli("validate").exit_code == 0


@pytest.mark.parametrize(
    ("lines", "line_number"),
    [
        (['{"id": "sunday", "response": "no"}', '{"id": "contact", "response": '], 2),
        (['{"id": "sunday", "response": "no"}', "", '["not", "an", "object"]'], 3),
        (['{"response": "no"}'], 1),
        (['{"id": "sunday"}'], 1),
        (['{"id": "sunday", "response": "no", "model": 4}'], 1),
        (['{"id": "sunday", "response": "no"}', "[" * 100_000 + "]" * 100_000], 2),
        (['{"id": "sunday", "response": "no", "tool_calls": {"name": "search"}}'], 1),
        (['{"id": "sunday", "response": "no"}', '{"id": "contact", "response": "", "tool_calls": [{"args": 1}]}'], 2),
        (['{"id": "sunday", "response": "no", "tool_calls": [{"name": "a", "arguments": {}, "id": "c1"}]}'], 1),
    ],
    ids=[
        "truncated",
        "array",
        "no-id",
        "no-response",
        "model-not-string",
        "nested-too-deeply",
        "tool-calls-not-array",
        "tool-call-without-name",
        "tool-call-unknown-key",
    ],
)
def test_a_malformed_line_is_exit_2_naming_file_and_line(
    cli: Any, replay_config: Path, isolated: Path, db_file: Path, lines: list[str], line_number: int
) -> None:
    write_answers(isolated, *lines)
    result = cli("run", "sets/demo.yaml", "--format", "json")
    assert result.exit_code == 2
    assert result.exception is None
    assert result.stdout == ""
    error_lines = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(error_lines) == 1
    assert f"answers.jsonl:{line_number}:" in error_lines[0]
    assert not db_file.exists()  # nothing ran, nothing was stored


def test_a_malformed_fallback_answers_file_stops_the_run_before_any_call(
    cli: Any, write_file: Any, fake_llm: FakeServer, isolated: Path, db_file: Path
) -> None:
    write_file("sets/demo.yaml", SET)
    write_file(
        "evalkit.yaml",
        f"""
        default_provider: fake
        providers:
          - id: fake
            adapter: openai
            base_url: {fake_llm.url}/v1
            model: fake-alias
            fallback: recorded
          - id: recorded
            adapter: replay
            path: answers.jsonl
        """,
    )
    write_answers(isolated, '{"id": "sunday", "response": "no"}', "{oops")
    result = cli("run", "sets/demo.yaml")
    assert result.exit_code == 2
    assert "answers.jsonl:2:" in result.stderr
    assert fake_llm.calls == 0
    assert not db_file.exists()


def test_a_missing_answers_file_is_exit_2(cli: Any, replay_config: Path, db_file: Path) -> None:
    result = cli("run", "sets/demo.yaml")
    assert result.exit_code == 2
    assert result.exception is None
    assert "answers.jsonl" in result.stderr
    assert not db_file.exists()


@pytest.mark.parametrize("scope", [{}, {"set": "replay.demo"}])
def test_a_second_answer_for_one_prompt_is_exit_2_naming_both_lines(
    cli: Any, replay_config: Path, isolated: Path, db_file: Path, scope: dict[str, str]
) -> None:
    write_answers(
        isolated,
        {"id": "sunday", "response": "no", **scope},
        {"id": "contact", "response": "{}", "set": "other.set"},
        {"id": "sunday", "response": "yes", **scope},
    )
    result = cli("run", "sets/demo.yaml", "--format", "json")
    assert result.exit_code == 2
    assert result.stdout == ""
    where = " in set 'replay.demo'" if scope else ""
    assert f"answers.jsonl:3:1: a second answer for prompt 'sunday'{where} (first at line 1); keep one" in result.stderr
    assert not db_file.exists()


def test_line_separators_inside_a_response_are_text_not_line_breaks(
    cli: Any, replay_config: Path, isolated: Path
) -> None:
    """JSON Lines are split on \\n only: json.dumps(..., ensure_ascii=False) writes U+2028,
    U+2029 and U+0085 raw inside a string, and str.splitlines would break the record there."""
    from evalkit.answers import read_answers

    response = "Monday\u2028to\x85Friday\u2029"
    lines = [
        json.dumps({"id": "opening-hours", "response": response}, ensure_ascii=False),
        json.dumps({"id": "sunday", "response": "no"}),
        json.dumps({"id": "contact", "response": '{"email": "a\u2028@b.c"}'}, ensure_ascii=False),
    ]
    (isolated / "answers.jsonl").write_text("\n".join(lines) + "\r\n", encoding="utf-8")
    assert read_answers(isolated / "answers.jsonl").get("replay.demo", "opening-hours") == (response, None, None)
    result = cli("run", "sets/demo.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert all(item["passed"] for item in json.loads(result.stdout)["items"])


TOOLS_SET = """
id: replay.tools
name: Replayed tool calls
prompts:
  - id: find
    prompt: Find the refund policy
    assertions:
      - tool_called: {name: search, arguments: {required: [query]}}
      - tool_sequence: [search, open]
      - not_tool_called: delete_account
  - id: chat
    prompt: Say hello
    assertions: [{contains: hello}, {not_tool_called: search}]
"""


def test_recorded_tool_calls_are_replayed_graded_and_reported(cli: Any, replay_config: Path, isolated: Path) -> None:
    (isolated / "sets/tools.yaml").write_text(TOOLS_SET, encoding="utf-8")
    calls = [{"name": "search", "arguments": {"query": "refund"}}, {"name": "open", "arguments": {"id": 3}}]
    write_answers(
        isolated,
        {"id": "find", "response": "", "model": "m", "tool_calls": calls},
        {"id": "chat", "response": "hello", "model": "m"},
    )
    assert cli("validate", "sets/tools.yaml").exit_code == 0
    result = cli("run", "sets/tools.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    found = items(json.loads(result.stdout))
    assert found["find"]["passed"]
    assert found["chat"]["passed"]
    assert found["find"]["tool_calls"] == calls  # as the JSON report writes them: a report replays as it was
    assert "tool_calls" not in found["chat"]

    write_answers(isolated, {"id": "find", "response": "", "tool_calls": calls[1:]}, {"id": "chat", "response": "hi"})
    failed = items(json.loads(cli("run", "sets/tools.yaml", "--format", "json", "--no-cache").stdout))
    assert not failed["find"]["passed"]
    assert "search" in failed["find"]["reason"]
