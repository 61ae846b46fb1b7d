"""Benchmark and variant fingerprints (docs/contract.md "Retrieval evaluation"): what they hash and what they ignore, as records,
as loaded from set files, and as the comparison state of stored runs."""

from __future__ import annotations

import dataclasses
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalkit.records import Question, QuestionSet, RetrievalTolerances
from evalkit.retrieval.provenance import Provenance, benchmark_fingerprint, variant_fingerprint
from evalkit.sets import load_set

CORPUS = "sha256:0123456789abcdef"
QUESTIONS = (
    Question("q1", "Where is the office?", "match", ("addr", "map"), "near-duplicate", "On Main Street."),
    Question("q2", "When do you open?", "gap", ("hours",), None, "At nine."),
    Question("q3", "Is there a canteen?", "gap", (), "no-answer"),
)


def qset(questions: tuple[Question, ...] = QUESTIONS, **fields: Any) -> QuestionSet:
    return QuestionSet("acme.docs", "Docs", questions, **fields)


def fingerprint(questions: tuple[Question, ...] = QUESTIONS, corpus: str | None = CORPUS, **fields: Any) -> str | None:
    return benchmark_fingerprint(qset(questions, **fields), corpus)


def changed(index: int, **fields: Any) -> tuple[Question, ...]:
    return tuple(dataclasses.replace(q, **fields) if i == index else q for i, q in enumerate(QUESTIONS))


BASE = fingerprint()


def test_fingerprint_is_known_and_stable() -> None:
    assert BASE is not None
    assert fingerprint() == BASE


@pytest.mark.parametrize(
    "questions",
    [
        pytest.param(tuple(reversed(QUESTIONS)), id="question-order"),
        pytest.param(changed(0, expected=("map", "addr")), id="target-order"),
        pytest.param(changed(0, answer_gist="Somewhere else entirely."), id="answer-gist-changed"),
        pytest.param(changed(1, answer_gist=None), id="answer-gist-removed"),
        pytest.param(changed(2, answer_gist="Nothing answers this."), id="answer-gist-added"),
    ],
)
def test_unchanged_by_order_and_gists(questions: tuple[Question, ...]) -> None:
    assert fingerprint(questions) == BASE


def test_unchanged_by_set_name_description_and_tolerances() -> None:
    other = QuestionSet(
        "acme.docs",
        "Another name",
        QUESTIONS,
        description="Described.",
        tolerances=RetrievalTolerances(Decimal("0.5"), Decimal("0")),
    )
    assert benchmark_fingerprint(other, CORPUS) == BASE


@pytest.mark.parametrize(
    "questions",
    [
        pytest.param(changed(0, id="q1-renamed"), id="question-id"),
        pytest.param(changed(0, question="Where is the office now?"), id="question-text"),
        pytest.param(changed(0, form="gap"), id="form"),
        pytest.param(changed(0, expected=("addr",)), id="target-removed"),
        pytest.param(changed(1, expected=("hours", "calendar")), id="target-added"),
        pytest.param(changed(1, expected=("opening",)), id="target-replaced"),
        pytest.param(changed(2, expected=("canteen",)), id="empty-expected-filled"),
        pytest.param(changed(1, expected=()), id="expected-emptied"),
        pytest.param(changed(0, hard_class="contrast"), id="hard-class-changed"),
        pytest.param(changed(0, hard_class=None), id="hard-class-removed"),
        pytest.param(changed(1, hard_class="paraphrase"), id="hard-class-added"),
        pytest.param(QUESTIONS[:2], id="question-removed"),
        pytest.param((*QUESTIONS, Question("q4", "Parking?", "gap", ("parking",))), id="question-added"),
    ],
)
def test_changed_by_each_labelled_field(questions: tuple[Question, ...]) -> None:
    assert fingerprint(questions) not in (BASE, None)


def test_changed_by_the_corpus_and_unknown_without_one() -> None:
    assert fingerprint(corpus="sha256:fedcba9876543210") not in (BASE, None)
    assert fingerprint(corpus=None) is None
    assert fingerprint(corpus="") is None


def test_moving_a_label_between_questions_changes_it() -> None:
    swapped = (
        dataclasses.replace(QUESTIONS[0], hard_class=None),
        dataclasses.replace(QUESTIONS[1], hard_class="near-duplicate"),
        QUESTIONS[2],
    )
    assert fingerprint(swapped) != BASE


@settings(max_examples=60, deadline=None, database=None)
@given(st.permutations(range(len(QUESTIONS))), st.randoms(use_true_random=False))
def test_any_order_of_questions_and_targets_gives_the_same_fingerprint(order: list[int], rnd: Any) -> None:
    shuffled = []
    for i in order:
        expected = list(QUESTIONS[i].expected)
        rnd.shuffle(expected)
        shuffled.append(dataclasses.replace(QUESTIONS[i], expected=tuple(expected)))
    assert fingerprint(tuple(shuffled)) == BASE


# ---------------------------------------------------------------- variant fingerprint and provenance

TREATMENT = Provenance("corpus-1", "e5-v1", "c512", "hybrid-v3")


@pytest.mark.parametrize("field", ["model_revision", "chunking", "pipeline"])
def test_variant_changed_by_each_treatment_field(field: str) -> None:
    assert variant_fingerprint(dataclasses.replace(TREATMENT, **{field: "other"})) != variant_fingerprint(TREATMENT)
    assert variant_fingerprint(dataclasses.replace(TREATMENT, **{field: None})) != variant_fingerprint(TREATMENT)


