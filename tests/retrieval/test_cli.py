"""`evalkit retrieval` end to end: the JSON and table reports, comparison states and exit codes,
tolerances, stored runs shown by `report` and `show`, JUnit, warnings, and the example set."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from evalkit.records import QuestionSet
from evalkit.sets import load_set
from tests.conftest import REPO
from tests.fakeserver import FakeServer, Recorded, Reply
from tests.test_readme import readme

PROVENANCE = {"corpus_revision": "docs-1", "model_revision": "e5-v1", "chunking": "c512", "pipeline": "dense-v1"}


class Search:
    """The fake server as an HTTP retriever: question text -> ranked ids, changeable between runs."""

    def __init__(self, server: FakeServer) -> None:
        self.answers: dict[str, list[str]] = {}
        self.default: Callable[[str], list[str]] = lambda question: []
        self.failing: set[str] = set()  # questions answered with HTTP 400 (a question error)
        self.ranks: dict[int, int] = {}  # see the ``ten`` fixture
        server.handler = self

    def __call__(self, request: Recorded) -> Reply:
        question = request.json["question"]
        if question in self.failing:
            return Reply(status=400, json={"error": {"message": "bad question"}})
        return Reply(json={"ids": self.answers.get(question, self.default(question))})


def http_config(server: FakeServer, provenance: dict[str, str] | None = None) -> str:
    declared = json.dumps(provenance if provenance is not None else PROVENANCE)
    return f"""
    retrievers:
      - id: vector
        kind: http
        url: {server.url}/search
        max_retries: 0
        retry_backoff_s: 0
        provenance: {declared}
      - id: blind
        kind: http
        url: {server.url}/search
        max_retries: 0
    """


def ten_questions(tolerances: str = "") -> str:
    lines = "\n".join(
        f"  - {{id: q{i}, question: question {i}, form: {'match' if i % 2 else 'gap'}, expected: [doc{i}]}}"
        for i in range(10)
    )
    return f"id: gate.docs\nname: Ten\n{tolerances}questions:\n{lines}\n"


@pytest.fixture
def ten(write_file: Any, fake_llm: FakeServer) -> Search:
    """Ten questions on the http retriever; ``ten.ranks[i] = r`` puts doc{i} at rank r (0: not at all)."""
    write_file("evalkit.yaml", http_config(fake_llm))
    write_file("sets/ten.yaml", ten_questions())
    search = Search(fake_llm)
    search.ranks = ranks = dict.fromkeys(range(10), 1)

    def answer(question: str) -> list[str]:
        i = int(question.rsplit(maxsplit=1)[-1])
        fillers = [f"other{i}-{n}" for n in range(4)]
        return fillers if ranks[i] == 0 else [*fillers[: ranks[i] - 1], f"doc{i}", *fillers[ranks[i] - 1 :]]

    search.default = answer
    return search


def retrieval(cli: Any, *args: str, target: str = "sets/ten.yaml", retriever: str = "vector") -> Any:
    result = cli("retrieval", target, "--retriever", retriever, "--format", "json", *args)
    result.doc = json.loads(result.stdout) if result.stdout.strip() else None
    return result


def stored(db: Path, sql: str = "select count(*) from runs", params: list[Any] | None = None) -> Any:
    if not db.exists():
        return None
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def run_count(db: Path) -> int:
    rows = stored(db)
    return 0 if rows is None else rows[0][0]


# ---------------------------------------------------------------- the JSON report (README "JSON output")

MIXED = """
id: mixed.docs
name: Mixed
questions:
  - {id: exact, question: first, form: match, expected: [a], hard_class: near-duplicate, answer_gist: A.}
  - {id: third, question: second, form: gap, expected: [b, c], hard_class: near-duplicate}
  - {id: fourth, question: third, form: gap, expected: [d]}
  - {id: nothing, question: fourth, form: gap, expected: [], hard_class: no-answer}
