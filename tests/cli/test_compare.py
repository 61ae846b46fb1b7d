"""`evalkit compare`: two stored runs item by item, with an exact McNemar test and a seeded
paired bootstrap interval: `compare RUN_A RUN_B`, and `--set` with two `--provider`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import scipy.stats

from evalkit import stats
from evalkit.records import ItemResult, RunResult, ServingRecord
from evalkit.runner import new_run_id
from evalkit.store import Store, save_run
from tests.factories import GEN, item

Outcome = tuple[str, bool, float]


def make_run(
    outcomes: Sequence[Outcome],
    *,
    set_id: str = "demo.set",
    serving: ServingRecord = GEN,
    started_at: str = "2026-11-30T12:00:00+00:00",
    repeats: int = 1,
    repeat_of: Sequence[int] | None = None,
) -> RunResult:
    items: list[ItemResult] = []
    for index, (item_id, passed, score) in enumerate(outcomes):
        entry = item(item_id, passed, score=score, serving=serving)
        if repeat_of is not None:
            entry = replace(entry, repeat=repeat_of[index])
        items.append(entry)
    return RunResult.create(
        tuple(items),
        run_id=new_run_id(),
        set_id=set_id,
        set_fingerprint="f" * 16,
        provider=serving.provider,
        model=serving.model,
        grader="deterministic",
        started_at=started_at,
        finished_at=started_at,
        repeats=repeats,
    )


def store_runs(db: Path, *runs: RunResult, privacy: str = "metadata") -> None:
    with Store.open(db) as store:
        for run in runs:
            save_run(store, run, privacy, "test")


def table_rows(stdout: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.split("│")] for line in stdout.splitlines() if "│" in line]


# first: p0-p7 pass, p8 p9 fail, "gone" only here. second: p5 p6 pass->fail, p8 fail->pass,
# p9 still fails but scores 0.5, "new" only here.
FIRST: list[Outcome] = [
    *[(f"p{i}", True, 1.0) for i in range(8)],
    ("p8", False, 0.0),
    ("p9", False, 0.0),
    ("gone", True, 1.0),
]
SECOND: list[Outcome] = [
    ("new", False, 0.0),
    *[(f"p{i}", True, 1.0) for i in range(5)],
    ("p5", False, 0.0),
    ("p6", False, 0.0),
    ("p7", True, 1.0),
    ("p8", True, 1.0),
    ("p9", False, 0.5),
]
PASS_DIFF = [0.0] * 5 + [-1.0, -1.0, 0.0, 1.0, 0.0]  # second - first over the paired items, in first-run order
SCORE_DIFF = [0.0] * 5 + [-1.0, -1.0, 0.0, 1.0, 0.5]


@pytest.fixture
def pair(db_file: Path) -> tuple[RunResult, RunResult]:
    first = make_run(FIRST, started_at="2026-11-01T10:00:00+00:00")
    second = make_run(SECOND, started_at="2026-11-02T10:00:00+00:00")
    store_runs(db_file, first, second)
    return first, second


def ci_text(values: list[float], scale: float, fmt: str) -> str:
    interval = stats.bootstrap_mean_ci(values)
    return f"95% CI {interval.low * scale:{fmt}} … {interval.high * scale:{fmt}}"


def test_table_reports_pairing_flips_and_the_paired_test(cli: Any, pair: tuple[RunResult, RunResult]) -> None:
    first, second = pair
    result = cli("compare", first.run_id, second.run_id)
    assert result.exit_code == 0, result.stderr
    lines = [line.rstrip() for line in result.stdout.splitlines()]
    assert lines[0].startswith(f"first  {first.run_id} · demo.set · fake/alias-1 · deterministic · 2026-11-01T10:00")
    assert lines[1].startswith(f"second {second.run_id} · demo.set · fake/alias-1 · deterministic · 2026-11-02T10:00")
    assert lines[2] == "Paired items: 10 (1 only in the first run, 1 only in the second)"
    p = scipy.stats.binomtest(1, 3, 0.5).pvalue  # 2 pass->fail, 1 fail->pass
    assert p == 1.0
    assert lines[3] == (
        f"pass rate -10.0 pp ({ci_text(PASS_DIFF, 100, '+.1f')}), two-sided p = 1.000 (McNemar exact: 2 pass->fail, "
        "1 fail->pass)"
    )
    assert lines[4] == "pass rate one-sided p = 0.500 of a drop (what run --significance gates on)"
    assert lines[5] == f"mean score -0.050 ({ci_text(SCORE_DIFF, 1, '+.3f')})"
    # whole runs include the unpaired items: 9/11 -> 7/11, scores 9/11 -> 7.5/11
    assert lines[6] == "Whole runs: pass rate 81.8% -> 63.6%, mean score 0.818 -> 0.682"
    assert "Items that changed" in result.stdout
    assert table_rows(result.stdout) == [
        ["p5", "pass", "fail", "-1.000"],
        ["p6", "pass", "fail", "-1.000"],
        ["p8", "fail", "pass", "+1.000"],
        ["p9", "fail", "fail", "+0.500"],
    ]


def test_a_significant_drop_is_printed_like_the_issue_example(cli: Any, db_file: Path) -> None:
    # 100 prompts: 15 pass->fail, 3 fail->pass, 50 pass in both, 32 fail in both.
    before = [True] * 15 + [False] * 3 + [True] * 50 + [False] * 32
    after = [False] * 15 + [True] * 3 + [True] * 50 + [False] * 32
    first = make_run([(f"q{i}", b, float(b)) for i, b in enumerate(before)])
    second = make_run([(f"q{i}", a, float(a)) for i, a in enumerate(after)])
    store_runs(db_file, first, second)
    expected_p = scipy.stats.binomtest(3, 18, 0.5).pvalue
    assert f"{expected_p:.3f}" == "0.008"
    differences = [float(a) - float(b) for a, b in zip(after, before, strict=True)]
    interval = stats.bootstrap_mean_ci(differences)
    assert -0.25 < interval.low < -0.12 < interval.high < 0  # the drop is bounded away from 0

    result = cli("compare", first.run_id, second.run_id)
    assert result.exit_code == 0
    assert f"pass rate -12.0 pp ({ci_text(differences, 100, '+.1f')}), two-sided p = 0.008" in result.stdout
    # the gate's one-sided p beside it, each labelled (15 of the 18 changed items lost)
    one_sided = scipy.stats.binomtest(15, 18, 0.5, alternative="greater").pvalue
    assert f"{one_sided:.3f}" == "0.004"
    assert "pass rate one-sided p = 0.004 of a drop (what run --significance gates on)" in result.stdout
    assert "Paired items: 100 (0 only in the first run, 0 only in the second)" in result.stdout


def test_json_carries_deltas_paired_test_and_flips(cli: Any, pair: tuple[RunResult, RunResult]) -> None:
    first, second = pair
    result = cli("compare", first.run_id, second.run_id, "--format", "json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert (doc["first"]["run_id"], doc["second"]["run_id"]) == (first.run_id, second.run_id)
    assert doc["first"]["pass_rate"] == pytest.approx(9 / 11)
    assert doc["pass_rate_delta"] == pytest.approx(7 / 11 - 9 / 11)
    assert doc["mean_score_delta"] == pytest.approx(7.5 / 11 - 9 / 11)
    pass_ci, score_ci = stats.bootstrap_mean_ci(PASS_DIFF), stats.bootstrap_mean_ci(SCORE_DIFF)
    assert doc["paired"] == {
        "paired_items": 10,
        "only_in_first": 1,
        "only_in_second": 1,
        "pass_rate_delta": pytest.approx(-0.1),
        "pass_rate_ci95": [pass_ci.low, pass_ci.high],
        "mean_score_delta": pytest.approx(-0.05),
        "mean_score_ci95": [score_ci.low, score_ci.high],
        "p_value": 1.0,
        "mean_score_p_value": stats.sign_flip_p(SCORE_DIFF),
        "one_sided_p_value": 0.5,  # 2 pass->fail, 1 fail->pass: P(X >= 2 | 3)
        "one_sided_p_floor": 0.125,
        "mean_score_one_sided_p_value": stats.drop_test(SCORE_DIFF).p_value,
        "mean_score_one_sided_p_floor": 0.0625,
        "mean_score_changed": 4,
        "test": "McNemar exact",
        "pass_to_fail": 2,
        "fail_to_pass": 1,
    }
    assert doc["flips"] == [
        {"id": "p5", "first_pass_rate": 1.0, "second_pass_rate": 0.0, "first_score": 1.0, "second_score": 0.0, "score_delta": -1.0},
        {"id": "p6", "first_pass_rate": 1.0, "second_pass_rate": 0.0, "first_score": 1.0, "second_score": 0.0, "score_delta": -1.0},
        {"id": "p8", "first_pass_rate": 0.0, "second_pass_rate": 1.0, "first_score": 0.0, "second_score": 1.0, "score_delta": 1.0},
        {"id": "p9", "first_pass_rate": 0.0, "second_pass_rate": 0.0, "first_score": 0.0, "second_score": 0.5, "score_delta": 0.5},
    ]  # fmt: skip


def test_markdown(cli: Any, pair: tuple[RunResult, RunResult]) -> None:
    first, second = pair
    result = cli("compare", first.run_id, second.run_id, "--format", "markdown")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == f"### Compare `{first.run_id}` -> `{second.run_id}`"
    assert lines[2] == "demo.set: fake/alias-1 -> fake/alias-1"
    assert "- Paired items: 10 (1 only in the first run, 1 only in the second)" in lines
    assert "| item | first | second | score delta |" in lines
    assert "| p5 | pass | fail | -1.000 |" in lines  # the words of the table, not rates
    assert "| p9 | fail | fail | +0.500 |" in lines


def test_identical_runs_change_nothing(cli: Any, db_file: Path) -> None:
    first, second = make_run(FIRST), make_run(FIRST)
    store_runs(db_file, first, second)
    result = cli("compare", first.run_id, second.run_id)
    assert result.exit_code == 0
    assert (
        "pass rate +0.0 pp (no paired item changed), two-sided p = 1.000 (McNemar exact: 0 pass->fail, 0 fail->pass)"
        in (result.stdout)
    )
    assert "mean score +0.000 (no paired item changed)" in result.stdout
    assert "95% CI" not in result.stdout  # a bootstrap over unchanged items is a point, no interval
    assert result.stdout.rstrip().endswith("No item changed.")


def test_run_ids_may_be_unique_prefixes(cli: Any, pair: tuple[RunResult, RunResult]) -> None:
    first, second = pair
    doc = json.loads(cli("compare", first.run_id[:-1], second.run_id, "--format", "json").stdout)
    assert doc["first"]["run_id"] == first.run_id


def test_repeated_runs_use_the_sign_flip_test(cli: Any, db_file: Path) -> None:
    first = make_run([(f"p{i}", True, 1.0) for i in range(6)])
    samples = [(f"p{i}", not (i < 3 and r == 0), 0.0 if i < 3 and r == 0 else 1.0) for i in range(6) for r in range(3)]
    second = make_run(samples, repeats=3, repeat_of=[r for _ in range(6) for r in range(3)])
    store_runs(db_file, first, second)
    doc = json.loads(cli("compare", first.run_id, second.run_id, "--format", "json").stdout)
    assert doc["paired"]["test"] == "sign-flip permutation"
    assert doc["paired"]["paired_items"] == 6
    assert doc["paired"]["pass_rate_delta"] == pytest.approx(-1 / 6)  # three prompts at 2/3
    assert doc["paired"]["p_value"] == stats.sign_flip_p([-1 / 3] * 3 + [0.0] * 3)
    assert [(f["id"], f["second_pass_rate"]) for f in doc["flips"]] == [
        ("p0", pytest.approx(2 / 3)),
        ("p1", pytest.approx(2 / 3)),
        ("p2", pytest.approx(2 / 3)),
    ]
    table = cli("compare", first.run_id, second.run_id)
    assert ["p0", "pass", "66.7%", "-0.333"] in table_rows(table.stdout)


@pytest.fixture
def two_providers(db_file: Path) -> dict[str, RunResult]:
    one, two = ServingRecord("one", "alias-1", "model-1"), ServingRecord("two", "alias-2", "model-2")
    runs = {
        "one-old": make_run(FIRST, serving=one, started_at="2026-11-01T10:00:00+00:00"),
        "one-new": make_run(SECOND, serving=one, started_at="2026-11-03T10:00:00+00:00"),
        "two": make_run(FIRST, serving=two, started_at="2026-11-02T10:00:00+00:00"),
        "one-other-set": make_run(FIRST, serving=one, set_id="other.set", started_at="2026-11-04T10:00:00+00:00"),
    }
    store_runs(db_file, *runs.values())
    return runs


def test_set_with_two_providers_compares_their_latest_runs(cli: Any, two_providers: dict[str, RunResult]) -> None:
    result = cli("compare", "--set", "demo.set", "--provider", "two", "--provider", "one", "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["first"]["run_id"] == two_providers["two"].run_id
    assert doc["second"]["run_id"] == two_providers["one-new"].run_id
    assert (doc["first"]["provider"], doc["second"]["provider"]) == ("two", "one")
    assert doc["paired"]["pass_to_fail"] == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("only-one",), "Error: compare needs two run ids, or --set SET --provider A --provider B"),
        (("a", "b", "c"), "Error: compare needs two run ids, or --set SET --provider A --provider B"),
        (("--set", "demo.set", "--provider", "one"), "Error: compare --set needs exactly two --provider options"),
        (
            ("--set", "demo.set", "--provider", "one", "--provider", "nobody"),
            "Error: no stored run of set 'demo.set' on provider instance 'nobody'",
        ),
        (("nope", "nada"), "Error: no stored run 'nope'; list runs with evalkit report"),
    ],
)
def test_bad_requests_exit_2_with_one_error_line(
    cli: Any, two_providers: dict[str, RunResult], args: tuple[str, ...], message: str
) -> None:
    result = cli("compare", *args)
    assert result.exit_code == 2
    assert result.stderr.strip() == message
    assert result.stdout == ""
    assert result.exception is None


def test_without_a_database(cli: Any, db_file: Path) -> None:
    result = cli("compare", "a", "b")
    assert result.exit_code == 2
    assert result.stderr.strip() == f"Error: no stored runs: the database {db_file} does not exist yet"
    assert not db_file.exists()


def test_runs_stored_without_items_cannot_be_compared(cli: Any, db_file: Path) -> None:
    first, second = make_run(FIRST), make_run(SECOND)
    store_runs(db_file, first, second, privacy="none")
    result = cli("compare", first.run_id, second.run_id)
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"Error: run {first.run_id} has no stored items (privacy none); "
        "compare needs runs stored at privacy metadata or above"
    )
