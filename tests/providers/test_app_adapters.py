"""The application adapters (README, "Testing your application"): ``http`` against a real server
on 127.0.0.1 (body template, env headers masked, dotted paths, a missing path, retries), and
``python`` with real files (sync, async, an exception, a timeout the run does not wait for,
imported once); identity, the cache (off unless asked) and the load-time checks."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fakeserver import FakeServer, Recorded, Reply

SET = """\
id: app.faq
name: FAQ
vars: {product: Acme}
prompts:
  - {id: refund, prompt: "How long do refunds take?", assertions: [{contains: "30 days"}]}
  - {id: hours, system: "Be brief.", prompt: "When are you open?", assertions: [{contains: "Monday"}]}
"""


def service(recorded: Recorded) -> Reply:
    """A FAQ service: answers under answer.text, its model under meta.model, what it retrieved."""
    question = recorded.json["question"] if isinstance(recorded.json, dict) else ""
    text = "Refunds take 30 days." if "refund" in question else "Monday to Friday."
    return Reply(
        json={
            "answer": {"text": text, "sources": ["doc-7"]},
            "meta": {"model": "faq-model-2"},
            "usage": {"in": 11, "out": 4},
        }
    )


def http_config(write_file: Any, url: str, extra: str = "") -> None:
    write_file(
        "evalkit.yaml",
        f"""\
        default_provider: app
        providers:
          - id: app
            adapter: http
            url: {url}/chat
            headers: {{Authorization: "Bearer {{{{ env.APP_TOKEN }}}}"}}
            body:
              question: "{{{{ prompt }}}}"
              history: "{{{{ messages | tojson }}}}"
              product: "{{{{ vars.product }}}}"
            response:
              output: answer.text
              model: meta.model
              usage: {{input_tokens: usage.in, output_tokens: usage.out}}
              context: answer.sources
            max_retries: 2
            retry_backoff_s: 0
        {extra}""",
    )
    write_file("set.yaml", SET)


def test_the_http_adapter_renders_the_body_and_reads_the_answer_at_its_paths(
    cli: Any, write_file: Any, fake_llm: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APP_TOKEN", "secret-token-123456")
    fake_llm.handler = service
    http_config(write_file, fake_llm.url)
    result = cli("run", "set.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert (doc["passed_count"], doc["error_count"]) == (2, 0)
    assert doc["generator"] == {"provider": "app", "model": "http", "reported_model": "faq-model-2"}
    assert {(r.method, r.path) for r in fake_llm.requests} == {("POST", "/chat")}
    assert {r.headers["authorization"] for r in fake_llm.requests} == {"Bearer secret-token-123456"}
    assert {r.json["product"] for r in fake_llm.requests} == {"Acme"}
    hours = next(r for r in fake_llm.requests if r.json["question"] == "When are you open?")
    assert json.loads(hours.json["history"]) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "When are you open?"},
    ]
    assert "secret-token-123456" not in result.stdout + result.stderr


def test_a_missing_output_path_is_the_item_s_error_with_the_answer_s_keys(
    cli: Any, write_file: Any, fake_llm: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APP_TOKEN", "t")
    fake_llm.handler = lambda recorded: Reply(json={"reply": "hi", "status": "ok"})
    http_config(write_file, fake_llm.url)
    result = cli("run", "set.yaml", "--format", "json")
    assert result.exit_code == 3
    errors = {item["error"] for item in json.loads(result.stdout)["items"]}
    assert errors == {
        "provider 'app': the answer has nothing at response.output 'answer.text'; its top-level keys: reply, status"
    }


def test_the_http_adapter_retries_as_the_model_adapters_do(
    cli: Any, write_file: Any, fake_llm: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APP_TOKEN", "t")
    fake_llm.handler = service
    fake_llm.enqueue(Reply(status=503, json={"error": "warming up"}), Reply(status=429, headers={"Retry-After": "0"}))
    http_config(write_file, fake_llm.url)
    result = cli("run", "set.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["passed_count"] == 2
    assert fake_llm.calls == 4


def test_a_header_s_unset_variable_is_exit_2_before_any_call(cli: Any, write_file: Any, fake_llm: FakeServer) -> None:
    http_config(write_file, fake_llm.url)
    result = cli("run", "set.yaml")
    assert result.exit_code == 2
    assert "environment variable APP_TOKEN is not set" in result.stderr
    assert fake_llm.calls == 0


def test_the_cache_is_off_for_an_application_unless_asked(
    cli: Any, write_file: Any, fake_llm: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APP_TOKEN", "t")
    fake_llm.handler = service
    http_config(write_file, fake_llm.url)
    for _ in range(2):
        assert cli("run", "set.yaml").exit_code == 0
    assert fake_llm.calls == 4  # every run called the application
    http_config(write_file, fake_llm.url, "    cache: true\n")
    for _ in range(2):
        assert cli("run", "set.yaml").exit_code == 0
    assert fake_llm.calls == 6  # the first cached run called it, the second replayed


# --- python ------------------------------------------------------------------------------------

ENTRY = """\
import asyncio, time

