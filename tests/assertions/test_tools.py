"""The tool assertions (README, "Tools and tool calls"): tool_called, tool_sequence,
valid_tool_calls, tool_call_f1 and context_contains, by example and by their algebra: a sequence
holds of itself (also exactly), F1 lies in 0..1, is symmetric and is 1 exactly for equal sets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalkit.assertions import registry
from evalkit.assertions.registry import AssertionValueError, Context
from evalkit.assertions.tools import f1, in_order
from evalkit.graders.deterministic import check
from evalkit.records import Assertion, ToolCall

PROPERTIES = settings(max_examples=200, deadline=None, database=None)
NAMES = st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=6)

SEARCH = {"name": "search", "parameters": {"type": "object", "required": ["query"]}}
CALLS = (ToolCall("search", {"query": "refunds"}), ToolCall("lookup", {"id": 7}), ToolCall("search", "{oops"))


def verdict(kind: str, value: Any, context: Context) -> tuple[bool, str, float]:
    result = check(Assertion(kind, value), "", context)
    return result.passed, result.reason, result.value


def calls(*made: ToolCall, tools: tuple[dict[str, Any], ...] = (SEARCH,), recorded: Any = None) -> Context:
    return Context(tool_calls=made, tools=tools, recorded_context=recorded)


def test_tool_called_by_name_and_by_arguments() -> None:
    assert verdict("tool_called", "lookup", calls(*CALLS))[0]
    assert verdict("tool_called", "fetch", calls(*CALLS)) == (
        False, "tool_called: no call of 'fetch' (calls: search, lookup, search)", 0.0,
    )  # fmt: skip
    assert verdict("tool_called", {"name": "lookup", "arguments": {"required": ["id"]}}, calls(*CALLS))[0]
    wanted = {"name": "lookup", "arguments": {"properties": {"id": {"type": "string"}}}}
    assert verdict("tool_called", wanted, calls(*CALLS)) == (
        False, "tool_called: 'lookup' arguments: $.id: 7 is not of type 'string'", 0.0,
    )  # fmt: skip
    assert verdict("not_tool_called", "fetch", calls())[0]


def test_tool_sequence_in_order_and_exact() -> None:
    made = calls(*CALLS)
    assert verdict("tool_sequence", ["search", "search"], made)[0]
    assert not verdict("tool_sequence", ["lookup", "lookup"], made)[0]
    assert verdict("tool_sequence", {"steps": ["search", "lookup", "search"], "exact": True}, made)[0]
    assert verdict("tool_sequence", {"steps": ["search", "search"], "exact": True}, made) == (
        False, "tool_sequence: expected exactly search -> search; got search -> lookup -> search", 0.0,
    )  # fmt: skip


def test_valid_tool_calls() -> None:
    good = ToolCall("search", {"query": "x"})
    assert verdict("valid_tool_calls", True, calls(good))[0]
    assert verdict("valid_tool_calls", True, calls()) == (False, "valid_tool_calls: the answer made no tool calls", 0.0)
    assert verdict("valid_tool_calls", True, calls(good, ToolCall("lookup", {}))) == (
        False, "valid_tool_calls: call 2 names 'lookup', not a declared tool (search)", 0.0,
    )  # fmt: skip
    assert verdict("valid_tool_calls", True, calls(ToolCall("search", {}))) == (
        False, "valid_tool_calls: call 1 ('search') arguments: $: 'query' is a required property", 0.0,
    )  # fmt: skip
    assert verdict("valid_tool_calls", True, calls(ToolCall("search", "{oops"))) == (
        False, "valid_tool_calls: call 1 ('search'): arguments are not JSON ('{oops')", 0.0,
    )  # fmt: skip


def test_tool_call_f1_scores_the_f1_and_passes_at_min() -> None:
    made = calls(*CALLS)  # called {search, lookup}
    assert verdict("tool_call_f1", {"expected": ["search", "lookup"]}, made) == (True, "", 1.0)
    passed, reason, score = verdict("tool_call_f1", {"expected": ["search"], "min": 0.5}, made)
    assert (passed, reason, score) == (True, "", pytest.approx(2 / 3))
    assert verdict("tool_call_f1", {"expected": ["search", "fetch"]}, made) == (
        False, "tool_call_f1: 0.50 below 1 (called: lookup, search; expected: fetch, search)", 0.5,
    )  # fmt: skip


def test_context_contains_ignores_case_and_is_undecided_without_a_context() -> None:
    assert verdict("context_contains", "30 DAYS", calls(recorded=["Refunds take 30 days.", "Hours"]))[0]
    assert verdict("context_contains", "days", calls(recorded=[{"text": "30 days"}]))[0]
    assert not verdict("context_contains", "weeks", calls(recorded="30 days"))[0]
    for kind in ("context_contains", "not_context_contains"):  # no verdict either way
        passed, reason, _ = verdict(kind, "days", calls())
        assert not passed
        assert "the answer recorded no context" in reason


@pytest.mark.parametrize(
    ("kind", "value", "message"),
    [
        ("tool_called", "", "tool_called must be a tool's name"),
        ("tool_called", {"nam": "x"}, "must be a tool name, or {name: N, arguments: <JSON Schema>}"),
        ("tool_called", {"name": "x", "arguments": {"type": "strin"}}, "arguments: invalid JSON Schema"),
        ("tool_sequence", [], "tool_sequence must be a non-empty list of tool names"),
        ("tool_sequence", {"steps": ["a"], "exact": "yes"}, "must be a list of tool names, or {steps"),
        ("valid_tool_calls", False, "must be true"),
        ("tool_call_f1", {"expected": ["a"], "min": 2}, "min must be a number in 0..1, got 2"),
        ("tool_call_f1", ["a"], "must be {expected: [tool names], min: 0..1}"),
        ("context_contains", "", "must be a non-empty string"),
    ],
)
def test_values_are_checked_at_load(kind: str, value: Any, message: str) -> None:
    spec = registry.get(kind)
    assert spec is not None
    with pytest.raises(AssertionValueError, match=None) as caught:
        spec.check(value, registry.Where(Path(".")))
    assert message in str(caught.value)


def test_a_bad_value_in_a_set_file_is_exit_2_with_its_line(cli: Any, write_file: Any) -> None:
    write_file(
        "s.yaml",
        "id: t.x\nname: X\nprompts:\n  - id: a\n    prompt: a\n    assertions:\n      - tool_call_f1: {expected: []}\n",
    )
    result = cli("validate", "s.yaml")
    assert result.exit_code == 2
    assert result.exception is None
    assert "s.yaml:7:" in result.stdout + result.stderr


@PROPERTIES
@given(names=NAMES.filter(bool))
def test_a_sequence_holds_of_itself_in_order_and_exactly(names: list[str]) -> None:
    made = calls(*(ToolCall(n) for n in names))
    assert verdict("tool_sequence", names, made)[0]
    assert verdict("tool_sequence", {"steps": names, "exact": True}, made)[0]


@PROPERTIES
@given(names=NAMES, steps=NAMES)
def test_in_order_is_a_subsequence(names: list[str], steps: list[str]) -> None:
    def oracle(seq: list[str], sub: list[str]) -> bool:  # the textbook recursion
        if not sub:
            return True
        if not seq:
            return False
        return oracle(seq[1:], sub[1:] if seq[0] == sub[0] else sub)

    assert in_order(names, steps) is oracle(names, steps)


@PROPERTIES
@given(a=NAMES, b=NAMES)
def test_f1_is_bounded_symmetric_and_one_exactly_for_equal_sets(a: list[str], b: list[str]) -> None:
    score = f1(a, b)
    assert 0.0 <= score <= 1.0
    assert score == f1(b, a)
    assert (score == 1.0) is (set(a) == set(b))


def test_a_tool_with_an_unusable_schema_built_in_python_is_no_verdict() -> None:
    broken = ({"name": "search", "parameters": {"type": "strin"}},)
    passed, reason, _ = verdict("valid_tool_calls", True, calls(ToolCall("search", {}), tools=broken))
    assert not passed
    assert reason.startswith("valid_tool_calls: tool 'search': parameters: invalid JSON Schema")
