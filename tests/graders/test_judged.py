"""Model-graded assertions (rubric, factuality) through the CLI against loopback servers.

Two real HTTP servers on 127.0.0.1 speak the OpenAI chat wire format: ``gen`` answers every prompt
with a fixed text per prompt id, ``judge`` is the scripted judge of tests/judgeserver.py (it reads
the rubric's quoted phrases and the answer and rates them). Verdicts are checked in the JSON of
``evalkit run --format json``, in the requests the judge received and in the DuckDB file.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.conftest import write
from tests.fakeserver import FakeServer, Recorded, Reply, openai_reply
from tests.graders.conftest import json_runner, judged_project
from tests.judgeserver import JUDGE_MODEL, judge_handler, sections

GEN_MODEL = "gen-model-1"
ANSWERS = {  # by a word of the prompt, the first that matches
    "(late)": "Sure, returns after 60 days are fine.",
    "refund": "Refunds are accepted within 30 days of delivery. Thank you for asking!",
}


def gen_handler(request: Recorded) -> Reply:
    text = request.json["messages"][-1]["content"]
    answer = next((a for key, a in ANSWERS.items() if key in text), f"I do not know about {text}")
    return openai_reply(answer, model=GEN_MODEL, prompt_tokens=10, completion_tokens=5)


@pytest.fixture
def gen(fake_llm: FakeServer) -> FakeServer:
    fake_llm.handler = gen_handler
    return fake_llm


@pytest.fixture
def project(isolated: Path, gen: FakeServer, judge: FakeServer) -> Path:
    return judged_project(
        isolated,
        gen,
        judge,
        judge_keys=", cost: {input_per_mtok: 3.0, output_per_mtok: 5.0}",
        providers=f"- {{id: judge2, adapter: openai, base_url: {judge.url}/v1, model: judge2-alias, max_retries: 0}}",
    )


REFUND_SET = """
id: support.refund
name: Refund answers
system: You are the support desk of Acme. Be polite.
prompts:
  - id: window
    prompt: What is the refund window?
    reference: 'Refunds within "30 days" of delivery.'
    assertions:
      - contains: "30 days"
      - rubric: 'Names the "30 days" window and thanks the customer: "thank you"'
      - {type: factuality, value: true, weight: 2}
  - id: late
    prompt: Can I get a refund after 60 days (late)?
    assertions:
      - {type: rubric, value: 'Says returns after "60 days" are not accepted: never "are fine"', threshold: 0.9}
