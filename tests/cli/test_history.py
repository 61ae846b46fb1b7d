"""`evalkit report`, `show` and `prune` on a real history."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalkit.records import ServingRecord
from evalkit.store import Store, save_run
from tests.conftest import write, wrong_answers
from tests.factories import fake_project, run_json, run_of
from tests.fakeserver import FakeServer


@pytest.fixture
def history(db_file: Path) -> list:
    runs = [
        run_of(4, 4, set_id="hist.a", started_at="2026-11-01T10:00:00+00:00"),
        run_of(3, 4, set_id="hist.a", started_at="2026-11-02T10:00:00+00:00"),
        run_of(1, 4, set_id="hist.a", started_at="2026-11-03T10:00:00+00:00"),
        run_of(2, 2, set_id="hist.b", started_at="2026-11-02T11:00:00+00:00"),
    ]
    with Store.open(db_file) as store:
        for run in runs:
            save_run(store, run, "metadata", "test")
    return runs


def test_report_on_a_missing_database_is_empty(cli) -> None:
    result = cli("report", "--format", "json")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {"runs": []}
    table = cli("report")
    assert table.exit_code == 0
    assert "No stored runs yet" in table.stdout


def test_report_json_lists_runs_newest_first(cli, history) -> None:
    result = cli("report", "--format", "json")
    assert result.exit_code == 0
    runs = json.loads(result.stdout)["runs"]
    assert [r["run_id"] for r in runs] == [history[2].run_id, history[3].run_id, history[1].run_id, history[0].run_id]
    assert set(runs[0]) == {
        "run_id", "set", "kind", "grader", "provider", "model", "reported_model", "pass_rate", "mean_score",
        "item_count", "error_count", "started_at", "comparison_state", "regressed",
    }  # fmt: skip
    assert runs[0]["set"] == "hist.a"
    assert runs[0]["pass_rate"] == 0.25


def test_report_filters(cli, history) -> None:
    one = json.loads(cli("report", "hist.a", "--format", "json", "--limit", "2").stdout)["runs"]
    assert [r["run_id"] for r in one] == [history[2].run_id, history[1].run_id]
    assert json.loads(cli("report", "--provider", "nobody", "--format", "json").stdout) == {"runs": []}
    assert len(json.loads(cli("report", "--grader", "deterministic", "--format", "json").stdout)["runs"]) == 4
    assert len(json.loads(cli("report", "--model", "alias-1", "--format", "json").stdout)["runs"]) == 4


def test_report_table_per_set_with_trend(cli, history) -> None:
    result = cli("report")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    row_a = next(line for line in lines if line.startswith("hist.a"))
    assert history[2].run_id in row_a
    assert "25.0%" in row_a
    assert "█▆▃" in row_a  # 100% -> 75% -> 25%
    assert any(line.startswith("hist.b") for line in lines)


def test_report_markdown_for_a_ci_comment(cli, history) -> None:
    result = cli("report", "--format", "markdown")
    assert result.exit_code == 0
    assert result.stdout.startswith("| set | latest run | pass rate | mean | trend | verdict |")
    assert f"| hist.a | `{history[2].run_id}` | 25.0% |" in result.stdout
    one = cli("report", "hist.a", "--format", "markdown")
    assert one.stdout.startswith("### hist.a")


def test_show_formats(cli, history) -> None:
    run = history[1]
    table = cli("show", run.run_id)
    assert table.exit_code == 0
    assert run.run_id in table.stdout
    assert "Pass rate 75.0% (3/4)" in table.stdout
    doc = json.loads(cli("show", run.run_id, "--format", "json").stdout)
    assert (doc["run_id"], doc["set"], doc["passed_count"], doc["prompt_count"]) == (run.run_id, "hist.a", 3, 4)
    assert [i["passed"] for i in doc["items"]] == [True, True, True, False]
    assert doc["generator"] == {"provider": "fake", "model": "alias-1", "reported_model": "model-1"}
    markdown = cli("show", run.run_id, "--format", "markdown")
    assert markdown.stdout.startswith(f"### hist.a · run `{run.run_id}`")


def test_show_unknown_run(cli, history) -> None:
    result = cli("show", "nope")
    assert result.exit_code == 2
    assert result.stderr.strip() == "Error: no stored run 'nope'; list runs with evalkit report"


def test_show_of_a_run_printed_by_run_matches(cli, fake_config, fake_llm: FakeServer, write_file) -> None:
    write_file(
        "sets/s.yaml", "id: show.s\nname: S\nprompts:\n  - {id: a, prompt: hi, assertions: [{contains: echo}]}\n"
    )
    printed = json.loads(cli("run", "sets/s.yaml", "--format", "json").stdout)
    shown = json.loads(cli("show", printed["run_id"], "--format", "json").stdout)
    for key in ("run_id", "set", "kind", "grader", "generator", "prompt_count", "passed_count", "error_count",
                "pass_rate", "mean_score", "comparison", "gate"):  # fmt: skip
        assert shown[key] == printed[key], key
    assert [{k: i[k] for k in ("id", "passed", "score", "assertions")} for i in shown["items"]] == [
        {k: i[k] for k in ("id", "passed", "score", "assertions")} for i in printed["items"]
    ]


@pytest.mark.parametrize("days", ["0", "-3", "abc", "1.5"])
def test_prune_needs_a_positive_integer(cli, history, days: str) -> None:
    result = cli("prune", "--older-than", days)
    assert result.exit_code == 2


def test_prune_deletes_old_runs(cli, db_file: Path) -> None:
    with Store.open(db_file) as store:
        save_run(store, run_of(1, 2, started_at="2020-01-01T00:00:00+00:00"), "metadata", "test")
        save_run(store, run_of(1, 2), "metadata", "test")
    result = cli("prune", "--older-than", "30")
    assert result.exit_code == 0
    assert result.stdout.startswith("Deleted 1 run and 0 cache entries older than 30 days.")
    assert len(json.loads(cli("report", "--format", "json").stdout)["runs"]) == 1


def test_prune_uses_retention_days(cli, db_file: Path, isolated: Path) -> None:
    write(isolated / "evalkit.yaml", "retention_days: 5000\n")
    with Store.open(db_file) as store:
        save_run(store, run_of(1, 2, started_at="2020-01-01T00:00:00+00:00"), "metadata", "test")
    result = cli("prune")
    assert result.stdout.startswith("Deleted 0 runs")


@pytest.mark.parametrize("days", ["1000000", "99999999999"])
def test_prune_with_an_age_past_the_year_1_deletes_nothing(cli, db_file: Path, isolated: Path, days: str) -> None:
    with Store.open(db_file) as store:
        save_run(store, run_of(1, 2, started_at="2020-01-01T00:00:00+00:00"), "metadata", "test")
    result = cli("prune", "--older-than", days)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Deleted 0 runs and 0 cache entries")
    write(isolated / "evalkit.yaml", f"retention_days: {days}\n")  # the same through the config
    assert cli("prune").stdout.startswith("Deleted 0 runs and 0 cache entries")
    assert len(json.loads(cli("report", "--format", "json").stdout)["runs"]) == 1


def test_the_trend_follows_the_latest_runs_instance_not_the_whole_matrix(cli, db_file: Path) -> None:
    # a prompts x providers matrix: instance a always passes, b always fails, stored alternately
    a, b = ServingRecord("a", "alias-a", "model-a"), ServingRecord("b", "alias-b", "model-b")
    with Store.open(db_file) as store:
        for minute in range(3):
            for offset, (serving, passed) in enumerate(((b, 0), (a, 2))):
                stamp = f"2026-11-30T12:0{minute}:0{offset}.000+00:00"
                save_run(store, run_of(passed, 2, serving=serving, started_at=stamp), "metadata", "test")
    table = cli("report").stdout
    assert "a/alias-a" in table
    assert "███" in table
    assert "▁" not in table


def test_report_of_a_set_says_which_runs_regressed(cli, isolated: Path, fake_llm: FakeServer) -> None:
    lines = "".join(f"  - {{id: q{i}, prompt: 'question {i}', assertions: [{{contains: right}}]}}\n" for i in range(4))
    project = wrong_answers(isolated, fake_llm, "sets/v.yaml", f"id: hist.v\nname: Verdicts\nprompts:\n{lines}")
    assert cli("run", "sets/v.yaml", "--no-cache").exit_code == 0  # the baseline
    assert cli("run", "sets/v.yaml", "--no-cache").exit_code == 0  # compared: no regression
    project.wrong = {0, 1}  # type: ignore[attr-defined]
    assert cli("run", "sets/v.yaml", "--no-cache", "--fail-on-regression").exit_code == 1  # regressed
    runs = json.loads(cli("report", "hist.v", "--format", "json").stdout)["runs"]
    assert [(r["comparison_state"], r["regressed"]) for r in runs] == [
        ("compared", True), ("compared", False), ("baseline", False),
    ]  # fmt: skip
    table = cli("report", "hist.v")
    verdicts = [
        line.split("│")[-1].strip()
        for line in table.stdout.splitlines()
        if line.startswith(tuple(r["run_id"] for r in runs))
    ]
    assert verdicts == ["regressed", "no regression", "baseline"]
    markdown = cli("report", "hist.v", "--format", "markdown").stdout.splitlines()
    assert [line.rsplit("|", 2)[-2].strip() for line in markdown if line.startswith("| `")] == [
        "**regressed**", "no regression", "baseline",
    ]  # fmt: skip


# --- show says which privacy level would keep the answers ------------------------------------------


@pytest.mark.parametrize(
    ("level", "hint"),
    [
        (
            "metadata",
            "No answers shown: this run was stored at privacy 'metadata' (no prompt or answer text). Set privacy: "
            "redacted (texts with secrets masked) or privacy: full in evalkit.yaml to keep them in later runs.",
        ),
        (
            "none",
            "No items shown: this run was stored at privacy 'none' (aggregates only). Set privacy: metadata in "
            "evalkit.yaml to keep per-item verdicts in later runs, or redacted / full to keep the answers too.",
        ),
    ],
)
def test_show_says_which_privacy_level_would_keep_the_answers(
    cli: Any, write_file: Any, fake_llm: FakeServer, level: str, hint: str
) -> None:
    fake_project(write_file, fake_llm, f"privacy: {level}")
    run_id = run_json(cli, "sets/one.yaml")["run_id"]
    table = cli("show", run_id)
    assert table.exit_code == 0, table.stderr
    assert " ".join(table.stdout.split()).endswith(hint)
    as_json = cli("show", run_id, "--format", "json")
    assert as_json.exit_code == 0
    json.loads(as_json.stdout)  # stdout stays one JSON document; the note goes to stderr
    assert as_json.stderr == f"Note: {hint}\n"


def test_show_of_a_full_run_has_no_privacy_note(cli: Any, write_file: Any, fake_llm: FakeServer) -> None:
    fake_project(write_file, fake_llm, "privacy: full")
    run_id = run_json(cli, "sets/one.yaml")["run_id"]
    for fmt in ("table", "json"):
        result = cli("show", run_id, "--format", fmt)
        assert result.exit_code == 0
        assert "privacy" not in result.stdout.replace('"privacy"', "")
        assert result.stderr == ""
