"""Each privacy level stores exactly what README "Privacy" says (asserted on the rows)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from evalkit.store.privacy import redact
from tests.conftest import write
from tests.fakeserver import FakeServer, openai_reply

# An e-mail address that straddles the 60-character cut of an assertion's reason.
STRADDLING = "Reach our account manager by mail: alice.smith@examplecorp.com or later"

SECRET_KEY = "sk-test-SECRETSECRETSECRET1234"
ANSWER = "Mail jane.doe@example.com or call +1 415 555 0199; token sk-live-abcdefghijklmnop1234"
PROMPT = "Contact bob@example.org about key sk-proj-zyxwvutsrqponmlk9876"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("write to jane.doe@example.com now", "write to *** now"),
        ("call +1 415 555 0199 today", "call *** today"),
        ("call (030) 1234-5678", "call ***"),
        ("key sk-abcdefghijklmnopqrstuv", "key ***"),
        ("Authorization: Bearer abc.def-ghi_jkl", "Authorization: ***"),
        ("api_key=abcdef123456", "api_key=***"),
        ("AWS AKIAABCDEFGHIJKLMNOP here", "AWS *** here"),
        ("the year 2026 and 3.14159 stay", "the year 2026 and 3.14159 stay"),
        ("", ""),
    ],
)
def test_redact(text: str, expected: str) -> None:
    assert redact(text) == expected


def rows(db: Path, sql: str) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.fixture
def privacy_project(isolated: Path, fake_llm: FakeServer, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("FAKE_KEY", SECRET_KEY)
    fake_llm.handler = lambda req: openai_reply(ANSWER)
    write(
        isolated / "sets/p.yaml",
        f"""
        id: privacy.set
        name: Privacy
        system: Be brief.
        prompts:
          - id: one
            prompt: "{PROMPT}"
            assertions: [{{contains: "not in the answer"}}]
        """,
    )

    def configure(level: str) -> None:
        write(
            isolated / "evalkit.yaml",
            f"""
            privacy: {level}
            providers:
              - id: fake
                adapter: openai
                base_url: {fake_llm.url}/v1
                model: alias-1
                api_key_env: FAKE_KEY
            """,
        )

    return configure


def stored_text(db: Path) -> str:
    return json.dumps(rows(db, "select * from runs"), default=str) + json.dumps(
        rows(db, "select * from results"), default=str
    )


def test_none_keeps_the_run_row_only(cli, privacy_project, db_file: Path) -> None:
    privacy_project("none")
    assert cli("run", "sets/p.yaml").exit_code == 0
    assert rows(db_file, "select count(*) from results") == [(0,)]
    (provenance,) = rows(db_file, "select generator_provenance from runs")[0]
    assert json.loads(provenance)["reported_model"] == "fake-model-1"
    assert "example" not in stored_text(db_file)


def test_metadata_keeps_verdicts_but_no_text(cli, privacy_project, db_file: Path) -> None:
    privacy_project("metadata")
    assert cli("run", "sets/p.yaml").exit_code == 0
    ((item_id, passed, score, latency, prompt, system, response, reason, serving),) = rows(
        db_file,
        "select item_id, passed, score, latency_ms, prompt, system_prompt, response, reason, serving from results",
    )
    assert (item_id, passed, score) == ("one", False, 0.0)
    assert latency is not None
    assert (prompt, system, response, serving) == (None, None, None, None)
    assert reason == "assertion failed: contains"
    text = stored_text(db_file)
    assert "example" not in text
    assert "not in the answer" not in text


def test_redacted_masks_contacts_and_secrets(cli, privacy_project, db_file: Path) -> None:
    privacy_project("redacted")
    assert cli("run", "sets/p.yaml").exit_code == 0
    ((prompt, system, response, serving),) = rows(
        db_file, "select prompt, system_prompt, response, serving from results"
    )
    assert prompt == "Contact *** about key ***"
    assert system == "Be brief."
    assert response == "Mail *** or call ***; token ***"
    assert serving is None


def test_full_keeps_texts_and_serving_record(cli, privacy_project, db_file: Path) -> None:
    privacy_project("full")
    assert cli("run", "sets/p.yaml").exit_code == 0
    ((prompt, response, serving, adapter),) = rows(db_file, "select prompt, response, serving, adapter from results")
    assert prompt == PROMPT
    assert response == ANSWER
    assert json.loads(serving) == {
        "version": 1,
        "provider": "fake",
        "model": "alias-1",
        "reported_model": "fake-model-1",
    }
    assert adapter == "openai"


@pytest.mark.parametrize("level", ["none", "metadata", "redacted", "full"])
def test_api_key_is_never_stored(cli, privacy_project, db_file: Path, level: str) -> None:
    privacy_project(level)
    result = cli("run", "sets/p.yaml")
    assert result.exit_code == 0
    assert SECRET_KEY not in stored_text(db_file)
    assert SECRET_KEY not in json.dumps(rows(db_file, "select * from cache"), default=str)
    assert SECRET_KEY not in result.stdout + result.stderr


def test_show_respects_the_stored_level(cli, privacy_project) -> None:
    privacy_project("metadata")
    run = cli("run", "sets/p.yaml", "--format", "json")
    run_id = json.loads(run.stdout)["run_id"]
    shown = cli("show", run_id, "--format", "json")
    assert shown.exit_code == 0
    doc = json.loads(shown.stdout)
    assert doc["run_id"] == run_id
    assert doc["items"][0]["id"] == "one"
    assert "response" not in doc["items"][0]
    assert "example" not in shown.stdout


def test_cache_can_be_switched_off(cli, isolated: Path, fake_llm: FakeServer, db_file: Path) -> None:
    write(
        isolated / "sets/p.yaml",
        "id: c.set\nname: C\nprompts:\n  - {id: a, prompt: hi, assertions: [{contains: hi}]}\n",
    )
    write(
        isolated / "evalkit.yaml",
        f"cache: false\nproviders:\n  - {{id: fake, adapter: openai, base_url: '{fake_llm.url}/v1', model: m}}\n",
    )
    assert cli("run", "sets/p.yaml").exit_code == 0
    assert cli("run", "sets/p.yaml").exit_code == 0
    assert fake_llm.calls == 2
    assert rows(db_file, "select count(*) from cache") == [(0,)]


def test_redacted_reasons_keep_no_part_of_an_email_address(cli: Any, write_file: Any, db_file: Path) -> None:
    write_file(
        "evalkit.yaml",
        """
        privacy: redacted
        default_provider: rec
        providers:
          - id: rec
            adapter: replay
            path: answers.jsonl
        """,
    )
    write_file("answers.jsonl", json.dumps({"id": "one", "response": STRADDLING, "model": "m1"}) + "\n")
    write_file(
        "sets/priv.yaml",
        """
        id: review.priv
        name: Privacy
        prompts:
          - id: one
            prompt: How do I reach you?
            assertions: [{exact: "no"}]
        """,
    )
    result = cli("run", "sets/priv.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    con = duckdb.connect(str(db_file), read_only=True)
    try:
        reason, assertions, response = con.execute("select reason, assertions, response from results").fetchone()
    finally:
        con.close()
    assert "alice.smith" not in response  # the full response is redacted
    assert "alice.smith" not in reason
    assert "alice.smith" not in assertions


@pytest.mark.parametrize(
    "secret",
    [
        "sk_live_51HxAbCdEfGhIjKlMnOpQrStUv",
        "sk_test_abcdefgh1234",
        "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345",
        "glpat-AbCdEfGhIjKlMnOpQrSt",
        "npm_abcdefghijklmnopqrstuvwxyz0123456789",
        "Authorization: Basic dXNlcjpwYXNzd29yZA==",
    ],
)
def test_redacted_text_masks_common_api_key_formats(secret: str) -> None:
    # README "Privacy": redacted replaces key-like secrets by ***.
    assert secret not in (redact(f"use the key {secret} here") or "")


@pytest.mark.parametrize(
    "text", ["I have a basic understanding of Python", "join pk_customer_orders on sk_live_flag", "task_list_items"]
)
def test_redaction_leaves_ordinary_words_and_identifiers(text: str) -> None:
    assert redact(text) == text
