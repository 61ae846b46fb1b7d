"""``run --batch`` batches the judge's calls too (README "Batches"): once a submission's answers
are in, the requests of its ``rubric`` and ``factuality`` assertions go as batches of their own,
and it is graded when those have ended. One loopback server speaks both providers' batch APIs and
their live endpoints; its answers are the scripted judge's (tests/judgeserver.py) for a judge's
request, an echo for a prompt's, so a batched run and a live run see the same answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.batchserver import BatchServer, Script
from tests.conftest import REPO
from tests.judgeserver import judge_or_echo

SET = """
id: shop.judged
name: Judged
prompts:
  - id: hours
    prompt: opening hours
    assertions:
      - contains: hours
      - rubric: 'Names the "hours"'
  - id: refund
    prompt: refund policy
    reference: 'Says "refund" and "policy"'
    assertions:
      - rubric: 'Says "refund" and "weekend"'
      - {type: factuality, value: true}
  - id: plain
    prompt: delivery
    assertions: [{contains: delivery}]
"""
ANSWER = 3 * (10 * 2.0 + 5 * 8.0) / 1e6  # the three answers at oa's standard price
JUDGED = 3 * (12 * 3.0 + 7 * 15.0) / 1e6  # the three judge answers at jd's standard price


@pytest.fixture
def project(write_file: Any, batch_server: BatchServer) -> BatchServer:
    """An openai instance for the answers and an anthropic judge, both priced, on the server."""
    batch_server.answer = judge_or_echo
    url = batch_server.url
    write_file("s.yaml", SET)
    write_file(
        "evalkit.yaml",
        f"""
        default_provider: oa
        batch_poll_s: 0.01
        judge: {{provider: jd}}
        providers:
          - {{id: oa, adapter: openai, model: gpt-x, base_url: {url}, max_retries: 0,
              cost: {{input_per_mtok: 2.0, output_per_mtok: 8.0}}}}
          - {{id: jd, adapter: anthropic, model: claude-x, base_url: {url}, max_retries: 0,
              cost: {{input_per_mtok: 3.0, output_per_mtok: 15.0, batch_discount: 0.4}}}}
          - {{id: oj, adapter: openai, model: judge-x, base_url: {url}, max_retries: 0}}
        """,
    )
    return batch_server


def stored(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql).fetchall()


def verdicts(doc: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(i["id"], i["passed"], i["score"], i["reason"], i["error"], i["assertions"]) for i in doc["items"]]


def judge_requests(batch_server: BatchServer) -> list[dict[str, Any]]:
    """The judge's requests of every batch, as sent."""
    return [
        request
        for batch in batch_server.batches.values()
        for request in batch.requests
        if "Candidate response:" in json.dumps(request)
    ]


@pytest.mark.parametrize("provider", ["oa", "jd"])  # the answers on another instance than the judge, or on the judge
def test_run_batch_sends_the_judges_requests_as_a_batch_once_the_answers_are_in(
    cli: Any, project: BatchServer, db_file: Path, provider: str
) -> None:
    result = cli("run", "s.yaml", "--batch", "--provider", provider, "--format", "json")
    assert result.exit_code == 0, result.stderr
    answers_id, judge_id = project.batches
    assert [b.kind for b in project.batches.values()] == ["openai" if provider == "oa" else "anthropic", "anthropic"]
    assert len(project.batches[answers_id].requests) == 3
    judged = project.batches[judge_id].requests
    assert len(judged) == 3  # two rubrics and a factuality: the plain prompt asks no judge
    assert all(r["params"]["tool_choice"] == {"type": "tool", "name": "record_answer"} for r in judged)
    assert project.live == []  # no judge call was made live (nor a readiness probe)
    assert f"Submitted judge batch {judge_id}: 3 judge requests to 'jd'" in result.stderr
    doc = json.loads(result.stdout)
    assert doc["grader"] == "judged:jd:claude-x-2026"
    assert doc["batch"]["judge"]["batch_ids"] == [judge_id]
    assert stored(db_file, "select phase, state from batches order by submitted_at") == [
        ("answers", "collected"), ("judge", "collected"),
    ]  # fmt: skip

    live = cli("run", "s.yaml", "--provider", provider, "--no-cache", "--format", "json")
    assert live.exit_code == 0, live.stderr
    assert len(project.live) == 3 + 3 + 1  # the answers, the judgements and the judge's readiness probe
    assert verdicts(json.loads(live.stdout)) == verdicts(doc)
    hours, refund, plain = doc["items"]
    assert (hours["passed"], refund["passed"], plain["passed"]) == (True, False, True)
    assert "rubric level 2/4: gets wrong: weekend (below the threshold 0.6)" in refund["reason"]


