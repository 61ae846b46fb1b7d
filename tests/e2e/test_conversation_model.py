"""A conversation on the real local model (SmolLM2-135M via llama.cpp): never assert its text.

What shows that every turn reached the model is llama.cpp's own count of the prompt tokens: the
conversation costs more of them than its last user turn asked alone, by at least the earlier turns.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

import evalkit
from evalkit.records import Assertion, Message, Prompt, PromptSet
from tests.conftest import write

pytestmark = [pytest.mark.model, pytest.mark.usefixtures("local_model")]

EARLIER = (Message("user", "Hi, I am Ada and I live in Lisbon."), Message("assistant", "Hello Ada! Lisbon is lovely."))
LAST = Message("user", "What is my name?")


def test_a_conversation_runs_on_the_local_model_with_every_turn(isolated: Path, db_file: Path) -> None:
    config = write(
        isolated / "evalkit.yaml",
        """
        privacy: full
        default_provider: cpu
        providers:
          - {id: cpu, adapter: local, n_ctx: 1024, threads: 2}
        """,
    )
    answered = (Assertion("regex", "."),)  # anything: the weak model's words are not the point
    prompt_set = PromptSet(
        id="local.conversation",
        name="Conversation",
        system="Answer in one short sentence.",
        params={"max_tokens": 8},
        prompts=(
            Prompt(id="conversation", prompt=LAST.content, messages=(*EARLIER, LAST), assertions=answered),
            Prompt(id="last-turn", prompt=LAST.content, assertions=answered),
        ),
    )
    run = evalkit.run_set(prompt_set, config=config)
    conversation, alone = run.items
    assert (conversation.error, alone.error) == (None, None)
    assert run.generator is not None
    assert run.generator.reported_model.startswith("SmolLM2-135M-Instruct.Q4_1@")
    earlier_words = sum(len(m.content.split()) for m in EARLIER)
    assert conversation.usage.input_tokens >= alone.usage.input_tokens + earlier_words
    assert conversation.usage.output_tokens > 0

    con = duckdb.connect(str(db_file), read_only=True)
    try:
        stored = con.execute("select item_id, prompt from results order by item_index").fetchall()
    finally:
        con.close()
    assert stored == [
        (
            "conversation",
            "user: Hi, I am Ada and I live in Lisbon.\nassistant: Hello Ada! Lisbon is lovely.\nuser: What is my name?",
        ),
        ("last-turn", "What is my name?"),
    ]
