"""Records: aggregates (README "Score and pass"), the run's generator (docs/contract.md "Serving identity") and tolerance parsing (README "Baselines and regressions")."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalkit.records import Aggregates, ItemResult, RunResult, ServingRecord, Usage, parse_tolerance, shared_generator

PROPERTIES = settings(max_examples=200, deadline=None, database=None)


def item(item_id: str, passed: bool, score: float, **fields: Any) -> ItemResult:
    return ItemResult(id=item_id, passed=passed, score=score, reason="", **fields)


def errored(item_id: str) -> ItemResult:
    return ItemResult(id=item_id, passed=False, score=0.0, reason="error: boom", error="boom")


def run_of(*items: ItemResult) -> RunResult:
    return RunResult.create(
        tuple(items),
        run_id="20261130-000000-abcdef",
        set_id="demo.set",
        set_fingerprint="f" * 16,
        provider="local",
        model="alias",
        grader="deterministic",
        started_at="2026-11-30T00:00:00.000+00:00",
        finished_at="2026-11-30T00:00:01.000+00:00",
    )


# --- aggregates ----------------------------------------------------------------------------


def test_aggregates_of_no_items_are_zero() -> None:
    totals = Aggregates.of(())
    assert (totals.item_count, totals.passed_count, totals.error_count) == (0, 0, 0)
    assert totals.pass_rate == 0.0
    assert totals.mean_score == 0.0


@pytest.mark.parametrize(
    ("items", "pass_rate", "mean_score"),
    [
        pytest.param([item("a", True, 1.0)], 1.0, 1.0, id="one-pass"),
        pytest.param([item("a", False, 0.5)], 0.0, 0.5, id="one-partial"),
        pytest.param(
            [item("a", True, 1.0), item("b", True, 1.0), item("c", False, 0.0)], 2 / 3, 2 / 3, id="two-of-three"
        ),
        pytest.param(
            [item("a", True, 1.0), item("b", False, 2 / 3), item("c", False, 0.25), item("d", False, 0.0)],
            0.25,
            (1.0 + 2 / 3 + 0.25 + 0.0) / 4,
            id="mixed-scores",
        ),
        pytest.param([item("a", True, 1.0), errored("b")], 0.5, 0.5, id="errored-counts-in-denominator"),
    ],
)
def test_aggregates_rates(items: list[ItemResult], pass_rate: float, mean_score: float) -> None:
    totals = Aggregates.of(tuple(items))
    assert totals.item_count == len(items)
    assert totals.passed_count == sum(1 for i in items if i.passed)
    assert totals.pass_rate == pass_rate
    assert totals.mean_score == pytest.approx(mean_score, abs=1e-15)


def test_aggregates_count_errors() -> None:
    totals = Aggregates.of((item("a", True, 1.0), errored("b"), errored("c")))
    assert totals.error_count == 2
    assert totals.passed_count == 1


def test_rates_are_not_rounded() -> None:
    totals = Aggregates.of((item("a", True, 1.0), item("b", True, 1.0), item("c", False, 0.0)))
    assert totals.pass_rate == 0.6666666666666666
    assert totals.pass_rate != round(totals.pass_rate, 4)


@PROPERTIES
@given(st.lists(st.tuples(st.booleans(), st.floats(min_value=0.0, max_value=1.0)), max_size=30))
def test_aggregates_property(rows: list[tuple[bool, float]]) -> None:
    items = tuple(item(str(n), passed, score) for n, (passed, score) in enumerate(rows))
    totals = Aggregates.of(items)
    passed = sum(1 for p, _ in rows if p)
    assert totals.passed_count == passed
    assert totals.pass_rate == (passed / len(rows) if rows else 0.0)
    assert 0.0 <= totals.pass_rate <= 1.0
    expected_mean = math.fsum(s for _, s in rows) / len(rows) if rows else 0.0
    assert totals.mean_score == pytest.approx(expected_mean, abs=1e-12)


# --- the run's generator -------------------------------------------------------------------

SERVED = ServingRecord("local", "alias", "model-q4")


def test_run_result_derives_totals_from_items() -> None:
    run = run_of(item("a", True, 1.0, serving=SERVED), item("b", False, 0.5, serving=SERVED), errored("c"))
    assert (run.prompt_count, run.passed_count, run.error_count) == (3, 1, 1)
    assert run.pass_rate == 1 / 3
    assert run.mean_score == 0.5


def test_run_result_shares_one_verified_generator() -> None:
    run = run_of(
        item("a", True, 1.0, serving=SERVED), item("b", False, 0.0, serving=ServingRecord("local", "alias", "model-q4"))
    )
    assert run.generator == SERVED


def test_errored_items_do_not_hide_the_generator() -> None:
    run = run_of(item("a", True, 1.0, serving=SERVED), errored("b"))
    assert run.generator == SERVED


@pytest.mark.parametrize(
    "servings",
    [
        pytest.param([SERVED, ServingRecord("local", "alias", "model-q8")], id="reported-model-differs"),
        pytest.param([SERVED, ServingRecord("other", "alias", "model-q4")], id="fallback-instance"),
        pytest.param([SERVED, ServingRecord("local", "alias-2", "model-q4")], id="alias-differs"),
        pytest.param([SERVED, ServingRecord("local", "alias", None)], id="one-unverified"),
        pytest.param([ServingRecord("local", "alias", "")], id="empty-reported-model"),
        pytest.param([ServingRecord("local", "alias", None)] * 2, id="all-unverified"),
        pytest.param([SERVED, ServingRecord("local", "alias", "model-q4", version=2)], id="record-version-differs"),
    ],
)
def test_no_generator_without_one_shared_verified_record(servings: list[ServingRecord]) -> None:
    run = run_of(*(item(str(n), True, 1.0, serving=s) for n, s in enumerate(servings)))
    assert run.generator is None


@pytest.mark.parametrize(
    "items",
    [pytest.param([], id="no-items"), pytest.param([errored("a"), errored("b")], id="all-errored")],
)
def test_no_generator_without_answers(items: list[ItemResult]) -> None:
    assert run_of(*items).generator is None
    assert shared_generator([i.serving for i in items]) is None


def test_run_usage_skips_cached_items() -> None:
    run = run_of(
        item("a", True, 1.0, serving=SERVED, usage=Usage(10, 5), grader_usage=Usage(1, 1)),
        item("b", True, 1.0, serving=SERVED, usage=Usage(7, 3), cached=True, grader_usage=Usage(2, 2)),
    )
    assert run.usage == Usage(10, 5)
    assert run.grader_usage == Usage(3, 3)


# --- tolerances ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0", Decimal(0)),
        ("-0.0", Decimal(0)),
        ("0.5", Decimal("0.5")),
        ("5e-1", Decimal("0.5")),
        ("1", Decimal(1)),
        ("0.1", Decimal("0.1")),
        ("1.0", Decimal(1)),
        (0, Decimal(0)),
        (1, Decimal(1)),
        (0.1, Decimal("0.1")),
        (-0.0, Decimal(0)),
        (Decimal("0.25"), Decimal("0.25")),
    ],
)
def test_tolerance_accepted(value: object, expected: Decimal) -> None:
    parsed = parse_tolerance(value)
    assert parsed == expected
    assert not parsed.is_signed()


@pytest.mark.parametrize(
    "value",
    [
        "",
        "   ",
        "typo",
        "NAN",
        "nan",
        "sNaN",
        "INF",
        "-INF",
        "Infinity",
        "1e309",
        "-0.0001",
        "1.0001",
        "2",
        "-1",
        True,
        False,
        None,
        float("nan"),
        float("inf"),
        float("-inf"),
        1.0001,
        -0.0001,
        2,
        -1,
        Decimal("NaN"),
        Decimal("1.0000001"),
        [0.5],
    ],
)
def test_tolerance_rejected(value: object) -> None:
    with pytest.raises(ValueError, match=r"0\.\.1"):
        parse_tolerance(value)


@PROPERTIES
@given(st.floats(min_value=0.0, max_value=1.0))
def test_any_float_in_range_is_accepted_exactly(x: float) -> None:
    assert parse_tolerance(x) == Decimal(repr(x))
    assert parse_tolerance(repr(x)) == Decimal(repr(x))


@PROPERTIES
@given(st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: x < 0.0 or x > 1.0))
def test_any_finite_float_outside_range_is_rejected(x: float) -> None:
    with pytest.raises(ValueError, match=r"0\.\.1"):
        parse_tolerance(x)
    with pytest.raises(ValueError, match=r"0\.\.1"):
        parse_tolerance(repr(x))


def test_tool_arguments_are_parsed_strictly_and_stay_storable() -> None:
    from evalkit.records import recorded_tool_calls

    calls = recorded_tool_calls(
        [
            {"function": {"name": "a", "arguments": '{"q": 1}'}},
            {"name": "b", "arguments": '{"q": NaN}'},
            {"name": "c", "input": {"q": float("inf")}},
            {"arguments": "{}"},
        ]
    )
    assert calls == [
        {"name": "a", "arguments": {"q": 1}},
        {"name": "b", "arguments": '{"q": NaN}'},  # not JSON: the text as sent
        {"name": "c", "arguments": "{'q': inf}"},
    ]
    json.dumps(calls, allow_nan=False)  # what is stored and printed is JSON