def test_the_batch_saving_counts_the_judges_tokens_at_its_discount(
    cli: Any, project: BatchServer, db_file: Path
) -> None:
    result = cli("run", "s.yaml", "--batch")
    assert result.exit_code == 0, result.stderr
    assert "saving $0.00034 of the standard $0.00060 (the judge's batches included)" in result.stdout
    ((run_id,),) = stored(db_file, "select run_id from runs")
    doc = json.loads(cli("show", run_id, "--format", "json").stdout)
    assert doc["cost"] == pytest.approx(ANSWER * 0.5)
    assert doc["grader_cost"] == pytest.approx(JUDGED * 0.4)  # the judge priced at its own discount
    assert doc["judge"]["cost"] == pytest.approx(JUDGED * 0.4)
    judge_id = list(project.batches)[1]
    assert doc["batch"]["judge"] == {
        "batch_ids": [judge_id],
        "standard_cost": pytest.approx(JUDGED),
        "cost": pytest.approx(JUDGED * 0.4),
        "saving": pytest.approx(JUDGED * 0.6),
    }
    assert doc["batch"]["standard_cost"] == pytest.approx(ANSWER + JUDGED)
    assert doc["batch"]["saving"] == pytest.approx(ANSWER * 0.5 + JUDGED * 0.6)


def test_judge_requests_the_cache_answers_are_not_sent(cli: Any, project: BatchServer, write_file: Any) -> None:
    assert cli("run", "s.yaml", "--batch").exit_code == 0
    again = cli("run", "s.yaml", "--batch", "--format", "json")
    assert again.exit_code == 0, again.stderr
    assert "Every answer is in the cache: no batch was needed." in again.stderr
    assert json.loads(again.stdout)["judge"]["cached"] == 3
    assert len(project.batches) == 2
    # a new rubric on a cached answer: only its judge request goes, as a batch of its own
    write_file("s.yaml", SET.replace("'Names the \"hours\"'", "'Names the \"opening\" hours'"))
    third = cli("run", "s.yaml", "--batch", "--format", "json")
    assert third.exit_code == 0, third.stderr
    assert "only the judge's requests go as batches" in third.stderr
    newest = list(project.batches.values())[-1]
    assert len(project.batches) == 3
    assert [r["custom_id"] for r in newest.requests] == [newest.requests[0]["custom_id"]]
    assert 'Names the \\"opening\\" hours' in json.dumps(newest.requests[0])
    doc = json.loads(third.stdout)
    assert (doc["cached_count"], doc["judge"]["cached"], doc["judge"]["calls"]) == (3, 2, 3)
    assert doc["items"][0]["passed"] is True
    # a new prompt: its answer, then its judge request, the others cached
    write_file("s.yaml", SET + "  - {id: new, prompt: fresh news, assertions: [{rubric: 'Says \"fresh\"'}]}\n")
    fourth = cli("run", "s.yaml", "--batch", "--format", "json")
    assert fourth.exit_code == 0, fourth.stderr
    answers, judged = list(project.batches.values())[-2:]
    assert [r["custom_id"] for r in answers.requests] == ["new"]
    assert len(judged.requests) == 1
    assert json.loads(fourth.stdout)["items"][-1]["passed"] is True


