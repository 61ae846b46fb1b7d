"""Tools and tool calls on the wire (README, "Tools and tool calls"): what the openai and anthropic
adapters send of a set's tools, the tool calls they read back, the application adapters' request
and answers, and the completion cache replaying them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalkit.api import run_set
from evalkit.records import ToolCall
from tests.fakeserver import FakeServer, Reply
from tests.providers.test_anthropic import claude_config  # noqa: F401  (a fixture)

SEARCH = {
    "name": "search",
    "description": "Search the docs",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
}

TOOL_SET = """
id: tools.wire
name: Tools on the wire
tools:
  - name: search
    description: Search the docs
    parameters:
      type: object
      properties: {query: {type: string}}
      required: [query]
tool_choice: {name: search}
prompts:
  - id: acts
    prompt: Find the refund policy
    assertions: [{exact: ""}, {tool_called: search}]
  - id: plain
    prompt: Say hi
    tools: []
    tool_choice: none
    assertions: [{exact: ""}]
"""


def openai_tool_reply(calls: list[dict[str, Any]], content: str | None = None) -> Reply:
    message = {"role": "assistant", "content": content, "tool_calls": calls}
    return Reply(
        json={
            "model": "fake-model-1",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2},
        }
    )


def openai_call(name: str, arguments: str) -> dict[str, Any]:
    return {"id": f"call_{name}", "type": "function", "function": {"name": name, "arguments": arguments}}


def test_openai_sends_the_tools_and_records_the_calls_of_an_answer_without_text(
    fake_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    write_file("sets/tools.yaml", TOOL_SET)
    calls = [openai_call("search", '{"query": "refunds"}'), openai_call("lookup", "{not json")]
    fake_llm.handler = lambda r: (
        openai_tool_reply(calls) if "Find" in str(r.json["messages"]) else openai_tool_reply([], "hi")
    )
    run = run_set("sets/tools.yaml", store=False)
    acts, plain = run.items
    assert acts.error is None
    assert acts.response == ""
    assert acts.passed
    assert acts.tool_calls == (ToolCall("search", {"query": "refunds"}), ToolCall("lookup", "{not json"))
    assert plain.tool_calls == ()
    assert plain.response == "hi"
    sent = {r.json["messages"][-1]["content"]: r.json for r in fake_llm.requests}
    assert sent["Find the refund policy"]["tools"] == [{"type": "function", "function": SEARCH}]
    assert sent["Find the refund policy"]["tool_choice"] == {"type": "function", "function": {"name": "search"}}
    assert "tools" not in sent["Say hi"]
    assert "tool_choice" not in sent["Say hi"]  # the API refuses a tool_choice without tools


def test_a_null_content_without_tool_calls_is_still_no_answer(
    fake_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    write_file("sets/tools.yaml", TOOL_SET)
    fake_llm.handler = lambda r: openai_tool_reply([])
    run = run_set("sets/tools.yaml", store=False)
    assert all(i.error and "content is null" in i.error for i in run.items)


def test_the_cache_replays_the_tool_calls(fake_config: Path, fake_llm: FakeServer, write_file: Any) -> None:
    write_file("sets/tools.yaml", TOOL_SET)
    fake_llm.handler = lambda r: openai_tool_reply([openai_call("search", '{"query": "x"}')])
    first = run_set("sets/tools.yaml")
    second = run_set("sets/tools.yaml")
    assert fake_llm.calls == 2  # the second run was served from the cache
    assert all(i.cached for i in second.items)
    assert second.items[0].passed  # tool_called: search, on the replayed calls
    assert (
        [i.tool_calls for i in second.items]
        == [i.tool_calls for i in first.items]
        == [(ToolCall("search", {"query": "x"}),)] * 2
    )


def test_tools_are_part_of_the_cache_key(fake_config: Path, fake_llm: FakeServer, write_file: Any) -> None:
    write_file("sets/tools.yaml", TOOL_SET)
    run_set("sets/tools.yaml")
    write_file("sets/tools.yaml", TOOL_SET.replace("Search the docs", "Search the manual"))
    run_set("sets/tools.yaml")
    assert fake_llm.calls == 3  # 'acts' declares the changed tool: asked again; 'plain' declares none


@pytest.mark.usefixtures("claude_config")
def test_anthropic_sends_its_tool_form_and_reads_tool_use_blocks(fake_llm: FakeServer, write_file: Any) -> None:
    write_file("sets/tools.yaml", TOOL_SET.replace("tool_choice: {name: search}", "tool_choice: required"))
    content = [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"query": "refunds"}},
    ]
    fake_llm.handler = lambda r: Reply(
        json={"model": "claude-test-1", "content": content, "stop_reason": "tool_use", "usage": {}}
    )
    acts, _plain = run_set("sets/tools.yaml", store=False).items
    assert acts.response == "Let me look."
    assert acts.tool_calls == (ToolCall("search", {"query": "refunds"}),)
    sent = {r.json["messages"][-1]["content"]: r.json for r in fake_llm.requests}
    assert sent["Find the refund policy"]["tools"] == [
        {"name": "search", "description": "Search the docs", "input_schema": SEARCH["parameters"]}
    ]
    assert sent["Find the refund policy"]["tool_choice"] == {"type": "any"}
    assert "tools" not in sent["Say hi"]
    assert "tool_choice" not in sent["Say hi"]


APP = """\
def answer(request):
    if request["prompt_id"] == "plain":
        return {"output": "hi", "tool_calls": [{"arguments": "{}"}]}
    return {
        "output": None,
        "model": "fn-model",
        "tool_calls": [
            {"name": "search", "arguments": {"query": "refunds"}},
            {"type": "function", "function": {"name": "lookup", "arguments": "{\\"id\\": 7}"}},
        ],
        "context": ["Refunds take 30 days.", request["tools"][0]["name"], request["tool_choice"]["name"]],
    }
