"""The rubric judge's agreement with a person, measured (README "Model-graded assertions").

The labelled set tests/data/judged/agreement.yaml goes through ``evalkit run`` as
bench/bench_judge.py sends it (the answers replayed, one rubric per prompt), judged by the scripted
judge of tests/judgeserver.py on a real loopback server: a keyword reader that never sees the
labels. What is checked is the measuring, not the judge's quality: every verdict in the run is the
scripted judge's own reading of that answer, and the accuracy and Cohen's kappa the bench reports
are those of an independent count of the same verdicts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.bench_judge import SET_ID, agreement, load_labelled, write_project
from tests.fakeserver import FakeServer
from tests.judgeserver import JUDGE_MODEL, judge_handler, level_of


def test_the_labelled_set_is_forty_answers_half_pass_half_fail() -> None:
    items = load_labelled()["items"]
    assert len(items) >= 40
    assert sum(1 for i in items if i["label"] == "pass") == len(items) / 2
    assert {i["label"] for i in items} == {"pass", "fail"}
    assert len({i["id"] for i in items}) == len(items)
    assert all(i["rubric"].strip() and i["answer"].strip() and i["prompt"].strip() for i in items)


def cohen_kappa(labels: list[bool], verdicts: list[bool]) -> float:
    """Cohen's kappa from the 2x2 table, written out (the oracle of ``agreement``)."""
    n = len(labels)
    a = sum(1 for x, y in zip(labels, verdicts, strict=True) if x and y)
    d = sum(1 for x, y in zip(labels, verdicts, strict=True) if not x and not y)
    b = sum(1 for x, y in zip(labels, verdicts, strict=True) if x and not y)
    c = n - a - b - d
    po = (a + d) / n
    pe = ((a + b) / n) * ((a + c) / n) + ((c + d) / n) * ((b + d) / n)
    return (po - pe) / (1 - pe)


def test_agreement_is_accuracy_and_cohens_kappa() -> None:
    labels = [True, True, False, False, True, False]
    verdicts: list[bool | None] = [True, False, False, True, True, None]
    measured = agreement(labels, verdicts)
    assert measured["accuracy"] == pytest.approx(3 / 6)
    assert measured["confusion"]["no_verdict"] == 1
    # a missing verdict is a disagreement: it counts as the opposite of the label would
    assert measured["accuracy"] == agreement(labels, [True, False, False, True, True, True])["accuracy"]
    complete = [True, False, False, True, True, False]
    assert agreement(labels, complete)["kappa"] == pytest.approx(cohen_kappa(labels, complete))
    assert agreement(labels, labels)["kappa"] == pytest.approx(1.0)


def test_the_labelled_set_graded_through_a_scripted_judge(cli: Any, isolated: Path) -> None:
    judge = FakeServer().start()
    judge.handler = judge_handler()
    labelled = load_labelled()
    try:
        write_project(
            isolated, labelled, {"id": "judge", "adapter": "openai", "base_url": f"{judge.url}/v1", "model": "j"}
        )
        result = cli("run", "set.yaml", "--format", "json")
    finally:
        judge.stop()
    assert result.exit_code in (0, 1), result.stderr
    doc = json.loads(result.stdout)
    assert doc["set"] == SET_ID
    assert doc["grader"] == f"judged:judge:{JUDGE_MODEL}"
    by_id = {item["id"]: item for item in doc["items"]}
    verdicts = []
    for item in labelled["items"]:
        level, _ = level_of(item["answer"], item["rubric"])
        got = by_id[item["id"]]
        assert got["error"] is None
        assert got["passed"] is (level / 4 >= 0.6), item["id"]  # the judge's own reading, carried through
        verdicts.append(got["passed"])
    labels = [item["label"] == "pass" for item in labelled["items"]]
    measured = agreement(labels, verdicts)
    assert measured["accuracy"] == pytest.approx(sum(x is y for x, y in zip(labels, verdicts, strict=True)) / 40)
    assert measured["kappa"] == pytest.approx(cohen_kappa(labels, verdicts))
    assert doc["judge"]["calls"] == len(labelled["items"])
    assert doc["judge"]["input_tokens"] == 100 * len(labelled["items"])