CALLS = []

def answer(request):
    CALLS.append(request["prompt_id"])
    text = "Refunds take 30 days." if "refund" in request["prompt"] else "Monday to Friday."
    return {"output": text, "model": "fn-model", "usage": {"input_tokens": 2, "output_tokens": 3},
            "seen": sorted(request)}

async def answer_async(request):
    await asyncio.sleep(0)
    return "Refunds take 30 days, Monday to Friday."

def unreported(request):
    return "Refunds take 30 days, Monday to Friday."

def broken(request):
    raise ValueError("no index loaded")

def stuck(request):
    time.sleep(600)
"""


def python_project(write_file: Any, function: str, extra: str = "") -> None:
    write_file("app/entry.py", ENTRY)
    write_file(
        "evalkit.yaml",
        f"default_provider: fn\nproviders:\n  - {{id: fn, adapter: python, function: 'app/entry.py:{function}'{extra}}}\n",
    )
    write_file("set.yaml", SET)


def run_json(cli: Any, *args: str) -> tuple[int, dict[str, Any]]:
    result = cli("run", "set.yaml", "--format", "json", *args)
    assert result.exception is None, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return result.exit_code, doc


def test_a_python_function_gets_the_request_and_reports_its_model(cli: Any, write_file: Any) -> None:
    python_project(write_file, "answer")
    code, doc = run_json(cli)
    assert code == 0
    assert doc["passed_count"] == 2
    assert doc["generator"]["reported_model"] == "fn-model"


def test_the_request_carries_every_documented_name() -> None:
    from evalkit.providers.app import app_request
    from evalkit.records import CompletionRequest, Message

    request = CompletionRequest(
        (Message("system", "S"), Message("user", "a"), Message("assistant", "b"), Message("user", "c")),
        "alias",
        {"temperature": 0},
        item_id="p1",
        set_id="s.x",
        vars={"k": 1},
    )
    assert app_request(request) == {
        "prompt": "c",
        "messages": [
            {"role": "system", "content": "S"},
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "b"},
            {"role": "user", "content": "c"},
        ],
        "system": "S",
        "vars": {"k": 1},
        "tools": None,
        "tool_choice": None,
        "params": {"temperature": 0},
        "set": "s.x",
        "prompt_id": "p1",
    }


def test_an_async_function_is_awaited_and_an_unreported_model_says_how_to_report_it(cli: Any, write_file: Any) -> None:
    python_project(write_file, "answer_async")
    code, doc = run_json(cli, "--fail-on-regression")
    assert doc["passed_count"] == 2
    assert code == 1  # unverified: not compared
    assert doc["comparison"]["state"] == "not_compared"
    assert "as `model` in the object it returns" in doc["comparison"]["reason"]


def test_an_exception_is_the_item_s_error_with_its_type_and_message(cli: Any, write_file: Any) -> None:
    python_project(write_file, "broken")
    code, doc = run_json(cli)
    assert code == 3
    assert {i["error"] for i in doc["items"]} == {"provider 'fn': the function raised ValueError: no index loaded"}


def test_a_stuck_function_times_out_and_the_run_does_not_wait_for_it(cli: Any, write_file: Any) -> None:
    python_project(write_file, "stuck", ", timeout_s: 0.2")
    started = time.monotonic()
    code, doc = run_json(cli)
    assert time.monotonic() - started < 60  # the function sleeps 600 s
    assert code == 3
    assert {i["error"] for i in doc["items"]} == {"provider 'fn': the function did not return within timeout_s (0.2 s)"}


def test_the_function_file_is_imported_once(isolated: Path, write_file: Any) -> None:
    from evalkit.config import ProviderConfig
    from evalkit.providers.pyfunc import function_of

    write_file(
        "app/counted.py",
        "import builtins\nbuiltins.evalkit_imports = getattr(builtins, 'evalkit_imports', 0) + 1\ndef f(r):\n    return 'x'\n",
    )
    config = ProviderConfig(id="fn", adapter="python", function="app/counted.py:f", root=isolated)
    assert function_of(config) is function_of(config)
    import builtins

    assert builtins.evalkit_imports == 1  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("{id: fn, adapter: python, function: 'app/none.py:f'}", "no Python file at 'app/none.py'"),
        ("{id: fn, adapter: python, function: 'app/entry.py:nothing'}", "defines no function 'nothing'"),
        ("{id: fn, adapter: python, function: 'app/entry'}", "must be path/file.py:function_name"),
        ("{id: fn, adapter: http, url: 'http://127.0.0.1:9/x'}", "missing required key 'response'"),
        (
            "{id: fn, adapter: http, url: 'http://127.0.0.1:9/x', response: {model: m}}",
            "response: missing required key 'output'",
        ),
        ("{id: fn, adapter: http, url: 'http://127.0.0.1:9/x', response: {output: 'a..b'}}", "is not a dotted path"),
        (
            "{id: fn, adapter: http, url: 'http://127.0.0.1:9/x', response: {output: a}, body: '{{ x'}",
            "template syntax error",
        ),
        ("{id: fn, adapter: command, command: 'nosuchprogram-xyz --flag'}", "no program 'nosuchprogram-xyz' on PATH"),
        ("{id: fn, adapter: command, command: 'echo \"unclosed'}", "cannot split the command"),
    ],
)
def test_validate_checks_an_application_before_anything_is_called(
    cli: Any, write_file: Any, entry: str, message: str
) -> None:
    write_file("app/entry.py", ENTRY)
    write_file("evalkit.yaml", f"providers:\n  - {entry}\n")
    result = cli("validate")
    assert result.exit_code == 2, result.stdout
    assert message in result.stdout + result.stderr
    assert "evalkit.yaml:2:" in result.stdout + result.stderr


# --- command -----------------------------------------------------------------------------------

PROGRAM = """\
import json, sys, time, subprocess
request = json.load(sys.stdin)
mode = sys.argv[1]
if mode == "json":
    text = "Refunds take 30 days." if "refund" in request["prompt"] else "Monday to Friday."
    print(json.dumps({"output": text, "model": "cmd-model", "context": [{"id": "d1", "text": "policy"}]}))
