"""Data-driven cases (README "Templates, variables, data files and conversations"): a template made into a prompt for every row of a CSV, JSON
Lines or YAML file; bad rows named by the data file and line; validate and the fingerprint."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from evalkit.errors import SetError
from evalkit.records import Assertion, Message, Prompt
from evalkit.runner import set_fingerprint
from evalkit.sets import load_set
from tests.conftest import REPO
from tests.fakeserver import FakeServer

CASES = REPO / "tests" / "data" / "cases"
SYSTEM = "You answer questions about Acme Search; be concise."
BASE = {"product": "Acme Search", "tone": "concise"}


def row_vars(**columns: str) -> dict[str, str]:
    return {**BASE, **columns}


def test_a_csv_with_a_bom_quoted_commas_and_a_multiline_cell_becomes_prompts() -> None:
    loaded = load_set(CASES / "faq.yaml")
    assert loaded.system is None  # the templated system renders differently for 'greeting'
    greeting, opening, refund, address = loaded.prompts
    assert greeting == Prompt(
        id="greeting",
        prompt="What is my name?",
        assertions=(Assertion("contains", "Ada"),),
        system="You answer questions about Acme Search; be warm.",
        vars={"product": "Acme Search", "tone": "warm", "name": "Ada"},
        messages=(
            Message("user", "Hi, I am Ada."),
            Message("assistant", "Hello Ada!"),
            Message("user", "What is my name?"),
        ),
    )
    assert opening == Prompt(
        id="opening",
        prompt="About Acme Search: When is the office open?",
        assertions=(Assertion("icontains", "Monday"), Assertion("not_contains", "Sunday", weight=0.5)),
        system=SYSTEM,
        reference="Monday",
        critical=True,
        vars=row_vars(
            id="opening",
            question="When is the office open?",
            expected="Monday",
            forbidden="Sunday",
            critical="true",
            threshold="",
        ),
    )
    assert (refund.prompt, refund.critical, refund.threshold) == (
        "About Acme Search: Can I get a refund, after 30 days?",
        False,
        0.5,
    )
    assert (address.prompt, address.critical, address.threshold) == (
        "About Acme Search: Where is the office?\nGive the street.",
        False,
        1.0,
    )
    assert [a.value for a in address.assertions] == ["Main Street", "unknown"]


def test_jsonl_rows_keep_their_types_and_add_assertions_critical_and_threshold() -> None:
    fr, jp, ch = load_set(CASES / "jsonl_set.yaml").prompts
    assert (fr.prompt, [a.value for a in fr.assertions]) == ("What is the capital of France?", ["Paris"])
    assert jp.critical is True
    assert [(a.type, a.value) for a in jp.assertions] == [
        ("contains", "Tokyo"),
        ("regex", "/Tokyo/i"),  # a row's own assertion, rendered with its columns
        ("not_contains", "Kyoto"),
    ]
    assert ch.prompt == "What is the capital of Switzerland? (also written Berne)"  # a list column, joined
    assert ch.threshold == 0.5
    assert ch.vars["aliases"] == ["Berne"]  # over the template's vars


def test_a_yaml_list_of_rows_fills_a_templated_conversation() -> None:
    small, large = load_set(CASES / "yaml_set.yaml").prompts
    assert small.messages == (
        Message("system", "Answer with a number only."),
        Message("user", "What is 2 plus 3?"),
    )
    assert small.prompt == "What is 2 plus 3?"
    assert [(a.type, a.value) for a in large.assertions] == [("exact", "3000"), ("starts_with", "3000")]


def test_rows_become_prompts_that_are_sent_and_graded_as_rendered(
    cli: Any, write_file: Any, fake_llm: FakeServer, fake_config: Path
) -> None:
    write_file("cases.csv", "id,question,expected\nq1,Is it open on Monday?,Monday\nq2,Is it open on Sunday?,Friday\n")
    write_file(
        "set.yaml",
        """
        id: t.run
        name: Run rows
        vars: {product: Acme}
        template:
          prompt: "{{ product }}: {{ question }}"
          assertions: [{contains: "{{ expected }}"}]
        cases: cases.csv
        """,
    )
    result = cli("run", "set.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    sent = sorted(r.json["messages"][-1]["content"] for r in fake_llm.requests)
    assert sent == ["Acme: Is it open on Monday?", "Acme: Is it open on Sunday?"]
    import json

    items = {item["id"]: item["passed"] for item in json.loads(result.stdout)["items"]}
    assert items == {"q1": True, "q2": False}  # the echo holds 'Monday', not 'Friday'


def write_case_set(write_file: Any, cases: str, data: str, template: str = "", extra: str = "") -> None:
    write_file(cases, data)
    template = template or "template:\n  prompt: 'Q {{ q }}'\n  assertions: [{contains: '{{ q }}'}]\n"
    write_file("s.yaml", f"id: t.c\nname: C\n{template}cases: {cases}\n{extra}")


@pytest.mark.parametrize(
    ("cases", "data", "lines"),
    [
        ("c.csv", "q,x\na,b\n", ["c.csv:1:1: the header has no id column; add one (every row needs a unique id, the prompt's id)"]),
        ("c.csv", "id,q,\na,b,c\n", ["c.csv:1:1: column 3 of the header has no name; name it or remove the extra comma"]),
        ("c.csv", "id,q,q\na,b,c\n", ["c.csv:1:1: column 'q' appears twice in the header; rename one"]),
        ("c.csv", "id,q,assertions\na,b,c\n", ["c.csv:1:1: a CSV file cannot hold assertions (lists); put them in the template, with a column as a value (contains: '{{ expected }}'), or use a JSONL or YAML cases file"]),
        ("c.csv", "id,q\n", ["c.csv:1:1: has no rows; add at least one (each row becomes a prompt)"]),
        ("c.csv", "id,q\na,b\n\nb,c,d\n,e\na,f\n", [
            "c.csv:4:1: has 3 values, the header has 2 columns; quote a value that holds a comma",
            "c.csv:5:1: id: missing id; give every row a unique id (the prompt's id)",
            "c.csv:6:1: id: duplicate id 'a' (first at line 2)",
        ]),
        ("c.csv", "id,q,critical,threshold\na,b,yes,\nb,c,,1.5\nc,\"x\",True,nan\n", [
            "c.csv:2:5: critical: expected true or false, got 'yes'",
            "c.csv:3:6: threshold: expected a number in 0..1, got '1.5'",
            "c.csv:4:12: threshold: expected a number in 0..1, got 'nan'",
        ]),
        ("c.csv", "id,q\na,\"open\nb,c\n", ["c.csv:2:1: not readable as CSV: unexpected end of data; check the quotes of this row"]),
        ("c.csv", b"id,q\na,caf\xe9\n", ["c.csv:2:6: not UTF-8 text (invalid continuation byte); save the file as UTF-8"]),
        ("c.jsonl", '{"id": "a", "q": "x"}\n{"id": "b", q: 1}\n[1]\n{"q": "y"}\n{"id": 7, "q": "z"}\n{"id": "a", "q": "w"}\n', [
            "c.jsonl:2:13: not a JSON object (Expecting property name enclosed in double quotes); fix the line",
            "c.jsonl:3:1: expected a JSON object (a row), got a list",
            "c.jsonl:4:1: missing id; give every row a unique id (the prompt's id)",
            "c.jsonl:5:2: id: id must be a string, got an integer (7); quote it",
            "c.jsonl:6:2: id: duplicate id 'a' (first at line 1)",
        ]),
        ("c.jsonl", '{"id": "a", "q": "x", "critical": "yes", "threshold": true, "assertions": {"contains": "x"}}\n', [
            "c.jsonl:1:23: critical: expected true or false, got the string 'yes'",
            "c.jsonl:1:42: threshold: expected a number in 0..1, got a boolean (True)",
            "c.jsonl:1:61: assertions: expected a list of assertions, got a mapping",
        ]),
        ("c.jsonl", '{"id": "a", "q": "x", "assertions": [{"containz": "x"}, {"contains": "x", "regex": "y"}, {"type": "regex", "value": "y", "weight": -1}, {"type": "exact", "value": "y", "wieght": 1}]}\n', [
            "c.jsonl:1:23: assertions[0]: unknown assertion type 'containz'; did you mean 'contains'?",
            "c.jsonl:1:23: assertions[1]: expected one type: value mapping, or {type, value, weight}",
            "c.jsonl:1:23: assertions[2].weight: must be a finite number of 0 or more, got an integer (-1)",
            "c.jsonl:1:23: assertions[3]: expected one type: value mapping, or {type, value, weight} (unknown key wieght)",
        ]),
        ("c.yaml", "- {id: a, q: x}\n- {id: a, q: y}\n- [1, 2]\n- {q: z, critical: maybe}\n", [
            "c.yaml:2:8: id: duplicate id 'a' (first at line 1)",
            "c.yaml:3:3: expected a mapping (a row), got a list",
            "c.yaml:4:3: missing id; give every row a unique id (the prompt's id)",
            "c.yaml:4:20: critical: expected true or false, got the string 'maybe'",
        ]),
        ("c.yaml", "id: a\nq: x\n", ["c.yaml:1:1: expected a list of rows, got a mapping"]),
    ],
)  # fmt: skip
def test_a_bad_row_names_the_data_file_and_its_line(
    cli: Any, write_file: Any, cases: str, data: str | bytes, lines: list[str]
) -> None:
    if isinstance(data, bytes):
        write_file(cases, "").write_bytes(data)
        write_file(
            "s.yaml",
            f"id: t.c\nname: C\ntemplate:\n  prompt: 'Q {{{{ q }}}}'\n  assertions: [{{contains: x}}]\ncases: {cases}\n",
        )
    else:
        write_case_set(write_file, cases, data)
    result = cli("validate", "s.yaml")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[:-1] == lines
    run = cli("run", "s.yaml")
    assert run.exit_code == 2
    assert run.stderr.splitlines()[0].startswith(f"Error: {lines[0]}")


@pytest.mark.parametrize(
    ("template", "data", "extra", "lines"),
    [
        (
            "template:\n  prompt: 'Q {{ question }}'\n  assertions: [{contains: '{{ expected }}'}]\n",
            "id,question,expcted\na,x,y\nb,x,y\nc,x,y\nd,x,y\ne,x,y\n",
            "",
            ["c.csv:2:1: template.assertions[0].contains: undefined variable 'expected' in the template; add a column "
             "'expected' to c.csv or define it in vars:; did you mean 'expcted'? (also lines 3, 4, 5 and 1 more)"],
        ),
        (
            "template:\n  prompt: 'Q {{ q }}'\n  assertions: [{regex: '{{ pattern }}'}]\n",
            "id,q,pattern\na,x,ok\nb,x,ko(\n",
            "",
            ["c.csv:3:1: template.assertions[0].regex: invalid regex 'ko(': missing ) at position 3 (rendered from '{{ pattern }}')"],
        ),
        (
            "template:\n  prompt: 'Q {{ q }}'\n  assertions: [{regex: 'ko('}]\n",
            "id,q\na,x\nb,y\n",
            "",
            ["s.yaml:5:24: template.assertions[0].regex: invalid regex 'ko(': missing ) at position 3"],  # once, at the template
        ),
        (
            "template:\n  prompt: 'Q {{ q }'\n  assertions: [{contains: x}]\n",
            "id,q\na,x\nb,y\n",
            "",
            ["s.yaml:4:11: template.prompt: template syntax error: unexpected '}'; to send the braces as text, "
             "write {{ '{{' }} or wrap the text in {% raw %}...{% endraw %}"],
        ),
        (
            "template:\n  prompt: 'Q {{ q }}'\n",
            "id,q\na,x\n",
            "",
            ["c.csv:2:1: template: row 'a' has neither an assertion nor a reference; add assertions: to the template "
             "(or the row) or reference:"],
        ),
        (
            "template:\n  prompt: 'Q {{ q }}'\n  assertions: [{contains: x}]\n",
            "id,q\ngreeting,x\n",
            "prompts:\n  - {id: greeting, prompt: hi, assertions: [{contains: x}]}\n",
            ["c.csv:2:1: id: duplicate prompt id 'greeting': also in prompts: (s.yaml line 8)"],
        ),
    ],
)  # fmt: skip
def test_what_a_row_renders_to_is_checked(
    cli: Any, write_file: Any, template: str, data: str, extra: str, lines: list[str]
) -> None:
    write_case_set(write_file, "c.csv", data, template, extra)
    result = cli("validate", "s.yaml")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[:-1] == lines


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        ("template: {prompt: hi, assertions: [{contains: x}]}\n", ["s.yaml:1:1: missing required key 'cases'"]),
        ("cases: c.csv\n", ["s.yaml:1:1: missing required key 'prompts'", "s.yaml:1:1: missing required key 'template'"]),
        ("template: {id: a, prompt: hi}\ncases: c.csv\n", ["s.yaml:3:12: template.id: unknown key 'id' (expected one of: assertions, critical, messages, params, prompt, reference, system, threshold, tool_choice, tools, vars)"]),
        ("template: {prompt: hi, assertions: [{contains: x}]}\ncases: nowhere.csv\n", ["s.yaml:4:8: cases: cases file 'nowhere.csv' not found (relative to s.yaml); check the path"]),
        ("template: {prompt: hi, assertions: [{contains: x}]}\ncases: c.txt\n", ["s.yaml:4:8: cases: 'c.txt' is not a cases file: name a .csv, .jsonl, .yaml, .yml file"]),
    ],
)  # fmt: skip
def test_template_and_cases_go_together(cli: Any, write_file: Any, text: str, lines: list[str]) -> None:
    write_file("c.txt", "id\na\n")
    write_file("c.csv", "id\na\n")
    write_file("s.yaml", f"id: t.c\nname: C\n{text}")
    result = cli("validate", "s.yaml")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[:-1] == lines


def test_a_set_may_combine_prompts_and_rows_in_that_order(write_file: Any) -> None:
    write_file("c.jsonl", '{"id": "r1", "q": "x"}\n{"id": "r2", "q": "y"}\n')
    path = write_file(
        "s.yaml",
        """
        id: t.both
        name: Both
        prompts:
          - {id: p1, prompt: hi, assertions: [{contains: x}]}
        template: {prompt: "Q {{ q }}", assertions: [{contains: "{{ q }}"}], critical: true, params: {max_tokens: 5}}
        cases: c.jsonl
        """,
    )
    loaded = load_set(path)
    assert [p.id for p in loaded.prompts] == ["p1", "r1", "r2"]
    assert [(p.critical, dict(p.params)) for p in loaded.prompts[1:]] == [(True, {"max_tokens": 5})] * 2


def test_editing_a_data_file_changes_the_set_fingerprint(write_file: Any) -> None:
    write_file("c.csv", "id,q\na,one\nb,two\n")
    path = write_file(
        "s.yaml",
        "id: t.fp\nname: FP\ntemplate: {prompt: 'Q {{ q }}', assertions: [{contains: '{{ q }}'}]}\ncases: c.csv\n",
    )
    first = set_fingerprint(load_set(path))
    assert set_fingerprint(load_set(path)) == first
    write_file("c.csv", "id,q\na,one\nb,three\n")
    changed = set_fingerprint(load_set(path))
    write_file("c.csv", "id,q\na,one\nc,two\n")
    renamed = set_fingerprint(load_set(path))
    write_file("c.csv", "id,q\na,one\nb,two\n")
    assert len({first, changed, renamed}) == 3
    assert set_fingerprint(load_set(path)) == first


def test_validate_checks_a_sets_data_file_with_it_and_a_data_file_on_its_own(cli: Any, isolated: Path) -> None:
    shutil.copytree(CASES, isolated / "cases")
    result = cli("validate", "cases")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "6 files valid (3 sets)\n", "")
    for name in ("faq.csv", "rows.jsonl", "rows.yaml"):
        alone = cli("validate", f"cases/{name}")
        assert (alone.exit_code, alone.stdout) == (0, "1 file valid (0 sets)\n"), name
    (isolated / "cases" / "rows.yaml").write_text("- {id: a, a: 1, b: 2, sum: '3'}\n- {id: a, a: 2, b: 2, sum: '4'}\n")
    duplicate = "cases/rows.yaml:2:8: id: duplicate id 'a' (first at line 1)"
    alone = cli("validate", "cases/rows.yaml")
    assert (alone.exit_code, alone.stderr.splitlines()) == (2, [duplicate, "1 error in 1 file"])
    folder = cli("validate", "cases")  # said once: by the set that names the file
    assert (folder.exit_code, folder.stderr.splitlines()) == (2, [duplicate, "1 error in 6 files"])
    (isolated / "cases" / "rows.yaml").write_text("- {id: a, a: 1, b: 2}\n")
    folder = cli("validate", "cases")  # and with what the rows render to
    assert folder.stderr.splitlines()[:-1] == [
        "cases/rows.yaml:1:3: template.assertions[0].exact: undefined variable 'sum' in the template; add a column "
        "'sum' to rows.yaml or define it in vars:"
    ]


def test_a_row_error_in_the_python_api_is_a_set_error_with_every_issue(write_file: Any) -> None:
    write_case_set(write_file, "c.jsonl", '{"id": "a", "q": "x"}\n{"q": "y"}\n{"id": "a", "q": "z"}\n')
    with pytest.raises(SetError) as caught:
        load_set("s.yaml")
    assert [(i.file, i.line) for i in caught.value.issues] == [("c.jsonl", 2), ("c.jsonl", 3)]


def test_a_folder_run_skips_the_yaml_cases_file_beside_its_set(cli: Any, write_file: Any) -> None:
    write_file(
        "sets/faq.yaml",
        "id: t.faq\nname: FAQ\ntemplate:\n  prompt: 'Say {{ word }}'\n  assertions: [{icontains: '{{ word }}'}]\ncases: rows.yaml\n",
    )
    write_file("sets/rows.yaml", "- {id: a, word: yes}\n- {id: b, word: no}\n")
    write_file(
        "sets/answers.jsonl",
        '{"id": "a", "response": "YES", "model": "m"}\n{"id": "b", "response": "No.", "model": "m"}\n',
    )
    write_file("evalkit.yaml", "providers:\n  - {id: rec, adapter: replay, path: sets/answers.jsonl}\n")
    result = cli("run", "sets", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["passed_count"] == 2


def test_the_fingerprint_covers_critical_only_when_set() -> None:
    base = Prompt(id="a", prompt="hi", assertions=(Assertion("contains", "x"),))
    from dataclasses import replace

    from evalkit.records import PromptSet

    def fingerprint(prompt: Prompt) -> str:
        return set_fingerprint(PromptSet(id="s", name="s", prompts=(prompt,)))

    assert fingerprint(replace(base, critical=True)) != fingerprint(base)
    assert fingerprint(replace(base, critical=False)) == fingerprint(base)
