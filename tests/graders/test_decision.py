"""The decision grader (profile ``evalkit.task_fulfilment`` v1) against loopback servers.

Two real HTTP servers on 127.0.0.1: ``gen`` answers the set's prompts (every answer is
``answer: <prompt>``), ``judge`` grades them. The judge is scripted per candidate answer, so a
test says which level each candidate gets; requests that carry no candidate are the readiness
probe and get ``OK``. Verdicts are checked in the JSON of ``evalkit run --format json``, in the
stored rows of the DuckDB file and in the requests the judge received.
"""

from __future__ import annotations

import json
import math
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest

import evalkit
from evalkit.graders.decision import level_grade, parse_answer, task_text, weighted_level
from evalkit.records import Prompt, PromptSet
from tests.conftest import CliResult, write
from tests.fakeserver import FakeServer, Recorded, Reply, anthropic_reply, openai_reply

GEN_MODEL = "gen-model-1"
JUDGE_MODEL = "judge-model-1"
YARDSTICK = f"decision:judge:{JUDGE_MODEL}:v1"
LEVEL_TEXTS = (
    "0: fails the task entirely or answers something else",
    "1: addresses the task but is mostly wrong or incomplete",
    "2: fulfils part of the task, important parts missing or wrong",
    "3: fulfils the task with minor gaps or inaccuracies",
    "4: fulfils the task completely and correctly",
)
EVIDENCE_WORDS = "judge the substance of the candidate against it, not its wording"
INSTRUCTIONS = "Instructions the response had to follow:"
# Judge tokens per grading, generator tokens per answer (distinct, so a mix-up shows).
JUDGE_IN, JUDGE_OUT = 100, 20
GEN_IN, GEN_OUT = 10, 5

Answer = Reply | Callable[[Recorded], Reply]


def candidate(prompt: str) -> str:
    """What the generator answers to ``prompt``."""
    return f"answer: {prompt}"


def request_text(request: Recorded) -> str:
    """Every message text of a request (and Anthropic's separate system field)."""
    body = request.json if isinstance(request.json, dict) else {}
    parts = [body.get("system") or ""]
    parts += [str(m.get("content", "")) for m in body.get("messages") or []]
    return "\n".join(str(p) for p in parts)


def verdict(level: Any, justification: str = "Because.", model: str = JUDGE_MODEL, **extra: Any) -> Reply:
    """The judge's answer as an OpenAI chat completion carrying a JSON object."""
    text = json.dumps({"level": level, "justification": justification})
    return openai_reply(text, model=model, prompt_tokens=JUDGE_IN, completion_tokens=JUDGE_OUT, **extra)


def text_reply(text: str, model: str = JUDGE_MODEL) -> Reply:
    return openai_reply(text, model=model, prompt_tokens=JUDGE_IN, completion_tokens=JUDGE_OUT)


class JudgeScript:
    """Answers judge requests by the candidate they grade; anything else is the probe."""

    def __init__(self, server: FakeServer) -> None:
        self.server = server
        self.model = JUDGE_MODEL
        self.answers: dict[str, list[Answer]] = {}
        self._lock = threading.Lock()
        server.handler = self.reply

    def script(self, prompt: str, *answers: Answer) -> None:
        """The judge's answers to the candidate for ``prompt``, in order; the last one repeats."""
        self.answers[candidate(prompt)] = list(answers)

    def reply(self, request: Recorded) -> Reply:
        text = request_text(request)
        anthropic = request.path.endswith("/messages")
        with self._lock:
            chosen: Answer | None = None
            for wanted, answers in self.answers.items():
                if wanted in text:
                    chosen = answers.pop(0) if len(answers) > 1 else answers[0]
                    break
        if chosen is not None:
            return chosen(request) if callable(chosen) else chosen
        if "answer: " not in text:  # the readiness probe
            if anthropic:
                return anthropic_reply("OK", model="claude-judge-1", input_tokens=0, output_tokens=0)
            return openai_reply("OK", model=self.model, prompt_tokens=0, completion_tokens=0)
        return verdict(4, "Fully correct.", model=self.model)

    def gradings(self) -> list[Recorded]:
        """The requests that graded a candidate (every request but the probes)."""
        return [r for r in self.server.requests if "answer: " in request_text(r)]

    def grading_for(self, prompt: str) -> list[Recorded]:
        return [r for r in self.server.requests if candidate(prompt) in request_text(r)]


@pytest.fixture
def gen(fake_llm: FakeServer) -> FakeServer:
    def answer(request: Recorded) -> Reply:
        prompt = request.json["messages"][-1]["content"]
        return openai_reply(candidate(prompt), model=GEN_MODEL, prompt_tokens=GEN_IN, completion_tokens=GEN_OUT)

    fake_llm.handler = answer
    return fake_llm


@pytest.fixture
def judge_server() -> Any:
    server = FakeServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def judge(judge_server: FakeServer) -> JudgeScript:
    return JudgeScript(judge_server)