@pytest.mark.parametrize(
    ("judge", "script", "why"),
    [
        (
            "jd",
            Script(outcome="expired", answered=1),
            "provider 'jd': the batch expired this request before answering it",
        ),
        ("oj", Script(outcome="failed"), "provider 'oj': batch {judge_id} failed: the file is malformed"),
    ],
)
def test_a_judge_request_the_batch_never_answered_is_a_failed_judgement(
    cli: Any, project: BatchServer, write_file: Any, judge: str, script: Script, why: str
) -> None:
    config = Path("evalkit.yaml").read_text().replace("judge: {provider: jd}", f"judge: {{provider: {judge}}}")
    write_file("evalkit.yaml", config)
    project.later = [Script(), script]  # the answers' batch completes, the judge's does not
    result = cli("run", "s.yaml", "--batch", "--format", "json")
    assert result.exit_code == 3, result.stderr
    judge_id = list(project.batches)[1]
    errors = [e for e in (i["error"] for i in json.loads(result.stdout)["items"]) if e]
    reason = why.format(judge_id=judge_id)
    assert len(errors) == (1 if judge == "jd" else 2)  # expired: one of three answered; failed: none
    assert all(reason in e and "judgement failed" in e for e in errors), errors
    assert project.live == []  # no plain-text retry was made as a call
    assert "items errored" in result.stderr


def test_a_decision_the_judge_batch_never_answered_fails_without_a_call(cli: Any, project: BatchServer) -> None:
    project.later = [Script(), Script(outcome="expired", answered=1)]  # one of three decisions answered
    result = cli("run", "s.yaml", "--batch", "--grader", "decision", "--judge", "jd", "--format", "json")
    assert result.exit_code == 0, result.stderr  # a failed decision fails its item, as in a live run
    doc = json.loads(result.stdout)
    assert doc["grader"] == "decision"  # some decisions failed: stored under no full yardstick
    reasons = [i["reason"] for i in doc["items"] if i["reason"].startswith("Decision failed")]
    assert len(reasons) == 2
    assert not any("retry" in r for r in reasons)
    assert all("provider 'jd': the batch expired this request before answering it" in r for r in reasons), reasons
    assert project.live == []  # no plain-text retry was made as a call


def test_an_unusable_batch_answer_is_asked_again_as_plain_text_in_a_call(cli: Any, project: BatchServer) -> None:
    asked: list[str] = []

    def unsure_once(text: str) -> str:
        if "Names the" in text and not asked:
            asked.append(text)
            return json.dumps({"verdict": "unsure"})  # valid JSON for the forced tool, but no level
        return judge_or_echo(text)

    project.answer = unsure_once
    result = cli("run", "s.yaml", "--batch", "--format", "json")
    assert result.exit_code == 0, result.stderr
    (retry,) = project.live  # the plain-text retry: a call, without the forced tool
    assert "tool_choice" not in retry
    assert "Names the" in retry["messages"][-1]["content"]
    doc = json.loads(result.stdout)
    assert doc["items"][0]["passed"] is True
    assert doc["judge"]["calls"] == 4


def test_ctrl_c_while_waiting_for_the_judges_batch_leaves_the_submission_pending(
    cli: Any, project: BatchServer, db_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.later = [Script(), Script(in_progress_polls=10_000)]

    def interrupt_once_judging(seconds: float) -> None:
        if len(project.batches) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr("time.sleep", interrupt_once_judging)
    result = cli("run", "s.yaml", "--batch")
    assert result.exit_code == 130
    answers_id = next(iter(project.batches))
    assert f"the batch stays pending; collect it with `evalkit collect {answers_id}`" in result.stderr
    assert stored(db_file, "select phase, state from batches order by submitted_at") == [
        ("answers", "pending"), ("judge", "pending"),
    ]  # fmt: skip


def test_the_wait_for_the_judges_batch_shares_max_wait_and_leaves_it_pending(
    cli: Any, project: BatchServer, db_file: Path
) -> None:
    project.later = [Script(), Script(in_progress_polls=10_000)]
    result = cli("run", "s.yaml", "--batch", "--max-wait", "1s", "--poll-interval", "0.2")
    assert result.exit_code == 0, result.stderr
    answers_id, judge_id = project.batches
    assert f"Submitted judge batch {judge_id}" in result.stderr
    assert (
        f"Batch {answers_id} {judge_id}: the answers are in, the judge's batches are in progress (0/3 judge "
        f"requests done); it stays pending: collect it later with `evalkit collect {answers_id} {judge_id}`"
    ) in result.stderr
    assert stored(db_file, "select state from batches") == [("pending",), ("pending",)]
    assert stored(db_file, "select count(*) from runs") == [(0,)]
    project.batches[judge_id].script = Script()
    done = cli("collect", judge_id, "--format", "json")
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)["passed_count"] == 2
    assert len(project.batches) == 2  # nothing sent twice


