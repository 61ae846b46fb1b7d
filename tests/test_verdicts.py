"""Typed verdicts (evalkit.verdicts): states and bases are enums whose values are the JSON's
strings (README "JSON output"), decided by predicates, never by comparing sentences."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from evalkit.compare import gate_of, gate_passed
from evalkit.records import Comparison
from evalkit.verdicts import ComparisonState, GateBasis
from tests.factories import run_of


def test_the_states_serialise_to_the_strings_the_json_always_had() -> None:
    assert [s.value for s in ComparisonState] == ["baseline", "compared", "not_compared", "mismatch", "unknown"]
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
    assert gate_of(run, True)["failures"] == ["not compared with a baseline (the run could not be stored (disk full))"]
