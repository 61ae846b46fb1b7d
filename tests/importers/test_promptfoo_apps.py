"""promptfoo providers that call the user's application, imported and run through evalkit's
application adapters: the python provider's call_api kept unchanged behind the generated
wrapper, an exec: script as a command, an http provider with a dotted transformResponse. Each
round trip gives the verdicts promptfoo's documented semantics give (written down in the case's
expected.json with the reasoning)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalkit.records import PromptSet
from evalkit.sets import load_set
from tests.conftest import write
from tests.fakeserver import FakeServer, Recorded, Reply
from tests.importers.test_promptfoo_cases import expected_of, run_import, section

PROVIDERS = "Add to evalkit.yaml (API keys stay in the environment variables named):"


def printed_config(stdout: str, folder: Path) -> None:
    """The provider entries the import printed, as evalkit.yaml."""
    write(folder / "evalkit.yaml", "\n".join(section(stdout, PROVIDERS)) + "\n")


def verdicts(cli: Any, set_path: str, provider: str) -> dict[str, Any]:
    result = cli("run", set_path, "--provider", provider, "--format", "json")
    assert result.exit_code in (0, 1, 3), result.stderr
    return {item["id"]: item for item in json.loads(result.stdout)["items"]}


def test_python_provider_tool_calls_round_trip(isolated: Path, cli: Any) -> None:
    expected = expected_of("applications")
    result = run_import("applications", isolated, cli)
    assert result.exit_code == 0, result.stderr
    printed_config(result.stdout, isolated)
    written = load_set(isolated / "sets" / "applications.yaml")
    assert isinstance(written, PromptSet)
    assert [t["name"] for t in written.tools] == ["search", "lookup_order"]  # the provider's config.tools
    prompts = {p["id"]: p["prompt"] for p in expected["sets"]["applications"]["prompts"]}
    for batch in expected["tool_answers"]:
        replies = {prompts[a["id"]]: a["reply"] for a in batch["round"]}
        write(isolated / "applications" / "replies.json", json.dumps(replies))
        items = verdicts(cli, "sets/applications.yaml", "agent")
        for answer in batch["round"]:
            assert items[answer["id"]]["passed"] == answer["passed"], (answer, items[answer["id"]])


def test_python_provider_error_and_usage_reach_evalkit(isolated: Path, cli: Any) -> None:
    result = run_import("applications", isolated, cli)
    assert result.exit_code == 0, result.stderr
    printed_config(result.stdout, isolated)
    refund = "Customer asks: What is the refund window?"
    order = "Customer asks: Where is order 42?"
    calls = [{"name": "search", "arguments": {"query": "x"}}, {"name": "lookup_order", "arguments": {"order_id": "4"}}]
    replies = {refund: {"error": "upstream timed out"},
               order: {"output": {"tool_calls": calls}, "tokenUsage": {"prompt": 12, "completion": 7}}}  # fmt: skip
    write(isolated / "applications" / "replies.json", json.dumps(replies))
    run = cli("run", "sets/applications.yaml", "--provider", "agent", "--format", "json")
    assert run.exit_code == 3, run.stderr  # an errored item
    document = json.loads(run.stdout)
    items = {item["id"]: item for item in document["items"]}
    assert "upstream timed out" in items["refund"]["error"]
    assert items["order-status"]["passed"] is True
    assert [c["name"] for c in items["order-status"]["tool_calls"]] == ["search", "lookup_order"]
    assert document["usage"] == {"input_tokens": 12, "output_tokens": 7}


def test_a_rerun_keeps_the_wrapper_and_an_edited_one_needs_force(isolated: Path, cli: Any) -> None:
    assert run_import("applications", isolated, cli).exit_code == 0
    wrapper = isolated / "sets" / "promptfoo_provider.py"
    wrapper.write_text(wrapper.read_text(encoding="utf-8") + "# edited\n", encoding="utf-8")
    refused = cli("import", "promptfoo", "applications/promptfooconfig.yaml", "--out", "sets")
    assert refused.exit_code == 2
    assert "promptfoo_provider.py exists and differs from the import; pass --force" in refused.stderr
    assert wrapper.read_text(encoding="utf-8").endswith("# edited\n")


EXEC_CONFIG = """\
prompts: ['Say {{word}}']
providers: ['exec: {python} shout.py']
tests:
  - vars: {word: hello world}
    assert: [{type: equals, value: 'SAY HELLO WORLD'}]
"""


def test_exec_provider_gets_the_prompt_as_one_argument(isolated: Path, cli: Any) -> None:
    write(isolated / "shout.py", "import sys\nprint(sys.argv[1].upper())\n")  # promptfoo: the prompt is argv[1]
    write(isolated / "promptfooconfig.yaml", EXEC_CONFIG.replace("{python}", sys.executable))
    result = cli("import", "promptfoo", "promptfooconfig.yaml", "--out", "sets", "--id", "shout")
    assert result.exit_code == 0, result.stderr
    printed_config(result.stdout, isolated)
    assert verdicts(cli, "sets/shout.yaml", "command")["test-1"]["passed"] is True


HTTP_CONFIG = """\
prompts: ['Answer briefly: {{{{question}}}}']
providers:
  - id: https
    label: support
    config:
      url: {url}/api/chat
      method: POST
      headers: {{X-Team: evals, X-Key: '{{{{env.SUPPORT_KEY}}}}', Authorization: Bearer sk-live-0000}}
      body: {{message: '{{{{prompt}}}}', topic: '{{{{topic}}}}'}}
      transformResponse: json.choices[0].message.content
tests:
  - vars: {{question: refund window?, topic: refunds}}
    assert: [{{type: icontains, value: 30 days}}]
