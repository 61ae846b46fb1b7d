"""Conversations as written (README "Templates, variables, data files and conversations"): ``messages:`` instead of ``prompt:`` loads into
records.Message turns, the last the user's, with a system turn only first and never beside a
``system:``; what is sent is exactly those turns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evalkit.records import Message
from evalkit.runner import build_request, set_fingerprint
from evalkit.sets import load_set
from tests.fakeserver import FakeServer

TURNS = """
    messages:
      - {role: system, content: Answer in French.}
      - {role: user, content: "Hi, I am {{ name }}."}
      - {role: assistant, content: "Bonjour {{ name }} !"}
      - {role: user, content: What is my name?}
"""


def one_prompt(write_file: Any, prompt: str, head: str = "") -> Path:
    body = "\n".join("  " + line if line else line for line in prompt.strip("\n").splitlines())
    return write_file("c.yaml", f"id: t.conv\nname: Conversation\n{head}prompts:\n{body}\n")


def test_a_conversation_loads_as_its_turns_and_is_sent_as_written(write_file: Any) -> None:
    path = one_prompt(
        write_file,
        f"- id: name\n  vars: {{name: Ada}}\n{TURNS.replace(chr(10) + '    ', chr(10) + '  ')}  assertions: [{{contains: Ada}}]",
    )
    loaded = load_set(path)
    (prompt,) = loaded.prompts
    assert prompt.messages == (
        Message("system", "Answer in French."),
        Message("user", "Hi, I am Ada."),
        Message("assistant", "Bonjour Ada !"),
        Message("user", "What is my name?"),
    )
    assert prompt.prompt == "What is my name?"  # the last user turn: what tables and reasons show
    assert (prompt.system, loaded.system_for(prompt)) == (None, None)
    assert build_request(loaded, prompt, "alias").messages == prompt.messages


def test_turns_come_after_the_sets_system_prompt(write_file: Any) -> None:
    path = one_prompt(
        write_file,
        "- id: a\n  messages:\n    - {role: user, content: one}\n    - {role: assistant, content: two}\n    - {role: user, content: three}\n  assertions: [{contains: x}]",
        head="system: Be brief.\n",
    )
    loaded = load_set(path)
    assert [(m.role, m.content) for m in build_request(loaded, loaded.prompts[0], "m").messages] == [
        ("system", "Be brief."),
        ("user", "one"),
        ("assistant", "two"),
        ("user", "three"),
    ]


def test_the_fingerprint_covers_every_turn(write_file: Any) -> None:
    text = "- id: a\n  messages:\n    - {{role: user, content: one}}\n    - {{role: assistant, content: {0}}}\n    - {{role: user, content: three}}\n  assertions: [{{contains: x}}]"
    first = set_fingerprint(load_set(one_prompt(write_file, text.format("two"))))
    again = set_fingerprint(load_set(one_prompt(write_file, text.format("two"))))
    edited = set_fingerprint(load_set(one_prompt(write_file, text.format("two!"))))
    assert first == again != edited


@pytest.mark.parametrize(
    ("prompt", "head", "line"),
    [
        (
            "- id: a\n  messages:\n    - {role: user, content: hi}\n    - {role: assistant, content: hello}\n  assertions: [{contains: x}]",
            "",
            "c.yaml:7:9: prompts[0].messages[1]: the last turn is the assistant's; end the conversation with a user "
            "turn (the one the model answers)",
        ),
        (
            "- id: a\n  messages:\n    - {role: user, content: hi}\n    - {role: system, content: be kind}\n    - {role: user, content: again}\n  assertions: [{contains: x}]",
            "",
            "c.yaml:7:9: prompts[0].messages[1]: a system turn may only come first; move it to the start or make it a user turn",
        ),
        (
            "- id: a\n  system: Be brief.\n  messages:\n    - {role: system, content: be kind}\n    - {role: user, content: hi}\n  assertions: [{contains: x}]",
            "",
            "c.yaml:7:9: prompts[0].messages[0]: both system: and this system turn set the system prompt; keep one "
            "(remove system: or this turn)",
        ),
        (
            "- id: a\n  messages:\n    - {role: system, content: be kind}\n    - {role: user, content: hi}\n  assertions: [{contains: x}]",
            "system: Be brief.\n",
            "c.yaml:7:9: prompts[0].messages[0]: the set's system: (line 3) would be sent as well as this system turn; "
            "keep one: move the turn's text to system: here (it replaces the set's), or remove the set's system:",
        ),
        (
            "- id: a\n  prompt: hi\n  messages:\n    - {role: user, content: hi}\n  assertions: [{contains: x}]",
            "",
            "c.yaml:4:5: prompts[0]: has both prompt: and messages:; keep one (messages: holds the whole "
            "conversation, its last turn the user's)",
        ),
        ("- id: a\n  assertions: [{contains: x}]", "", "c.yaml:4:5: prompts[0]: missing required key 'prompt'"),
        (
            "- id: a\n  messages:\n    - {role: tool, content: hi}\n  assertions: [{contains: x}]",
            "",
            "c.yaml:6:16: prompts[0].messages[0].role: 'tool' is not one of: system, user, assistant",
        ),
        (
            "- id: a\n  messages:\n    - {role: user, content: ' '}\n  assertions: [{contains: x}]",
            "",
            "c.yaml:6:31: prompts[0].messages[0].content: must not be empty",
        ),
        (
            "- id: a\n  messages: []\n  assertions: [{contains: x}]",
            "",
            "c.yaml:5:15: prompts[0].messages: must have at least 1 item",
        ),
        (
            "- id: a\n  messages:\n    - {role: user, text: hi}\n  assertions: [{contains: x}]",
            "",
            "c.yaml:6:9: prompts[0].messages[0]: missing required key 'content'",
        ),
        (
            "- id: a\n  messages:\n    - {role: user, content: 'Hi {{ who }}'}\n  assertions: [{contains: x}]",
            "",
            "c.yaml:6:31: prompts[0].messages[0].content: undefined variable 'who' in the template; define it in "
            "vars: (the set's or the prompt's)",
        ),
    ],
)
def test_a_conversation_that_cannot_be_sent_as_written_is_refused(
    cli: Any, write_file: Any, prompt: str, head: str, line: str
) -> None:
    one_prompt(write_file, prompt, head)
    result = cli("validate", "c.yaml")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == line


def test_a_templated_conversation_for_every_row(write_file: Any) -> None:
    write_file("rows.csv", "id,name\nada,Ada\nbob,Bob\n")
    path = write_file(
        "c.yaml",
        """
        id: t.rows
        name: Rows
        template:
          messages:
            - {role: user, content: "I am {{ name }}."}
            - {role: assistant, content: "Hello {{ name }}."}
            - {role: user, content: "Who am I?"}
          assertions: [{contains: "{{ name }}"}]
        cases: rows.csv
        """,
    )
    ada, bob = load_set(path).prompts
    assert [m.content for m in bob.messages] == ["I am Bob.", "Hello Bob.", "Who am I?"]
    assert (ada.prompt, ada.assertions[0].value, bob.assertions[0].value) == ("Who am I?", "Ada", "Bob")


def test_a_template_conversation_in_the_wrong_shape_is_said_once_at_the_template(cli: Any, write_file: Any) -> None:
    write_file("rows.csv", "id,name\nada,Ada\nbob,Bob\n")
    write_file(
        "c.yaml",
        "id: t.rows\nname: Rows\ntemplate:\n  messages:\n    - {role: user, content: 'I am {{ name }}.'}\n"
        "    - {role: assistant, content: hi}\n  assertions: [{contains: x}]\ncases: rows.csv\n",
    )
    result = cli("validate", "c.yaml")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "c.yaml:6:7: template.messages[1]: the last turn is the assistant's; end the conversation with a user turn "
        "(the one the model answers)",
        "1 error in 2 files",
    ]


def test_the_conversation_reaches_the_endpoint_turn_by_turn(
    cli: Any, write_file: Any, fake_llm: FakeServer, fake_config: Path
) -> None:
    one_prompt(
        write_file,
        "- id: a\n  vars: {name: Ada}\n  messages:\n    - {role: user, content: 'I am {{ name }}.'}\n"
        "    - {role: assistant, content: Noted.}\n    - {role: user, content: Who am I?}\n  assertions: [{contains: Who}]",
    )
    result = cli("run", "c.yaml")
    assert result.exit_code == 0, result.stderr
    (request,) = fake_llm.requests
    assert request.json["messages"] == [
        {"role": "user", "content": "I am Ada."},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "Who am I?"},
    ]
