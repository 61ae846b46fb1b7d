"""The API key is masked wherever endpoint text goes: an endpoint echoing it back never puts it in
the output, the report or the database."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.fakeserver import FakeServer, Recorded, Reply, openai_reply

THREE = """
id: hostile.three
name: Three
prompts:
  - {id: q0, prompt: question 0, assertions: [{contains: echo}]}
  - {id: q1, prompt: question 1, assertions: [{contains: echo}]}
  - {id: q2, prompt: question 2, assertions: [{contains: echo}]}
"""


def whole_database(db: Path) -> str:
    """Every row of every table, as text."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        names = [r[0] for r in con.execute("select table_name from duckdb_tables()").fetchall()]
        return json.dumps({n: con.execute(f"select * from {n}").fetchall() for n in names}, default=str)
    finally:
        con.close()


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
