"""Typed verdicts (evalkit.verdicts): states and bases are enums whose values are the JSON's
strings (README "JSON output"), decided by predicates, never by comparing sentences."""

from __future__ import annotations

import json
from dataclasses import replace
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalkit.compare import gate_of, gate_passed, paired_test
from evalkit.graders.decision import yardstick as decision_yardstick
from evalkit.records import Comparison, Gate
from evalkit.report.render import verdict_style
from evalkit.report.text import verdict_label
from evalkit.verdicts import (
    BelowMinimum,
    ComparisonState,
    GateBasis,
    GateVerdict,
    Regressed,
    StoredFailure,
    Yardstick,
)
from tests.factories import run_of


def test_the_states_serialise_to_the_strings_the_json_always_had() -> None:
    assert [s.value for s in ComparisonState] == [
        "baseline", "compared", "not_compared", "mismatch", "unknown", "shard",
    ]  # fmt: skip
    assert json.dumps(Comparison(ComparisonState.MISMATCH, "r").as_dict()["state"]) == '"mismatch"'
    assert [b.value for b in GateBasis] == ["significant", "undecided", "untested"]


@pytest.mark.parametrize(
    ("state", "baseline", "compared", "comparable"),
    [
        (ComparisonState.BASELINE, True, False, True),
        (ComparisonState.COMPARED, False, True, True),
        (ComparisonState.NOT_COMPARED, False, False, False),
        (ComparisonState.MISMATCH, False, False, False),
        (ComparisonState.UNKNOWN, False, False, False),
        (ComparisonState.SHARD, False, False, False),
    ],
)
def test_each_state_answers_its_predicates(
    state: ComparisonState, baseline: bool, compared: bool, comparable: bool
) -> None:
    assert (state.is_baseline, state.is_compared, state.comparable) == (baseline, compared, comparable)
    assert gate_passed(Comparison(state, "r"), True) is comparable


def test_a_stored_comparison_reads_back_typed() -> None:
    stored = Comparison(
        ComparisonState.COMPARED, "r", regressed=True, gate_basis=GateBasis.UNDECIDED, significance=0.05
    )
    back = Comparison.from_dict(json.loads(json.dumps(stored.as_dict())))
    assert back.state is ComparisonState.COMPARED
    assert back.gate_basis is GateBasis.UNDECIDED
    assert back == stored


def test_a_not_compared_verdict_keeps_its_cause_apart_from_its_sentence() -> None:
    comparison = Comparison.not_compared("the run could not be stored (disk full)", ComparisonState.UNKNOWN)
    assert comparison.reason == "Not compared: the run could not be stored (disk full)."
    run = replace(run_of(1, 1), comparison=comparison)
    assert gate_of(run, True).reasons() == ["not compared with a baseline (the run could not be stored (disk full))"]


@pytest.mark.parametrize(
    ("stored", "parsed", "shared", "judged"),
    [
        ("deterministic", Yardstick("deterministic"), True, False),
        ("retrieval_hit_rate", Yardstick("retrieval_hit_rate"), True, False),
        ("decision:judge:gpt-4o-2024-08-06:v1", Yardstick("decision", "judge", "gpt-4o-2024-08-06", 1), True, True),
        ("decision:local:llama3:8b:v1", Yardstick("decision", "local", "llama3:8b", 1), True, True),
        ("decision", Yardstick("decision"), False, True),
        ("decision:failed", Yardstick("decision", failed=True), False, True),
        ("decision:judge:model:vx", Yardstick("decision:judge:model:vx"), False, False),
        ("deterministic_v2", Yardstick("deterministic_v2"), False, False),
    ],
)
def test_a_stored_yardstick_parses_into_its_parts(stored: str, parsed: Yardstick, shared: bool, judged: bool) -> None:
    assert Yardstick.parse(stored) == parsed
    assert (parsed.shared, parsed.judged, str(parsed)) == (shared, judged, stored)


