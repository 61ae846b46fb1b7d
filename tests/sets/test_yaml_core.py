"""Set files as YAML 1.2's core schema reads them (no timestamps, no underscores in numbers), and
where a file that cannot be read is named: by its line and column, also when its set was asked
for by id."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest


def test_timestamp_like_text_is_read_verbatim(cli: Any, write_file: Any) -> None:
    write_file("evalkit.yaml", "providers: [{id: rec, adapter: replay, path: answers.jsonl}]\n")
    write_file("answers.jsonl", json.dumps({"id": "when", "response": "2001-12-14 21:59:43", "model": "m1"}) + "\n")
    write_file(
        "set.yaml",
        "id: rev.when\nname: n\nprompts:\n  - {id: when, prompt: hi, assertions: [{exact: 2001-12-14 21:59:43}]}\n",
    )
    result = cli("run", "set.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["items"][0]["passed"] is True


def test_underscored_number_is_a_string_in_yaml_12(cli: Any, write_file: Any) -> None:
    write_file("set.yaml", "id: rev.num\nname: n\nprompts:\n  - {id: a, prompt: 1_000, assertions: [{contains: x}]}\n")
    result = cli("validate", "set.yaml")
    assert result.exit_code == 0, result.stderr


def test_set_id_in_a_broken_file_names_the_file_and_line(cli: Any, write_file: Any) -> None:
    write_file("evalkit.yaml", "providers: [{id: rec, adapter: replay, path: answers.jsonl}]\n")
    write_file("answers.jsonl", "")
    write_file(
        "sets/faq.yaml", "id: rev.broken\nname: n\nprompts:\n  - {id: a, prompt: hi, assertions: [{contains: x}]\n"
    )
    result = cli("run", "rev.broken")
    assert result.exit_code == 2
    assert "'rev.broken' is neither a file, a folder nor a set id" in result.stderr
    assert "a file there could not be read, and may hold it: " in result.stderr
    assert "faq.yaml:5:" in result.stderr


def test_non_utf8_set_file_names_line_and_column(cli: Any, isolated: Any) -> None:
    (isolated / "set.yaml").write_bytes(
        b'id: rev.latin\nname: n\nprompts:\n  - {id: a, prompt: "caf\xe9", assertions: [{contains: x}]}\n'
    )
    result = cli("validate", "set.yaml")
    assert result.exit_code == 2
    assert result.stderr.startswith("set.yaml:4:25: not UTF-8 text (invalid continuation byte); save the file as UTF-8")


TAB_HINT = "YAML error: a tab where YAML expects indentation or a value; indent with spaces (YAML does not allow tabs)"


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("prompts:\n\t- id: a\n\t  prompt: hi\n\t  assertions: [{contains: x}]\n", "set.yaml:4:1"),
        ("prompts:\n  - id: a\n    prompt: hi\n    assertions:\n\t- contains: x\n", "set.yaml:7:1"),
        ("prompts:\n  - id: a\n    prompt: hi\n    assertions:\n    -\tcontains: x\n", "set.yaml:7:6"),
    ],
)
def test_a_tab_indent_is_refused_with_the_hint_to_use_spaces(
    cli: Any, isolated: Path, yaml_parser: str, text: str, where: str
) -> None:
    (isolated / "set.yaml").write_text(f"id: rev.tab\nname: n\n{text}", encoding="utf-8")
    result = cli("validate", "set.yaml")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"{where}: {TAB_HINT}", "1 error in 1 file"]


def test_a_regex_escape_yaml_double_quotes_made_a_control_character_is_refused(cli: Any, isolated: Path) -> None:
    """In YAML double quotes "\\bno\\b" is a backspace, "no" and a backspace: a pattern that never matches."""
    (isolated / "set.yaml").write_text(
        "id: rev.bs\nname: n\nprompts:\n"
        '  - {id: a, prompt: hi, assertions: [{regex: "\\bno\\b"}, {not_regex: "/\\bno\\b/i"}, {regex: "a\\x01"}]}\n'
        '  - {id: b, prompt: hi, assertions: [{regex: \'\\bno\\b\'}, {regex: "\\\\bno\\\\b"}, {regex: "a\\tb\\n"}]}\n',
        encoding="utf-8",
    )
    result = cli("validate", "set.yaml")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "set.yaml:4:46: prompts[0].assertions[0].regex: regex '\\x08no\\x08' holds the control character U+0008: "
        "in YAML double quotes \\b is that character, not a regex escape; write the pattern in single quotes "
        "('\\bno\\b') or double each backslash",
        "set.yaml:4:69: prompts[0].assertions[1].not_regex: regex '/\\x08no\\x08/i' holds the control character "
        "U+0008: in YAML double quotes \\b is that character, not a regex escape; write the pattern in single "
        "quotes ('/\\bno\\b/i') or double each backslash",
        "set.yaml:4:91: prompts[0].assertions[2].regex: regex 'a\\x01' holds the control character U+0001; write "
        "the pattern in single quotes, with the regex escape (\\xNN) instead of the character",
        "3 errors in 1 file",
    ]
