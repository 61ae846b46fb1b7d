"""Retrieval scoring (docs/contract.md "Retrieval evaluation"): the hit rules, the breakdowns, and the ranking metrics checked
against an independent oracle (ir-measures) on randomly generated rankings."""

from __future__ import annotations

import math
from collections.abc import Sequence

import ir_measures
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ir_measures import RR, Qrel, R, ScoredDoc, Success, nDCG

from evalkit.records import Question
from evalkit.retrieval.metrics import distinct, score

PROPERTIES = settings(max_examples=100, deadline=None, database=None)
MEASURES = {
    "mrr@10": RR @ 10,
    "recall@3": R @ 3,
    "recall@10": R @ 10,
    "ndcg@10": nDCG @ 10,
    "hit@1": Success @ 1,
    "hit@3": Success @ 3,
}


def question(qid: str, expected: Sequence[str] = (), form: str = "match", hard_class: str | None = None) -> Question:
    return Question(qid, f"question {qid}", form, tuple(expected), hard_class)


def hit_flags(expected: Sequence[str], raw_ranking: Sequence[str]) -> tuple[bool, bool]:
    """(top-1 hit, top-3 hit) of one question whose retriever answered ``raw_ranking``."""
    return score([question("q", expected)], [distinct(raw_ranking)]).per_question[0]


def test_distinct_keeps_first_occurrences_and_drops_blanks() -> None:
    assert distinct(["b", "a", "b", "", "a", " ", "\t", "c", "b"]) == ["b", "a", "c"]


@pytest.mark.parametrize(
    ("expected", "ranking", "flags"),
    [
        pytest.param(["a"], ["a", "b", "c"], (True, True), id="target-at-rank-1"),
        pytest.param(["a"], ["b", "a"], (False, True), id="target-at-rank-2"),
        pytest.param(["a"], ["b", "c", "a"], (False, True), id="target-at-rank-3"),
        pytest.param(["a"], ["b", "c", "d", "a"], (False, False), id="target-at-rank-4"),
        pytest.param(["a"], ["b", "b", "c", "c", "b", "a"], (False, True), id="duplicates-take-no-slot"),
        pytest.param(["a"], ["b", "c", "b", "d", "a"], (False, False), id="target-4th-distinct-after-duplicates"),
        pytest.param(["a"], ["", "  ", "a", "b"], (True, True), id="leading-blanks-skipped"),
        pytest.param(["a"], ["b", "", "c", "\t", "a"], (False, True), id="blanks-take-no-slot"),
        pytest.param(["a", "b"], ["x", "b", "y"], (False, True), id="several-targets-second-in-top-3"),
        pytest.param(["a", "b"], ["b", "x", "a"], (True, True), id="several-targets-any-is-top-1"),
        pytest.param(["a", "b"], ["x", "y", "z", "a", "b"], (False, False), id="several-targets-all-below-3"),
        pytest.param(["a"], [], (False, False), id="expected-but-nothing-returned"),
        pytest.param([], [], (True, True), id="empty-expected-nothing-returned"),
        pytest.param([], ["", " "], (True, True), id="empty-expected-only-blanks-returned"),
        pytest.param([], ["a"], (False, False), id="empty-expected-with-a-result"),
        pytest.param([], ["", "a", "a"], (False, False), id="empty-expected-with-a-result-after-blanks"),
    ],
)
def test_hit_rules(expected: list[str], ranking: list[str], flags: tuple[bool, bool]) -> None:
    assert hit_flags(expected, ranking) == flags


def test_a_failed_retrieval_is_a_miss_even_when_nothing_is_expected() -> None:
    scores = score([question("q1"), question("q2")], [[], []], [True, False])
    assert scores.per_question == ((False, False), (True, True))
    assert (scores.top1_hits, scores.top3_hits) == (1, 1)


def test_target_at_rank_four_in_the_ranking_metrics() -> None:
    metrics = score([question("q", ["a"])], [distinct(["b", "c", "d", "a"])]).metrics
    assert metrics["mrr@10"] == pytest.approx(0.25)
    assert metrics["recall@3"] == 0.0
    assert metrics["recall@10"] == 1.0
    assert metrics["ndcg@10"] == pytest.approx(1 / math.log2(5))


def test_target_beyond_rank_ten_counts_nothing() -> None:
    ranking = [f"x{i}" for i in range(10)] + ["a"]
    metrics = score([question("q", ["a"])], [ranking]).metrics
    assert metrics == {"mrr@10": 0.0, "recall@3": 0.0, "recall@10": 0.0, "ndcg@10": 0.0}


def test_duplicates_count_once_in_recall_and_ndcg() -> None:
    metrics = score([question("q", ["a", "b"])], [distinct(["a", "a", "a", "x", "b"])]).metrics
    assert metrics["recall@3"] == 1.0  # distinct ranking: a, x, b
    assert metrics["ndcg@10"] == pytest.approx((1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3)))
    metrics = score([question("q", ["a", "b"])], [distinct(["a", "a", "a"])]).metrics
    assert metrics["recall@3"] == 0.5
    assert metrics["ndcg@10"] == pytest.approx(1 / (1 + 1 / math.log2(3)))


def test_ranking_metrics_average_only_over_questions_with_expected_ids() -> None:
    questions = [question("q1", ["a"]), question("q2", []), question("q3", ["b"])]
    scores = score(questions, [["a"], ["z"], ["x", "b"]])
    assert scores.metrics["mrr@10"] == pytest.approx((1 + 0.5) / 2)
    assert scores.metrics["recall@3"] == 1.0
    assert (scores.scored, scores.left_out) == (2, 1)
    # the hit rates, unlike the metrics, are over every question
    assert scores.rates.questions == 3
    assert scores.rates.top1_hit_rate == pytest.approx(1 / 3)
    assert scores.rates.top3_hit_rate == pytest.approx(2 / 3)