"""


@pytest.fixture
def support() -> Iterator[FakeServer]:
    server = FakeServer().start()

    def reply(request: Recorded) -> Reply:
        body = request.json
        text = "Refunds: 30 days." if body["topic"] == "refunds" else "Ask again."
        return Reply(json={"choices": [{"message": {"content": text}}]})

    server.handler = reply
    yield server
    server.stop()


def test_http_provider_sends_the_body_and_reads_the_dotted_transform(
    isolated: Path, cli: Any, support: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUPPORT_KEY", "k-123")
    write(isolated / "promptfooconfig.yaml", HTTP_CONFIG.format(url=support.url))
    result = cli("import", "promptfoo", "promptfooconfig.yaml", "--out", "sets", "--id", "support")
    assert result.exit_code == 0, result.stderr
    assert "sk-live" not in result.stdout  # a credential written in the config is never copied
    assert section(result.stdout, "Partly converted:") == [
        "promptfooconfig.yaml:3: provider https header Authorization: a credential written in the config is not "
        "copied; send it as {{ env.NAME }}"
    ]
    printed_config(result.stdout, isolated)
    assert verdicts(cli, "sets/support.yaml", "support")["test-1"]["passed"] is True
    (request,) = support.requests
    assert request.json == {"message": "Answer briefly: refund window?", "topic": "refunds"}
    assert (request.headers["x-team"], request.headers["x-key"]) == ("evals", "k-123")
    assert "authorization" not in request.headers


MODEL_TOOLS = """\
prompts: ['Weather in {{city}}?']
providers:
  - id: openai:chat:gpt-4o-mini
    config:
      tools:
        - type: function
          function: {name: get_weather, parameters: {type: object, properties: {city: {type: string}}}}
tests:
  - vars: {city: Oslo}
    assert: [{type: trajectory:tool-used, value: get_weather}]
"""


def test_a_model_providers_tools_become_the_sets(isolated: Path, cli: Any) -> None:
    write(isolated / "promptfooconfig.yaml", MODEL_TOOLS)
    result = cli("import", "promptfoo", "promptfooconfig.yaml", "--out", "sets", "--id", "weather")
    assert result.exit_code == 0, result.stderr
    assert "Partly converted:" not in result.stdout
    written = load_set(isolated / "sets" / "weather.yaml")
    assert isinstance(written, PromptSet)
    assert written.tools == (
        {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
    )
    assert [(a.type, a.value) for a in written.prompts[0].assertions] == [("tool_called", "get_weather")]


def test_a_python_provider_outside_the_config_folder_is_refused(isolated: Path, cli: Any) -> None:
    write(isolated / "agent.py", "def call_api(prompt, options, context):\n    return {'output': 'x'}\n")
    write(isolated / "cfg" / "promptfooconfig.yaml", "prompts: [hi]\nproviders: ['file://../agent.py']\n")
    result = cli("import", "promptfoo", "cfg/promptfooconfig.yaml", "--out", "sets")
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: cfg/promptfooconfig.yaml:2:")
    assert "../agent.py" in result.stderr
    assert not (isolated / "sets").exists()


def test_the_same_python_provider_with_two_configs_gets_two_wrappers(isolated: Path, cli: Any) -> None:
    write(
        isolated / "agent.py",
        "def call_api(prompt, options, context):\n    return {'output': options['config']['say']}\n",
    )
    write(
        isolated / "promptfooconfig.yaml",
        "prompts: [hi]\nproviders:\n  - {id: 'file://agent.py', label: a, config: {say: one}}\n"
        "  - {id: 'file://agent.py', label: b, config: {say: two}}\n"
        "tests: [{assert: [{type: equals, value: one}]}]\n",
    )
    result = cli("import", "promptfoo", "promptfooconfig.yaml", "--out", "sets", "--id", "agent")
    assert result.exit_code == 0, result.stderr
    printed_config(result.stdout, isolated)
    assert verdicts(cli, "sets/agent.yaml", "a")["test-1"]["passed"] is True
    assert verdicts(cli, "sets/agent.yaml", "b")["test-1"]["passed"] is False


def test_an_application_providers_output_transform_is_listed(isolated: Path, cli: Any) -> None:
    write(
        isolated / "promptfooconfig.yaml",
        "prompts: [hi]\nproviders:\n  - id: 'exec: ./answer.sh'\n    transform: output.trim()\n"
        "tests: [{assert: [{type: contains, value: hi}]}]\n",
    )
    result = cli("import", "promptfoo", "promptfooconfig.yaml", "--out", "sets")
    assert result.exit_code == 0, result.stderr
    partly = section(result.stdout, "Partly converted:")
    assert partly == ["promptfooconfig.yaml:3: provider exec: ./answer.sh transform: evalkit grades the raw response"]


@pytest.mark.parametrize(
    ("provider", "why"),
    [
        ("'exec: python3 \"unclosed'", "evalkit cannot split its command (No closing quotation); fix its quoting"),
        ("{id: http, config: {url: ftp://host/x, transformResponse: json.output}}", "it names no http(s) url;"),
        ("{id: https, config: {url: 'https://h/x'}}", "it reads the whole response;"),
    ],
)
def test_application_providers_evalkit_cannot_call_are_listed(
    isolated: Path, cli: Any, provider: str, why: str
) -> None:
    write(
        isolated / "promptfooconfig.yaml",
        f"prompts: [hi]\nproviders:\n  - {provider}\ntests: [{{assert: [{{type: contains, value: hi}}]}}]\n",
    )
    result = cli("import", "promptfoo", "promptfooconfig.yaml", "--out", "sets")
    assert result.exit_code == 0, result.stderr
    (line,) = section(result.stdout, "Not converted:")
    assert line.startswith("promptfooconfig.yaml:3: provider ")
    assert why in line
    assert section(result.stdout, PROVIDERS) == []