"""


@pytest.fixture
def mixed(write_file: Any, fake_llm: FakeServer) -> Search:
    write_file("evalkit.yaml", http_config(fake_llm))
    write_file("sets/mixed.yaml", MIXED)
    search = Search(fake_llm)
    search.answers = {
        "first": ["a", "a", "x"],
        "second": ["x", "", "x", " ", "y", "c", "b", "z"],  # distinct: x, y, c, b, z -> c at rank 3
        "third": ["x", "y", "z", "d"],  # rank 4
        "fourth": [],
    }
    return search


def test_json_envelope(cli: Any, mixed: Search) -> None:
    result = retrieval(cli, target="sets/mixed.yaml")
    assert (result.exit_code, result.stderr) == (0, "")
    doc = result.doc
    assert (doc["kind"], doc["set"], doc["retriever"], doc["grader"]) == (
        "retrieval",
        "mixed.docs",
        "vector",
        "retrieval_hit_rate",
    )
    assert (doc["question_count"], doc["error_count"]) == (4, 0)
    assert (doc["top1_hit_rate"], doc["top3_hit_rate"]) == (0.5, 0.75)
    assert doc["by_form"] == {
        "gap": {"questions": 3, "top1_hit_rate": pytest.approx(1 / 3), "top3_hit_rate": pytest.approx(2 / 3)},
        "match": {"questions": 1, "top1_hit_rate": 1.0, "top3_hit_rate": 1.0},
    }
    assert doc["by_hard_class"] == {
        "near-duplicate": {"questions": 2, "top1_hit_rate": 0.5, "top3_hit_rate": 1.0},
        "no-answer": {"questions": 1, "top1_hit_rate": 1.0, "top3_hit_rate": 1.0},
    }
    assert set(doc["metrics"]) == {"mrr@10", "recall@3", "recall@10", "ndcg@10"}
    assert doc["metrics"]["mrr@10"] == pytest.approx((1 + 1 / 3 + 1 / 4) / 3)
    assert doc["metrics"]["recall@3"] == pytest.approx((1 + 0.5 + 0) / 3)
    assert doc["metrics"]["recall@10"] == pytest.approx(1.0)
    assert doc["items"] == [
        {"id": "exact", "form": "match", "hard_class": "near-duplicate", "top1_hit": True, "top3_hit": True,
         "retrieved": ["a", "x"]},
        {"id": "third", "form": "gap", "hard_class": "near-duplicate", "top1_hit": False, "top3_hit": True,
         "retrieved": ["x", "y", "c"]},
        {"id": "fourth", "form": "gap", "hard_class": None, "top1_hit": False, "top3_hit": False,
         "retrieved": ["x", "y", "z"]},
        {"id": "nothing", "form": "gap", "hard_class": "no-answer", "top1_hit": True, "top3_hit": True,
         "retrieved": []},
    ]  # fmt: skip
    assert doc["provenance"] == PROVENANCE
    assert doc["comparison"]["state"] == "baseline"
    assert doc["gate"] == {"fail_on_regression": False, "passed": True, "failures": []}


def test_table_report(cli: Any, mixed: Search) -> None:
    result = cli("retrieval", "sets/mixed.yaml", "--retriever", "vector")
    assert result.exit_code == 0
    lines = [line.rstrip() for line in result.stdout.splitlines()]
    assert lines[0].startswith("mixed.docs · retriever vector · run ")
    assert "Top-1 hit rate 50.0% (2/4) · top-3 hit rate 75.0% (3/4) · errors 0" in lines
    metrics = next(line for line in lines if line.startswith("mrr@10 "))
    assert metrics.endswith("(over 3 questions; 1 without expected ids left out)")
    assert "By form" in lines
    assert "By hard class" in lines
    cells = [[cell.strip() for cell in line.split("│")] for line in lines if "│" in line]
    rows = {row[0]: row for row in cells}
    assert rows["third"] == ["third", "gap", "near-duplicate", "miss", "hit", "x, y, c"]
    assert rows["fourth"] == ["fourth", "gap", "—", "miss", "miss", "x, y, z"]
    assert rows["nothing"] == ["nothing", "gap", "no-answer", "hit", "hit", "(nothing)"]
    assert lines[-1].startswith("Recorded as the baseline for mixed.docs with retriever 'vector'")


def test_output_file_holds_the_same_json(cli: Any, mixed: Search, tmp_path: Path) -> None:
    out = tmp_path / "reports" / "retrieval.json"
    result = retrieval(cli, "--output", str(out), target="sets/mixed.yaml")
    assert json.loads(out.read_text(encoding="utf-8")) == result.doc


def test_junit_parses_back(cli: Any, mixed: Search, tmp_path: Path) -> None:
    mixed.failing = {"third"}
    junit = tmp_path / "junit.xml"
    result = retrieval(cli, "--junit", str(junit), target="sets/mixed.yaml")
    assert result.exit_code == 3
    root = ET.parse(junit).getroot()
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == "mixed.docs"
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("4", "1", "1")
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props == {"run_id": result.doc["run_id"], "grader": "retrieval_hit_rate", "retriever": "vector"}
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert list(cases) == ["exact", "third", "fourth", "nothing"]
    assert [child.tag for child in cases["exact"]] == []
    assert [child.tag for child in cases["nothing"]] == []
    (failure,) = list(cases["third"])
    assert (failure.tag, failure.get("type")) == ("failure", "RetrievalMiss")
    assert failure.get("message") == "top-1 miss (top-3 hit); retrieved: x, y, c"
    (error,) = list(cases["fourth"])
    assert (error.tag, error.get("type")) == ("error", "RetrieverError")
    assert "HTTP 400" in (error.get("message") or "")


# ---------------------------------------------------------------- comparison states and exit codes


@pytest.mark.slow
@pytest.mark.parametrize("gate", [False, True], ids=["no-gate", "fail-on-regression"])
def test_states_and_exit_codes(cli: Any, ten: Search, write_file: Any, gate: bool) -> None:
    flag = ("--fail-on-regression",) if gate else ()
    failing_gate = 1 if gate else 0

    first = retrieval(cli, *flag)
    assert (first.exit_code, first.doc["comparison"]["state"]) == (0, "baseline")
    assert first.doc["gate"] == {"fail_on_regression": gate, "passed": True, "failures": []}

    ten.ranks[0] = 2  # 9/10 top-1: a drop of exactly the tolerance
    second = retrieval(cli, *flag)
    comparison = second.doc["comparison"]
    assert (second.exit_code, comparison["state"], comparison["regressed"]) == (0, "compared", False)
    assert comparison["baseline_run_id"] == first.doc["run_id"]
    assert comparison["reason"] == f"No regression: top-1 -10.0 pp, top-3 +0.0 pp against run {first.doc['run_id']}."
    assert comparison["treatment_changed"] is False

    ten.ranks.update({1: 3, 2: 0, 3: 0})  # 6/10 top-1, 8/10 top-3
    third = retrieval(cli, *flag)
    comparison = third.doc["comparison"]
    assert (third.exit_code, comparison["state"], comparison["regressed"]) == (failing_gate, "compared", True)
    assert comparison["reason"] == (
        "Regression: top-1 hit rate dropped 30.0 pp, beyond the tolerance of 10.0 pp; top-3 hit rate dropped "
        f"20.0 pp, beyond the tolerance of 10.0 pp (against run {second.doc['run_id']})."
    )
    assert comparison["pass_rate_delta"] == pytest.approx(-0.3)
    assert comparison["mean_score_delta"] == pytest.approx(-0.2)
    failures = [f"regression against the baseline (run {comparison['baseline_run_id']})"] if gate else []
    assert third.doc["gate"] == {"fail_on_regression": gate, "passed": not gate, "failures": failures}

    write_file("sets/ten.yaml", ten_questions().replace("expected: [doc9]", "expected: [doc9, doc19]"))
    fourth = retrieval(cli, *flag)
    assert (fourth.exit_code, fourth.doc["comparison"]["state"]) == (failing_gate, "mismatch")
    assert fourth.doc["comparison"]["regressed"] is False

    fifth = retrieval(cli, *flag, retriever="blind")
    assert (fifth.exit_code, fifth.doc["comparison"]["state"]) == (failing_gate, "unknown")
    assert fifth.doc["benchmark_fingerprint"] is None
    assert "declared no corpus revision" in fifth.doc["comparison"]["reason"]

    ten.failing = {"question 4"}
    sixth = retrieval(cli, *flag)
    assert (sixth.exit_code, sixth.doc["comparison"]["state"], sixth.doc["error_count"]) == (3, "unknown", 1)


@pytest.mark.slow
def test_unknown_fingerprint_stays_unknown_on_rerun(cli: Any, ten: Search) -> None:
    assert retrieval(cli, retriever="blind").doc["comparison"]["state"] == "unknown"
    again = retrieval(cli, "--fail-on-regression", retriever="blind")
    assert (again.exit_code, again.doc["comparison"]["state"]) == (1, "unknown")


@pytest.mark.slow
def test_errored_run_is_stored_but_never_a_baseline(cli: Any, ten: Search, db_file: Path) -> None:
    ten.failing = {"question 0"}
    errored = retrieval(cli)
    assert (errored.exit_code, errored.doc["comparison"]["state"]) == (3, "unknown")
    assert stored(db_file, "select status, error_count from runs") == [("errored", 1)]
    ten.failing = set()
    clean = retrieval(cli, "--fail-on-regression")
    assert (clean.exit_code, clean.doc["comparison"]["state"]) == (0, "baseline")


@pytest.mark.slow
def test_drop_equal_to_the_tolerance_uses_exact_arithmetic(cli: Any, ten: Search) -> None:
    ten.ranks.update({0: 2, 1: 2})  # 8/10 top-1
    retrieval(cli)
    ten.ranks[2] = 2  # 7/10: 0.8 - 0.7 > 0.1 in floats, exactly 0.1 in decimals
    result = retrieval(cli, "--fail-on-regression")
    assert (result.exit_code, result.doc["comparison"]["regressed"]) == (0, False)
    ten.ranks[3] = 2  # 6/10
    result = retrieval(cli, "--fail-on-regression")
    assert (result.exit_code, result.doc["comparison"]["regressed"]) == (0, False)  # against 7/10
    ten.ranks.update({4: 2, 5: 2})  # 4/10
    result = retrieval(cli, "--fail-on-regression")
    assert (result.exit_code, result.doc["comparison"]["regressed"]) == (1, True)


@pytest.mark.slow
def test_options_override_the_set_tolerances(cli: Any, ten: Search, write_file: Any) -> None:
    write_file("sets/ten.yaml", ten_questions("tolerances: {max_top1_drop: 0, max_top3_drop: 0}\n"))
    retrieval(cli)
    ten.ranks[0] = 2  # top-1 drops 0.1, top-3 holds
    strict = retrieval(cli, "--fail-on-regression")
    assert (strict.exit_code, strict.doc["comparison"]["regressed"]) == (1, True)
    assert strict.doc["tolerances"] == {"max_top1_drop": 0.0, "max_top3_drop": 0.0}
    ten.ranks[1] = 2
    relaxed = retrieval(cli, "--fail-on-regression", "--max-top1-drop", "0.1")
    assert (relaxed.exit_code, relaxed.doc["comparison"]["regressed"]) == (0, False)
    assert relaxed.doc["tolerances"] == {"max_top1_drop": 0.1, "max_top3_drop": 0.0}
    ten.ranks[2] = 0  # top-3 drops 0.1 as well
    top3 = retrieval(cli, "--fail-on-regression", "--max-top1-drop", "1")
    assert (top3.exit_code, top3.doc["comparison"]["regressed"]) == (1, True)
    assert top3.doc["comparison"]["reason"].startswith("Regression: top-3 hit rate dropped 10.0 pp")
    ten.ranks[3] = 0
    both = retrieval(cli, "--fail-on-regression", "--max-top1-drop", "1", "--max-top3-drop", "0.5")
    assert (both.exit_code, both.doc["comparison"]["regressed"]) == (0, False)


ACCEPTED = ["0", "-0.0", "0.5", "5e-1", "1"]
REJECTED = ["", "typo", "NAN", "INF", "-INF", "1e309", "-0.0001", "1.0001"]


@pytest.mark.parametrize("option", ["--max-top1-drop", "--max-top3-drop"])
@pytest.mark.parametrize("value", ACCEPTED)
def test_tolerance_values_accepted(cli: Any, write_file: Any, option: str, value: str) -> None:
    lexical_project(write_file)
    result = retrieval(cli, f"{option}={value}", target="sets/fruit.yaml", retriever="lexical")
    assert result.exit_code == 0, result.stderr
    name = option[2:].replace("-", "_")
    assert result.doc["tolerances"][name] == abs(float(value))
    assert str(result.doc["tolerances"][name]) != "-0.0"


@pytest.mark.parametrize("option", ["--max-top1-drop", "--max-top3-drop"])
@pytest.mark.parametrize("value", REJECTED)
def test_tolerance_values_rejected_before_anything_runs(
    cli: Any, write_file: Any, tmp_path: Path, db_file: Path, option: str, value: str
) -> None:
    lexical_project(write_file)
    result = cli("retrieval", "sets/fruit.yaml", "--retriever", "lexical", "--format", "json", f"{option}={value}")
    assert result.exit_code == 2
    assert result.stderr == f"Error: {option}: must be a finite number in 0..1, got {value!r}\n"
    assert result.stdout == ""
    assert not db_file.exists()
    assert not (tmp_path / "index").exists()  # nothing was indexed either


def test_rejected_tolerance_calls_no_retriever(cli: Any, ten: Search, fake_llm: FakeServer, db_file: Path) -> None:
    result = cli("retrieval", "sets/ten.yaml", "--retriever", "vector", "--max-top1-drop", "1.0001")
    assert result.exit_code == 2
    assert fake_llm.calls == 0
    assert run_count(db_file) == 0


@pytest.mark.slow
def test_rejected_tolerance_after_a_stored_run_stores_nothing(cli: Any, ten: Search, db_file: Path) -> None:
    assert retrieval(cli).exit_code == 0
    result = cli("retrieval", "sets/ten.yaml", "--retriever", "vector", "--max-top3-drop", "1e309")
    assert result.exit_code == 2
    assert run_count(db_file) == 1


@pytest.mark.parametrize("value", ["1.5", "-0.1", ".nan", "'0.1'"])
def test_set_file_tolerances_are_validated(cli: Any, ten: Search, write_file: Any, db_file: Path, value: str) -> None:
    write_file("sets/ten.yaml", ten_questions(f"tolerances: {{max_top3_drop: {value}}}\n"))
    result = cli("retrieval", "sets/ten.yaml", "--retriever", "vector")
    assert result.exit_code == 2
    assert re.match(r"Error: sets/ten\.yaml:3:\d+: tolerances\.max_top3_drop: ", result.stderr), result.stderr
    assert run_count(db_file) == 0


# ---------------------------------------------------------------- treatment changes


@pytest.mark.slow
def test_treatment_change_in_config_provenance_is_still_compared(
    cli: Any, ten: Search, write_file: Any, fake_llm: FakeServer
) -> None:
    first = retrieval(cli)
    write_file("evalkit.yaml", http_config(fake_llm, {**PROVENANCE, "model_revision": "e5-v2"}))
    result = cli("retrieval", "sets/ten.yaml", "--retriever", "vector", "--fail-on-regression")
    assert result.exit_code == 0
    assert (
        f"No regression: top-1 +0.0 pp, top-3 +0.0 pp against run {first.doc['run_id']}. "
        "Treatment changed: model_revision e5-v1 -> e5-v2." in " ".join(result.stdout.split())
    )
    write_file("evalkit.yaml", http_config(fake_llm, {**PROVENANCE, "model_revision": "e5-v2", "chunking": "c256"}))
    ten.ranks[0] = 0
    doc = retrieval(cli).doc
    comparison = doc["comparison"]
    assert (comparison["state"], comparison["treatment_changed"], comparison["regressed"]) == ("compared", True, False)
    assert comparison["reason"].endswith("Treatment changed: chunking c512 -> c256.")
    assert doc["benchmark_fingerprint"] == first.doc["benchmark_fingerprint"]
    assert doc["variant_fingerprint"] != first.doc["variant_fingerprint"]


@pytest.mark.slow
def test_changed_corpus_revision_in_config_is_a_mismatch(
    cli: Any, ten: Search, write_file: Any, fake_llm: FakeServer
) -> None:
    retrieval(cli)
    write_file("evalkit.yaml", http_config(fake_llm, {**PROVENANCE, "corpus_revision": "docs-2"}))
    result = retrieval(cli, "--fail-on-regression")
    assert (result.exit_code, result.doc["comparison"]["state"]) == (1, "mismatch")


LEXICAL_SET = """
id: fruit.docs
name: Fruit
corpus: docs.jsonl
questions:
  - {id: pie, question: the apple pie, form: match, expected: [apple]}
  - {id: bread, question: banana bread, form: gap, expected: [banana], hard_class: paraphrase}