def test_breakdowns_by_form_and_hard_class() -> None:
    questions = [
        question("q1", ["a"], "match", "near-duplicate"),  # top-1 hit
        question("q2", ["a"], "match"),  # miss
        question("q3", ["a"], "gap", "near-duplicate"),  # top-3 hit only
        question("q4", [], "gap", "no-answer"),  # nothing returned: hit
        question("q5", [], "gap", "no-answer"),  # something returned: miss
    ]
    rankings = [["a"], ["x"], ["x", "y", "a"], [], ["x"]]
    scores = score(questions, rankings)
    assert {k: v.as_dict() for k, v in scores.by_form.items()} == {
        "gap": {"questions": 3, "top1_hit_rate": pytest.approx(1 / 3), "top3_hit_rate": pytest.approx(2 / 3)},
        "match": {"questions": 2, "top1_hit_rate": 0.5, "top3_hit_rate": 0.5},
    }
    assert {k: v.as_dict() for k, v in scores.by_hard_class.items()} == {
        "near-duplicate": {"questions": 2, "top1_hit_rate": 0.5, "top3_hit_rate": 1.0},
        "no-answer": {"questions": 2, "top1_hit_rate": 0.5, "top3_hit_rate": 0.5},
    }
    assert (scores.top1_hits, scores.top3_hits) == (2, 3)
    assert scores.rates.as_dict() == {"questions": 5, "top1_hit_rate": 0.4, "top3_hit_rate": 0.6}


def test_no_hard_class_means_an_empty_breakdown() -> None:
    scores = score([question("q1", ["a"]), question("q2", ["b"], "gap")], [["a"], ["a"]])
    assert scores.by_hard_class == {}
    assert set(scores.by_form) == {"match", "gap"}


# ---------------------------------------------------------------- oracle: ir-measures

DOC_IDS = [f"d{i}" for i in range(12)]
RAW_IDS = st.one_of(st.sampled_from(DOC_IDS), st.sampled_from(["", " ", "\t"]))
LABELLED = st.tuples(
    st.lists(st.sampled_from(DOC_IDS), min_size=1, max_size=4, unique=True),  # expected (never empty: see below)
    st.lists(RAW_IDS, max_size=18),  # what the retriever returned, duplicates and blanks included
)


def oracle(questions: Sequence[Question], rankings: Sequence[Sequence[str]]) -> dict[str, dict[str, float]]:
    """Per question and measure, as ir-measures computes them from binary qrels and a run whose
    scores descend along the distinct ranking. A question absent from the run counts 0."""
    qrels = [Qrel(q.id, doc, 1) for q in questions for doc in q.expected]
    run = [
        ScoredDoc(q.id, doc, float(len(ranking) - rank))
        for q, ranking in zip(questions, rankings, strict=True)
        for rank, doc in enumerate(ranking)
    ]
    by_measure = {measure: name for name, measure in MEASURES.items()}
    values: dict[str, dict[str, float]] = {q.id: dict.fromkeys(MEASURES, 0.0) for q in questions}
    for metric in ir_measures.iter_calc(list(MEASURES.values()), qrels, run):
        values[metric.query_id][by_measure[metric.measure]] = metric.value
    return values


@pytest.mark.slow
@PROPERTIES
@given(st.lists(LABELLED, min_size=1, max_size=8))
def test_metrics_and_hit_rates_equal_ir_measures(cases: list[tuple[list[str], list[str]]]) -> None:
    # ir-measures drops queries without qrels, and our metrics average only over questions with
    # expected ids: so every generated question has at least one (hit rates of the others are
    # covered by the rules above).
    questions = [question(f"q{i}", expected) for i, (expected, _) in enumerate(cases)]
    rankings = [distinct(raw) for _, raw in cases]
    ours = score(questions, rankings)
    expected = oracle(questions, rankings)
    n = len(questions)
    for name in ("mrr@10", "recall@3", "recall@10", "ndcg@10"):
        assert ours.metrics[name] == pytest.approx(sum(v[name] for v in expected.values()) / n, abs=1e-9), name
    assert ours.rates.top1_hit_rate == pytest.approx(sum(v["hit@1"] for v in expected.values()) / n, abs=1e-9)
    assert ours.rates.top3_hit_rate == pytest.approx(sum(v["hit@3"] for v in expected.values()) / n, abs=1e-9)
    for q, (top1, top3) in zip(questions, ours.per_question, strict=True):
        assert (float(top1), float(top3)) == (expected[q.id]["hit@1"], expected[q.id]["hit@3"]), q.id
    assert (ours.scored, ours.left_out) == (n, 0)


def test_oracle_agrees_on_a_hand_computed_case() -> None:
    """Guards the oracle wiring itself (measure names, score direction)."""
    questions = [question("q1", ["a", "b"])]
    values = oracle(questions, [["x", "b", "a"]])["q1"]
    assert values == {
        "mrr@10": 0.5,
        "recall@3": 1.0,
        "recall@10": 1.0,
        "ndcg@10": pytest.approx((1 / math.log2(3) + 1 / math.log2(4)) / (1 + 1 / math.log2(3))),
        "hit@1": 0.0,
        "hit@3": 1.0,
    }