def free_port() -> int:
    """A loopback port nothing listens on (connections to it are refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def project(isolated: Path, gen: FakeServer, judge: JudgeScript) -> Path:
    """evalkit.yaml: generator ``gen``, judge ``judge`` (both openai), plus other judges."""
    return write(
        isolated / "evalkit.yaml",
        f"""
        default_provider: gen
        decision: {{provider: judge}}
        providers:
          - id: gen
            adapter: openai
            base_url: {gen.url}/v1
            model: gen-alias
            max_retries: 0
            cost: {{input_per_mtok: 1.0, output_per_mtok: 2.0}}
          - id: judge
            adapter: openai
            base_url: {judge.server.url}/v1
            model: judge-alias
            max_retries: 0
            cost: {{input_per_mtok: 3.0, output_per_mtok: 5.0}}
          - id: claude
            adapter: anthropic
            base_url: {judge.server.url}/v1
            model: claude-judge-alias
            max_retries: 0
          - id: keyed
            adapter: openai
            base_url: {judge.server.url}/v1
            model: judge-alias
            api_key_env: EVALKIT_TEST_JUDGE_KEY
          - id: dead
            adapter: openai
            base_url: http://127.0.0.1:{free_port()}/v1
            model: judge-alias
            max_retries: 0
            timeout_s: 5
        """,
    )


def write_set(name: str, prompts: list[str], **fields: str) -> list[str]:
    """sets/<name>.yaml with one prompt per text (ids p0, p1, ...); returns the prompt texts."""
    lines = [f"id: decision.{name}", f"name: {name}"] + [f"{k}: {json.dumps(v)}" for k, v in fields.items()]
    lines.append("prompts:")
    for index, text in enumerate(prompts):
        lines.append(f"  - {{id: p{index}, prompt: {json.dumps(text)}, reference: {json.dumps('ref ' + text)}}}")
    write(Path.cwd() / f"sets/{name}.yaml", "\n".join(lines) + "\n")
    return prompts


def run(cli: Any, target: str, *args: str) -> tuple[CliResult, Any]:
    result = cli("run", target, "--grader", "decision", "--format", "json", *args)
    assert result.exception is None, result.exception
    return result, (json.loads(result.stdout) if result.stdout.strip() else None)


def query(db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    if not db.exists():
        return []
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, list(params)).fetchall()
    finally:
        con.close()


def stored_run(db: Path, run_id: str) -> tuple[str, str]:
    rows = query(db, "select grader, comparison_state from runs where run_id = ?", run_id)
    assert len(rows) == 1
    return rows[0]


def stored_yardsticks(db: Path, run_id: str) -> list[str | None]:
    return [r[0] for r in query(db, "select yardstick from results where run_id = ? order by item_index", run_id)]


def logprob_tokens(level: int, probabilities: dict[str, float], justification: str) -> dict[str, Any]:
    """OpenAI-style logprobs whose tokens spell the JSON answer; ``probabilities`` for the level token."""
    tokens = ['{"', "level", '":', " ", str(level), ",", ' "', "justification", '":', ' "', justification, '"}']
    content = []
    for token in tokens:
        entry: dict[str, Any] = {"token": token, "logprob": 0.0, "top_logprobs": [{"token": token, "logprob": 0.0}]}
        if token == str(level):
            entry["logprob"] = math.log(probabilities[token])
            entry["top_logprobs"] = [{"token": t, "logprob": math.log(p)} for t, p in probabilities.items()]
        content.append(entry)
    return {"content": content}


# --- levels, scores and the reason -------------------------------------------------------------


def test_levels_give_scores_and_pass_only_at_three_and_four(
    cli: Any, project: Path, judge: JudgeScript, db_file: Path
) -> None:
    prompts = write_set("levels", [f"question {i}" for i in range(5)])
    for level, prompt in enumerate(prompts):
        judge.script(prompt, verdict(level, f"Reason for level {level}."))
    result, doc = run(cli, "sets/levels.yaml")
    assert result.exit_code == 0, result.stderr
    assert [i["score"] for i in doc["items"]] == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert [i["passed"] for i in doc["items"]] == [False, False, False, True, True]
    assert [i["reason"] for i in doc["items"]] == [f"level {n}.00/4: Reason for level {n}." for n in range(5)]
    assert (doc["passed_count"], doc["pass_rate"], doc["mean_score"]) == (2, 0.4, 0.5)
    assert doc["grader"] == YARDSTICK
    assert doc["comparison"]["state"] == "baseline"
    assert stored_run(db_file, doc["run_id"]) == (YARDSTICK, "baseline")
    assert stored_yardsticks(db_file, doc["run_id"]) == [YARDSTICK] * 5
    assert len(judge.gradings()) == 5


def test_judge_is_asked_the_profile_with_structured_output(
    cli: Any, project: Path, judge: JudgeScript, gen: FakeServer
) -> None:
    (prompt,) = write_set("profile", ["What is 2 + 2?"])
    result, doc = run(cli, "sets/profile.yaml")
    assert result.exit_code == 0, result.stderr
    assert doc["grader"] == YARDSTICK
    (grading,) = judge.gradings()
    body = grading.json
    assert grading.path == "/v1/chat/completions"
    assert body["model"] == "judge-alias"
    text = request_text(grading)
    for line in LEVEL_TEXTS:
        assert line in text
    assert prompt in text
    assert candidate(prompt) in text
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    schema = fmt["json_schema"]["schema"]
    assert set(schema["required"]) == {"level", "justification"}
    assert schema["properties"]["level"]["enum"] == [0, 1, 2, 3, 4]
    assert body["logprobs"] is True
    assert body["top_logprobs"] >= 2
    # The generator was asked the prompt itself, never the judge's instructions.
    assert [r.json["messages"] for r in gen.requests] == [[{"role": "user", "content": prompt}]]


@pytest.mark.parametrize(
    ("probabilities", "reason", "score", "passed"),
    [
        ({"2": 0.6, "3": 0.4}, "level 2.40/4: Partly right.", 0.6, True),
        ({"2": 0.64, "3": 0.36}, "level 2.36/4: Partly right.", 0.59, False),
        ({"3": 0.5, "4": 0.5}, "level 3.50/4: Partly right.", 0.875, True),
    ],
)
def test_logprobs_of_the_level_token_weight_the_level(
    cli: Any,
    project: Path,
    judge: JudgeScript,
    probabilities: dict[str, float],
    reason: str,
    score: float,
    passed: bool,
) -> None:
    (prompt,) = write_set("weighted", ["Explain photosynthesis."])
    level = int(max(probabilities, key=lambda t: probabilities[t]))
    logprobs = logprob_tokens(level, probabilities, "Partly right.")
    judge.script(prompt, verdict(level, "Partly right.", logprobs=logprobs))
    result, doc = run(cli, "sets/weighted.yaml")
    assert result.exit_code == 0, result.stderr
    (item,) = doc["items"]
    assert (item["reason"], item["score"], item["passed"]) == (reason, score, passed)
    assert doc["grader"] == YARDSTICK


def test_level_grade_boundary_and_weighted_level() -> None:
    assert level_grade(2.4, "x", "m").passed is True
    assert level_grade(2.4, "x", "m").score == 0.6
    assert level_grade(2.36, "x", "m").passed is False
    assert level_grade(2.36, "x", "m").score == 0.59
    assert level_grade(4.0, "", "m").reason == "level 4.00/4"
    raw = {"logprobs": logprob_tokens(2, {"2": 0.6, "3": 0.4}, "j")}
    assert weighted_level(raw) == pytest.approx(2.4)
    assert weighted_level({}) is None
    assert weighted_level(None) is None


@pytest.mark.parametrize(
    ("text", "level", "justification"),
    [
        ('{"level": 3, "justification": "Minor gaps."}', 3, "Minor gaps."),
        ('Here is my verdict: {"level": 1, "justification": "Mostly wrong."} Thanks.', 1, "Mostly wrong."),
        ('```json\n{"level": "2", "justification": "Half."}\n```', 2, "Half."),
    ],
)
def test_parse_answer_finds_the_json_object(text: str, level: int, justification: str) -> None:
    assert parse_answer(text) == (level, justification)


@pytest.mark.parametrize(
    "text", ["", "It is good.", '{"level": 5, "justification": "x"}', '{"justification": "no level"}', "[3]"]
)
def test_parse_answer_rejects_answers_without_a_level(text: str) -> None:
    with pytest.raises(ValueError, match="level"):
        parse_answer(text)


def test_a_json_object_in_plain_text_is_parsed(cli: Any, project: Path, judge: JudgeScript) -> None:
    (prompt,) = write_set("prose", ["Name a prime number."])
    judge.script(prompt, text_reply('Sure. {"level": 3, "justification": "Correct but terse."} Hope this helps.'))
    result, doc = run(cli, "sets/prose.yaml")
    assert result.exit_code == 0, result.stderr
    (item,) = doc["items"]
    assert (item["score"], item["passed"], item["reason"]) == (0.75, True, "level 3.00/4: Correct but terse.")
    assert doc["grader"] == YARDSTICK


# --- what the judge is told ----------------------------------------------------------------------


def test_task_text_with_and_without_a_system_prompt() -> None:
    plain = Prompt(id="a", prompt="Name the capital of Peru.")
    own = Prompt(id="b", prompt="Name the capital of Spain.", system="Answer in German.")
    cleared = Prompt(id="c", prompt="Name the capital of Chile.", system="")
    without = PromptSet(id="s.none", name="None", prompts=(plain,))
    with_set = PromptSet(id="s.set", name="Set", prompts=(plain, own, cleared), system="Answer in French.")
    assert task_text(without, plain) == "Name the capital of Peru."
    assert task_text(without, own) == (
        "Instructions the response had to follow:\nAnswer in German.\n\nTask:\nName the capital of Spain."
    )
    assert task_text(with_set, plain) == (
        "Instructions the response had to follow:\nAnswer in French.\n\nTask:\nName the capital of Peru."
    )
    assert task_text(with_set, own) == (
        "Instructions the response had to follow:\nAnswer in German.\n\nTask:\nName the capital of Spain."
    )
    assert task_text(with_set, cleared) == "Name the capital of Chile."


def test_judge_receives_the_task_with_the_system_prompt_the_call_ran_with(
    cli: Any, project: Path, judge: JudgeScript, gen: FakeServer
) -> None:
    write(
        Path.cwd() / "sets/tasks.yaml",
        """
        id: decision.tasks
        name: Tasks
        system: Answer in French.
        prompts:
          - {id: inherits, prompt: Name the capital of Italy., reference: Rome}
          - {id: own, prompt: Name the capital of Spain., system: Answer in German., reference: Madrid}
          - {id: cleared, prompt: Name the capital of Peru., system: "", reference: Lima}
        """,
    )
    result, doc = run(cli, "sets/tasks.yaml")
    assert result.exit_code == 0, result.stderr
    assert doc["error_count"] == 0

    (italy,) = judge.grading_for("Name the capital of Italy.")
    assert f"{INSTRUCTIONS}\nAnswer in French.\n\nTask:\nName the capital of Italy." in request_text(italy)

    (spain,) = judge.grading_for("Name the capital of Spain.")
    assert f"{INSTRUCTIONS}\nAnswer in German.\n\nTask:\nName the capital of Spain." in request_text(spain)
    assert "Answer in French." not in request_text(spain)

    (peru,) = judge.grading_for("Name the capital of Peru.")
    assert "Name the capital of Peru." in request_text(peru)
    assert INSTRUCTIONS not in request_text(peru)
    assert "Answer in French." not in request_text(peru)

    # The generator ran with the same system prompts the judge was shown.
    systems = {
        r.json["messages"][-1]["content"]: [m["content"] for m in r.json["messages"] if m["role"] == "system"]
        for r in gen.requests
    }
    assert systems == {
        "Name the capital of Italy.": ["Answer in French."],
        "Name the capital of Spain.": ["Answer in German."],
        "Name the capital of Peru.": [],
    }


def test_reference_is_sent_as_evidence_only_when_present(cli: Any, project: Path, judge: JudgeScript) -> None:
    write(
        Path.cwd() / "sets/evidence.yaml",
        """
        id: decision.evidence
        name: Evidence
        prompts:
          - {id: with-ref, prompt: Who wrote Hamlet?, reference: William Shakespeare wrote it around 1600.}
          - {id: no-ref, prompt: Say hello., assertions: [{contains: hello}]}
          - {id: blank-ref, prompt: Say goodbye., reference: "   ", assertions: [{contains: bye}]}
        """,
    )
    result, doc = run(cli, "sets/evidence.yaml")
    assert result.exit_code == 0, result.stderr
    assert doc["grader"] == YARDSTICK
    (with_ref,) = judge.grading_for("Who wrote Hamlet?")
    assert "William Shakespeare wrote it around 1600." in request_text(with_ref)
    assert EVIDENCE_WORDS in request_text(with_ref)
    for prompt in ("Say hello.", "Say goodbye."):
        (without,) = judge.grading_for(prompt)
        assert EVIDENCE_WORDS not in request_text(without)
        assert "Reference" not in request_text(without)


# --- failed decisions and the stored grader -------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        text_reply("The answer looks fine to me."),
        text_reply('{"level": 7, "justification": "Off the scale."}'),
        text_reply('{"justification": "No level given."}'),
        text_reply(""),
        Reply(status=500, json={"error": {"message": "judge overloaded"}}),
        Reply(status=400, json={"error": {"message": "bad request"}}),
        Reply(reset=True),
    ],
    ids=["prose", "level-7", "no-level", "empty", "http-500", "http-400", "reset"],
)
def test_a_failed_decision_scores_zero_and_the_run_is_stored_as_failed(
    cli: Any, project: Path, judge: JudgeScript, db_file: Path, answer: Reply
) -> None:
    (prompt,) = write_set("failed", ["Summarise the plot of Hamlet."])
    judge.script(prompt, answer)
    result, doc = run(cli, "sets/failed.yaml", "--fail-on-regression")
    assert result.exit_code == 1, result.stderr  # not_compared under the gate; not 3: nothing errored
    assert result.exception is None
    (item,) = doc["items"]
    assert (item["passed"], item["score"]) == (False, 0.0)
    assert item["reason"].startswith("Decision failed: ")
    assert item["error"] is None
    assert len(judge.grading_for(prompt)) == 2  # the answer and one retry
    assert doc["grader"] == "decision:failed"
    assert doc["comparison"]["state"] == "not_compared"
    assert "every decision failed" in doc["comparison"]["reason"]
    assert doc["gate"]["passed"] is False
    assert doc["gate"]["failures"] == [
        "not compared with a baseline (every decision failed, so the run has no yardstick)"
    ]
    assert stored_run(db_file, doc["run_id"]) == ("decision:failed", "not_compared")


def test_an_unparseable_answer_is_retried_once(cli: Any, project: Path, judge: JudgeScript) -> None:
    (prompt,) = write_set("retry", ["List three colours."])
    judge.script(prompt, text_reply("Looks right!"), verdict(3, "Three colours, one odd."))
    result, doc = run(cli, "sets/retry.yaml")
    assert result.exit_code == 0, result.stderr
    (item,) = doc["items"]
    assert (item["score"], item["passed"], item["reason"]) == (0.75, True, "level 3.00/4: Three colours, one odd.")
    assert len(judge.grading_for(prompt)) == 2
    assert doc["grader"] == YARDSTICK


def test_all_failed_decisions_print_why_the_run_is_not_compared(
    cli: Any, project: Path, judge: JudgeScript, db_file: Path
) -> None:
    prompts = write_set("allfail", ["question a", "question b"])
    for prompt in prompts:
        judge.script(prompt, Reply(status=500, json={"error": {"message": "down"}}))
    table = cli("run", "sets/allfail.yaml", "--grader", "decision")
    assert table.exit_code == 0, table.stderr
    assert "Not compared: every decision failed" in table.stdout
    assert "Decision failed: " in table.stdout
    gated = cli("run", "sets/allfail.yaml", "--grader", "decision", "--fail-on-regression")
    assert gated.exit_code == 1
    assert "Not compared: every decision failed" in gated.stdout
    rows = query(db_file, "select grader, comparison_state from runs order by started_at")
    assert rows == [("decision:failed", "not_compared")] * 2


def test_mixed_run_is_stored_as_decision_and_never_used_as_a_baseline(
    cli: Any, project: Path, judge: JudgeScript, db_file: Path
) -> None:
    prompts = write_set("mixed", ["question a", "question b", "question c"])
    first, doc1 = run(cli, "sets/mixed.yaml", "--fail-on-regression")
    assert (first.exit_code, doc1["grader"], doc1["comparison"]["state"]) == (0, YARDSTICK, "baseline")

    judge.script(prompts[1], text_reply("no idea"))
    mixed, doc2 = run(cli, "sets/mixed.yaml", "--no-cache", "--fail-on-regression")
    assert mixed.exit_code == 1
    assert doc2["grader"] == "decision"
    assert [i["reason"].startswith("Decision failed: ") for i in doc2["items"]] == [False, True, False]
    assert doc2["comparison"]["state"] == "not_compared"
    assert "do not share one yardstick" in doc2["comparison"]["reason"]
    assert stored_run(db_file, doc2["run_id"]) == ("decision", "not_compared")
    yardsticks = stored_yardsticks(db_file, doc2["run_id"])
    assert (yardsticks[0], yardsticks[2]) == (YARDSTICK, YARDSTICK)
    assert yardsticks[1] != YARDSTICK

    judge.answers.clear()
    again, doc3 = run(cli, "sets/mixed.yaml", "--no-cache", "--fail-on-regression")
    assert again.exit_code == 0, again.stderr
    assert doc3["comparison"]["state"] == "compared"
    assert doc3["comparison"]["baseline_run_id"] == doc1["run_id"]


def test_a_judge_model_that_changes_mid_run_gives_decision(
    cli: Any, project: Path, judge: JudgeScript, db_file: Path
) -> None:
    prompts = write_set("drift", ["question a", "question b", "question c"])
    judge.script(prompts[2], verdict(4, "Correct.", model="judge-model-2"))
    result, doc = run(cli, "sets/drift.yaml", "--fail-on-regression")
    assert result.exit_code == 1
    assert [i["score"] for i in doc["items"]] == [1.0, 1.0, 1.0]
    assert doc["grader"] == "decision"
    assert doc["comparison"]["state"] == "not_compared"
    assert "do not share one yardstick" in doc["comparison"]["reason"]
    assert stored_run(db_file, doc["run_id"]) == ("decision", "not_compared")
    assert stored_yardsticks(db_file, doc["run_id"]) == [YARDSTICK, YARDSTICK, "decision:judge:judge-model-2:v1"]


# --- grader names and readiness -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["llm_judge", "Decision", "decision:judge", "judge"])
def test_other_grader_names_are_refused(
    cli: Any, project: Path, gen: FakeServer, judge: JudgeScript, db_file: Path, name: str
) -> None:
    write_set("names", ["question a"])
    result = cli("run", "sets/names.yaml", "--grader", name)
    assert result.exit_code == 2
    assert result.exception is None
    assert result.stderr.startswith("Error: ")
    assert name in result.stderr
    assert "deterministic, decision" in result.stderr
    assert (gen.calls, judge.server.calls) == (0, 0)
    assert query(db_file, "select count(*) from runs") in ([], [(0,)])


def test_python_api_decision_grader_and_fallback(project: Path, gen: FakeServer, judge: JudgeScript) -> None:
    write_set("api", ["question a"])
    graded = evalkit.run_set("sets/api.yaml", grader="decision", config=project)
    assert graded.grader == YARDSTICK
    assert [i.score for i in graded.items] == [1.0]
    judged = len(judge.gradings())
    assert judged == 1
    fallback = evalkit.run_set("sets/api.yaml", grader="llm_judge", config=project, use_cache=False)
    assert fallback.grader == "deterministic"
    assert len(judge.gradings()) == judged


@pytest.mark.parametrize(
    ("config_text", "args", "words"),
    [
        ("", (), "decision: {provider: ID}"),
        ("", ("--judge", "nowhere"), "unknown provider instance 'nowhere'"),
        ("decision: {provider: keyed}", (), "EVALKIT_TEST_JUDGE_KEY is not set"),
        ("", ("--judge", "keyed"), "EVALKIT_TEST_JUDGE_KEY is not set"),
    ],
    ids=["no-judge", "unknown-judge", "configured-key-missing", "option-key-missing"],
)
def test_a_judge_that_is_not_ready_to_configure_exits_2_before_any_call(
    cli: Any,
    project: Path,
    gen: FakeServer,
    judge: JudgeScript,
    db_file: Path,
    config_text: str,
    args: tuple[str, ...],
    words: str,
) -> None:
    lines = [line for line in project.read_text().splitlines() if not line.startswith("decision:")]
    project.write_text("\n".join([config_text, *lines]) + "\n")
    write_set("ready", ["question a"])
    result = cli("run", "sets/ready.yaml", "--grader", "decision", *args)
    assert result.exit_code == 2
    assert result.exception is None
    assert result.stderr.startswith("Error: ")
    assert words in result.stderr
    assert (gen.calls, judge.server.calls) == (0, 0)
    assert query(db_file, "select count(*) from runs") in ([], [(0,)])


@pytest.mark.parametrize(
    ("judge_id", "refusal"),
    [
        ("dead", None),
        ("judge", Reply(status=503, json={"error": {"message": "warming up"}})),
        ("judge", Reply(status=401, json={"error": {"message": "bad key"}})),
    ],
    ids=["connection-refused", "http-503", "http-401"],
)
def test_an_unreachable_judge_exits_3_before_any_completion(
    cli: Any,
    project: Path,
    gen: FakeServer,
    judge: JudgeScript,
    db_file: Path,
    judge_id: str,
    refusal: Reply | None,
) -> None:
    write_set("probe", ["question a", "question b"])
    if refusal is not None:
        judge.server.enqueue(refusal)
    result = cli("run", "sets/probe.yaml", "--grader", "decision", "--judge", judge_id, "--format", "json")
    assert result.exit_code == 3
    assert result.exception is None
    assert result.stderr.strip().splitlines()[-1].startswith("Error: ")
    assert f"judge '{judge_id}'" in result.stderr
    assert gen.calls == 0
    assert judge.server.calls == (0 if refusal is None else 1)
    assert judge.gradings() == []
    assert query(db_file, "select count(*) from runs") in ([], [(0,)])


def test_anthropic_judge_is_asked_through_a_forced_tool(
    cli: Any, project: Path, judge: JudgeScript, db_file: Path
) -> None:
    (prompt,) = write_set("tool", ["Translate 'cat' to French."])

    def tool_answer(request: Recorded) -> Reply:
        reply = anthropic_reply("", model="claude-judge-1", input_tokens=JUDGE_IN, output_tokens=JUDGE_OUT)
        name = request.json["tools"][0]["name"]
        block = {"type": "tool_use", "id": "toolu_01", "name": name, "input": {"level": 3, "justification": "Chat."}}
        reply.json["content"] = [block]
        reply.json["stop_reason"] = "tool_use"
        return reply

    judge.script(prompt, tool_answer)
    result, doc = run(cli, "sets/tool.yaml", "--judge", "claude")
    assert result.exit_code == 0, result.stderr
    (item,) = doc["items"]
    assert (item["score"], item["passed"], item["reason"]) == (0.75, True, "level 3.00/4: Chat.")
    assert doc["grader"] == "decision:claude:claude-judge-1:v1"
    assert stored_yardsticks(db_file, doc["run_id"]) == ["decision:claude:claude-judge-1:v1"]
    assert {r.path for r in judge.server.requests} == {"/v1/messages"}  # --judge overrides decision.provider
    (grading,) = judge.gradings()
    body = grading.json
    (tool,) = body["tools"]
    assert body["tool_choice"] == {"type": "tool", "name": tool["name"]}
    assert set(tool["input_schema"]["required"]) == {"level", "justification"}
    assert body["model"] == "claude-judge-alias"
    assert "logprobs" not in body
    for line in LEVEL_TEXTS:
        assert line in body["system"]
    assert doc["grader_usage"] == {"input_tokens": JUDGE_IN, "output_tokens": JUDGE_OUT}


def test_a_judge_that_refuses_mid_run_stops_the_run_with_an_error_line(
    cli: Any, project: Path, judge: JudgeScript, db_file: Path
) -> None:
    prompts = write_set("refused", ["question a", "question b"])
    judge.script(prompts[1], Reply(status=401, json={"error": {"message": "key revoked"}}))
    result = cli("run", "sets/refused.yaml", "--grader", "decision", "--concurrency", "1")
    assert result.exit_code == 3
    assert result.exception is None
    assert result.stderr.strip().splitlines()[-1].startswith("Error: ")
    assert "HTTP 401" in result.stderr
    assert query(db_file, "select count(*) from runs") in ([], [(0,)])


def test_model_override_changes_the_generator_alias_only(
    cli: Any, project: Path, gen: FakeServer, judge: JudgeScript
) -> None:
    write_set("alias", ["question a"])
    result, doc = run(cli, "sets/alias.yaml", "--model", "other-alias")
    assert result.exit_code == 0, result.stderr
    assert {r.json["model"] for r in gen.requests} == {"other-alias"}
    assert {r.json["model"] for r in judge.server.requests} == {"judge-alias"}
    assert doc["generator"] == {"provider": "gen", "model": "other-alias", "reported_model": GEN_MODEL}
    assert doc["grader"] == YARDSTICK


@pytest.mark.slow
def test_baselines_are_kept_per_yardstick(cli: Any, project: Path, judge: JudgeScript, db_file: Path) -> None:
    write_set("scopes", ["question a", "question b"])
    plain = cli("run", "sets/scopes.yaml", "--format", "json")
    assert plain.exit_code == 0, plain.stderr
    assert json.loads(plain.stdout)["grader"] == "deterministic"

    result, first = run(cli, "sets/scopes.yaml")
    assert result.exit_code == 0, result.stderr
    assert (first["grader"], first["comparison"]["state"]) == (YARDSTICK, "baseline")

    judge.server.handler = lambda request: (
        anthropic_reply('{"level": 4, "justification": "Fine."}', model="claude-judge-1")
        if "answer: " in request_text(request)
        else anthropic_reply("OK", model="claude-judge-1")
    )
    result, other = run(cli, "sets/scopes.yaml", "--judge", "claude")
    assert result.exit_code == 0, result.stderr
    assert (other["grader"], other["comparison"]["state"]) == ("decision:claude:claude-judge-1:v1", "baseline")

    judge.server.handler = judge.reply
    result, again = run(cli, "sets/scopes.yaml", "--no-cache", "--fail-on-regression")
    assert result.exit_code == 0, result.stderr
    assert (again["grader"], again["comparison"]["state"]) == (YARDSTICK, "compared")
    assert again["comparison"]["baseline_run_id"] == first["run_id"]
    rows = query(db_file, "select grader, comparison_state from runs order by started_at")
    assert rows == [
        ("deterministic", "baseline"),
        (YARDSTICK, "baseline"),
        ("decision:claude:claude-judge-1:v1", "baseline"),
        (YARDSTICK, "compared"),
    ]


# --- cache, tokens and cost ------------------------------------------------------------------------


def test_rerun_replays_the_generator_and_is_compared_under_the_same_yardstick(
    cli: Any, project: Path, gen: FakeServer, judge: JudgeScript, db_file: Path
) -> None:
    prompts = write_set("rerun", ["question a", "question b"])
    judge.script(prompts[0], verdict(3, "Minor gaps."))
    first, doc1 = run(cli, "sets/rerun.yaml")
    assert first.exit_code == 0, first.stderr
    gen_calls = gen.calls
    assert gen_calls == 2
    second, doc2 = run(cli, "sets/rerun.yaml", "--fail-on-regression")
    assert second.exit_code == 0, second.stderr
    assert gen.calls == gen_calls
    assert [i.get("cached") for i in doc2["items"]] == [True, True]
    assert doc2["usage"] == {"input_tokens": 0, "output_tokens": 0}
    assert [i["reason"] for i in doc2["items"]] == [i["reason"] for i in doc1["items"]]
    assert doc2["grader"] == doc1["grader"] == YARDSTICK
    assert doc2["comparison"]["state"] == "compared"
    assert doc2["comparison"]["baseline_run_id"] == doc1["run_id"]
    assert stored_run(db_file, doc2["run_id"]) == (YARDSTICK, "compared")


def test_judge_calls_are_cached_like_completions(cli: Any, project: Path, gen: FakeServer, judge: JudgeScript) -> None:
    write_set("cached", ["question a", "question b"])
    first, doc1 = run(cli, "sets/cached.yaml")
    assert first.exit_code == 0, first.stderr
    assert len(judge.gradings()) == 2
    assert doc1["grader_usage"] == {"input_tokens": 2 * JUDGE_IN, "output_tokens": 2 * JUDGE_OUT}
    second, doc2 = run(cli, "sets/cached.yaml")
    assert second.exit_code == 0, second.stderr
    assert gen.calls == 2
    assert len(judge.gradings()) == 2  # no judge call for a cached grading
    assert doc2["grader_usage"] == {"input_tokens": 0, "output_tokens": 0}
    assert doc2["comparison"]["baseline_run_id"] == doc1["run_id"]


def test_judge_tokens_are_reported_apart_from_the_generator(
    cli: Any, project: Path, judge: JudgeScript, db_file: Path
) -> None:
    write_set("tokens", ["question a", "question b", "question c"])
    result, doc = run(cli, "sets/tokens.yaml")
    assert result.exit_code == 0, result.stderr
    assert doc["usage"] == {"input_tokens": 3 * GEN_IN, "output_tokens": 3 * GEN_OUT}
    assert doc["grader_usage"] == {"input_tokens": 3 * JUDGE_IN, "output_tokens": 3 * JUDGE_OUT}
    # The generator's cost prices only the generator's tokens, at the generator's rates.
    assert doc["cost"] == pytest.approx((3 * GEN_IN * 1.0 + 3 * GEN_OUT * 2.0) / 1e6)
    rows = query(db_file, "select input_tokens, output_tokens, metrics from runs where run_id = ?", doc["run_id"])
    ((tokens_in, tokens_out, metrics),) = rows
    assert (tokens_in, tokens_out) == (3 * GEN_IN, 3 * GEN_OUT)
    assert (json.loads(metrics)["grader_input_tokens"], json.loads(metrics)["grader_output_tokens"]) == (
        3 * JUDGE_IN,
        3 * JUDGE_OUT,
    )
    table = cli("run", "sets/tokens.yaml", "--grader", "decision", "--no-cache")
    assert f"judge tokens {3 * JUDGE_IN:,} in / {3 * JUDGE_OUT:,} out" in table.stdout


def test_judge_cost_is_reported_apart_from_the_generator(cli: Any, project: Path, judge: JudgeScript) -> None:
    write_set("cost", ["question a", "question b"])
    result, doc = run(cli, "sets/cost.yaml")
    assert result.exit_code == 0, result.stderr
    assert doc["cost"] == pytest.approx((2 * GEN_IN * 1.0 + 2 * GEN_OUT * 2.0) / 1e6)
    judge_cost = (2 * JUDGE_IN * 3.0 + 2 * JUDGE_OUT * 5.0) / 1e6
    assert doc["grader_cost"] == pytest.approx(judge_cost)
    table = cli("run", "sets/cost.yaml", "--grader", "decision", "--no-cache")
    assert table.exit_code == 0, table.stderr
    assert f"judge cost ${judge_cost:.4f}" in table.stdout


@pytest.mark.parametrize(
    "text",
    [
        '{"level": 10, "justification": "Excellent."}',  # a 0-10 scale: read as level 1
        '{"level": 40, "justification": "x"}',  # read as level 4
        '{"level": 3.5, "justification": "Between."}',  # read as level 3
    ],
)
def test_a_judge_level_outside_the_five_levels_is_not_a_level(text: str) -> None:
    # README "Graders": five levels 0-4; an answer without one is a failed decision, never a guessed level.
    with pytest.raises(ValueError, match="level"):
        parse_answer(text)


def test_a_weighted_level_just_below_the_pass_mark_fails() -> None:
    # README "Graders": score = min(1, level/4), pass at score >= 0.6; 2.395 / 4 = 0.59875.
    grade = level_grade(2.395, "x", "decision:judge:m:v1")
    assert (grade.passed, grade.score) == (False, pytest.approx(0.59875))
    assert grade.reason == "level 2.395/4: x"  # two decimals (2.40) would contradict the verdict


@pytest.mark.parametrize(("level", "shown"), [(3.000005313178, "3.00"), (1.4e-11, "0.00"), (2.4049, "2.40")])
def test_a_weighted_level_is_shown_to_two_decimals_when_they_agree_with_the_verdict(level: float, shown: str) -> None:
    assert level_grade(level, "", "m").reason == f"level {shown}/4"


def test_a_judge_without_the_decision_grader_is_exit_2_before_any_call(
    cli: Any, project: Path, gen: FakeServer, judge: JudgeScript, db_file: Path
) -> None:
    write_set("nojudge", ["question a"])
    result = cli("run", "sets/nojudge.yaml", "--judge", "claude", "--format", "json")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (
        "Error: --judge claude is the judge of --grader decision; add --grader decision or drop --judge\n"
    )
    assert gen.requests == []
    assert not db_file.exists()


def test_judge_gradings_replayed_from_the_cache_are_counted(cli: Any, project: Path, judge: JudgeScript) -> None:
    prompts = write_set("replayed", ["question a", "question b"])
    for prompt in prompts:
        judge.script(prompt, verdict(4))
    first, doc = run(cli, "sets/replayed.yaml")
    assert first.exit_code == 0, first.stderr
    assert (doc["cached_count"], doc["judge_cached_count"]) == (0, 0)
    second = cli("run", "sets/replayed.yaml", "--grader", "decision")
    assert "answers from the cache: 2 of 2, judge gradings from the cache: 2 of 2" in second.stdout
    _, again = run(cli, "sets/replayed.yaml")
    assert (again["cached_count"], again["judge_cached_count"]) == (2, 2)
