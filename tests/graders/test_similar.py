"""The ``similar`` assertion through the CLI (README "Model-graded assertions"): a generator, the
scripted judge of tests/judgeserver.py and an embeddings endpoint, three real HTTP servers on
127.0.0.1 speaking OpenAI's chat and ``/embeddings`` wire formats. The embeddings server answers
a bag-of-words vector per text, so the test computes the cosine it expects from the same texts."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.conftest import write
from tests.fakeserver import FakeServer, Recorded, Reply, openai_reply, serving
from tests.graders.conftest import json_runner, judged_project
from tests.judgeserver import JUDGE_MODEL

EMB_MODEL = "text-embedding-3-small-0125"
DIMS = 32
ANSWER = "Refunds are accepted within 30 days of delivery. Thank you for asking!"
CLOSE = "Refunds are accepted within 30 days of delivery."
FAR = "Our office cat sleeps on the printer every afternoon."


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def vector(text: str) -> list[float]:
    """Word counts folded into DIMS slots (a word's slot by its letters)."""
    slots = [0.0] * DIMS
    for word, count in Counter(words(text)).items():
        slots[sum(ord(c) * (i + 1) for i, c in enumerate(word)) % DIMS] += count
    return slots


def expected_score(a: str, b: str) -> float:
    va, vb = vector(a), vector(b)
    dot = sum(x * y for x, y in zip(va, vb, strict=True))
    return max(0.0, min(1.0, dot / math.sqrt(sum(x * x for x in va) * sum(y * y for y in vb))))


def embeddings_handler(request: Recorded) -> Reply:
    texts = list(request.json["input"])
    return Reply(
        json={
            "object": "list",
            "model": EMB_MODEL,
            "data": [{"object": "embedding", "index": i, "embedding": vector(t)} for i, t in enumerate(texts)],
            "usage": {"prompt_tokens": sum(len(words(t)) for t in texts)},
        }
    )


def gen_handler(request: Recorded) -> Reply:
    return openai_reply(ANSWER, model="gen-model-1", prompt_tokens=10, completion_tokens=5)


@pytest.fixture
def gen(fake_llm: FakeServer) -> FakeServer:
    fake_llm.handler = gen_handler
    return fake_llm


@pytest.fixture
def emb() -> Iterator[FakeServer]:
    with serving(embeddings_handler) as server:
        yield server


@pytest.fixture
def project(isolated: Path, gen: FakeServer, judge: FakeServer, emb: FakeServer) -> Path:
    return judged_project(
        isolated,
        gen,
        judge,
        settings="embeddings: {provider: emb}",
        providers=f"""
        - id: emb
          adapter: openai
          base_url: {emb.url}/v1
          model: text-embedding-3-small
          max_retries: 0
          cost: {{input_per_mtok: 20.0, output_per_mtok: 0.0}}
        """,
    )


ONE_PROMPT = f"""
id: support.similar
name: Similar answers
prompts:
  - id: window
    prompt: What is the refund window?
    assertions:
      - contains: "30 days"
      - rubric: 'Names the "30 days" window'
      - {{type: similar, value: "{CLOSE}", min: 0.7}}
      - {{type: not_similar, value: "{FAR}"}}
"""

SIMILAR_ONLY = f"""
id: support.similar
name: Similar answers
prompts:
  - id: window
    prompt: What is the refund window?
    assertions:
      - similar: {{value: "{CLOSE}", min: 0.7}}
  - id: again
    prompt: How long do I have for a refund?
    assertions:
      - similar: {{value: "{CLOSE}", min: 0.7}}
"""


run_json = json_runner("sets/s.yaml")


def embedded(emb: FakeServer) -> list[str]:
    return [text for r in emb.requests for text in r.json["input"]]


def test_contains_rubric_and_similar_grade_one_prompt(
    cli: Any, project: Path, judge: FakeServer, emb: FakeServer
) -> None:
    write(Path("sets/s.yaml"), ONE_PROMPT)
    result, doc = run_json(cli)
    assert result.exit_code == 0, result.stderr
    assert doc["grader"] == f"judged:emb:{EMB_MODEL}+judge:{JUDGE_MODEL}"
    (item,) = doc["items"]
    kinds = [(a["type"], a["passed"]) for a in item["assertions"]]
    assert kinds == [("contains", True), ("rubric", True), ("similar", True), ("not_similar", True)]
    similar, not_similar = item["assertions"][2:]
    assert similar["score"] == pytest.approx(expected_score(ANSWER, CLOSE))
    assert expected_score(ANSWER, FAR) < 0.8  # not_similar holds below the default min
    assert not_similar["score"] == pytest.approx(1.0 - expected_score(ANSWER, FAR))
    assert similar["yardstick"] == not_similar["yardstick"] == f"evalkit.similar:emb:{EMB_MODEL}:v1"
    # one request: the answer and both expected values, each once
    assert sorted(embedded(emb)) == sorted([ANSWER, CLOSE, FAR])
    tokens = sum(len(words(t)) for t in (ANSWER, CLOSE, FAR))
    rubric_calls = 1
    assert doc["judge"]["calls"] == rubric_calls + len(emb.requests)
    assert doc["judge"]["cached"] == 0
    assert doc["judge"]["input_tokens"] == 100 + tokens  # the scripted judge counts 100 a call
    assert doc["judge"]["cost"] == pytest.approx(tokens * 20.0 / 1e6)  # only the embeddings are priced
    assert doc["usage"] == {"input_tokens": 10, "output_tokens": 5}  # the generator's, apart


def test_a_dissimilar_answer_fails_with_its_score(cli: Any, project: Path, emb: FakeServer) -> None:
    write(Path("sets/s.yaml"), SIMILAR_ONLY.replace(CLOSE, FAR))
    result, doc = run_json(cli)
    assert result.exit_code == 0, result.stderr  # failing items, no baseline to regress from
    assert doc["grader"] == f"judged:emb:{EMB_MODEL}"
    score = expected_score(ANSWER, FAR)
    for item in doc["items"]:
        assert item["passed"] is False
        assert item["assertions"][0]["score"] == pytest.approx(score)
        assert f"similarity {score:.3f} is below the min 0.7" in item["reason"]


def test_expected_values_are_embedded_once_per_run(cli: Any, project: Path, emb: FakeServer) -> None:
    write(Path("sets/s.yaml"), SIMILAR_ONLY)
    result, doc = run_json(cli, "--repeat", "2")
    assert result.exit_code == 0, result.stderr
    assert Counter(embedded(emb)) == {CLOSE: 1, ANSWER: 1}  # four answers, one text each
    assert {r.path for r in emb.requests} == {"/v1/embeddings"}  # an embeddings instance is not probed as a judge
    assert doc["judge"]["calls"] == len(emb.requests)


def test_a_rerun_of_unchanged_answers_makes_no_embeddings_call(cli: Any, project: Path, emb: FakeServer) -> None:
    write(Path("sets/s.yaml"), ONE_PROMPT)
    first, _ = run_json(cli)
    assert first.exit_code == 0, first.stderr
    sent = len(emb.requests)
    again, doc = run_json(cli)
    assert again.exit_code == 0, again.stderr
    assert len(emb.requests) == sent
    # one call a judged assertion (the rubric, similar, not_similar), each answered by the cache
    assert doc["judge"]["calls"] == doc["judge"]["cached"] == 3
    assert doc["judge"]["input_tokens"] == 0
    assert doc["grader"] == f"judged:emb:{EMB_MODEL}+judge:{JUDGE_MODEL}"
    rows = (
        duckdb.connect(str(Path.cwd().parent / "evalkit.duckdb"), read_only=True)
        .execute("SELECT grader FROM runs")
        .fetchall()
    )
    assert {g for (g,) in rows} == {doc["grader"]}
    skipped, _ = run_json(cli, "--no-cache")  # skips reading: embeds again
    assert skipped.exit_code == 0, skipped.stderr
    assert len(emb.requests) == 2 * sent  # as many requests as the first run


def test_a_failed_embedding_errors_the_item_with_the_reason(cli: Any, project: Path, emb: FakeServer) -> None:
    emb.handler = lambda request: Reply(status=500, json={"error": {"message": "embedding backend down"}})
    write(Path("sets/s.yaml"), ONE_PROMPT)
    result, doc = run_json(cli)
    assert result.exit_code == 3, result.stderr
    (item,) = doc["items"]
    assert "similar: judgement failed" in item["error"]
    similar = item["assertions"][2]
    assert similar["passed"] is False
    assert doc["grader"] == "judged"  # the rubric was judged, the embeddings failed: never compared


def test_a_run_whose_embeddings_all_failed_is_judged_failed(cli: Any, project: Path, emb: FakeServer) -> None:
    emb.handler = lambda request: Reply(status=500, json={"error": {"message": "embedding backend down"}})
    write(Path("sets/s.yaml"), SIMILAR_ONLY)
    result, doc = run_json(cli)
    assert result.exit_code == 3, result.stderr
    assert doc["grader"] == "judged:failed"
    assert all(i["error"] for i in doc["items"])


def test_an_embeddings_endpoint_that_refuses_stops_the_run(cli: Any, project: Path, emb: FakeServer) -> None:
    emb.handler = lambda request: Reply(status=401, json={"error": {"message": "bad key"}})
    write(Path("sets/s.yaml"), SIMILAR_ONLY)
    result = cli("run", "sets/s.yaml")
    assert result.exit_code == 3, (result.stdout, result.stderr)
    assert "401" in result.stderr or "refused" in result.stderr
    assert (
        not duckdb.connect(str(Path.cwd().parent / "evalkit.duckdb"), read_only=True)
        .execute("SELECT * FROM runs")
        .fetchall()
    )


def test_provider_on_the_assertion_picks_the_embeddings_instance(
    cli: Any, project: Path, emb: FakeServer, judge: FakeServer
) -> None:
    config = Path("evalkit.yaml")
    config.write_text(
        config.read_text() + f"  - {{id: emb2, adapter: openai, base_url: {emb.url}/v1, model: emb2-alias}}\n"
    )
    write(Path("sets/s.yaml"), SIMILAR_ONLY.replace("min: 0.7}", "min: 0.7, provider: emb2}", 1))
    result, doc = run_json(cli)
    assert result.exit_code == 0, result.stderr
    assert doc["grader"] == f"judged:emb2:{EMB_MODEL}+emb:{EMB_MODEL}"
    assert {r.json["model"] for r in emb.requests} == {"text-embedding-3-small", "emb2-alias"}
    assert not judge.requests  # no rubric: the judge is not asked, not even probed


def test_the_table_the_markdown_and_the_html_report_count_the_embeddings(cli: Any, project: Path) -> None:
    write(Path("sets/s.yaml"), SIMILAR_ONLY)  # both prompts answered alike: one request for both
    table = cli("run", "sets/s.yaml", "--markdown", "comment.md", "--html", "report.html")
    assert table.exit_code == 0, table.stderr
    tokens = len(words(ANSWER)) + len(words(CLOSE))
    cost = f"${tokens * 20.0 / 1e6:.4f}"
    footer = " ".join(table.stdout.split())  # the footer may wrap
    assert "judge calls 1 (0 cached)" in footer
    assert f"judge tokens {tokens} in / 0 out" in footer
    assert f"judge cost {cost}" in footer
    assert (
        f"Judge: judge calls 1 (0 cached) · tokens {tokens} in / 0 out · cost {cost}" in Path("comment.md").read_text()
    )
    assert f"Judge: 1 calls (0 cached) · tokens {tokens} in / 0 out · cost {cost}" in Path("report.html").read_text()


def test_the_embeddings_instance_retries_a_transient_fault(cli: Any, project: Path, emb: FakeServer) -> None:
    config = Path("evalkit.yaml")
    config.write_text(
        config.read_text().replace("max_retries: 0\n    cost:", "max_retries: 1\n    retry_backoff_s: 0.01\n    cost:")
    )
    faults = [Reply(status=503, json={"error": {"message": "busy"}})]
    emb.handler = lambda request: faults.pop() if faults else embeddings_handler(request)
    write(Path("sets/s.yaml"), SIMILAR_ONLY)
    result, doc = run_json(cli)
    assert result.exit_code == 0, result.stderr
    assert len(emb.requests) == 2  # the fault, then its retry
    assert all(item["passed"] and not item["error"] for item in doc["items"])