elif mode == "text":
    print("Refunds take 30 days, Monday to Friday. " + sys.argv[2])
elif mode == "fail":
    print("Traceback (most recent call last):\\n  oops", file=sys.stderr)
    sys.exit(4)
elif mode == "flood":
    sys.stdout.write("x" * (3 * 1024 * 1024))
elif mode == "hang":
    subprocess.Popen(["setsid", "sleep", "600"])
    time.sleep(600)
"""


def command_project(write_file: Any, arguments: str, extra: str = "") -> None:
    write_file("app/answer.py", PROGRAM)
    write_file(
        "evalkit.yaml",
        f"default_provider: cli\nproviders:\n  - {{id: cli, adapter: command, command: '{arguments}'{extra}}}\n",
    )
    write_file("set.yaml", SET)


def test_a_command_gets_the_request_on_stdin_and_answers_with_json(cli: Any, write_file: Any) -> None:
    command_project(write_file, "python3 app/answer.py json")
    code, doc = run_json(cli)
    assert code == 0, doc
    assert doc["passed_count"] == 2
    assert doc["generator"]["reported_model"] == "cmd-model"


def test_a_command_s_text_is_its_output_and_arguments_are_templates(cli: Any, write_file: Any) -> None:
    command_project(write_file, "python3 app/answer.py text {{ prompt_id }}")
    _, doc = run_json(cli)
    assert doc["passed_count"] == 2
    assert doc["generator"] is None  # a text answer reports no model


def test_a_failing_command_is_the_item_s_error_with_the_first_stderr_line(cli: Any, write_file: Any) -> None:
    command_project(write_file, "python3 app/answer.py fail")
    code, doc = run_json(cli)
    assert code == 3
    assert {i["error"] for i in doc["items"]} == {
        "provider 'cli': the command exited with status 4: Traceback (most recent call last):"
    }


def test_a_command_printing_past_max_response_mb_is_ended(cli: Any, write_file: Any) -> None:
    command_project(write_file, "python3 app/answer.py flood", ", max_response_mb: 1")
    code, doc = run_json(cli)
    assert code == 3
    assert {i["error"] for i in doc["items"]} == {
        "provider 'cli': the command printed more than max_response_mb (1 MB); it was ended"
    }


def test_a_command_that_hangs_is_ended_with_what_it_started(cli: Any, write_file: Any) -> None:
    command_project(write_file, "python3 app/answer.py hang", ", timeout_s: 0.5")
    started = time.monotonic()
    code, doc = run_json(cli)
    assert time.monotonic() - started < 60
    assert code == 3
    assert {i["error"] for i in doc["items"]} == {
        "provider 'cli': the command did not finish within timeout_s (0.5 s); it and everything it started were ended"
    }


def test_an_application_s_cache_key_holds_the_prompt_s_variables() -> None:
    from evalkit.records import CompletionRequest, Message
    from evalkit.runner import cache_key

    one, other = (CompletionRequest((Message("user", "q"),), "m", vars={"k": v}) for v in (1, 2))
    assert cache_key("fn", one, endpoint="python app/entry.py:f sha256:x") != cache_key(
        "fn", other, endpoint="python app/entry.py:f sha256:x"
    )
    # a model is not sent the variables: its key is what it was
    assert cache_key("m", one, endpoint="openai http://h/v1") == cache_key("m", other, endpoint="openai http://h/v1")


def test_validate_names_a_header_s_unset_variable_and_report_does_not_need_it(cli: Any, write_file: Any) -> None:
    write_file(
        "evalkit.yaml",
        "providers:\n  - {id: app, adapter: http, url: 'http://127.0.0.1:9/x', response: {output: a},\n"
        "     headers: {Authorization: 'Bearer {{ env.APP_TOKEN_UNSET }}'}}\n",
    )
    result = cli("validate")
    assert result.exit_code == 2
    assert "evalkit.yaml:3:" in result.stderr
    assert "environment variable APP_TOKEN_UNSET is not set (this header reads env.APP_TOKEN_UNSET)" in result.stderr
    assert cli("report").exit_code == 0  # a command that calls nothing needs no token


def test_an_unusable_environment_proxy_for_an_application_is_exit_2_before_any_call(
    cli: Any, write_file: Any, fake_llm: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APP_TOKEN", "t")
    monkeypatch.setenv("HTTP_PROXY", "ftp://proxy.example:21")
    http_config(write_file, fake_llm.url)
    result = cli("run", "set.yaml")
    assert result.exit_code == 2, result.stderr
    assert "HTTP_PROXY" in result.stderr
    assert fake_llm.calls == 0
    assert cli("validate").exit_code == 2


def test_cache_false_on_a_model_instance_turns_its_cache_off(
    cli: Any, write_file: Any, fake_llm: FakeServer, fake_config: Path
) -> None:
    """``cache`` is a key of every adapter (README, "Configuration"): a model endpoint whose
    instance says ``cache: false`` is asked every run, as an application is by default."""
    write_file("set.yaml", SET)
    for _ in range(2):
        assert cli("run", "set.yaml").exit_code in (0, 1)
    assert fake_llm.calls == 2  # cached by default: the second run replayed
    fake_config.write_text(fake_config.read_text() + "    cache: false\n")
    for _ in range(2):
        assert cli("run", "set.yaml").exit_code in (0, 1)
    assert fake_llm.calls == 6  # off: both runs asked the endpoint


# --- the README's example ------------------------------------------------------------------------

README_ENTRY = """\
def answer(request):
    text = "Refunds take 30 days." if "refund" in request["prompt"] else "Monday to Friday."
    return {"output": text, "model": "fn-model"}