def test_variant_not_changed_by_the_corpus() -> None:
    assert variant_fingerprint(dataclasses.replace(TREATMENT, corpus_revision="corpus-2")) == variant_fingerprint(
        TREATMENT
    )


def test_provenance_later_sources_win_and_blanks_are_ignored() -> None:
    merged = Provenance.merged(
        {"corpus_revision": "c1", "model_revision": "m1", "chunking": "k1"},
        {"model_revision": "m2", "chunking": "  ", "pipeline": 3},
        None,
    )
    assert merged.as_dict() == {"corpus_revision": "c1", "model_revision": "m2", "chunking": "k1", "pipeline": None}


# ---------------------------------------------------------------- from set files

SET_A = """
id: acme.docs
name: Docs
corpus: docs.jsonl
questions:
  - {id: q1, question: apple pie, form: match, expected: [apple, cake], hard_class: multi, answer_gist: Bake it.}
  - {id: q2, question: banana bread, form: gap, expected: [banana]}
  - {id: q3, question: durian smell, form: gap, expected: []}
"""
SET_A_REORDERED = """
id: acme.docs
name: Docs, reworded title
corpus: docs.jsonl
questions:
  - {id: q3, question: durian smell, form: gap, expected: []}
  - {id: q2, question: banana bread, form: gap, expected: [banana, banana], answer_gist: Sweet.}
  - {id: q1, question: apple pie, form: match, expected: [cake, apple], hard_class: multi, answer_gist: Other gist.}
"""
DOCS = [
    {"id": "apple", "text": "apple pie with apples"},
    {"id": "cake", "text": "a cake with apple"},
    {"id": "banana", "text": "banana bread"},
]


def test_loaded_sets_fingerprint_by_labels_only(write_file: Any) -> None:
    a = load_set(write_file("a/set.yaml", SET_A))
    b = load_set(write_file("b/set.yaml", SET_A_REORDERED))
    c = load_set(
        write_file("c/set.yaml", SET_A.replace("form: gap, expected: [banana]", "form: match, expected: [banana]"))
    )
    assert isinstance(a, QuestionSet)
    assert isinstance(b, QuestionSet)
    assert isinstance(c, QuestionSet)
    assert benchmark_fingerprint(a, CORPUS) == benchmark_fingerprint(b, CORPUS)
    assert benchmark_fingerprint(c, CORPUS) != benchmark_fingerprint(a, CORPUS)


def run_json(cli: Any) -> dict[str, Any]:
    result = cli("retrieval", "sets/docs.yaml", "--retriever", "lexical", "--format", "json", "--fail-on-regression")
    doc = json.loads(result.stdout)
    doc["exit_code"] = result.exit_code
    return doc


def test_stored_runs_compare_only_under_the_same_benchmark(cli: Any, write_file: Any) -> None:
    write_file("sets/docs.yaml", SET_A)
    write_file("sets/docs.jsonl", "".join(json.dumps(d) + "\n" for d in DOCS))
    first = run_json(cli)
    assert (first["comparison"]["state"], first["exit_code"]) == ("baseline", 0)

    write_file("sets/docs.yaml", SET_A_REORDERED)  # same labels: order, duplicates and gists differ
    second = run_json(cli)
    assert second["benchmark_fingerprint"] == first["benchmark_fingerprint"]
    assert (second["comparison"]["state"], second["comparison"]["baseline_run_id"]) == ("compared", first["run_id"])
    assert second["exit_code"] == 0

    write_file("sets/docs.yaml", SET_A_REORDERED.replace("durian smell", "durian odour"))
    third = run_json(cli)
    assert third["benchmark_fingerprint"] != first["benchmark_fingerprint"]
    assert (third["comparison"]["state"], third["exit_code"]) == ("mismatch", 1)
    assert third["comparison"]["baseline_run_id"] == second["run_id"]

    # same labels as the third run, but one document's text changed: the corpus revision differs
    write_file("sets/docs.jsonl", "".join(json.dumps(d) + "\n" for d in [*DOCS[:2], {"id": "banana", "text": "bread"}]))
    fourth = run_json(cli)
    assert fourth["provenance"]["corpus_revision"] != third["provenance"]["corpus_revision"]
    assert fourth["benchmark_fingerprint"] != third["benchmark_fingerprint"]
    assert (fourth["comparison"]["state"], fourth["exit_code"]) == ("mismatch", 1)
    assert fourth["comparison"]["reason"].startswith(f"Not compared: the benchmark changed since run {third['run_id']}")


def test_fingerprints_are_stored_with_the_run(cli: Any, write_file: Any, db_file: Path) -> None:
    import duckdb

    write_file("sets/docs.yaml", SET_A)
    write_file("sets/docs.jsonl", "".join(json.dumps(d) + "\n" for d in DOCS))
    doc = run_json(cli)
    con = duckdb.connect(str(db_file), read_only=True)
    try:
        row = con.execute(
            "select set_fingerprint, benchmark_fingerprint, variant_fingerprint from runs where run_id = $1",
            [doc["run_id"]],
        ).fetchone()
    finally:
        con.close()
    assert row == (doc["benchmark_fingerprint"], doc["benchmark_fingerprint"], doc["variant_fingerprint"])
