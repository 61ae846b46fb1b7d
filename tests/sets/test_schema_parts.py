"""A large prompt set validated by parts (evalkit/sets/schemaparts.py) has the issues a whole
validation of the same document gives: the same paths, lines and messages."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalkit.errors import Issue
from evalkit.sets import schemaparts
from evalkit.sets.schemaparts import MIN_PROMPTS, separable
from evalkit.sets.validation import _validator, schema_issues
from evalkit.sets.yamldoc import parse_document
from tests.sets.test_properties import SETTINGS

# prompts as a set may write them, valid or not (i: the prompt's place, for unique ids)
VARIANTS: list[Any] = [
    lambda i: {"id": f"p{i}", "prompt": "hi", "assertions": [{"contains": "x"}]},
    lambda i: {"id": f"p{i}", "prompt": f"q{i}", "assertions": [{"contains": "x"}, {"regex": "a+"}]},
    lambda i: {"id": f"p{i}", "prompt": "hi"},
    lambda i: {"id": f"p{i}", "prompt": ""},
    lambda i: {"id": f"p{i}", "prompt": "   "},
    lambda i: {"id": "", "prompt": "hi", "assertions": [{"contains": "x"}]},
    lambda i: {"id": i, "prompt": "hi"},
    lambda i: {"prompt": "hi"},
    lambda i: {"id": f"p{i}"},
    lambda i: {"id": f"p{i}", "prompt": "hi", "messages": [{"role": "user", "content": "x"}]},
    lambda i: {"id": f"p{i}", "messages": [{"role": "user", "content": "x"}]},
    lambda i: {"id": f"p{i}", "messages": [{"role": "bot", "content": ""}]},
    lambda i: {"id": f"p{i}", "prompt": "hi", "asertions": [{"contains": "x"}]},
    lambda i: {"id": f"p{i}", "prompt": "hi", "assertions": "contains"},
    lambda i: {"id": f"p{i}", "prompt": "hi", "assertions": []},
    lambda i: {"id": f"p{i}", "prompt": "hi", "assertions": [{"containz": "x"}, {"contains": ""}]},
    lambda i: {"id": f"p{i}", "prompt": "hi", "assertions": [{"contains": "x", "weight": 2}]},
    lambda i: {"id": f"p{i}", "prompt": "hi", "assertions": [{"weight": 2}]},
    lambda i: {"id": f"p{i}", "prompt": "hi", "assertions": [{"type": "contains", "value": "x", "weight": -1}]},
    lambda i: {"id": f"p{i}", "prompt": "hi", "assertions": [3, None, {"json_schema": {"type": "object"}}]},
    lambda i: {"id": f"p{i}", "prompt": "hi", "params": {"temperature": 0.5}, "assertions": [{"contains": "x"}]},
    lambda i: {"id": f"p{i}", "prompt": "hi", "params": {"temperature": -1}},
    lambda i: {"id": f"p{i}", "prompt": "hi", "params": {"model": "m", "top_p": 2}},
    lambda i: {"id": f"p{i}", "prompt": "hi", "params": [1]},
    lambda i: {"id": f"p{i}", "prompt": "hi", "critical": "yes", "threshold": 2},
    lambda i: {"id": f"p{i}", "prompt": "hi", "critical": True, "threshold": 0.5, "reference": "r"},
    lambda i: {"id": f"p{i}", "prompt": "hi", "vars": {"a": 1}, "reference": 3, "system": None},
    lambda i: {"id": f"p{i}", "prompt": "hi", "tools": "x", "tool_choice": 1},
    lambda i: "a prompt written as a string",
    lambda i: [1, 2],
    lambda i: None,
]


def document(choices: list[int], top: dict[str, Any] | None = None) -> str:
    """A set file of the chosen variants (JSON flow collections are YAML)."""
    head = {"id": "s", "name": "n", **(top or {})}
    lines = [f"{key}: {json.dumps(value)}" for key, value in head.items()] + ["prompts:"]
    lines += [f"  - {json.dumps(VARIANTS[k](i))}" for i, k in enumerate(choices)]
    return "\n".join(lines) + "\n"


def ordered(issues: list[Issue]) -> list[tuple[int, int, str, str]]:
    return sorted((i.line, i.col, i.path, i.message) for i in issues)


def whole_and_parts(text: str, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], list[Any]]:
    doc = parse_document(text, "f.yaml")
    by_parts = ordered(schema_issues("prompts", doc))
    with monkeypatch.context() as patched:
        patched.setattr(schemaparts, "MIN_PROMPTS", 10**9)
        whole = ordered(schema_issues("prompts", parse_document(text, "f.yaml")))
    return whole, by_parts


@SETTINGS
@given(choices=st.lists(st.integers(0, len(VARIANTS) - 1), min_size=MIN_PROMPTS, max_size=MIN_PROMPTS + 12))
def test_a_large_set_has_the_issues_of_a_whole_validation(choices: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    whole, by_parts = whole_and_parts(document(choices), monkeypatch)
    assert by_parts == whole


@SETTINGS
@given(
    common=st.integers(0, len(VARIANTS) - 1),
    odd=st.lists(st.tuples(st.integers(0, MIN_PROMPTS + 9), st.integers(0, len(VARIANTS) - 1)), max_size=4),
)
def test_one_odd_prompt_among_many_alike_is_found(
    common: int, odd: list[tuple[int, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Most prompts share one key set (checked once); an odd one anywhere, even with the same
    keys, is reported where it stands."""
    choices = [common] * (MIN_PROMPTS + 10)
    for at, variant in odd:
        choices[at] = variant
    whole, by_parts = whole_and_parts(document(choices), monkeypatch)
    assert by_parts == whole