@pytest.mark.slow
def test_submit_collect_and_collect_again_in_three_processes(
    project: BatchServer, db_file: Path, isolated: Path
) -> None:
    """Three CI jobs on one database file: submit; the answers are in, so the judge's batch goes;
    the judge has answered, so the run is graded and stored, once."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def evalkit(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "evalkit", *args], cwd=isolated, env=env, capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip

    submitted = evalkit("run", "s.yaml", "--batch", "--no-wait")
    assert submitted.returncode == 0, submitted.stderr
    (answers_id,) = project.batches
    judging = evalkit("collect")
    assert judging.returncode == 0, judging.stderr
    judge_id = list(project.batches)[1]
    assert f"Submitted judge batch {judge_id}: 3 judge requests to 'jd'" in judging.stderr
    assert f"it stays pending: collect it later with `evalkit collect {answers_id} {judge_id}`" in judging.stderr
    assert judging.stdout == ""
    assert stored(db_file, "select phase, state from batches order by submitted_at") == [
        ("answers", "pending"), ("judge", "pending"),
    ]  # fmt: skip
    graded = evalkit("collect", "--format", "json")
    assert graded.returncode == 0, graded.stderr
    doc = json.loads(graded.stdout)
    assert (doc["passed_count"], doc["grader"], doc["batch"]["judge"]["batch_ids"]) == (
        2, "judged:jd:claude-x-2026", [judge_id],
    )  # fmt: skip
    assert project.live == []
    assert stored(db_file, "select count(*) from runs") == [(1,)]
    again = evalkit("collect", answers_id)
    assert f"Batch {answers_id} {judge_id} was collected before" in again.stderr
    assert stored(db_file, "select count(*) from runs") == [(1,)]
    assert len(project.batches) == 2


@pytest.mark.parametrize("judge", ["jd", "oj"])  # an anthropic judge (a forced tool), an openai one (logprobs)
def test_the_decision_graders_requests_go_as_a_judge_batch(
    cli: Any, project: BatchServer, db_file: Path, judge: str
) -> None:
    result = cli("run", "s.yaml", "--batch", "--grader", "decision", "--judge", judge, "--format", "json")
    assert result.exit_code == 0, result.stderr
    _, judge_id = project.batches
    assert [b.kind for b in project.batches.values()] == ["openai", "anthropic" if judge == "jd" else "openai"]
    assert len(project.batches[judge_id].requests) == 3  # every prompt is judged by the decision grader
    assert project.live == []  # no judgement made live, no readiness probe
    assert f"Submitted judge batch {judge_id}: 3 judge requests to '{judge}'" in result.stderr
    doc = json.loads(result.stdout)
    assert doc["grader"].startswith(f"decision:{judge}:")
    assert doc["batch"]["judge"]["batch_ids"] == [judge_id]
    if judge == "jd":  # priced: the decisions at the judge's own discount, in the saving
        assert doc["grader_cost"] == pytest.approx(JUDGED * 0.4)
        assert doc["batch"]["judge"]["saving"] == pytest.approx(JUDGED * 0.6)
    assert stored(db_file, "select phase, state from batches order by submitted_at") == [
        ("answers", "collected"), ("judge", "collected"),
    ]  # fmt: skip

    live = cli("run", "s.yaml", "--grader", "decision", "--judge", judge, "--no-cache", "--format", "json")
    assert live.exit_code == 0, live.stderr
    assert len(project.live) == 3 + 3 + 1  # the answers, the decisions and the judge's readiness probe
    assert verdicts(json.loads(live.stdout)) == verdicts(doc)
    assert doc["grader"] == json.loads(live.stdout)["grader"]