"""
LEXICAL_DOCS = [{"id": "apple", "text": "apple pie recipes"}, {"id": "banana", "text": "banana bread and the loaf"}]


def lexical_project(write_file: Any, config: str = "") -> None:
    if config:
        write_file("evalkit.yaml", config)
    write_file("sets/fruit.yaml", LEXICAL_SET)
    write_file("sets/docs.jsonl", "".join(json.dumps(d) + "\n" for d in LEXICAL_DOCS))


def test_lexical_pipeline_change_is_a_treatment_change(cli: Any, write_file: Any) -> None:
    lexical_project(write_file, "retrievers: [{id: lex, kind: lexical}]\n")
    first = retrieval(cli, target="sets/fruit.yaml", retriever="lex")
    assert first.doc["comparison"]["state"] == "baseline"
    write_file("evalkit.yaml", "retrievers: [{id: lex, kind: lexical, language: none, k1: 1.2}]\n")
    second = retrieval(cli, target="sets/fruit.yaml", retriever="lex")
    comparison = second.doc["comparison"]
    assert (comparison["state"], comparison["treatment_changed"]) == ("compared", True)
    before, after = first.doc["provenance"]["pipeline"], second.doc["provenance"]["pipeline"]
    assert comparison["reason"].endswith(f"Treatment changed: pipeline {before} -> {after}.")


# ---------------------------------------------------------------- storage, report and show


def test_run_is_stored_as_a_retrieval_run(cli: Any, mixed: Search, db_file: Path) -> None:
    doc = retrieval(cli, target="sets/mixed.yaml").doc
    (row,) = stored(
        db_file,
        "select kind, grader, provider, set_id, pass_rate, mean_score, item_count, passed_count, status, "
        "comparison_state, metrics from runs where run_id = $1",
        [doc["run_id"]],
    )
    assert row[:10] == (
        "retrieval",
        "retrieval_hit_rate",
        "vector",
        "mixed.docs",
        0.5,
        0.75,
        4,
        2,
        "complete",
        "baseline",
    )
    metrics = json.loads(row[10])
    assert metrics["metrics"] == doc["metrics"]
    assert metrics["by_form"] == doc["by_form"]
    assert metrics["by_hard_class"] == doc["by_hard_class"]
    items = stored(
        db_file, "select item_id, passed, score from results where run_id = $1 order by item_index", [doc["run_id"]]
    )
    assert items == [("exact", True, 1.0), ("third", False, 1.0), ("fourth", False, 0.0), ("nothing", True, 1.0)]


def test_report_lists_retrieval_runs(cli: Any, mixed: Search) -> None:
    first = retrieval(cli, target="sets/mixed.yaml").doc
    mixed.answers["first"] = ["x"]
    second = retrieval(cli, target="sets/mixed.yaml").doc
    report = cli("report", "--format", "json")
    assert report.exit_code == 0
    runs = json.loads(report.stdout)["runs"]
    assert [r["run_id"] for r in runs] == [second["run_id"], first["run_id"]]
    assert {k: runs[0][k] for k in ("set", "kind", "grader", "provider", "pass_rate", "mean_score", "item_count")} == {
        "set": "mixed.docs",
        "kind": "retrieval",
        "grader": "retrieval_hit_rate",
        "provider": "vector",
        "pass_rate": 0.25,
        "mean_score": 0.5,
        "item_count": 4,
    }
    assert [r["comparison_state"] for r in runs] == ["compared", "baseline"]
    table = cli("report")
    assert table.exit_code == 0
    row = next(line for line in table.stdout.splitlines() if line.startswith("mixed.docs"))
    assert second["run_id"] in row
    assert "retrieval_hit_rate" in row
    assert "25.0%" in row
    history = cli("report", "mixed.docs")
    assert history.exit_code == 0
    assert first["run_id"] in history.stdout
    assert second["run_id"] in history.stdout


def test_show_prints_the_run_as_it_was_reported(cli: Any, mixed: Search) -> None:
    doc = retrieval(cli, "--fail-on-regression", target="sets/mixed.yaml").doc
    shown = cli("show", doc["run_id"], "--format", "json")
    assert shown.exit_code == 0
    again = json.loads(shown.stdout)
    for key in ("kind", "retriever", "question_count", "top1_hit_rate", "top3_hit_rate", "by_form", "by_hard_class",
                "metrics", "items", "comparison", "provenance", "benchmark_fingerprint", "gate"):  # fmt: skip
        assert again[key] == doc[key], key
    table = cli("show", doc["run_id"])
    assert table.exit_code == 0
    text = table.stdout
    assert "Top-1 hit rate 50.0% (2/4) · top-3 hit rate 75.0% (3/4) · errors 0" in text
    assert "By form" in text
    assert "By hard class" in text
    assert "near-duplicate" in text
    assert "Gate: passed" in text


# ---------------------------------------------------------------- input errors


def test_unknown_retriever_lists_the_known_ones(cli: Any, ten: Search, db_file: Path) -> None:
    result = cli("retrieval", "sets/ten.yaml", "--retriever", "vectr")
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: unknown retriever 'vectr' (known: blind, lexical, vector); ")
    assert run_count(db_file) == 0


def test_unknown_retriever_without_config_names_lexical(cli: Any, write_file: Any) -> None:
    lexical_project(write_file)
    result = cli("retrieval", "sets/fruit.yaml", "--retriever", "bm25")
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: unknown retriever 'bm25' (known: lexical); ")


def test_lexical_needs_a_corpus(cli: Any, write_file: Any, db_file: Path) -> None:
    write_file("sets/bare.yaml", LEXICAL_SET.replace("corpus: docs.jsonl\n", ""))
    result = cli("retrieval", "sets/bare.yaml", "--retriever", "lexical")
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: ")
    assert "corpus" in result.stderr
    assert run_count(db_file) == 0


def test_a_prompt_set_is_refused(cli: Any, write_file: Any) -> None:
    write_file("sets/p.yaml", "id: p.set\nname: P\nprompts:\n  - {id: a, prompt: hi, assertions: [{contains: x}]}\n")
    result = cli("retrieval", "sets/p.yaml", "--retriever", "lexical")
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: sets/p.yaml: evalkit retrieval needs exactly one question set")


# ---------------------------------------------------------------- the example set


def test_stdlib_example_runs_with_the_lexical_retriever(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # as documented; the database and the index stay under EVALKIT_DB's folder
    path = REPO / "sets" / "stdlib_docs.yaml"
    question_set = load_set(path)
    assert isinstance(question_set, QuestionSet)
    result = cli("retrieval", "sets/stdlib_docs.yaml", "--retriever", "lexical", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""  # every expected id is in the corpus
    doc = json.loads(result.stdout)
    questions = question_set.questions
    assert (doc["set"], doc["kind"], doc["retriever"]) == ("evalkit.stdlib_docs", "retrieval", "lexical")
    assert doc["question_count"] == len(questions) == len(doc["items"])
    assert doc["error_count"] == 0
    assert set(doc["by_form"]) == {"match", "gap"}
    assert sum(g["questions"] for g in doc["by_form"].values()) == len(questions)
    classes = {q.hard_class for q in questions if q.hard_class}
    assert set(doc["by_hard_class"]) == classes
    assert sum(g["questions"] for g in doc["by_hard_class"].values()) == sum(1 for q in questions if q.hard_class)
    assert doc["metrics_questions"] == sum(1 for q in questions if q.expected)
    assert all(0.0 <= v <= 1.0 for v in doc["metrics"].values())
    assert doc["top1_hit_rate"] <= doc["top3_hit_rate"]
    assert doc["top1_hit_rate"] == sum(i["top1_hit"] for i in doc["items"]) / len(questions)
    with (REPO / "sets" / "corpus" / "stdlib.jsonl").open(encoding="utf-8") as handle:
        corpus_ids = {json.loads(line)["id"] for line in handle if line.strip()}
    for item in doc["items"]:
        assert len(item["retrieved"]) <= 3
        assert len(set(item["retrieved"])) == len(item["retrieved"])
        assert set(item["retrieved"]) <= corpus_ids
    assert doc["comparison"]["state"] == "baseline"
    assert doc["provenance"]["corpus_revision"].startswith("sha256:")
    table = cli("retrieval", "sets/stdlib_docs.yaml", "--retriever", "lexical")
    assert table.exit_code == 0
    assert "No regression: top-1 +0.0 pp, top-3 +0.0 pp" in table.stdout


def test_unknown_lexical_language_is_refused_before_the_database_is_touched(
    cli: Any, write_file: Any, db_file: Path
) -> None:
    write_file(
        "evalkit.yaml",
        """
        retrievers:
          - id: lexical
            kind: lexical
            language: xx
        """,
    )
    write_file("corpus.jsonl", '{"id": "a", "text": "apple pie"}\n')
    write_file(
        "q.yaml",
        """
        id: review.lang
        name: Language
        corpus: corpus.jsonl
        questions:
          - {id: q1, question: apple, form: match, expected: [a]}
        """,
    )
    result = cli("retrieval", "q.yaml", "--retriever", "lexical")
    assert result.exit_code == 2
    assert not db_file.exists()
    assert "evalkit.yaml:4:" in result.stderr


def test_mismatch_still_says_whether_the_treatment_changed(cli: Any, write_file: Any) -> None:
    write_file("corpus.jsonl", '{"id": "a", "text": "apple pie"}\n')
    write_file(
        "q.yaml",
        """
        id: review.treat
        name: Treatment
        corpus: corpus.jsonl
        questions:
          - {id: q1, question: apple, form: match, expected: [a]}
        """,
    )
    first = cli("retrieval", "q.yaml", "--retriever", "lexical", "--format", "json")
    assert json.loads(first.stdout)["comparison"]["state"] == "baseline"
    write_file("corpus.jsonl", '{"id": "a", "text": "apple pie"}\n{"id": "b", "text": "banana"}\n')
    write_file("evalkit.yaml", "retrievers:\n  - {id: lexical, kind: lexical, k1: 1.2}\n")
    second = json.loads(cli("retrieval", "q.yaml", "--retriever", "lexical", "--format", "json").stdout)
    assert second["comparison"]["state"] == "mismatch"
    assert second["comparison"]["treatment_changed"] is True


def test_a_retrieval_run_the_database_refuses_is_still_reported(
    cli: Any, write_file: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import evalkit.store
    from evalkit.errors import StoreError

    def full_disk(*args: Any, **kwargs: Any) -> None:
        raise StoreError("evalkit.duckdb: commit failed (No space left on device)")

    monkeypatch.setattr(evalkit.store, "save_retrieval_run", full_disk)
    write_file("corpus.jsonl", '{"id": "a", "text": "apple pie"}\n')
    write_file(
        "q.yaml",
        "id: fault.store\nname: F\ncorpus: corpus.jsonl\nquestions:\n"
        "  - {id: q1, question: apple, form: match, expected: [a]}\n",
    )
    result = cli("retrieval", "q.yaml", "--retriever", "lexical", "--format", "json", "--output", "out.json")
    assert result.exit_code == 3
    assert result.stderr.strip() == (
        "Error: evalkit.duckdb: commit failed (No space left on device); the run was not stored"
    )
    doc = json.loads(result.stdout)  # README "Commands": the JSON of a run carried out, whatever the exit code
    assert (doc["top1_hit_rate"], doc["comparison"]["state"]) == (1.0, "unknown")
    assert doc["comparison"]["reason"].startswith("Not compared: the run could not be stored (")
    assert json.loads(Path("out.json").read_text()) == doc


@pytest.mark.slow
def test_a_retrieval_run_id_names_its_stored_start(cli: Any, ten: Search, monkeypatch: pytest.MonkeyPatch) -> None:
    import evalkit.pipeline.execute
    import evalkit.runner
    from tests.test_runner import SteppingClock

    monkeypatch.setattr(evalkit.pipeline.execute, "datetime", SteppingClock)
    monkeypatch.setattr(evalkit.runner, "datetime", SteppingClock)  # each reading a minute later
    doc = retrieval(cli).doc
    started = datetime.fromisoformat(doc["started_at"])
    assert doc["run_id"][:15] == f"{started:%Y%m%d-%H%M%S}"


def test_compare_markdown_says_hit_and_miss_as_the_table_does(cli: Any, ten: Search) -> None:
    first = retrieval(cli).doc["run_id"]
    ten.ranks.update({0: 2, 1: 0})  # q0: top-3 only; q1: not at all
    second = retrieval(cli).doc["run_id"]
    table = cli("compare", first, second)
    assert [
        line.replace("│", " ").split() for line in table.stdout.splitlines() if line.startswith(("q0 ", "q1 "))
    ] == [
        ["q0", "hit", "miss", "hit", "hit"],
        ["q1", "hit", "miss", "hit", "miss"],
    ]
    markdown = cli("compare", first, second, "--format", "markdown")
    assert markdown.exit_code == 0, markdown.output
    assert "| question | first top-1 | second top-1 | first top-3 | second top-3 |" in markdown.stdout
    assert "| q0 | hit | miss | hit | hit |" in markdown.stdout
    assert "| q1 | hit | miss | hit | miss |" in markdown.stdout


# ---------------------------------------------------------------- report, compare and the default retriever

FRUIT = """
id: fruit.docs
name: Fruit
corpus: docs.jsonl
questions:
  - {id: pie, question: the apple pie, form: match, expected: [apple]}
  - {id: bread, question: banana bread, form: gap, expected: [banana]}
  - {id: loaf, question: a loaf of apple bread, form: gap, expected: [banana]}