"""

README_ASK = """\
import json, sys

request = json.load(sys.stdin)
assert sys.argv[1:] == ["--product", request["vars"]["product"]], sys.argv
text = "Refunds take 30 days." if "refund" in request["prompt"] else "Monday to Friday."
print(json.dumps({"output": text, "model": "cli-model"}))
"""


def readme_example() -> str:
    """The evalkit.yaml example of the README's "Testing your application"."""
    from tests.conftest import REPO

    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Testing your application\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```yaml\n", 1)[1].split("```", 1)[0]


@pytest.mark.parametrize(("instance", "reported"), [("app", "faq-model-2"), ("fn", "fn-model"), ("cli", "cli-model")])
def test_the_readme_s_three_adapters_run_as_written(
    cli: Any,
    write_file: Any,
    fake_llm: FakeServer,
    monkeypatch: pytest.MonkeyPatch,
    instance: str,
    reported: str,
) -> None:
    monkeypatch.setenv("APP_TOKEN", "secret-token-123456")
    fake_llm.handler = service
    example = readme_example()
    assert "http://127.0.0.1:8765/chat" in example
    write_file("evalkit.yaml", example.replace("http://127.0.0.1:8765", fake_llm.url))
    write_file("entry.py", README_ENTRY)
    write_file("ask.py", README_ASK)
    write_file("set.yaml", SET)
    code, doc = run_json(cli, "--provider", instance)
    assert code == 0, doc
    assert (doc["passed_count"], doc["error_count"]) == (2, 0), [i["reason"] for i in doc["items"]]
    assert doc["generator"]["reported_model"] == reported
    assert fake_llm.calls == (2 if instance == "app" else 0)


def test_a_body_template_s_bounds_hold_per_request_not_for_the_whole_run(
    cli: Any, write_file: Any, fake_llm: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The template bounds a set's load has in all (README, "Templates, variables, data files and
    conversations") hold for each request's body: a long run renders its body many times over."""
    from evalkit.sets import sandbox

    monkeypatch.setenv("APP_TOKEN", "t")
    fake_llm.handler = service
    http_config(write_file, fake_llm.url)
    body = len(json.dumps({"question": "How long do refunds take?", "history": "", "product": "Acme"}))
    monkeypatch.setattr(sandbox, "LIMITS", sandbox.Limits(set_text=2 * body + 200))
    prompts = "\n".join(
        f'  - {{id: p{i}, prompt: "How long do refunds take? ({i})", assertions: [{{contains: "30 days"}}]}}'
        for i in range(6)
    )
    write_file("set.yaml", f"id: app.many\nname: Many\nvars: {{product: Acme}}\nprompts:\n{prompts}\n")
    code, doc = run_json(cli)
    assert code == 0, [i["error"] for i in doc["items"]]
    assert (doc["passed_count"], fake_llm.calls) == (6, 6)
