"""Faults during `evalkit run`: a null answer is an item error and is not cached, an exit 3 run
under --format json says on stderr how many items errored, and a --concurrency above the
provider's max_concurrency is said once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fakeserver import FakeServer, Recorded, Reply, last_user_message, openai_reply

THREE = """
id: hostile.three
name: Three
prompts:
  - {id: q0, prompt: question 0, assertions: [{contains: echo}]}
  - {id: q1, prompt: question 1, assertions: [{contains: echo}]}
  - {id: q2, prompt: question 2, assertions: [{contains: echo}]}
"""


def test_null_content_is_an_item_error_and_is_not_cached(
    cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    def answer(request: Recorded) -> Reply:
        if last_user_message(request).endswith("1"):
            reply = openai_reply("")
            reply.json["choices"][0]["message"]["content"] = None
            return reply
        return openai_reply(f"echo: {last_user_message(request)}")

    fake_llm.handler = answer
    write_file("sets/three.yaml", THREE)
    for _ in range(2):
        result = cli("run", "sets/three.yaml", "--format", "json")
        assert result.exit_code == 3
        items = {i["id"]: i for i in json.loads(result.stdout)["items"]}
        assert items["q1"]["error"] == (
            "provider 'fake': choices[0].message.content is null (finish_reason 'stop'): the endpoint gave no answer"
        )
        assert items["q0"]["error"] is None
    q1_calls = [r for r in fake_llm.requests if last_user_message(r).endswith("1")]
    assert len(q1_calls) == 2  # asked again: a missing answer is never replayed from the cache


def test_an_exit_3_run_under_format_json_says_on_stderr_how_many_items_errored(
    cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    def answer(request: Recorded) -> Reply:
        if last_user_message(request).endswith("2"):
            return Reply(status=400, json={"error": {"message": "bad request"}})
        return openai_reply(f"echo: {last_user_message(request)}")

    fake_llm.handler = answer
    write_file("sets/three.yaml", THREE)
    result = cli("run", "sets/three.yaml", "--format", "json")
    assert result.exit_code == 3
    run_id = json.loads(result.stdout)["run_id"]
    assert result.stderr.splitlines()[-1] == (
        f"Error: 1 of 3 items errored (hostile.three {run_id}: 1); each item's error says why"
    )
    assert result.stderr.count("errored") == 1


def test_concurrency_above_max_concurrency_is_said_once(cli: Any, fake_llm: FakeServer, write_file: Any) -> None:
    write_file(
        "evalkit.yaml",
        f"""
        default_provider: fake
        providers:
          - id: fake
            adapter: openai
            base_url: {fake_llm.url}/v1
            model: alias-1
            max_concurrency: 2
        """,
    )
    write_file("sets/three.yaml", THREE)
    write_file("sets/other.yaml", THREE.replace("hostile.three", "hostile.other"))
    result = cli("run", "sets/three.yaml", "sets/other.yaml", "--concurrency", "8", "--format", "json")
    assert result.exit_code == 0, result.stderr
    notes = [line for line in result.stderr.splitlines() if "max_concurrency" in line]
    assert notes == [
        "Note: --concurrency 8 is above max_concurrency of 'fake' (2): at most that many calls are in flight "
        "(raise max_concurrency in evalkit.yaml)"
    ]
    for args in (("--concurrency", "2"), ()):
        quiet = cli("run", "sets/three.yaml", *args, "--format", "json")
        assert "max_concurrency" not in quiet.stderr