"""


def test_an_application_gets_the_tools_and_its_calls_are_recorded(write_file: Any) -> None:
    write_file("app.py", APP)
    write_file(
        "evalkit.yaml", "default_provider: fn\nproviders:\n  - {id: fn, adapter: python, function: 'app.py:answer'}\n"
    )
    write_file("sets/tools.yaml", TOOL_SET)
    acts, plain = run_set("sets/tools.yaml", store=False).items
    assert acts.response == ""
    assert acts.error is None
    assert acts.tool_calls == (ToolCall("search", {"query": "refunds"}), ToolCall("lookup", {"id": 7}))
    assert acts.context == ["Refunds take 30 days.", "search", "search"]  # it was given the tools
    assert plain.error is not None
    assert "tool_calls[0] has no name" in plain.error


def test_an_http_application_gets_the_tools_in_its_body_and_answers_with_calls(
    fake_llm: FakeServer, write_file: Any
) -> None:
    write_file(
        "evalkit.yaml",
        f"""\
        default_provider: app
        providers:
          - id: app
            adapter: http
            url: {fake_llm.url}/chat
            body: {{question: "{{{{ prompt }}}}", tools: "{{{{ tools | tojson }}}}"}}
            response: {{output: reply, tool_calls: actions, context: sources}}
        """,
    )
    write_file("sets/tools.yaml", TOOL_SET)
    fake_llm.handler = lambda r: Reply(
        json={"reply": None, "actions": [{"name": "search", "arguments": '{"query": "refunds"}'}], "sources": "FAQ"}
    )
    acts, _ = run_set("sets/tools.yaml", store=False).items
    assert acts.error is None
    assert acts.tool_calls == (ToolCall("search", {"query": "refunds"}),)
    assert acts.context == "FAQ"
    sent = {r.json["question"]: json.loads(r.json["tools"]) for r in fake_llm.requests}
    assert sent == {"Find the refund policy": [SEARCH], "Say hi": None}


def test_an_application_s_context_stays_json() -> None:
    from evalkit.providers.app import app_completion
    from evalkit.records import CompletionRequest, Message

    request = CompletionRequest((Message("user", "q"),), "m")
    answer = {"output": "a", "context": [{"score": float("nan")}, "doc"]}
    completion = app_completion(answer, request, instance="fn", adapter="python", latency_ms=1.0)
    assert completion.context == [{"score": "nan"}, "doc"]
