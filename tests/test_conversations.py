"""Conversations (README "Templates, variables, data files and conversations") on the run side, over loopback servers.

A prompt with ``messages`` is sent as chat turns by the OpenAI-compatible, Anthropic and local
adapters (asserted on the request bodies the fake server recorded), cached under every turn,
stored and shown as ``role: content`` lines per privacy level, and judged as a conversation.
The sets are built as records here: the loader's ``messages:`` is tested with the loader.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

import evalkit
from evalkit.config import ProviderConfig
from evalkit.graders.decision import task_text
from evalkit.providers.anthropic import split_system
from evalkit.providers.local import LocalProvider
from evalkit.records import Assertion, Message, Prompt, PromptSet
from evalkit.report.jsonout import item_json
from evalkit.runner import build_request, cache_key
from tests.fakeserver import FakeServer, Recorded, Reply, anthropic_reply, openai_reply

TURNS = (
    ("user", "Hi, I am Ada."),
    ("assistant", "Hello Ada! How can I help?"),
    ("user", "What is my name?"),
)
TRANSCRIPT = "user: Hi, I am Ada.\nassistant: Hello Ada! How can I help?\nuser: What is my name?"


def conversation(
    *turns: tuple[str, str],
    prompt_id: str = "greeting",
    system: str | None = None,
    set_system: str | None = "Be brief.",
) -> PromptSet:
    """A set with one conversation prompt (its ``prompt`` the last turn, as the loader makes it)."""
    messages = tuple(Message(role, content) for role, content in turns or TURNS)
    prompt = Prompt(
        id=prompt_id,
        prompt=messages[-1].content,
        messages=messages,
        system=system,
        assertions=(Assertion("contains", "Ada"),),
    )
    return PromptSet(id="conv.set", name="Conversations", prompts=(prompt,), system=set_system)


def body_turns(request: Recorded) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in request.json["messages"]]


def configure(write_file: Any, server: FakeServer, adapter: str = "openai", privacy: str = "metadata") -> Path:
    return write_file(
        "evalkit.yaml",
        f"""
        privacy: {privacy}
        default_provider: fake
        providers:
          - id: fake
            adapter: {adapter}
            base_url: {server.url}/v1
            model: fake-alias
            max_retries: 0
        """,
    )


def rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


# --- on the wire ---------------------------------------------------------------------------------


def test_openai_adapter_sends_every_turn_in_order_after_the_system_prompt(
    write_file: Any, fake_llm: FakeServer
) -> None:
    config = configure(write_file, fake_llm)
    run = evalkit.run_set(conversation(), config=config)
    (request,) = fake_llm.requests
    assert request.path == "/v1/chat/completions"
    assert body_turns(request) == [("system", "Be brief."), *TURNS]
    assert run.items[0].response == "echo: What is my name?"


def test_openai_adapter_keeps_system_turns_and_repeated_roles_as_written(write_file: Any, fake_llm: FakeServer) -> None:
    turns = (("system", "Speak French."), ("user", "Bonjour."), ("user", "Je suis Ada."))
    evalkit.run_set(conversation(*turns, system="Be kind."), config=configure(write_file, fake_llm))
    (request,) = fake_llm.requests
    assert body_turns(request) == [("system", "Be kind."), *turns]


def test_anthropic_adapter_sends_system_on_top_and_the_turns_as_messages(write_file: Any, fake_llm: FakeServer) -> None:
    config = configure(write_file, fake_llm, adapter="anthropic")
    run = evalkit.run_set(conversation(), config=config)
    (request,) = fake_llm.requests
    assert request.path == "/v1/messages"
    assert request.json["system"] == "Be brief."
    assert body_turns(request) == list(TURNS)
    assert run.items[0].response == "echo: What is my name?"


def test_anthropic_adapter_joins_system_turns_and_merges_repeated_roles(write_file: Any, fake_llm: FakeServer) -> None:
    # The Messages API wants alternating user/assistant turns and has no system role: system
    # turns join the top-level field, two turns of one role in a row become one.
    turns = (
        ("system", "Speak French."),
        ("user", "Bonjour."),
        ("user", "Je suis Ada."),
        ("assistant", "Bonjour Ada !"),
        ("system", "Stay polite."),
        ("assistant", "Que puis-je faire ?"),
        ("user", "Comment je m'appelle ?"),
    )
    evalkit.run_set(conversation(*turns), config=configure(write_file, fake_llm, adapter="anthropic"))
    (request,) = fake_llm.requests
    assert request.json["system"] == "Be brief.\n\nSpeak French.\n\nStay polite."
    assert body_turns(request) == [
        ("user", "Bonjour.\n\nJe suis Ada."),
        ("assistant", "Bonjour Ada !\n\nQue puis-je faire ?"),
        ("user", "Comment je m'appelle ?"),
    ]


def test_split_system_without_system_turns_sends_no_system() -> None:
    system, turns = split_system([Message("user", "a"), Message("assistant", "b"), Message("user", "c")])
    assert system == ""
    assert turns == [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
    ]


def test_local_adapter_sends_the_whole_conversation_to_llama_cpp(
    fake_llm: FakeServer, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # llama.cpp's server replaced by the loopback server (it answers /health and the chat
    # completions alike): what the local adapter sends is what the recorded body shows.
    model = isolated / "tiny.gguf"
    model.write_bytes(b"GGUF not really a model")
    monkeypatch.setattr(
        "evalkit.providers.local.start_server", lambda config, path, embedding: (object(), fake_llm.url)
    )
    config = ProviderConfig(id="cpu", adapter="local", model="tiny", model_path=model, max_retries=0)
    prompt_set = conversation(*TURNS, ("assistant", "Your name is Ada."), ("user", "Spell it."))

    async def ask() -> str:
        provider = LocalProvider(config)
        try:
            return (await provider.complete(build_request(prompt_set, prompt_set.prompts[0], "tiny"))).text
        finally:
            await provider.aclose()

    assert asyncio.run(ask()) == "echo: Spell it."
    (chat,) = [r for r in fake_llm.requests if r.method == "POST"]
    assert chat.path == "/v1/chat/completions"
    assert body_turns(chat) == [
        ("system", "Be brief."),
        *TURNS,
        ("assistant", "Your name is Ada."),
        ("user", "Spell it."),
    ]
    assert (chat.json["temperature"], chat.json["seed"]) == (0.0, 42)


# --- cached and fingerprinted as sent --------------------------------------------------------------


def test_an_identical_conversation_hits_the_cache_and_a_changed_assistant_turn_misses(
    write_file: Any, fake_llm: FakeServer
) -> None:
    config = configure(write_file, fake_llm)
    first = evalkit.run_set(conversation(), config=config)
    again = evalkit.run_set(conversation(), config=config)  # equal records, built anew
    assert fake_llm.calls == 1
    assert (first.items[0].cached, again.items[0].cached) == (False, True)
    assert again.set_fingerprint == first.set_fingerprint

    edited = conversation(TURNS[0], ("assistant", "Hello! How can I help?"), TURNS[2])
    changed = evalkit.run_set(edited, config=config)
    assert fake_llm.calls == 2
    assert not changed.items[0].cached
    assert body_turns(fake_llm.requests[-1])[2] == ("assistant", "Hello! How can I help?")
    assert changed.set_fingerprint != first.set_fingerprint


def test_the_cache_key_covers_every_turn_and_its_role() -> None:
    def key(*turns: tuple[str, str]) -> str:
        prompt_set = conversation(*turns)
        return cache_key("fake", build_request(prompt_set, prompt_set.prompts[0], "alias"))

    base = key(*TURNS)
    assert key(*TURNS) == base
    assert key(TURNS[0], ("assistant", "Hello Ada! How can I help"), TURNS[2]) != base
    assert key(TURNS[0], ("user", TURNS[1][1]), TURNS[2]) != base  # the same words from the user
    assert key(TURNS[2]) != base  # the last turn alone is another request


# --- stored and shown per privacy level ----------------------------------------------------------

SECRET_TURNS = (
    ("user", "My key is sk-proj-zyxwvutsrqponmlk9876, keep it."),
    ("assistant", "Noted. I will write to ada@example.org."),
    ("user", "What is my name?"),
)
REDACTED = "user: My key is ***, keep it.\nassistant: Noted. I will write to ***.\nuser: What is my name?"
VERBATIM = "\n".join(f"{role}: {content}" for role, content in SECRET_TURNS)


@pytest.mark.parametrize(
    ("level", "stored"),
    [("none", None), ("metadata", None), ("redacted", REDACTED), ("full", VERBATIM)],
    ids=["none", "metadata", "redacted", "full"],
)
def test_a_conversation_is_stored_and_shown_with_its_roles_per_privacy_level(
    cli: Any, write_file: Any, fake_llm: FakeServer, db_file: Path, level: str, stored: str | None
) -> None:
    config = configure(write_file, fake_llm, privacy=level)
    run = evalkit.run_set(conversation(*SECRET_TURNS), config=config)
    assert item_json(run)[0]["prompt"] == VERBATIM  # the run's own output: what was asked
    results = rows(db_file, "select prompt, system_prompt from results")
    shown = cli("show", run.run_id, "--format", "json")
    assert shown.exit_code == 0, shown.stderr
    items = json.loads(shown.stdout)["items"]
    if level == "none":
        assert results == []
        assert items == []
    else:
        assert results == [(stored, None if stored is None else "Be brief.")]
        assert items[0].get("prompt") == stored
    everything = json.dumps(rows(db_file, "select * from results"), default=str) + shown.stdout
    for secret in ("sk-proj-zyxwvutsrqponmlk9876", "ada@example.org"):
        assert (secret in everything) == (level == "full")


def test_a_failed_call_keeps_the_conversation_as_its_prompt(write_file: Any, fake_llm: FakeServer) -> None:
    fake_llm.enqueue(Reply(status=500, json={"error": {"message": "boom"}}))
    run = evalkit.run_set(conversation(), config=configure(write_file, fake_llm, privacy="full"))
    assert run.items[0].errored
    assert run.items[0].prompt == TRANSCRIPT


def test_a_single_prompt_is_still_stored_as_its_text(write_file: Any, fake_llm: FakeServer, db_file: Path) -> None:
    prompt_set = PromptSet(
        id="plain.set",
        name="Plain",
        prompts=(Prompt(id="p", prompt="Hi there", assertions=(Assertion("contains", "x"),)),),
    )
    run = evalkit.run_set(prompt_set, config=configure(write_file, fake_llm, privacy="full"))
    assert rows(db_file, "select prompt from results") == [("Hi there",)]
    assert item_json(run)[0]["prompt"] == "Hi there"


# --- the decision grader sees the conversation -----------------------------------------------------


def test_task_text_of_a_conversation_is_every_turn_with_its_role() -> None:
    prompt_set = conversation(set_system=None)
    assert task_text(prompt_set, prompt_set.prompts[0]) == (
        f"Conversation (the candidate response is the assistant's next turn):\n{TRANSCRIPT}"
    )
    with_system = conversation()
    assert task_text(with_system, with_system.prompts[0]) == (
        "Instructions the response had to follow:\nBe brief.\n\n"
        f"Task:\nConversation (the candidate response is the assistant's next turn):\n{TRANSCRIPT}"
    )


def test_the_judge_is_asked_about_the_whole_conversation(write_file: Any, fake_llm: FakeServer) -> None:
    judge = FakeServer().start()
    try:
        judge.handler = lambda request: openai_reply(
            json.dumps({"level": 4, "justification": "Names Ada."}), model="judge-model-1"
        )
        fake_llm.handler = lambda request: openai_reply("Your name is Ada.", model="gen-model-1")
        config = write_file(
            "evalkit.yaml",
            f"""
            default_provider: gen
            decision: {{provider: judge}}
            providers:
              - id: gen
                adapter: openai
                base_url: {fake_llm.url}/v1
                model: gen-alias
                max_retries: 0
              - id: judge
                adapter: openai
                base_url: {judge.url}/v1
                model: judge-alias
                max_retries: 0
            """,
        )
        run = evalkit.run_set(conversation(), config=config, grader="decision")
        gradings = [r for r in judge.requests if "Candidate response:" in json.dumps(r.json)]
    finally:
        judge.stop()
    assert run.items[0].passed
    assert run.items[0].yardstick == "decision:judge:judge-model-1:v1"
    (grading,) = gradings
    system, user = grading.json["messages"]
    assert system["role"] == "system"
    assert user["content"] == (
        "Task:\nInstructions the response had to follow:\nBe brief.\n\n"
        f"Task:\nConversation (the candidate response is the assistant's next turn):\n{TRANSCRIPT}\n\n"
        "Candidate response:\nYour name is Ada."
    )


def test_an_anthropic_judge_gets_the_conversation_inside_one_user_message(
    write_file: Any, fake_llm: FakeServer
) -> None:
    # the judge's own request is one user message whatever the conversation graded
    judge = FakeServer().start()
    try:
        judge.handler = lambda request: anthropic_reply(json.dumps({"level": 3, "justification": "Close."}))
        config = write_file(
            "evalkit.yaml",
            f"""
            default_provider: gen
            decision: {{provider: claude}}
            providers:
              - id: gen
                adapter: openai
                base_url: {fake_llm.url}/v1
                model: gen-alias
                max_retries: 0
              - id: claude
                adapter: anthropic
                base_url: {judge.url}/v1
                model: claude-alias
                max_retries: 0
            """,
        )
        run = evalkit.run_set(conversation(set_system=None), config=config, grader="decision")
        gradings = [r for r in judge.requests if "Candidate response:" in json.dumps(r.json)]
    finally:
        judge.stop()
    assert run.items[0].score == 0.75
    assert gradings
    for grading in gradings:
        ((role, content),) = body_turns(grading)
        assert role == "user"
        assert f"Conversation (the candidate response is the assistant's next turn):\n{TRANSCRIPT}" in content
        assert "Candidate response:\necho: What is my name?" in content