"""
FRUIT_DOCS = "".join(
    json.dumps(d) + "\n"
    for d in [{"id": "apple", "text": "apple pie recipes"}, {"id": "banana", "text": "banana bread and the loaf"}]
)


@pytest.fixture
def fruit(write_file: Any) -> None:
    write_file("sets/fruit.yaml", FRUIT)
    write_file("sets/docs.jsonl", FRUIT_DOCS)


def retrieval_json(cli: Any, *args: str) -> dict[str, Any]:
    result = cli("retrieval", "sets/fruit.yaml", *args, "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


@pytest.mark.usefixtures("fruit")
def test_retriever_defaults_to_lexical_when_no_other_is_configured(cli: Any, write_file: Any) -> None:
    assert retrieval_json(cli)["retriever"] == "lexical"
    write_file("evalkit.yaml", "retrievers: [{id: lexical, kind: lexical, language: none}]\n")
    assert retrieval_json(cli)["retriever"] == "lexical"
    write_file("evalkit.yaml", "retrievers: [{id: vector, kind: http, url: 'http://127.0.0.1:9/search'}]\n")
    result = cli("retrieval", "sets/fruit.yaml")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (
        f"Error: --retriever ID is needed: {Path('evalkit.yaml').resolve()} configures vector besides the built-in "
        "lexical; name one, e.g. --retriever lexical\n"
    )


@pytest.mark.usefixtures("fruit")
def test_report_labels_the_hit_rates_of_retrieval_runs(cli: Any) -> None:
    retrieval_json(cli)
    for args in (["report"], ["report", "fruit.docs"]):
        result = cli(*args)
        assert result.exit_code == 0
        (row,) = [line for line in result.stdout.splitlines() if "lexical/" in line]
        assert "(top-1)" in row, result.stdout
        assert "(top-3)" in row, result.stdout


@pytest.mark.usefixtures("fruit")
def test_compare_of_retrieval_runs_speaks_of_hit_rates(cli: Any, write_file: Any) -> None:
    first = retrieval_json(cli)["run_id"]
    write_file("sets/docs.jsonl", FRUIT_DOCS.replace("banana bread and the loaf", "banana and a loaf of bread"))
    second = retrieval_json(cli)["run_id"]
    result = cli("compare", first, second)
    assert result.exit_code == 0, result.stderr
    assert "pass rate" not in result.stdout
    assert "mean score" not in result.stdout
    lines = result.stdout.splitlines()
    assert lines[2].startswith("Paired questions: 3 (0 only in the first run, 0 only in the second)")
    assert lines[3].startswith("top-1 hit rate ")
    assert lines[4].startswith("top-3 hit rate ")
    assert lines[5].startswith("Whole runs: top-1 hit rate ")
    assert "top-3 hit rate" in lines[5]


def test_stdlib_no_answer_questions_are_documented_misses_for_lexical(
    cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    result = cli("retrieval", "sets/stdlib_docs.yaml", "--format", "json")  # lexical by default
    doc = json.loads(result.stdout)
    no_answer = [i for i in doc["items"] if i["hard_class"] == "no-answer"]
    assert len(no_answer) == 9
    assert all(i["retrieved"] and not i["top3_hit"] for i in no_answer)
    said = "count as misses for it"
    assert said in " ".join((REPO / "sets" / "stdlib_docs.yaml").read_text(encoding="utf-8").replace("#", "").split())
    assert said in " ".join(readme().split())


def test_ctrl_c_while_a_retrieval_run_is_stored_says_what_was_kept(
    cli: Any, write_file: Any, db_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The failure path prompt runs take (docs/architecture.md "The run pipeline"): the
    interrupted command says no run was stored, and none is."""
    import evalkit.store

    def pressed(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(evalkit.store, "save_retrieval_run", pressed)
    write_file("corpus.jsonl", '{"id": "a", "text": "apple pie"}\n')
    write_file(
        "q.yaml",
        "id: fault.ctrlc\nname: F\ncorpus: corpus.jsonl\nquestions:\n"
        "  - {id: q1, question: apple, form: match, expected: [a]}\n",
    )
    result = cli("retrieval", "q.yaml", "--retriever", "lexical")
    assert result.exit_code == 130
    assert result.stderr.strip().splitlines()[-1] == "Interrupted: no run of this command was stored."
    assert stored(db_file) == [(0,)]
