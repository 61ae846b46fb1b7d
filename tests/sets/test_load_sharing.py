"""What a large set shares once loaded: one checker per distinct assertion value, one record per
assertion written alike, and no node graph until a position is shown."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalkit import load_set
from evalkit.assertions.jsondoc import parse_response
from evalkit.graders.deterministic import grade_assertions
from evalkit.records import PromptSet


def write_set(path: Path, prompts: list[dict[str, Any]]) -> Path:
    lines = ["id: sharing", "name: Sharing", "prompts:"]
    lines += [f"  - {json.dumps(p)}" for p in prompts]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def loaded(path: Path) -> PromptSet:
    prompt_set = load_set(path)
    assert isinstance(prompt_set, PromptSet)
    return prompt_set


def test_equal_mappings_written_apart_share_one_checker(isolated: Path) -> None:
    schema = {"type": "object", "required": ["answer"]}
    prompts = [{"id": f"p{i}", "prompt": "Q", "assertions": [{"json_schema": dict(schema)}]} for i in range(80)]
    prompts.append({"id": "other", "prompt": "Q", "assertions": [{"json_schema": {"type": "array"}}]})
    prompt_set = loaded(write_set(isolated / "set.yaml", prompts))
    checkers = {id(p.assertions[0].compiled) for p in prompt_set.prompts}
    assert len(checkers) == 2
    assert grade_assertions(prompt_set.prompts[0], '{"answer": 1}').passed
    assert not grade_assertions(prompt_set.prompts[-1], '{"answer": 1}').passed


def test_an_assertion_written_alike_shares_its_record_unless_it_is_located(isolated: Path) -> None:
    """A record that depends on the item alone is made once; a cost assertion's record holds its
    own place in the file (its error names it), and a weight or a template makes another item."""
    prompts = [
        {"id": f"p{i}", "prompt": "Q", "assertions": [{"contains": "x"}, {"cost": 0.01}, {"icontains": "X"}]}
        for i in range(4)
    ]
    prompts.append({"id": "heavy", "prompt": "Q", "assertions": [{"type": "contains", "value": "x", "weight": 2}]})
    prompts.append({"id": "t", "prompt": "Q", "vars": {"v": "x"}, "assertions": [{"contains": "{{ v }}"}]})
    prompt_set = loaded(write_set(isolated / "set.yaml", prompts))
    written = prompt_set.prompts[:4]
    assert len({id(p.assertions[0]) for p in written}) == len({id(p.assertions[2]) for p in written}) == 1
    assert len({str(p.assertions[1].where) for p in written}) == 4
    heavy, templated = prompt_set.prompts[4].assertions[0], prompt_set.prompts[5].assertions[0]
    assert (heavy.weight, heavy is not written[0].assertions[0]) == (2.0, True)
    assert (templated.value, templated is not written[0].assertions[0]) == ("x", True)


def test_a_key_that_is_not_a_string_is_refused_after_a_valid_twin(cli: Any, isolated: Path) -> None:
    """{"1": "a"} and {1: "a"} are the same JSON text, but only the first is a JSON value: the
    second is refused, at its own line."""
    text = (
        "id: alike\nname: Alike\nprompts:\n"
        "  - {id: a, prompt: Q, assertions: [{equals_json: {'1': a}}]}\n"
        "  - {id: b, prompt: Q, assertions: [{equals_json: {1: a}}]}\n"
    )
    (isolated / "set.yaml").write_text(text, encoding="utf-8")
    result = cli("validate", "set.yaml")
    assert result.exit_code == 2
    assert "set.yaml:5:" in result.stderr
    assert "equals_json: keys must be strings, got 1" in result.stderr
    assert "set.yaml:4:" not in result.stderr


def test_values_that_write_alike_but_differ_are_checked_each() -> None:
    """The shared check is keyed by the value's repr, then confirmed equal: a value from the
    Python API with an int key is not served its string-keyed twin's checker."""
    from evalkit.assertions import registry
    from evalkit.assertions.registry import AssertionValueError
    from evalkit.sets.drafts import Drafter
    from evalkit.sets.yamldoc import Document

    drafter = Drafter(Document("sets/set.yaml", {}, None), None)
    spec = registry.get("equals_json")
    assert spec is not None
    first = drafter._check(spec, "equals_json", {"1": "a"})
    assert drafter._check(spec, "equals_json", {"1": "a"}) is first  # an equal value: the same checker
    with pytest.raises(AssertionValueError, match="keys are strings"):
        drafter._check(spec, "equals_json", {1: "a"})


def test_a_cost_assertion_is_located_without_composing_the_file(isolated: Path) -> None:
    prompts = [{"id": f"p{i}", "prompt": "Q", "assertions": [{"contains": "x"}, {"cost": 0.01}]} for i in range(3)]
    prompt_set = loaded(write_set(isolated / "set.yaml", prompts))
    where = prompt_set.prompts[2].assertions[1].where
    documents = {id(p.assertions[1].where.doc) for p in prompt_set.prompts}  # type: ignore[union-attr]
    assert len(documents) == 1  # one copy of the document's positions for every location
    assert where.doc.data is None  # type: ignore[union-attr]  # the location keeps no data
    assert where.doc._composed == []  # type: ignore[union-attr]  # nothing composed while loading
    line = (isolated / "set.yaml").read_text(encoding="utf-8").splitlines()[5]
    column = line.index('{"cost"') + 1
    assert str(where).endswith(f"set.yaml:6:{column}")
    assert where.doc._composed != []  # type: ignore[union-attr]  # composed when shown, once


def test_the_parsed_answer_kept_is_only_that_answer() -> None:
    first, second = '{"a": 1}', '{"a": 2}'
    copy = "".join(['{"a": ', "1}"])  # equal to first, another object
    assert parse_response(first, "equals_json") == ({"a": 1}, None)
    assert parse_response(second, "equals_json") == ({"a": 2}, None)
    assert parse_response(copy, "equals_json") == ({"a": 1}, None)
    document, failed = parse_response("not json", "json_schema")
    assert document is None
    assert failed is not None
    assert failed.reason.startswith("json_schema: response is not JSON (")
    _, failed_again = parse_response("not json", "equals_json")
    assert failed_again is not None
    assert failed_again.reason.startswith("equals_json: ")