@pytest.mark.parametrize(
    "top",
    [{"template": {"prompt": "x"}}, {"prompts_extra": 1}, {"tolerances": {"max_pass_rate_drop": 2}}, {"id": ""}],
)
def test_the_set_itself_is_validated_whole(top: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    whole, by_parts = whole_and_parts(document([0] * MIN_PROMPTS, top), monkeypatch)
    assert by_parts == whole
    assert whole


def test_the_shipped_schema_is_validated_by_parts() -> None:
    """Else a large set would be validated whole again, several times slower (bench/README.md)."""
    assert separable(_validator("prompts").schema)


def with_prompt(change: dict[str, Any]) -> dict[str, Any]:
    schema = copy.deepcopy(_validator("prompts").schema)
    schema["properties"]["prompts"]["items"].update(change)
    return schema


@pytest.mark.parametrize(
    "change",
    [
        {"minProperties": 2},  # reads how many keys, not which: the parts do not stand for it
        {"enum": [{"id": "a", "prompt": "b"}]},
        {"if": {"properties": {"critical": {"const": True}}}, "then": {"required": ["reference"]}},
        {"dependentSchemas": {"critical": {"required": ["reference"]}}},
        {"additionalProperties": {"type": "string"}},
    ],
)
def test_a_prompt_schema_that_reads_values_is_validated_whole(change: dict[str, Any]) -> None:
    assert not separable(with_prompt(change))


@pytest.mark.parametrize(
    "change",
    [
        {"allOf": [{"properties": {"prompts": {"maxItems": 3}}}]},  # reads the list beside properties
        {"patternProperties": {"^p": {"maxItems": 3}}},
        {"properties": {"prompts": {"type": "array", "minItems": 2}}},
        {"properties": {"prompts": {"type": "array", "uniqueItems": True}}},
    ],
)
def test_a_set_schema_that_reads_the_whole_list_is_validated_whole(change: dict[str, Any]) -> None:
    schema = copy.deepcopy(_validator("prompts").schema)
    for word, value in change.items():
        if word == "properties":
            schema["properties"]["prompts"].update(value["prompts"])
        else:
            schema[word] = value
    assert not separable(schema)


def test_a_schema_that_is_not_separable_is_validated_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """The parts step aside (None), and the set is validated whole, as a small set is."""
    from evalkit.sets.validation import _rewrite

    doc = parse_document(document([0, 3, 15] * 30), "f.yaml")
    validator = _validator("prompts")
    assert schemaparts.large_set_issues(validator, doc, _rewrite)
    monkeypatch.setattr(schemaparts, "separable", lambda schema: False)
    monkeypatch.setattr(schemaparts, "_PARTS", {})
    assert schemaparts.large_set_issues(validator, doc, _rewrite) is None
