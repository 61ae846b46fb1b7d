"""``run --batch`` and ``evalkit collect`` (README "Batches") against a loopback server of both
providers' batch APIs: submit, wait or not, collect exactly like ``run``, once; errors of the
batch as item errors; the batch price and its saving; the cache; a submit and a collect in two
processes with the database carried between them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.batchserver import BatchServer, Script
from tests.conftest import REPO

SET = """
id: shop.batch
name: Batched
prompts:
  - {id: hours, prompt: opening hours, assertions: [{contains: hours}]}
  - {id: refund.policy, prompt: refund policy, assertions: [{contains: refund}]}
  - {id: faq 3, prompt: delivery, assertions: [{contains: delivery}]}
"""


@pytest.fixture
def project(write_file: Any, batch_server: BatchServer) -> BatchServer:
    """evalkit.yaml with an openai instance (priced) and an anthropic instance on the batch
    server, a short poll interval, and the three-prompt set."""
    write_file("s.yaml", SET)
    write_file(
        "evalkit.yaml",
        f"""
        default_provider: oa
        batch_poll_s: 0.01
        providers:
          - id: oa
            adapter: openai
            model: gpt-x
            base_url: {batch_server.url}
            max_retries: 0
            cost: {{input_per_mtok: 2.0, output_per_mtok: 8.0}}
          - id: an
            adapter: anthropic
            model: claude-x
            base_url: {batch_server.url}
            max_retries: 0
            cost: {{input_per_mtok: 3.0, output_per_mtok: 15.0, batch_discount: 0.4}}
        """,
    )
    return batch_server


def stored_runs(db: Path) -> list[tuple[str, str, int]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute("select set_id, provider, item_count from runs order by started_at").fetchall()


def batch_states(db: Path) -> list[str]:
    with duckdb.connect(str(db), read_only=True) as con:
        return [r[0] for r in con.execute("select state from batches order by submitted_at").fetchall()]


@pytest.mark.parametrize(
    ("provider", "standard", "discount"),
    [("oa", 3 * (10 * 2 + 5 * 8) / 1e6, 0.5), ("an", 3 * (12 * 3 + 7 * 15) / 1e6, 0.4)],
)
def test_run_batch_waits_grades_stores_and_prices_at_the_batch_discount(
    cli: Any, project: BatchServer, db_file: Path, provider: str, standard: float, discount: float
) -> None:
    project.script = Script(in_progress_polls=2)
    result = cli("run", "s.yaml", "--batch", "--provider", provider, "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert [(i["id"], i["passed"], i["error"]) for i in doc["items"]] == [
        ("hours", True, None), ("refund.policy", True, None), ("faq 3", True, None),
    ]  # fmt: skip
    assert doc["generator"]["reported_model"].endswith("-2026")
    assert doc["comparison"]["state"] == "baseline"
    assert doc["cost"] == pytest.approx(standard * discount)
    assert doc["batch"]["discount"] == discount
    assert doc["batch"]["standard_cost"] == pytest.approx(standard)
    assert doc["batch"]["saving"] == pytest.approx(standard * (1 - discount))
    assert doc["batch"]["batch_ids"] == list(project.batches)
    assert "Submitted batch" in result.stderr
    assert "0/3 requests done (submitted), 0 s" in result.stderr  # progress while it waited
    assert stored_runs(db_file) == [("shop.batch", provider, 3)]
    assert batch_states(db_file) == ["collected"]
    shown = cli("show", doc["run_id"], "--format", "json")
    assert json.loads(shown.stdout)["batch"] == doc["batch"]  # kept with the run


def test_the_table_shows_the_batch_price_and_the_saving(cli: Any, project: BatchServer) -> None:
    result = cli("run", "s.yaml", "--batch")
    assert result.exit_code == 0, result.stderr
    assert "batch price ×0.5, saving $0.000090 of the standard $0.00018" in result.stdout


def test_no_wait_submits_and_collect_finishes_the_run_once(cli: Any, project: BatchServer, db_file: Path) -> None:
    submitted = cli("run", "s.yaml", "--batch", "--no-wait")
    assert submitted.exit_code == 0, submitted.stderr
    assert "submitted: collect with `evalkit collect`" in submitted.stderr
    assert submitted.stdout == ""
    assert stored_runs(db_file) == []
    assert json.loads(cli("report", "--format", "json").stdout)["runs"] == []  # a pending batch is no graded run
    collected = cli("collect", "--format", "json")
    assert collected.exit_code == 0, collected.stderr
    assert json.loads(collected.stdout)["passed_count"] == 3
    assert stored_runs(db_file) == [("shop.batch", "oa", 3)]
    again = cli("collect")
    assert (again.exit_code, again.stderr.strip()) == (0, f"No pending batch in {db_file}: nothing to collect.")
    (batch_id,) = project.batches
    named = cli("collect", batch_id)
    assert named.exit_code == 0
    assert f"Batch {batch_id} was collected before (" in named.stderr
    assert stored_runs(db_file) == [("shop.batch", "oa", 3)]  # stored once


def test_a_batch_in_progress_is_reported_and_left_pending(cli: Any, project: BatchServer, db_file: Path) -> None:
    project.hold.set()
    assert cli("run", "s.yaml", "--batch", "--no-wait").exit_code == 0
    (batch_id,) = project.batches
    result = cli("collect")
    assert result.exit_code == 0
    assert f"Batch {batch_id}: still in progress (1/3 requests done); it stays pending" in result.stderr
    assert batch_states(db_file) == ["pending"]
    waited = cli("collect", "--wait", "--max-wait", "1s", "--poll-interval", "0.2", "--fail-on-regression")
    assert waited.exit_code == 3  # a gate was asked for: no verdict yet
    assert batch_states(db_file) == ["pending"]
    project.hold.clear()
    done = cli("collect", batch_id, "--fail-on-regression")
    assert done.exit_code == 0, done.stderr
    assert batch_states(db_file) == ["collected"]


@pytest.mark.parametrize(("gate", "code"), [((), 0), (("--min-pass-rate", "0.5"), 3)])
def test_run_batch_max_wait_leaves_the_batch_pending(
    cli: Any, project: BatchServer, db_file: Path, gate: tuple[str, ...], code: int
) -> None:
    project.hold.set()
    result = cli("run", "s.yaml", "--batch", "--max-wait", "1s", "--poll-interval", "0.2", *gate)
    assert result.exit_code == code
    assert "it stays pending: collect it later with `evalkit collect batch_" in result.stderr
    assert batch_states(db_file) == ["pending"]
    assert stored_runs(db_file) == []


@pytest.mark.parametrize("provider", ["oa", "an"])
def test_refused_requests_are_item_errors(cli: Any, project: BatchServer, provider: str) -> None:
    project.script = Script(refuse=frozenset({"refund_policy-"}))  # no custom id is refused by that name ...
    assert cli("run", "s.yaml", "--batch", "--no-wait", "--provider", provider).exit_code == 0
    (batch,) = project.batches.values()
    refused = next(r["custom_id"] for r in batch.requests if r["custom_id"].startswith("refund_policy-"))
    batch.script = Script(refuse=frozenset({refused}))  # ... the mapped id of 'refund.policy' is
    result = cli("collect", "--format", "json")
    assert result.exit_code == 3
    items = {i["id"]: i for i in json.loads(result.stdout)["items"]}
    assert items["refund.policy"]["error"] == f"provider '{provider}': batch request refused (" + (
        "HTTP 400: the prompt was refused)" if provider == "oa" else "the prompt was refused)"
    )
    assert [items[k]["passed"] for k in ("hours", "faq 3")] == [True, True]
    assert "1 of 3 items errored" in result.stderr


@pytest.mark.parametrize(
    ("provider", "outcome", "word"), [("oa", "expired", "expired"), ("an", "cancelled", "canceled")]
)
def test_an_expired_or_cancelled_batchs_missing_answers_are_item_errors(
    cli: Any, project: BatchServer, provider: str, outcome: str, word: str
) -> None:
    project.script = Script(outcome=outcome, answered=1)
    result = cli("run", "s.yaml", "--batch", "--provider", provider, "--format", "json")
    assert result.exit_code == 3
    errors = [i["error"] for i in json.loads(result.stdout)["items"]]
    assert errors[0] is None
    assert all(e is not None and word in e for e in errors[1:]), errors


def test_answers_enter_the_cache_and_cached_requests_are_not_sent(
    cli: Any, project: BatchServer, write_file: Any
) -> None:
    assert cli("run", "s.yaml", "--batch").exit_code == 0
    again = cli("run", "s.yaml", "--batch", "--format", "json")
    assert again.exit_code == 0
    assert "Every answer is in the cache: no batch was needed." in again.stderr
    doc = json.loads(again.stdout)
    assert doc["cached_count"] == 3
    assert doc["generator"]["reported_model"] == "gpt-x-2026"  # replayed with its serving record
    assert len(project.batches) == 1
    write_file("s.yaml", SET + "  - {id: new, prompt: fresh question, assertions: [{contains: fresh}]}\n")
    third = cli("run", "s.yaml", "--batch", "--format", "json")
    assert third.exit_code == 0, third.stderr
    newest = list(project.batches.values())[-1]
    assert [r["custom_id"] for r in newest.requests] == ["new"]  # only the uncached request was sent
    assert json.loads(third.stdout)["cached_count"] == 3


def test_a_large_run_is_split_at_the_providers_limits(
    cli: Any, project: BatchServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalkit.providers import batches

    monkeypatch.setitem(batches.LIMITS, "openai", (2, 200 * 1024 * 1024))
    result = cli("run", "s.yaml", "--batch", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert [len(b.requests) for b in project.batches.values()] == [2, 1]
    doc = json.loads(result.stdout)
    assert doc["passed_count"] == 3
    assert doc["batch"]["batch_ids"] == list(project.batches)


def test_a_set_changed_since_submit_is_refused_at_collect(cli: Any, project: BatchServer, write_file: Any) -> None:
    assert cli("run", "s.yaml", "--batch", "--no-wait").exit_code == 0
    write_file("s.yaml", SET.replace("opening hours", "closing hours"))
    result = cli("collect")
    assert result.exit_code == 2
    assert "s.yaml: the set changed since batch batch_" in result.stderr


def test_batch_needs_an_openai_or_anthropic_instance(cli: Any, project: BatchServer, write_file: Any) -> None:
    write_file(
        "answers.jsonl", "".join(f'{{"id": "{p}", "response": "x"}}\n' for p in ("hours", "refund.policy", "faq 3"))
    )
    config = Path("evalkit.yaml").read_text()
    write_file("evalkit.yaml", config + "  - {id: rec, adapter: replay, path: answers.jsonl}\n")
    result = cli("run", "s.yaml", "--batch", "--provider", "rec")
    assert result.exit_code == 2
    assert "provider 'rec' uses the replay adapter; provider batches exist for openai and anthropic" in result.stderr
    assert project.paths == []


@pytest.mark.parametrize("option", [("--no-wait",), ("--max-wait", "10m"), ("--poll-interval", "5")])
def test_wait_options_go_with_batch(cli: Any, project: BatchServer, option: tuple[str, ...]) -> None:
    result = cli("run", "s.yaml", *option)
    assert result.exit_code == 2
    assert "--no-wait, --max-wait and --poll-interval go with --batch" in result.stderr


@pytest.mark.parametrize("value", ["soon", "10d", "-5m", "0s"])
def test_max_wait_takes_seconds_minutes_or_hours(cli: Any, project: BatchServer, value: str) -> None:
    result = cli("run", "s.yaml", "--batch", "--max-wait", value)
    assert result.exit_code == 2
    assert "is not a duration: write it as 90s, 10m or 2h" in result.stderr
    assert project.paths == []


def test_collect_of_an_unknown_batch_is_exit_2(cli: Any, project: BatchServer) -> None:
    assert cli("run", "s.yaml", "--batch", "--no-wait").exit_code == 0
    result = cli("collect", "batch_nope")
    assert result.exit_code == 2
    assert "no batch batch_nope in" in result.stderr


def test_ctrl_c_while_waiting_leaves_the_batch_pending(
    cli: Any, project: BatchServer, db_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.hold.set()

    def interrupt(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("time.sleep", interrupt)
    result = cli("run", "s.yaml", "--batch")
    assert result.exit_code == 130
    (batch_id,) = project.batches
    assert f"the batch stays pending; collect it with `evalkit collect {batch_id}`" in result.stderr
    assert batch_states(db_file) == ["pending"]


@pytest.mark.slow
def test_submit_in_one_process_collect_in_another_with_the_database_carried(
    project: BatchServer, tmp_path: Path, isolated: Path
) -> None:
    """Two CI jobs: the first submits and uploads its database; the second downloads it and collects."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    first_db, second_db = tmp_path / "job1" / "evalkit.duckdb", tmp_path / "job2" / "evalkit.duckdb"

    def evalkit(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "evalkit", *args, "--db", str(db)],
            cwd=isolated, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    project.script = Script(in_progress_polls=1)
    first_db.parent.mkdir()
    submitted = evalkit("run", "s.yaml", "--batch", "--no-wait", "--provider", "an", db=first_db)
    assert submitted.returncode == 0, submitted.stderr
    second_db.parent.mkdir()
    shutil.copy(first_db, second_db)  # the artifact
    early = evalkit("collect", db=second_db)
    assert early.returncode == 0
    assert "still in progress" in early.stderr
    collected = evalkit("collect", "--format", "json", "--fail-on-regression", db=second_db)
    assert collected.returncode == 0, collected.stderr
    doc = json.loads(collected.stdout)
    assert (doc["passed_count"], doc["comparison"]["state"], doc["gate"]["passed"]) == (3, "baseline", True)
    assert stored_runs(second_db) == [("shop.batch", "an", 3)]
    assert evalkit("collect", db=second_db).stderr.startswith("No pending batch")


