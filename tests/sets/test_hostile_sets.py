"""Hostile set files: a lone surrogate escape is exit 2 at load (an escaped pair is the character
it encodes), long literals are cut in error lines, and a set id too long for the file system or
longer than 200 characters is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fakeserver import FakeServer, last_user_message

# --- lone surrogate escapes are exit 2 at load --------------------------------------------------

SURROGATES = {
    "prompt": ('  - {id: p1, prompt: "bad \\ud800", assertions: [{contains: x}]}\n', "4:", "prompts[0].prompt"),
    "params": (
        '  - {id: p1, prompt: hi, params: {stop: ["\\udc00"]}, assertions: [{contains: x}]}\n',
        "4:",
        "prompts[0].params.stop[0]",
    ),
    "prompt id": ('  - {id: "p\\ud800", prompt: hi, assertions: [{contains: x}]}\n', "4:", "prompts[0].id"),
    "key": ('  - {id: p1, prompt: hi, params: {"k\\udfff": 1}, assertions: [{contains: x}]}\n', "4:", "params"),
}


@pytest.mark.parametrize("where", list(SURROGATES))
def test_a_lone_surrogate_escape_is_exit_2_at_load_from_validate_and_run(
    cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any, db_file: Path, where: str
) -> None:
    line, at, path = SURROGATES[where]
    write_file("sets/s.yaml", f"id: hostile.surrogate\nname: s\nprompts:\n{line}")
    for command in ("validate", "run"):
        result = cli(command, "sets/s.yaml")
        assert result.exit_code == 2, result.stderr
        assert result.exception is None
        assert f"sets/s.yaml:{at}" in result.stderr
        assert path in result.stderr
        assert "lone surrogate escape" in result.stderr
    assert fake_llm.calls == 0
    assert not db_file.exists()


def test_an_escaped_surrogate_pair_is_the_character_it_encodes(
    cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    # YAML is a superset of JSON, and JSON reads "\ud83d\ude00" as one character
    write_file(
        "sets/s.yaml",
        'id: hostile.pair\nname: s\nprompts:\n  - {id: p1, prompt: "smile \\ud83d\\ude00", assertions: [{contains: x}]}\n',
    )
    assert cli("validate", "sets/s.yaml").exit_code == 0
    assert cli("run", "sets/s.yaml").exit_code == 0
    assert last_user_message(fake_llm.requests[0]) == "smile \U0001f600"


# --- long literals in error lines, long set ids ------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "id: hostile.long\nname: x\nparams: {max_tokens: "
        + "9" * 5000
        + "}\nprompts: [{id: p, prompt: hi, assertions: [{contains: x}]}]\n",
        "id: hostile.long\nname: x\nprompts:\n  - {id: "
        + "P" * 100_000
        + ", prompt: hi, assertions: [{contains: x}]}\n"
        "  - {id: " + "P" * 100_000 + ", prompt: hi, assertions: [{contains: x}]}\n",
        "id: " + "a" * 100_000 + "\nname: x\nprompts: [{id: p, prompt: hi, assertions: [{contains: x}]}]\n",
    ],
    ids=["5000-digit integer", "100000-character prompt id", "100000-character set id"],
)
def test_long_literals_in_error_lines_are_cut(cli: Any, fake_config: Path, write_file: Any, text: str) -> None:
    write_file("sets/long.yaml", text)
    for command in ("validate", "run"):
        result = cli(command, "sets/long.yaml")
        assert result.exception is None
        if command == "run":
            assert result.exit_code == 2, result.stderr
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert all(len(line) < 400 for line in lines), max(lines, key=len)[:500]


def test_a_set_id_too_long_for_the_file_system_is_exit_2(cli: Any, fake_config: Path, fake_llm: FakeServer) -> None:
    result = cli("run", "a" * 100_000)  # the file system refuses the name: it is a set id, and unknown
    assert (result.exit_code, result.exception) == (2, None)
    assert "is neither a file, a folder nor a set id" in result.stderr
    assert fake_llm.requests == []


def test_a_set_id_longer_than_200_characters_is_refused(cli: Any, write_file: Any) -> None:
    write_file(
        "sets/long.yaml",
        "id: " + "a" * 201 + "\nname: x\nprompts: [{id: p, prompt: hi, assertions: [{contains: x}]}]\n",
    )
    result = cli("validate", "sets/long.yaml")
    assert result.exit_code == 2
    assert "sets/long.yaml:1:5: id: " in result.stdout + result.stderr
    assert "is too long" in result.stdout + result.stderr
