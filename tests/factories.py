"""Build records for store and comparison tests without running a model, and the one-prompt
project on a loopback server that several CLI tests share."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from evalkit.records import AssertionResult, ItemResult, RunResult, ServingRecord, Tolerances
from evalkit.runner import new_run_id
from tests.fakeserver import FakeServer, openai_reply

GEN = ServingRecord("fake", "alias-1", "model-1")


def item(
    item_id: str,
    passed: bool,
    *,
    score: float | None = None,
    serving: ServingRecord | None = GEN,
    error: str | None = None,
    response: str = "an answer",
) -> ItemResult:
    if error is not None:
        return ItemResult(
            id=item_id, passed=False, score=0.0, reason=f"error: {error}", error=error, prompt=f"prompt {item_id}"
        )
    return ItemResult(
        id=item_id,
        passed=passed,
        score=(1.0 if passed else 0.0) if score is None else score,
        reason="assertion holds" if passed else "contains 'x': not found",
        latency_ms=12.5,
        assertions=(AssertionResult("contains", passed, "" if passed else "contains 'x': not found"),),
        prompt=f"prompt {item_id}",
        response=response,
        serving=serving,
        adapter="openai",
        yardstick="deterministic",
    )


def run_of(
    passed: int,
    total: int,
    *,
    set_id: str = "demo.set",
    serving: ServingRecord | None = GEN,
    grader: str = "deterministic",
    errors: int = 0,
    started_at: str | None = None,
    tolerance: str = "0.1",
) -> RunResult:
    items = tuple(item(f"p{i}", i < passed, serving=serving) for i in range(total - errors)) + tuple(
        item(f"e{i}", False, error="HTTP 500") for i in range(errors)
    )
    stamp = started_at or "2026-11-30T12:00:00.000+00:00"
    return RunResult.create(
        items,
        run_id=new_run_id(),
        set_id=set_id,
        set_fingerprint="f" * 16,
        provider=serving.provider if serving else "fake",
        model=serving.model if serving else "alias-1",
        grader=grader,
        started_at=stamp,
        finished_at=stamp,
        tolerances=Tolerances(Decimal(tolerance), Decimal(tolerance)),
    )


# a project of one prompt answered by a loopback OpenAI-compatible server
ONE_PROMPT = """
id: hour.one
name: One prompt
prompts:
  - id: greet
    prompt: Say hi
    assertions: [{contains: hi}]
"""


def fake_project(write_file: Any, server: FakeServer, extra: str = "") -> None:
    write_file(
        "evalkit.yaml",
        f"""
        {extra}
        providers:
          - id: fake
            adapter: openai
            base_url: {server.url}/v1
            model: fake-alias
            max_retries: 0
        """,
    )
    write_file("sets/one.yaml", ONE_PROMPT)
    server.handler = lambda request: openai_reply("hi there")


def run_json(cli: Any, *args: str) -> dict[str, Any]:
    result = cli("run", *args, "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc
