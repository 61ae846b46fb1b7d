"""Token counts: implausible usage values are dropped with a note and the run is stored; migration
m006 makes every token column BIGINT and keeps the rows."""

from __future__ import annotations

import json
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
    assert "m006_bigint_tokens" in [name for name, _ in MIGRATIONS]
    with Store.open(db_file, upto="m005_cache_endpoint") as store:
        store.con.execute(
            "insert into results (run_id, item_index, item_id, passed, score, input_tokens, output_tokens)"
            " values ('old', 0, 'a', true, 1.0, 7, 8)"
        )
    with Store.open(db_file) as store:
        assert "m006_bigint_tokens" in store.schema_version()
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