"""


run_json = json_runner("sets/refund.yaml")


def gradings(judge: FakeServer) -> list[Recorded]:
    """The judge requests that graded an answer (not the readiness probe)."""
    return [r for r in judge.requests if "Candidate response:" in r.json["messages"][-1]["content"]]


def test_rubric_and_factuality_grade_each_answer_next_to_the_deterministic_assertions(
    cli: Any, project: Path, judge: FakeServer
) -> None:
    write(Path("sets/refund.yaml"), REFUND_SET)
    result, doc = run_json(cli)
    assert result.exit_code == 0, result.stderr
    assert doc["grader"] == f"judged:judge:{JUDGE_MODEL}"
    window, late = doc["items"]
    assert (window["passed"], window["score"]) == (True, 1.0)
    assert [a["type"] for a in window["assertions"]] == ["contains", "rubric", "factuality"]
    marks = [a.get("yardstick") for a in window["assertions"]]
    assert marks == [None, f"evalkit.rubric:judge:{JUDGE_MODEL}:v1", f"evalkit.factuality:judge:{JUDGE_MODEL}:v1"]
    # the answer names "60 days" but says they "are fine": one of two points, level 2 of 4
    assert late["passed"] is False
    assert late["score"] == 0.5
    assert "rubric level 2/4: gets wrong: are fine (below the threshold 0.9)" in late["reason"]
    assert doc["judge"] == {"calls": 3, "cached": 0, "input_tokens": 300, "output_tokens": 60, "cost": pytest.approx(
        (300 * 3.0 + 60 * 5.0) / 1e6
    )}  # fmt: skip
    assert doc["grader_cost"] == pytest.approx(doc["judge"]["cost"])
    assert doc["usage"] == {"input_tokens": 20, "output_tokens": 10}  # the generator's, apart


def test_the_judge_sees_the_system_prompt_the_conversation_the_tool_calls_and_the_rubric(
    cli: Any, project: Path, gen: FakeServer, judge: FakeServer
) -> None:
    def with_tool_call(request: Recorded) -> Reply:
        reply = openai_reply("Let me look that up.", model=GEN_MODEL)
        reply.json["choices"][0]["message"]["tool_calls"] = [
            {"id": "c1", "type": "function", "function": {"name": "lookup_order", "arguments": '{"order": "A17"}'}}
        ]
        return reply

    gen.handler = with_tool_call
    write(
        Path("sets/refund.yaml"),
        """
        id: support.chat
        name: Chat
        system: You are the support desk of Acme.
        prompts:
          - id: order
            messages:
              - {role: user, content: Where is my order A17?}
              - {role: assistant, content: Let me check. Which country?}
              - {role: user, content: Germany.}
            assertions:
              - rubric: 'Looks the order up: "lookup_order"'
        """,
    )
    result, _doc = run_json(cli)
    assert result.exit_code == 0, result.stderr
    (graded,) = gradings(judge)
    system, user = graded.json["messages"]
    assert system["role"] == "system"
    assert "Rate how well a candidate response meets a rubric" in system["content"]
    parts = sections(user["content"])
    assert "Instructions the response had to follow:\nYou are the support desk of Acme." in user["content"]
    assert "user: Where is my order A17?\nassistant: Let me check. Which country?\nuser: Germany." in parts["Task"]
    assert parts["Tool calls the response made"] == 'lookup_order({"order": "A17"})'
    assert parts["Candidate response"] == "Let me look that up."
    assert parts["Rubric"] == 'Looks the order up: "lookup_order"'
    # structured output asked of an openai adapter, in the fixed answer shape
    shape = graded.json["response_format"]["json_schema"]["schema"]
    assert shape["required"] == ["level", "reason"]
    assert graded.json["model"] == "judge-alias"


def test_a_rerun_of_unchanged_answers_makes_no_judge_call_and_no_cache_asks_again(
    cli: Any, project: Path, judge: FakeServer
) -> None:
    write(Path("sets/refund.yaml"), REFUND_SET)
    first, _ = run_json(cli)
    assert first.exit_code == 0, first.stderr
    asked = len(gradings(judge))
    assert asked == 3
    again, doc = run_json(cli)
    assert again.exit_code == 0, again.stderr
    assert len(gradings(judge)) == asked  # every judgement replayed from the completion cache
    assert doc["judge"]["calls"] == 3
    assert doc["judge"]["cached"] == 3
    assert doc["judge"]["input_tokens"] == 0
    assert doc["judge"]["cost"] == 0.0
    assert doc["comparison"]["state"] == "compared"
    fresh, doc = run_json(cli, "--no-cache")
    assert fresh.exit_code == 0, fresh.stderr
    assert len(gradings(judge)) == 2 * asked
    assert doc["judge"]["cached"] == 0


def test_an_unreadable_judgement_errors_its_item_and_the_run_exits_3(
    cli: Any, project: Path, judge: FakeServer
) -> None:
    scripted = judge_handler()

    def garbled_for_late(request: Recorded) -> Reply:
        if "60 days" in request.json["messages"][-1]["content"] and "Candidate response" in str(request.json):
            return openai_reply("I would rather not say.", model=JUDGE_MODEL)
        return scripted(request)

    judge.handler = garbled_for_late
    write(Path("sets/refund.yaml"), REFUND_SET)
    result, doc = run_json(cli)
    assert result.exit_code == 3, result.stderr
    late = doc["items"][1]
    assert late["error"].startswith("rubric: judgement failed: unparseable judge answer")
    assert "; retry: unparseable judge answer" in late["error"]  # asked twice: structured, then plain
    assert late["passed"] is False
    assert doc["error_count"] == 1
    assert doc["grader"] == "judged"  # some judgements failed: plain judged, not compared
    assert doc["comparison"]["state"] == "not_compared"
    stored = duckdb.connect(str(Path.cwd().parent / "evalkit.duckdb"), read_only=True)
    try:  # at privacy metadata, no text: what failed, in words
        rows = stored.execute("select item_id, reason, error from results order by item_id").fetchall()
    finally:
        stored.close()
    assert ("late", "error: a judgement failed", "a judgement failed") in rows


def test_a_run_whose_judgements_all_failed_is_stored_as_judged_failed(
    cli: Any, project: Path, judge: FakeServer
) -> None:
    scripted = judge_handler()
    judge.handler = lambda r: (
        openai_reply("no idea", model=JUDGE_MODEL) if "Candidate response" in str(r.json) else scripted(r)
    )
    write(Path("sets/refund.yaml"), REFUND_SET)
    result, doc = run_json(cli)
    assert result.exit_code == 3
    assert doc["grader"] == "judged:failed"
    stored = duckdb.connect(str(Path.cwd().parent / "evalkit.duckdb"), read_only=True)
    try:
        assert stored.execute("select grader from runs").fetchall() == [("judged:failed",)]
    finally:
        stored.close()


def test_a_changed_judge_model_makes_the_run_plain_judged_and_not_compared(
    cli: Any, project: Path, judge: FakeServer
) -> None:
    models = iter(["judge-model-1", "judge-model-2"] * 10)
    write(Path("sets/refund.yaml"), REFUND_SET)

    def alternating(request: Recorded) -> Reply:
        return judge_handler(model=next(models))(request)

    judge.handler = alternating
    result, doc = run_json(cli, "--concurrency", "1")
    assert result.exit_code == 0, result.stderr
    assert doc["grader"] == "judged"
    assert doc["comparison"]["state"] == "not_compared"
    assert "judge model changed" in doc["comparison"]["reason"]


def test_runs_of_different_judges_keep_their_own_baselines(cli: Any, project: Path, judge: FakeServer) -> None:
    write(Path("sets/refund.yaml"), REFUND_SET)
    first, doc = run_json(cli)
    assert doc["comparison"]["state"] == "baseline"
    judge.handler = judge_handler(model="judge-model-2")
    _second, doc = run_json(cli, "--no-cache")
    assert doc["grader"] == "judged:judge:judge-model-2"
    assert doc["comparison"]["state"] == "baseline"  # a new judge is a new scope: never compared with the old
    judge.handler = judge_handler()
    _third, doc = run_json(cli, "--no-cache")
    assert doc["comparison"]["state"] == "compared"
    assert doc["comparison"]["baseline_run_id"] == json.loads(first.stdout)["run_id"]


def test_provider_on_an_assertion_picks_another_judge(cli: Any, project: Path, judge: FakeServer) -> None:
    write(
        Path("sets/refund.yaml"),
        """
        id: support.two
        name: Two judges
        prompts:
          - id: window
            prompt: What is the refund window?
            assertions:
              - rubric: 'Names "30 days"'
              - {type: rubric, value: 'Thanks the customer: "thank you"', provider: judge2}
        """,
    )
    judge.handler = lambda r: judge_handler(model="m2" if r.json["model"] == "judge2-alias" else JUDGE_MODEL)(r)
    result, doc = run_json(cli)
    assert result.exit_code == 0, result.stderr
    assert doc["grader"] == f"judged:judge2:m2+judge:{JUDGE_MODEL}"  # the identities sorted
    assert sorted(r.json["model"] for r in gradings(judge)) == ["judge-alias", "judge2-alias"]


def test_not_rubric_weights_and_a_prompt_threshold_work_as_for_any_type(cli: Any, project: Path) -> None:
    write(
        Path("sets/refund.yaml"),
        """
        id: support.weights
        name: Weights
        prompts:
          - id: window
            prompt: What is the refund window?
            threshold: 0.5
            assertions:
              - not_rubric: 'Mentions "store credit"'
              - {type: rubric, value: 'Mentions "store credit"', weight: 0}
              - {type: rubric, value: 'Mentions "exchange" and "30 days"', weight: 3}
        """,
    )
    result, doc = run_json(cli)
    assert result.exit_code == 0, result.stderr
    (item,) = doc["items"]
    held = [a["passed"] for a in item["assertions"]]
    assert held == [True, False, False]
    # not_rubric holds (score 1 - 0), the weight-0 one is not counted, level 2/4 scores 0.5 x 3
    assert item["score"] == pytest.approx((1.0 + 0.5 * 3) / 4)
    assert item["passed"] is True


def test_judge_calls_run_while_generation_goes_on(cli: Any, project: Path, gen: FakeServer, judge: FakeServer) -> None:
    """With one generation at a time, the first answer's judgement is held until the second
    prompt's generation has been asked for: only a judge call running beside generation passes."""
    second_asked = threading.Event()

    def generate(request: Recorded) -> Reply:
        if "late" in request.json["messages"][-1]["content"]:
            second_asked.set()
        return gen_handler(request)

    scripted = judge_handler()

    def held_judge(request: Recorded) -> Reply:
        first = "Candidate response" in str(request.json) and "refund window" in str(request.json)
        if first and not second_asked.wait(timeout=20):  # a guard against hanging, not a timing threshold
            return openai_reply('{"level": 0, "reason": "judged before the next answer was asked"}')
        return scripted(request)

    gen.handler, judge.handler = generate, held_judge
    write(Path("sets/refund.yaml"), REFUND_SET)
    result, doc = run_json(cli, "--concurrency", "1")
    assert result.exit_code == 0, result.stderr
    assert doc["items"][0]["passed"] is True, doc["items"][0]["reason"]


