"""The YAML writer: what it writes, evalkit's own YAML reader reads back as the same data."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalkit.importers.yamlout import Commented, dump
from evalkit.sets.yamldoc import parse_document


def read(text: str) -> Any:
    return parse_document(text, "out.yaml").data


def test_layout() -> None:
    data = {
        "id": "demo.set",
        "params": {"temperature": 0},
        "prompts": [
            Commented(
                {
                    "id": "capital",
                    "prompt": "Line one\nline two\n",
                    "assertions": [
                        {"icontains": "paris"},
                        Commented({"regex": "[0-9]+"}, "promptfoo regex: \\d+"),
                        {"contains_any": ["a", "b"]},
                        {"type": "exact", "value": "4", "weight": 2},
                    ],
                },
                "promptfoo test: config.yaml:3",
            )
        ],
    }
    text = dump(data, header=["Imported from promptfoo"])
    assert text == (
        "# Imported from promptfoo\n"
        "id: demo.set\n"
        "params: {temperature: 0}\n"
        "prompts:\n"
        "  # promptfoo test: config.yaml:3\n"
        "  - id: capital\n"
        "    prompt: |\n"
        "      Line one\n"
        "      line two\n"
        "    assertions:\n"
        "      - icontains: paris\n"
        "      # promptfoo regex: \\d+\n"
        "      - regex: '[0-9]+'\n"
        "      - contains_any: [a, b]\n"
        "      - type: exact\n"
        "        value: '4'\n"
        "        weight: 2\n"
    )
    assert read(text) == {
        "id": "demo.set",
        "params": {"temperature": 0},
        "prompts": [
            {
                "id": "capital",
                "prompt": "Line one\nline two\n",
                "assertions": [
                    {"icontains": "paris"},
                    {"regex": "[0-9]+"},
                    {"contains_any": ["a", "b"]},
                    {"type": "exact", "value": "4", "weight": 2},
                ],
            }
        ],
    }


def test_strings_that_look_like_other_things_are_quoted() -> None:
    tricky = ["4", "1.5", "true", "no", "null", "~", "- item", "key: value", "a #b", "ends:", "[x]", "", " pad",
              "2024-01-01", "0x1F", ".inf", "@at", "it's", "\u2028", "tab\there", "x\r\ny", "<<", "%x", "*alias"]  # fmt: skip
    data = {"values": tricky, "each": {f"k{i}": v for i, v in enumerate(tricky)}}
    assert read(dump(data)) == data


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(st.characters(exclude_categories=("Cs",)), max_size=30),
    st.sampled_from(["a\nb", "a\n\nb\n", "x\n\n\n", "  lead\nx", "trail \n", "a\n  \nb", "\tt\nx", "#c\nd"]),
)
values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=8), values, max_size=5))
def test_round_trip(data: dict[str, Any]) -> None:
    assert read(dump(data)) == (data or None)


@settings(max_examples=200, deadline=None)
@given(st.text(st.sampled_from(" \t\nab#-:"), max_size=24))
def test_whitespace_in_every_line_survives(text: str) -> None:
    """Trailing spaces and tabs, blank lines and lines of only whitespace, in one string or as a
    list item: read back byte-identical."""
    data = {"prompt": text, "items": [text, f"x\n{text}"]}
    assert read(dump(data)) == data


@pytest.mark.parametrize("text", ["line one \nline two", "a\t\nb\n", "a\n\nb  \n\n", "a\n \t\nb"])
def test_lines_ending_in_whitespace_are_not_literal_blocks(text: str) -> None:
    """A literal block keeps a line's trailing space, but editors and `git diff --check` strip
    it: such a string is written double-quoted."""
    written = dump({"prompt": text})
    assert written.startswith('prompt: "'), written
    assert read(written) == {"prompt": text}
