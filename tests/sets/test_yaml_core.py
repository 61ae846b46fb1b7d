"""Set files as YAML 1.2's core schema reads them (no timestamps, no underscores in numbers), and
where a file that cannot be read is named: by its line and column, also when its set was asked
for by id."""

from __future__ import annotations

import json
from typing import Any


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
