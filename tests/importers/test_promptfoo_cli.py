"""``evalkit import promptfoo`` at the command line: bad input, re-runs, secrets, literal braces,
and cost/latency verdicts against a priced loopback server."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evalkit.records import PromptSet
from evalkit.sets import load_set
from tests.conftest import REPO
from tests.fakeserver import FakeServer, Recorded, Reply, last_user_message, openai_reply

CASES = REPO / "tests" / "data" / "promptfoo"


@pytest.mark.slow
def test_cost_and_latency_verdicts_against_a_priced_server(
    isolated: Path, cli: Any, write_file: Any, fake_llm: FakeServer
) -> None:
    expected = json.loads((CASES / "cost_latency" / "expected.json").read_text(encoding="utf-8"))
    shutil.copytree(CASES / "cost_latency", isolated / "cost_latency")
    assert cli("import", "promptfoo", "cost_latency/promptfooconfig.yaml", "--out", "sets").exit_code == 0
    write_file(
        "evalkit.yaml",
        f"""
        providers:
          - id: fake
            adapter: openai
            base_url: {fake_llm.url}/v1
            model: gpt-4o-mini
            max_retries: 0
            cost: {{input_per_mtok: 1, output_per_mtok: 1}}
        """,
    )
    prompts = {p.prompt: p.id for p in load_set(isolated / "sets" / "cost_latency.yaml").prompts}  # type: ignore[union-attr]
    for served in expected["served"]:

        def answer(request: Recorded, served: dict[str, Any] = served) -> Reply:
            prompt_id = prompts[last_user_message(request)]
            if prompt_id != served["id"]:
                return openai_reply("-", model="m")
            reply = openai_reply(served["response"], model="m", prompt_tokens=served["prompt_tokens"],
                                 completion_tokens=served["completion_tokens"])  # fmt: skip
            reply.delay_s = served["delay_s"]
            return reply

        fake_llm.handler = answer
        result = cli("run", "sets/cost_latency.yaml", "--provider", "fake", "--format", "json", "--no-cache")
        assert result.exit_code in (0, 1), result.stderr
        items = {item["id"]: item for item in json.loads(result.stdout)["items"]}
        wanted = served.get("evalkit_passed", served["passed"])  # evalkit's where it differs on purpose
        assert items[served["id"]]["passed"] is wanted, (served, items[served["id"]])


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({}, "Error: promptfooconfig.yaml: file not found; check the path"),
        ({"promptfooconfig.yaml": "prompts: [a\n"}, "Error: promptfooconfig.yaml:2:1: YAML error:"),
        ({"promptfooconfig.yaml": "- a\n- b\n"}, "Error: promptfooconfig.yaml:1:1: not a promptfoo config: expected a"),
        (
            {"promptfooconfig.yaml": "id: x\nname: y\n"},
            "Error: promptfooconfig.yaml:1:1: not a promptfoo config: no prompts:",
        ),
        (
            {"promptfooconfig.yaml": "providers: [openai:gpt-4o]\ntests: []\n"},
            "Error: promptfooconfig.yaml:1:1: no prompts: promptfoo needs the prompts to send",
        ),
        (
            {"promptfooconfig.yaml": "prompts:\n  - 'ok {{x}}'\n  - file://missing.txt\n"},
            "Error: promptfooconfig.yaml:3:5: prompts[1]: file not found: 'missing.txt'",
        ),
        (
            {
                "promptfooconfig.yaml": "prompts: ['{{x}}']\ntests: file://t.csv\n",
                "t.csv": "x,__expected\na,b\nc,d,e\n",
            },
            "Error: t.csv:3:1: 3 fields where the header has 2; quote a field holding commas",
        ),
        (
            {"promptfooconfig.yaml": "prompts: ['{{x}}']\ntests:\n  - vars: [1, 2]\n"},
            "Error: promptfooconfig.yaml:3:11: tests[0].vars: vars files are named by paths",
        ),
        (
            {"promptfooconfig.yaml": "prompts: ['{{x}}']\ntests:\n  - assert: {type: contains}\n"},
            "Error: promptfooconfig.yaml:3:13: tests[0].assert: assert must be a list of assertions",
        ),
        (
            {"promptfooconfig.yaml": "prompts: ['{{x}}']\ntests:\n  - description: only words\n"},
            "Error: promptfooconfig.yaml:3:5: tests[0]: a test case needs one of assert, vars, options",
        ),
    ],
)
def test_bad_input_is_exit_2_with_the_place(
    files: dict[str, str], message: str, isolated: Path, cli: Any, write_file: Any
) -> None:
    for name, text in files.items():
        (isolated / name).write_text(text, encoding="utf-8")
    result = cli("import", "promptfoo", "promptfooconfig.yaml", "--out", "sets")
    assert result.exit_code == 2
    assert result.stderr.startswith(message), result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert not (isolated / "sets").exists()


def test_nothing_to_convert_lists_why_and_writes_nothing(isolated: Path, cli: Any, write_file: Any) -> None:
    write_file(
        "promptfooconfig.yaml",
        """
        prompts: ['Tell a joke about {{topic}}']
        tests:
          - vars: {topic: cats}
            assert:
              - type: g-eval
                value: is funny
        """,
    )
    result = cli("import", "promptfoo", "promptfooconfig.yaml", "--out", "sets")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "Not converted:",
        "  promptfooconfig.yaml:5: g-eval: G-Eval's criteria and its step-by-step scoring have no evalkit equivalent; "
        "write the criteria as a rubric: (a judge rates the answer on five levels)",
        "  promptfooconfig.yaml:3: test: none of its assertions converts; evalkit needs one to grade",
        "Error: nothing to write: none of the 1 test of promptfooconfig.yaml converts (see the list above)",
    ]
    assert not (isolated / "sets").exists()


def test_an_invalid_set_id_is_refused(isolated: Path, cli: Any, write_file: Any) -> None:
    write_file("promptfooconfig.yaml", "prompts: ['hi']\ntests: [{assert: [{type: contains, value: a}]}]\n")
    result = cli("import", "promptfoo", "promptfooconfig.yaml", "--id", "Bad-Id")
    assert result.exit_code == 2
    assert result.stderr == (
        "Error: --id 'Bad-Id' is not a set id: lowercase letters, digits and _ in dot-separated parts\n"
    )
    ok = cli("import", "promptfoo", "promptfooconfig.yaml", "--id", "team.smoke", "--out", "here")
    assert ok.exit_code == 0, ok.stderr
    assert ok.stdout.splitlines()[0] == "Wrote here/team.smoke.yaml (set team.smoke, 1 prompt)"


def test_a_rerun_is_unchanged_and_an_edited_file_needs_force(isolated: Path, cli: Any, write_file: Any) -> None:
    write_file("promptfooconfig.yaml", "prompts: ['hi']\ntests: [{assert: [{type: contains, value: a}]}]\n")
    assert cli("import", "promptfoo", "promptfooconfig.yaml").exit_code == 0
    target = isolated / "sets" / "work.yaml"
    again = cli("import", "promptfoo", "promptfooconfig.yaml")
    assert again.exit_code == 0
    assert again.stdout.splitlines()[0] == "Unchanged sets/work.yaml (set work, 1 prompt)"
    target.write_text(target.read_text(encoding="utf-8") + "# my note\n", encoding="utf-8")
    refused = cli("import", "promptfoo", "promptfooconfig.yaml")
    assert refused.exit_code == 2
    assert refused.stderr == "Error: sets/work.yaml exists and differs from the import; pass --force to overwrite it\n"
    assert target.read_text(encoding="utf-8").endswith("# my note\n")
    forced = cli("import", "promptfoo", "promptfooconfig.yaml", "--force")
    assert forced.exit_code == 0
    assert not target.read_text(encoding="utf-8").endswith("# my note\n")


def test_a_key_in_the_config_is_never_printed_or_written(isolated: Path, cli: Any) -> None:
    shutil.copytree(CASES / "not_converted", isolated / "not_converted")
    result = cli("import", "promptfoo", "not_converted/promptfooconfig.yaml", "--out", "sets")
    assert result.exit_code == 0
    assert "sk-NOT-A-REAL-KEY" not in result.stdout + result.stderr
    assert all("sk-NOT-A-REAL-KEY" not in p.read_text(encoding="utf-8") for p in (isolated / "sets").iterdir())


def test_literal_braces_survive_evalkits_templates(isolated: Path, cli: Any, write_file: Any) -> None:
    """Text that holds {{ or {% after promptfoo's rendering (a var naming an undefined variable
    is inserted as written; a raw block) loads back as that text."""
    write_file(
        "promptfooconfig.yaml",
        """
        prompts:
          - 'Explain this Jinja line: {{ code }} {% raw %}and {% if %}{% endraw %}'
        tests:
          - vars:
              code: 'Hello {{ name }}! {# note #}'
            assert:
              - type: contains
                value: '{% raw %}{{ name }}{% endraw %}'
              - type: contains-any
                value: ['{% raw %}{%{% endraw %}', x]
        """,
    )
    result = cli("import", "promptfoo", "promptfooconfig.yaml", "--out", "sets")
    assert result.exit_code == 0, result.stderr
    prompt_set = load_set(isolated / "sets" / "work.yaml")
    assert isinstance(prompt_set, PromptSet)
    (prompt,) = prompt_set.prompts
    assert prompt.prompt == "Explain this Jinja line: Hello {{ name }}! {# note #} and {% if %}"
    assert [a.value for a in prompt.assertions] == ["{{ name }}", ["{%", "x"]]
    assert cli("validate", "sets").exit_code == 0


def test_what_defaulttest_sets_is_reported_once_where_it_is_written(isolated: Path, cli: Any, write_file: Any) -> None:
    write_file(
        "promptfooconfig.yaml",
        """
        prompts: ['Say {{word}}']
        defaultTest:
          options:
            provider: openai:gpt-4o
        tests:
          - vars: {word: a}
            assert: [{type: contains, value: a}]
          - vars: {word: b}
            assert: [{type: contains, value: b}]
        """,
    )
    result = cli("import", "promptfoo", "promptfooconfig.yaml", "--out", "sets")
    assert result.exit_code == 0, result.stderr
    listed = [line for line in result.stdout.splitlines() if "options.provider" in line]
    assert listed == [
        "  promptfooconfig.yaml:4: options.provider: grading provider: it grades model-graded assertions (in evalkit "
        "provider: on a rubric, factuality or similar), and this test has none"
    ]
    assert result.stdout.splitlines()[-1] == (
        "Converted 2 of 2 tests into 2 prompts in 1 set; 2 of 2 assertions converted."
    )


def test_sets_point_editors_at_the_projects_schemas(isolated: Path, cli: Any, write_file: Any) -> None:
    assert cli("init").exit_code == 0  # copies the schemas to .evalkit/schemas/
    write_file("pf/promptfooconfig.yaml", "prompts: ['hi']\ntests: [{assert: [{type: contains, value: a}]}]\n")
    assert cli("import", "promptfoo", "pf/promptfooconfig.yaml", "--out", "sets/imported").exit_code == 0
    first = (isolated / "sets" / "imported" / "pf.yaml").read_text(encoding="utf-8").splitlines()[0]
    assert first == "# yaml-language-server: $schema=../../.evalkit/schemas/prompt-set.schema.json"


def test_lines_ending_in_spaces_load_back_byte_identical(isolated: Path, cli: Any, write_file: Any) -> None:
    """A prompt file's lines and a var's lines that end in spaces or tabs (promptfoo's
    anthropic/web-tools example) are written so the set loads back as the same text."""
    (isolated / "prompt.txt").write_text("Answer briefly. \nQuestion:\t\n\n{{question}}\n", encoding="utf-8")
    write_file(
        "promptfooconfig.yaml",
        """
        prompts: [file://prompt.txt]
        tests:
          - vars:
              question: "What is 2+2?  \\nThink first. "
            assert: [{type: contains, value: '4'}]
        """,
    )
    result = cli("import", "promptfoo", "promptfooconfig.yaml", "--out", "sets")
    assert result.exit_code == 0, result.stderr
    prompt_set = load_set(isolated / "sets" / "work.yaml")
    assert isinstance(prompt_set, PromptSet)
    assert prompt_set.prompts[0].prompt == "Answer briefly. \nQuestion:\t\n\nWhat is 2+2?  \nThink first. "


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    ("files", "message"),
    [
        pytest.param(
            {"promptfooconfig.yaml": "prompts: ['{{x}}']\ntests: file://tests.json\n", "tests.json": DEEP},
            "Error: tests.json:1:66: YAML error: nested deeper than 64 levels; flatten it",
            id="tests-json",
        ),
        pytest.param(
            {"promptfooconfig.yaml": "prompts: ['{{x}}']\ntests: file://tests.jsonl\n", "tests.jsonl": DEEP},
            "Error: tests.jsonl:1:1: JSON nested too deeply to read; flatten it",
            id="tests-jsonl",
        ),
        pytest.param(
            {"promptfooconfig.yaml": "prompts: [file://p.json]\ntests: [{vars: {x: a}}]\n", "p.json": DEEP},
            "Error: p.json:1:1: JSON nested too deeply to read; flatten it",
            id="chat-prompt-json",
        ),
    ],
)
def test_files_nested_100000_deep_are_exit_2(isolated: Path, files: dict[str, str], message: str) -> None:
    """Bounded nesting: a file nested 100,000 deep crashed the process (libyaml's composer
    overflowed the C stack: exit 139, no message) or was a RecursionError traceback. In a
    subprocess, so that a crash fails this test instead of ending pytest."""
    for name, text in files.items():
        (isolated / name).write_text(text, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "evalkit", "import", "promptfoo", "promptfooconfig.yaml", "--out", "sets"],
        capture_output=True,
        text=True,
        cwd=isolated,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(isolated)},
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stderr.splitlines()) == (2, [message]), done.stderr[-2000:]
    assert not (isolated / "sets").exists()


def test_credentials_in_a_provider_url_are_never_printed_or_written(isolated: Path, cli: Any, write_file: Any) -> None:
    write_file(
        "promptfooconfig.yaml",
        """
        prompts: ['hi']
        providers:
          - id: openai:chat:gpt-4o-mini
            config: {apiBaseUrl: 'https://alice:s3cr%40t@llm.example.com/v1/'}
          - id: anthropic:messages:claude-3-5-haiku-latest
            config: {apiHost: 'bob:hunter2@proxy.example.com'}
        tests: [{assert: [{type: contains, value: a}]}]
        """,
    )
    result = cli("import", "promptfoo", "promptfooconfig.yaml", "--out", "sets")
    assert result.exit_code == 0, result.stderr
    shown = result.stdout + result.stderr + "".join(p.read_text(encoding="utf-8") for p in isolated.glob("sets/*"))
    for secret in ("alice", "s3cr", "bob", "hunter2"):
        assert secret not in shown
    lines = result.stdout.splitlines()
    assert "      base_url: https://llm.example.com/v1" in lines
    assert "      base_url: https://proxy.example.com/v1" in lines
    assert (
        "  promptfooconfig.yaml:3: provider openai:chat:gpt-4o-mini apiBaseUrl: its user:password@ is not copied "
        "(evalkit sends no credentials in a URL); export the key as OPENAI_API_KEY"
    ) in lines
    assert (
        "  promptfooconfig.yaml:5: provider anthropic:messages:claude-3-5-haiku-latest apiHost: its user:password@ "
        "is not copied (evalkit sends no credentials in a URL); export the key as ANTHROPIC_API_KEY"
    ) in lines
    assert cli("validate", "sets").exit_code == 0


OUTSIDE_REFERENCES = [
    pytest.param(
        "prompts: ['Summarise {{doc}}']\ntests: [{vars: {doc: 'file://../outside/secret.txt'}, assert: [{type: equals, value: a}]}]\n",
        "Error: pf/promptfooconfig.yaml:2:22: tests[0].vars.doc: file://../outside/secret.txt reads outside/secret.txt",
        id="relative-var",
    ),
    pytest.param(
        "prompts: ['Summarise {{doc}}']\ntests: [{vars: {doc: 'file://{secret}'}, assert: [{type: equals, value: a}]}]\n",
        "Error: pf/promptfooconfig.yaml:2:22: tests[0].vars.doc: file://{secret} reads outside/secret.txt",
        id="absolute-var",
    ),
    pytest.param(
        "prompts: ['Summarise {{doc}}']\n"
        "tests: [{vars: {doc: 'file://../outside/secret.txt'}, options: {disableVarExpansion: true},\n"
        "         assert: [{type: equals, value: a}]}]\n",
        "Error: pf/promptfooconfig.yaml:2:22: tests[0].vars.doc: file://../outside/secret.txt reads outside/secret.txt",
        id="var-not-expanded",
    ),
    pytest.param(
        "prompts: ['file://../outside/secret.txt']\ntests: [{assert: [{type: equals, value: a}]}]\n",
        "Error: pf/promptfooconfig.yaml:1:11: prompts[0]: file://../outside/secret.txt reads outside/secret.txt",
        id="prompt-file",
    ),
    pytest.param(
        "prompts: ['hi']\ntests: [{assert: [{type: contains, value: 'file://../outside/secret.txt'}]}]\n",
        "Error: pf/promptfooconfig.yaml:2:19: tests[0].assert[0]: file://../outside/secret.txt reads outside/secret.txt",
        id="assertion-value",
    ),
]


@pytest.mark.parametrize(("config", "message"), OUTSIDE_REFERENCES)
def test_files_outside_the_configs_folder_are_refused(isolated: Path, cli: Any, config: str, message: str) -> None:
    """A hostile config must not copy the user's files into the sets it writes."""
    secret = isolated / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("TOP-SECRET\n", encoding="utf-8")
    (isolated / "pf").mkdir()
    (isolated / "pf" / "promptfooconfig.yaml").write_text(config.replace("{secret}", str(secret)), encoding="utf-8")
    result = cli("import", "promptfoo", "pf/promptfooconfig.yaml", "--out", "sets")
    assert (result.exit_code, result.exception) == (2, None), result.stderr
    assert result.stderr == message.replace("{secret}", str(secret)) + (
        ", outside the config's folder pf; move it there, or pass --allow-outside outside\n"
    )
    assert not (isolated / "sets").exists()
    allowed = cli("import", "promptfoo", "pf/promptfooconfig.yaml", "--out", "sets", "--allow-outside", "outside")
    assert allowed.exit_code == 0, allowed.stderr
    assert "TOP-SECRET" in (isolated / "sets" / "pf.yaml").read_text(encoding="utf-8")


def test_an_absolute_file_var_inside_the_configs_folder_is_read(isolated: Path, cli: Any) -> None:
    (isolated / "pf").mkdir()
    (isolated / "pf" / "doc.txt").write_text("the document\n", encoding="utf-8")
    config = f"prompts: ['Summarise {{{{doc}}}}']\ntests: [{{vars: {{doc: 'file://{isolated}/pf/doc.txt'}}, assert: [{{type: equals, value: a}}]}}]\n"
    (isolated / "pf" / "promptfooconfig.yaml").write_text(config, encoding="utf-8")
    result = cli("import", "promptfoo", "pf/promptfooconfig.yaml", "--out", "sets")
    assert result.exit_code == 0, result.stderr
    prompt_set = load_set(isolated / "sets" / "pf.yaml")
    assert isinstance(prompt_set, PromptSet)
    assert prompt_set.prompts[0].prompt == "Summarise the document"


def test_a_test_whose_only_assertion_has_weight_0_stays_weight_0_and_passes(
    isolated: Path, cli: Any, write_file: Any
) -> None:
    """promptfoo never fails a test on a weight-0 assertion; neither does evalkit (it was written
    with weight 1, and failed)."""
    write_file(
        "promptfooconfig.yaml",
        """
        prompts: ['Name a city']
        tests:
          - description: recorded only
            assert: [{type: contains, value: Paris, weight: 0}]
          - description: gated and recorded
            assert: [{type: contains, value: Rome}, {type: contains, value: Paris, weight: 0}]
        """,
    )
    result = cli("import", "promptfoo", "promptfooconfig.yaml", "--out", "sets")
    assert result.exit_code == 0, result.stderr
    assert "weight" not in result.stdout  # nothing to list: the meaning is promptfoo's
    prompt_set = load_set(isolated / "sets" / "work.yaml")
    assert isinstance(prompt_set, PromptSet)
    assert [[a.weight for a in p.assertions] for p in prompt_set.prompts] == [[0.0], [1.0, 0.0]]
    write_file(
        "answers.jsonl",
        '{"id": "recorded-only", "response": "Rome"}\n{"id": "gated-and-recorded", "response": "Rome"}\n',
    )
    write_file("evalkit.yaml", "providers:\n  - {id: rec, adapter: replay, path: answers.jsonl}\n")
    run = cli("run", "sets/work.yaml", "--provider", "rec", "--format", "json")
    assert run.exit_code == 0, run.stderr
    verdicts = [(i["id"], i["passed"], i["score"]) for i in json.loads(run.stdout)["items"]]
    assert verdicts == [("recorded-only", True, 1.0), ("gated-and-recorded", True, 1.0)]


def test_a_test_that_lost_an_assertion_fails_until_it_is_replaced(isolated: Path, cli: Any, write_file: Any) -> None:
    """A test whose transform: (or other unconvertible) assertion is dropped would pass on fewer
    checks than promptfoo's: a regex that never matches stands in for it, the prompt's comment
    names it, and the summary lists every dropped assertion by type."""
    write_file(
        "promptfooconfig.yaml",
        """
        prompts: ['Capital of {{country}}?']
        tests:
          - vars: {country: France}
            assert:
              - {type: contains, value: Paris}
              - {type: equals, value: paris, transform: output.toLowerCase()}
              - {type: g-eval, value: is polite, weight: 0}
              - {type: icontains, value: '{{capital}}'}
        """,
    )
    result = cli("import", "promptfoo", "promptfooconfig.yaml", "--out", "sets")
    assert result.exit_code == 0, result.stderr
    assert "  promptfooconfig.yaml:8: icontains: undefined variable 'capital' in its value (promptfoo renders it " \
        "as nothing); define it in vars" in result.stdout.splitlines()  # fmt: skip
    assert result.stdout.splitlines()[-1] == (
        "Converted 1 of 1 test (1 partly) into 1 prompt in 1 set; 1 of 4 assertions converted "
        "(not converted: 1 equals with transform, 1 g-eval, 1 icontains)."
    )
    text = (isolated / "sets" / "work.yaml").read_text(encoding="utf-8")
    assert (
        "  # Not converted (a regex that never matches stands in, failing until replaced): equals with transform, "
        "g-eval, icontains\n  - id: test-1\n"
    ) in text
    prompt_set = load_set(isolated / "sets" / "work.yaml")
    assert isinstance(prompt_set, PromptSet)
    assert [(a.type, a.weight) for a in prompt_set.prompts[0].assertions] == [
        ("contains", 1.0), ("regex", 1.0), ("regex", 0.0), ("regex", 1.0)
    ]  # fmt: skip
    write_file("answers.jsonl", '{"id": "test-1", "response": "Paris"}\n')
    write_file("evalkit.yaml", "providers:\n  - {id: rec, adapter: replay, path: answers.jsonl}\n")
    run = cli("run", "sets/work.yaml", "--provider", "rec", "--format", "json")
    assert run.exit_code == 0, run.stderr  # a first run is the baseline: its verdicts gate nothing yet
    (item,) = json.loads(run.stdout)["items"]
    assert item["passed"] is False
    assert "promptfoo equals with transform not converted: replace this" in item["reason"]


CONTAINS_JSON_DIFFERENCES = [  # promptfoo's contains-json holds on each of these; evalkit's contains_json does not
    ("a truncated object", 'Here: {"city": "Paris"'),
    ("single quotes", "Here: {'city': 'Paris'}"),
    ("unquoted keys", 'Here: {city: "Paris"}'),
    ("// comments", 'Here: {"city": "Paris" // the capital\n}'),
]


def test_contains_json_differences_are_listed_with_an_example_each(isolated: Path, cli: Any, write_file: Any) -> None:
    from evalkit.graders.deterministic import grade_assertions

    write_file("promptfooconfig.yaml", "prompts: ['City as JSON']\ntests: [{assert: [{type: contains-json}]}]\n")
    result = cli("import", "promptfoo", "promptfooconfig.yaml", "--out", "sets")
    assert result.exit_code == 0, result.stderr
    listed = section_of(result.stdout, "Differences to know (evalkit's meaning, not promptfoo's, in edge cases):")
    prompt_set = load_set(isolated / "sets" / "work.yaml")
    assert isinstance(prompt_set, PromptSet)
    for what, answer in CONTAINS_JSON_DIFFERENCES:
        shown = answer.removeprefix("Here: ").replace("\n", "\\n")
        line = f"  contains-json: promptfoo accepts {what} ({shown}), evalkit requires strict JSON"
        assert line in listed, (line, listed)
        assert grade_assertions(prompt_set.prompts[0], answer).passed is False  # the difference is real
    assert grade_assertions(prompt_set.prompts[0], 'Here: {"city": "Paris"}').passed is True


def section_of(stdout: str, title: str) -> list[str]:
    """The indented lines under ``title`` in the import's report."""
    after = stdout.splitlines()[stdout.splitlines().index(title) + 1 :]
    return after[: next((i for i, line in enumerate(after) if not line.startswith("  ")), len(after))]