def test_a_judge_that_reported_no_model_is_unverified_whatever_the_version() -> None:
    assert Yardstick.parse("decision:judge:alias?:v1").verified is False
    assert Yardstick.parse("decision:judge:alias?:v2").verified is False
    assert Yardstick.parse("decision:judge:model-1:v2").verified is True
    assert Yardstick.decision("judge", "model-1", 1) == Yardstick.parse(decision_yardstick("judge", "model-1"))


@given(st.text(alphabet=st.sampled_from("decision:vf1a?ld2²٣"), max_size=30) | st.text(max_size=30))
def test_a_yardstick_gives_back_the_string_it_was_parsed_from(stored: str) -> None:
    assert str(Yardstick.parse(stored)) == stored


def test_the_gate_keeps_its_failures_typed_and_says_them_where_shown() -> None:
    regressed = replace(
        run_of(7, 10),
        comparison=Comparison(
            ComparisonState.COMPARED,
            "r",
            regressed=True,
            baseline_run_id="b1",
            gate_basis=GateBasis.SIGNIFICANT,
            significance=0.05,
        ),
    )
    gate = gate_of(regressed, True, Gate(min_pass_rate=Decimal("0.8")))
    assert gate.failures == (
        Regressed("b1", GateBasis.SIGNIFICANT, 0.05),
        BelowMinimum("pass rate", "0.70", Decimal("0.8"), "7/10"),
    )
    assert gate.as_dict() == {
        "fail_on_regression": True,
        "passed": False,
        "failures": [
            "regression against the baseline (run b1): significant at 0.05 (one-sided paired test)",
            "pass rate 0.70 (7/10) is below the minimum 0.8",
        ],
    }
    assert GateVerdict.stored(json.loads(json.dumps(gate.as_dict()))) == GateVerdict(
        True, tuple(StoredFailure(f) for f in gate.reasons())
    )


@pytest.mark.parametrize(
    ("stored", "read"),
    [
        (None, None),
        ("passed", None),
        ([1, 2], None),
        ({"failures": "not a list", "passed": False}, GateVerdict(False)),
        ({"fail_on_regression": True, "failures": [3]}, GateVerdict(True, (StoredFailure("3"),))),
    ],
)
def test_a_damaged_stored_gate_reads_back_as_data_never_a_crash(stored: object, read: GateVerdict | None) -> None:
    assert GateVerdict.stored(stored) == read


@pytest.mark.parametrize(
    ("stored", "regressed", "label", "style"),
    [
        ("compared", False, "no regression", "green"),
        ("baseline", False, "baseline", "cyan"),
        ("mismatch", False, "mismatch", "yellow"),
        ("compared", True, "regressed", "bold red"),
        ("compared; DROP", False, "compared; DROP", "yellow"),  # a state no version wrote: shown as it is
        (None, None, "—", "yellow"),
    ],
)
def test_a_stored_state_is_read_into_the_enum_for_its_label_and_style(
    stored: str | None, regressed: bool | None, label: str, style: str
) -> None:
    assert (verdict_label(stored, regressed), verdict_style(stored, regressed)) == (label, style)


def test_the_paired_test_says_its_parts_without_being_parsed_back() -> None:
    test = paired_test([("a", True, 1.0), ("b", True, 1.0)], [("a", False, 0.0), ("b", True, 1.0)])
    assert test.p_text(one_sided=True) == "one-sided p = 0.500"
    assert test.describe() == f"pass rate -50.0 pp ({test.pass_interval()}), two-sided p = 1.000"
    assert test.describe(measure="top-1 hit rate").startswith("top-1 hit rate -50.0 pp (")


def test_a_stored_comparison_with_a_state_no_version_wrote_reads_as_unknown_never_a_crash() -> None:
    stored = {"state": "compared; DROP TABLE runs", "reason": "r", "gate_basis": ["significant"]}
    back = Comparison.from_dict(stored)
    assert (back.state, back.gate_basis) == (ComparisonState.UNKNOWN, None)
    assert ComparisonState.read(1) is None
    assert GateBasis.read("undecided") is GateBasis.UNDECIDED