def test_grader_decision_replaces_the_model_graded_assertions(cli: Any, project: Path, judge: FakeServer) -> None:
    write(Path("sets/refund.yaml"), REFUND_SET)
    project.write_text(project.read_text().replace("judge: {provider: judge}", "decision: {provider: judge}"))
    judge.handler = lambda r: openai_reply('{"level": 4, "justification": "fine"}', model=JUDGE_MODEL)
    result, doc = run_json(cli, "--grader", "decision")
    assert result.exit_code == 0, result.stderr
    assert doc["grader"] == f"decision:judge:{JUDGE_MODEL}:v1"
    assert all(item["assertions"] == [] for item in doc["items"])


def test_a_judge_that_does_not_answer_its_probe_stops_the_run(cli: Any, project: Path, judge: FakeServer) -> None:
    judge.handler = lambda r: Reply(status=500, json={"error": {"message": "down"}})
    write(Path("sets/refund.yaml"), REFUND_SET)
    result = cli("run", "sets/refund.yaml")
    assert result.exit_code == 3
    assert "the judge 'judge' did not answer a readiness probe" in result.stderr


def test_a_committed_baseline_keeps_its_judge(cli: Any, project: Path, judge: FakeServer) -> None:
    write(Path("sets/refund.yaml"), REFUND_SET)
    run_json(cli)
    assert cli("baseline", "accept").exit_code == 0
    (entry,) = json.loads(Path("baselines/support.refund.json").read_text())["baselines"]
    assert entry["grader"] == f"judged:judge:{JUDGE_MODEL}"
    _, doc = run_json(cli, "--no-cache")
    assert doc["comparison"]["baseline_source"] == "file"
    judge.handler = judge_handler(model="judge-model-2")  # another judge: the file's entry is not its baseline
    _, doc = run_json(cli, "--no-cache")
    assert doc["grader"] == "judged:judge:judge-model-2"
    assert doc["comparison"]["state"] == "not_compared"
    reason = doc["comparison"]["reason"]
    assert "has no baseline for support.refund" in reason
    assert "graded by judged:judge:judge-model-2" in reason
    assert "graded by judged:judge:judge-model-1" in reason  # what the file holds, said


def test_the_table_the_markdown_and_the_html_report_count_the_judge_apart(cli: Any, project: Path) -> None:
    write(Path("sets/refund.yaml"), REFUND_SET)
    table = cli("run", "sets/refund.yaml", "--markdown", "comment.md", "--html", "report.html")
    assert table.exit_code == 0, table.stderr
    footer = " ".join(table.stdout.split())  # the footer may wrap
    assert "judge calls 3 (0 cached)" in footer
    assert "judge tokens 300 in / 60 out" in footer
    assert "judge cost $0.0012" in footer
    assert "Judge: judge calls 3 (0 cached) · tokens 300 in / 60 out · cost $0.0012" in Path("comment.md").read_text()
    assert "Judge: 3 calls (0 cached) · tokens 300 in / 60 out · cost $0.0012" in Path("report.html").read_text()
