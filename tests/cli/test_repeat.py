"""`evalkit run --repeat N` and `--significance ALPHA` end to end against the fake server:
per-prompt pass@N / pass^N / flaky, the aggregate's interval, the cache per repeat index, and
the paired test deciding the gate."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pytest
import scipy.stats

from evalkit import stats
from tests.conftest import write, wrong_answers
from tests.fakeserver import FakeServer, Recorded, Reply, last_user_message, openai_reply

PROMPTS = ("always", "never", "flaky")


@pytest.fixture
def project(isolated: Path, fake_llm: FakeServer) -> FakeServer:
    """Three prompts: 'always' is answered right, 'never' wrong, 'flaky' right on every odd call."""
    write(
        isolated / "sets/rep.yaml",
        "id: rep.set\nname: Repeats\nprompts:\n"
        + "".join(f"  - {{id: {p}, prompt: 'question {p}', assertions: [{{contains: right}}]}}\n" for p in PROMPTS),
    )
    write(
        isolated / "evalkit.yaml",
        f"""
        default_provider: fake
        providers:
          - id: fake
            adapter: openai
            base_url: {fake_llm.url}/v1
            model: alias-1
            max_retries: 0
        """,
    )
    calls: Counter[str] = Counter()

    def answer(request: Recorded) -> Reply:
        name = last_user_message(request).split()[-1]
        calls[name] += 1
        right = name == "always" or (name == "flaky" and calls[name] % 2 == 1)
        return openai_reply("right" if right else "wrong", model="model-1")

    fake_llm.handler = answer
    return fake_llm


def run_json(cli: Any, *args: str) -> tuple[Any, Any]:
    result = cli("run", "sets/rep.yaml", "--format", "json", *args)
    return result, json.loads(result.stdout) if result.stdout.strip() else None


def table_rows(stdout: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.split("│")] for line in stdout.splitlines() if "│" in line]


def test_json_reports_pass_at_n_pass_all_and_flaky_per_prompt(cli: Any, project: FakeServer) -> None:
    result, doc = run_json(cli, "--repeat", "3")
    assert result.exit_code == 0, result.stderr
    assert project.calls == 9
    assert (doc["repeats"], doc["prompt_count"], doc["sample_count"], doc["passed_count"]) == (3, 3, 9, 5)
    assert doc["pass_rate"] == pytest.approx(5 / 9)  # the mean over every repeat
    assert doc["prompts"] == [
        {"id": "always", "samples": 3, "passed": 3, "pass_rate": 1.0, "mean_score": 1.0,
         "pass_at_n": True, "pass_all": True, "flaky": False},
        {"id": "never", "samples": 3, "passed": 0, "pass_rate": 0.0, "mean_score": 0.0,
         "pass_at_n": False, "pass_all": False, "flaky": False},
        {"id": "flaky", "samples": 3, "passed": 2, "pass_rate": pytest.approx(2 / 3),
         "mean_score": pytest.approx(2 / 3), "pass_at_n": True, "pass_all": False, "flaky": True},
    ]  # fmt: skip
    assert doc["pass_at_n_rate"] == pytest.approx(2 / 3)
    assert doc["pass_all_rate"] == pytest.approx(1 / 3)
    assert doc["flaky_count"] == 1
    # the 95% Clopper-Pearson interval of this set's pass rate over its 9 samples, as scipy has it
    interval = stats.clopper_pearson(5, 9)
    assert doc["pass_rate_ci95"] == [interval.low, interval.high]
    exact = scipy.stats.binomtest(5, 9).proportion_ci(0.95, method="exact")
    assert doc["pass_rate_ci95"] == [pytest.approx(exact.low, abs=1e-12), pytest.approx(exact.high, abs=1e-12)]
    assert interval.low < 5 / 9 < interval.high
    assert sorted((i["id"], i["repeat"]) for i in doc["items"]) == sorted((p, r) for p in PROMPTS for r in range(3))


@pytest.mark.slow
def test_table_shows_the_repeat_columns_and_the_interval(cli: Any, project: FakeServer) -> None:
    result = cli("run", "sets/rep.yaml", "--repeat", "3")
    assert result.exit_code == 0, result.stderr
    header = next(line for line in result.stdout.splitlines() if "┃" in line)
    assert [cell.strip() for cell in header.split("┃")] == [
        "prompt", "pass@3", "pass^3", "passed", "flaky", "mean score", "a failure",
    ]  # fmt: skip
    assert table_rows(result.stdout) == [
        ["always", "yes", "yes", "3/3", "", "1.00", ""],
        ["never", "no", "no", "0/3", "", "0.00", "assertion failed: contains 'right': not found"],
        ["flaky", "yes", "no", "2/3", "flaky", "0.67", "assertion failed: contains 'right': not found"],
    ]
    interval = stats.clopper_pearson(5, 9)
    assert (
        f"Over 3 repeats: pass rate 55.6% (95% CI {interval.low * 100:.1f}% … {interval.high * 100:.1f}%) · "
        "pass@3 66.7% · pass^3 33.3% · flaky prompts 1"
    ) in result.stdout
    assert "Pass rate 55.6% (5/9)" in result.stdout


@pytest.mark.slow
def test_samples_are_stored_with_their_repeat_index(cli: Any, project: FakeServer, db_file: Path) -> None:
    result, doc = run_json(cli, "--repeat", "3")
    assert result.exit_code == 0
    con = duckdb.connect(str(db_file), read_only=True)
    try:
        assert con.execute("select run_id, repeats, item_count, passed_count from runs").fetchall() == [
            (doc["run_id"], 3, 9, 5)
        ]
        rows = con.execute("select item_id, repeat_index from results order by item_index").fetchall()
    finally:
        con.close()
    assert sorted(rows) == sorted((p, r) for p in PROMPTS for r in range(3))


@pytest.mark.slow
def test_cache_is_keyed_per_repeat_index(cli: Any, project: FakeServer) -> None:
    result, first = run_json(cli, "--repeat", "3")
    assert (result.exit_code, project.calls) == (0, 9)
    assert not any(i.get("cached") for i in first["items"])

    result, again = run_json(cli, "--repeat", "3")
    assert result.exit_code == 0
    assert project.calls == 9  # every (prompt, repeat index) was cached
    assert all(i.get("cached") for i in again["items"])
    assert again["prompts"] == first["prompts"]  # replayed, not re-asked

    result, more = run_json(cli, "--repeat", "4")
    assert result.exit_code == 0
    assert project.calls == 12  # exactly one new call per prompt: repeat index 3
    assert sorted(last_user_message(r) for r in project.requests[9:]) == sorted(f"question {p}" for p in PROMPTS)
    fresh = sorted((i["id"], i["repeat"]) for i in more["items"] if not i.get("cached"))
    assert fresh == sorted((p, 3) for p in PROMPTS)


def test_a_plain_run_is_repeat_index_zero(cli: Any, project: FakeServer) -> None:
    assert run_json(cli)[0].exit_code == 0
    assert project.calls == 3
    assert run_json(cli, "--repeat", "2")[0].exit_code == 0
    assert project.calls == 6  # only repeat index 1 was new
    assert run_json(cli)[0].exit_code == 0
    assert project.calls == 6


def test_no_cache_asks_every_repeat_again(cli: Any, project: FakeServer) -> None:
    assert run_json(cli, "--repeat", "2")[0].exit_code == 0
    assert run_json(cli, "--repeat", "2", "--no-cache")[0].exit_code == 0
    assert project.calls == 12  # 3 prompts x 2 repeats, twice


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--repeat", "0"), "Invalid value for '--repeat'"),
        (("--significance", "typo"), "Invalid value for '--significance'"),
        (("--significance", "0"), "Error: --significance: must be a number between 0 and 1 (exclusive), got 0.0"),
        (("--significance", "1"), "Error: --significance: must be a number between 0 and 1 (exclusive), got 1.0"),
        (("--significance", "-0.05"), "Error: --significance: must be a number between 0 and 1 (exclusive)"),
        (("--significance", "nan"), "Error: --significance: must be a number between 0 and 1 (exclusive)"),
        (("--significance", "inf"), "Error: --significance: must be a number between 0 and 1 (exclusive)"),
    ],
)
def test_invalid_repeat_or_significance_exits_2_before_anything_runs(
    cli: Any, project: FakeServer, db_file: Path, args: tuple[str, ...], message: str
) -> None:
    result = cli("run", "sets/rep.yaml", *args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert result.exception is None
    assert project.calls == 0
    assert not db_file.exists()


# -- --significance against a baseline ----------------------------------------------------------


@pytest.fixture
def gate_project(isolated: Path, fake_llm: FakeServer) -> FakeServer:
    """Twenty prompts; ``fake_llm.wrong`` says which ones are answered wrong."""
    lines = "".join(f"  - {{id: q{i}, prompt: 'question {i}', assertions: [{{contains: right}}]}}\n" for i in range(20))
    return wrong_answers(isolated, fake_llm, "sets/sig.yaml", f"id: sig.set\nname: Significance\nprompts:\n{lines}")


STRICT = ("--max-pass-rate-drop", "0", "--max-mean-score-drop", "0", "--fail-on-regression", "--no-cache")


def gate_run(cli: Any, *args: str) -> tuple[Any, Any]:
    result = cli("run", "sets/sig.yaml", "--format", "json", *args)
    return result, json.loads(result.stdout) if result.stdout.strip() else None


@pytest.mark.slow
def test_an_insignificant_drop_passes_the_gate_and_says_so(cli: Any, gate_project: FakeServer) -> None:
    gate_project.wrong = {0, 1, 2}  # type: ignore[attr-defined]
    assert gate_run(cli, *STRICT)[1]["comparison"]["state"] == "baseline"  # 17/20
    # 16/20: four prompts lost, three gained. The control: without --significance, the gate fails
    gate_project.wrong = {3, 4, 5, 6}  # type: ignore[attr-defined]
    result, doc = gate_run(cli, *STRICT)
    assert result.exit_code == 1
    assert doc["comparison"]["reason"].startswith("Regression: pass rate dropped 5.0 pp")
    assert "paired_test" not in doc["comparison"]

    gate_project.wrong = {0, 1, 2}  # type: ignore[attr-defined]
    assert gate_run(cli, *STRICT)[0].exit_code == 0  # back to 17/20: the new baseline
    gate_project.wrong = {3, 4, 5, 6}  # type: ignore[attr-defined]
    result, doc = gate_run(cli, *STRICT, "--significance", "0.05")
    assert result.exit_code == 0
    comparison = doc["comparison"]
    assert (comparison["state"], comparison["regressed"], comparison["significance"]) == ("compared", False, 0.05)
    assert comparison["reason"].startswith(
        "Drop not significant: pass rate dropped 5.0 pp, beyond the tolerance of 0.0 pp"
    )
    assert "Paired test over 20 items: pass rate -5.0 pp (95% CI" in comparison["reason"]
    # one-sided McNemar: P(X >= 4 | 7 changed) = 0.5; only 7 of 7 failing (p = 1/128) would do
    assert comparison["reason"].endswith(
        "The drop is not significant at 0.05 (pass rate one-sided p = 0.500; a drop of at least 35.0 pp over "
        "the 20 paired items (7 of the 7 changed items failing now) would have been significant; mean score one-sided "
        "p = 0.500; with the same items changed, a mean-score drop of at least 0.350 would have been significant)."
    )
    assert "not a regression" not in comparison["reason"].lower()
    assert comparison["paired_test"]["pass_to_fail"] == 4
    assert comparison["paired_test"]["one_sided_p_value"] == 0.5
    assert doc["gate"] == {"fail_on_regression": True, "passed": True, "failures": []}


@pytest.mark.slow
def test_a_significant_drop_fails_the_gate(cli: Any, gate_project: FakeServer) -> None:
    assert gate_run(cli, *STRICT)[0].exit_code == 0
    gate_project.wrong = set(range(8))  # type: ignore[attr-defined]
    result, doc = gate_run(cli, *STRICT, "--significance", "0.05")
    assert result.exit_code == 1
    comparison = doc["comparison"]
    assert comparison["regressed"] is True
    # McNemar: 8 pass->fail, 0 fail->pass: two-sided p = 2 / 2**8, one-sided (a drop) 1 / 2**8
    assert comparison["paired_test"]["p_value"] == pytest.approx(2 / 256)
    assert comparison["paired_test"]["one_sided_p_value"] == pytest.approx(1 / 256)
    assert comparison["reason"].startswith("Regression: pass rate dropped 40.0 pp")
    assert "one-sided p = 0.004" in comparison["reason"]
    assert comparison["reason"].endswith(
        "Significant at 0.05 (pass rate one-sided p = 0.004; mean score one-sided p = 0.004)."
    )
    assert doc["gate"]["failures"] == [
        f"regression against the baseline (run {comparison['baseline_run_id']}): significant at 0.05 "
        "(one-sided paired test)"
    ]


@pytest.mark.slow
def test_significance_in_the_table(cli: Any, gate_project: FakeServer) -> None:
    gate_project.wrong = {0, 1, 2}  # type: ignore[attr-defined]
    assert gate_run(cli, *STRICT)[0].exit_code == 0
    gate_project.wrong = {3, 4, 5, 6}  # type: ignore[attr-defined]
    result = cli("run", "sets/sig.yaml", *STRICT, "--significance", "0.05")
    assert result.exit_code == 0
    assert "Drop not significant: pass rate dropped 5.0 pp" in result.stdout
    assert "The drop is not significant at 0.05 (pass rate one-sided p = 0.500;" in " ".join(result.stdout.split())
    assert "Gate: passed" in result.stdout


@pytest.mark.slow
def test_a_repeated_run_is_compared_with_the_paired_test(cli: Any, gate_project: FakeServer) -> None:
    assert gate_run(cli, "--no-cache")[0].exit_code == 0
    gate_project.wrong = set(range(10))  # type: ignore[attr-defined]
    result, doc = gate_run(cli, "--no-cache", "--repeat", "2")
    assert result.exit_code == 0  # no --fail-on-regression: reported, exit 0
    comparison = doc["comparison"]
    assert comparison["state"] == "compared"
    assert comparison["regressed"] is True
    paired = comparison["paired_test"]
    assert (paired["paired_items"], paired["pass_to_fail"], paired["fail_to_pass"]) == (20, 10, 0)
    assert paired["pass_rate_delta"] == pytest.approx(-0.5)
    assert "Paired test over 20 items: pass rate -50.0 pp" in comparison["reason"]