def test_repeats_are_sent_and_answered_each(cli: Any, project: BatchServer) -> None:
    result = cli("run", "s.yaml", "--batch", "--repeat", "2", "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert (doc["sample_count"], doc["passed_count"]) == (6, 6)
    (batch,) = project.batches.values()
    ids = [r["custom_id"] for r in batch.requests]
    assert len(set(ids)) == 6
    assert {"hours", "hours__r1"} <= set(ids)


def test_batch_discount_is_a_share_of_the_price(cli: Any, project: BatchServer) -> None:
    config = Path("evalkit.yaml").read_text().replace("batch_discount: 0.4", "batch_discount: 1.5")
    Path("evalkit.yaml").write_text(config)
    result = cli("validate", "evalkit.yaml")
    assert result.exit_code == 2
    assert "batch_discount" in result.stdout + result.stderr


def test_a_failed_batch_makes_every_request_an_item_error(cli: Any, project: BatchServer) -> None:
    project.script = Script(outcome="failed")
    result = cli("run", "s.yaml", "--batch", "--format", "json")
    assert result.exit_code == 3
    (batch_id,) = project.batches
    errors = {i["error"] for i in json.loads(result.stdout)["items"]}
    assert errors == {f"provider 'oa': batch {batch_id} failed: the file is malformed"}


def test_a_submit_refused_half_way_keeps_what_was_sent_pending(
    cli: Any, project: BatchServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalkit.providers import batches

    monkeypatch.setitem(batches.LIMITS, "openai", (2, 200 * 1024 * 1024))
    project.max_batches = 1
    result = cli("run", "s.yaml", "--batch")
    assert result.exit_code == 3
    (batch_id,) = project.batches
    assert "Enqueued token limit reached for gpt-x" in result.stderr
    assert f"the batches sent before it stay pending: evalkit collect {batch_id}" in result.stderr
    collected = cli("collect", "--format", "json")
    assert collected.exit_code == 3
    items = {i["id"]: i["error"] for i in json.loads(collected.stdout)["items"]}
    assert items["hours"] is None
    assert items["refund.policy"] is None
    assert "no answer in the batch for this request" in items["faq 3"]  # never a call of its own
