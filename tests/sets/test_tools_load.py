"""``tools:`` and ``tool_choice:`` in set files (README, "Tools and tool calls"): inherited from the
set by a prompt or a template unless it declares its own, checked at load with file:line, and part
of what is sent (the request, the set fingerprint)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalkit.runner import build_request, set_fingerprint
from evalkit.sets import load_set

SEARCH = """
  - name: search
    description: Search the docs
    parameters: {type: object, properties: {query: {type: string}}}
"""

SET = f"""id: t.tools
name: Tools
tools:{SEARCH}tool_choice: auto
prompts:
  - id: inherits
    prompt: a
    assertions: [{{valid_tool_calls: true}}]
  - id: own
    prompt: b
    tools:
      - {{name: lookup, parameters: {{type: object}}}}
    tool_choice: {{name: lookup}}
    assertions: [{{contains: x}}]
  - id: none
    prompt: c
    tools: []
    assertions: [{{contains: x}}]
template:
  prompt: "{{{{ q }}}}"
  tools:
    - {{name: fetch}}
  assertions: [{{contains: x}}]
cases: cases.csv
"""


def test_prompts_inherit_the_sets_tools_unless_they_declare_their_own(write_file: Any) -> None:
    write_file("cases.csv", "id,q\nrow1,hello\n")
    loaded = load_set(write_file("s.yaml", SET))
    requests = {p.id: build_request(loaded, p, "alias") for p in loaded.prompts}
    assert [t["name"] for t in requests["inherits"].tools] == ["search"]
    assert requests["inherits"].tool_choice == "auto"
    assert requests["own"].tools == ({"name": "lookup", "parameters": {"type": "object"}},)
    assert requests["own"].tool_choice == {"name": "lookup"}
    assert requests["none"].tools == ()
    assert requests["none"].tool_choice == "auto"
    assert [t["name"] for t in requests["row1"].tools] == ["fetch"]


def test_tools_are_part_of_the_set_fingerprint(write_file: Any) -> None:
    write_file("cases.csv", "id,q\nrow1,hello\n")
    before = set_fingerprint(load_set(write_file("s.yaml", SET)))
    changed = set_fingerprint(load_set(write_file("s.yaml", SET.replace("Search the docs", "Search"))))
    choice = set_fingerprint(load_set(write_file("s.yaml", SET.replace("tool_choice: auto", "tool_choice: required"))))
    assert len({before, changed, choice}) == 3


def test_a_set_without_tools_keeps_its_fingerprint(write_file: Any) -> None:
    plain = "id: t.plain\nname: P\nprompts:\n  - {id: a, prompt: a, assertions: [{contains: x}]}\n"
    # the hash of this set as evalkit computed it before tools existed
    assert set_fingerprint(load_set(write_file("p.yaml", plain))) == "e90fba962f0425bf"


def validate(cli: Any, write_file: Any, text: str) -> list[str]:
    write_file("s.yaml", text)
    result = cli("validate", "s.yaml")
    assert result.exit_code == 2, result.stdout + result.stderr
    assert result.exception is None
    return [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("s.yaml:")]


def test_a_tool_whose_parameters_are_not_a_json_schema_is_refused_with_its_line(cli: Any, write_file: Any) -> None:
    text = f"id: t.bad\nname: B\ntools:{SEARCH.replace('type: string', 'type: strin')}prompts:\n  - {{id: a, prompt: a, assertions: [{{contains: x}}]}}\n"
    (line,) = validate(cli, write_file, text)
    assert line.startswith("s.yaml:6:")
    assert "tools[0].parameters: tool 'search': parameters: invalid JSON Schema at properties/query/type" in line


def test_tool_choice_must_name_a_declared_tool(cli: Any, write_file: Any) -> None:
    text = SET.replace("tool_choice: auto", "tool_choice: {name: lookup}").replace("template:", "x:", 1)
    text = text.split("x:")[0]
    lines = validate(cli, write_file, text)
    assert lines == [
        "s.yaml:7:14: tool_choice: tool_choice names 'lookup', which this call does not declare (its tools: search); name one of them",
        "s.yaml:20:12: prompts[2].tools: tool_choice names 'lookup', which this call does not declare (its tools: none); name one of them",
    ]


def test_a_bad_tool_choice_a_duplicate_tool_and_valid_tool_calls_without_tools(cli: Any, write_file: Any) -> None:
    text = (
        "id: t.bad\nname: B\nprompts:\n"
        "  - id: a\n    prompt: a\n    tool_choice: sometimes\n    tools: [{name: s}, {name: s}]\n"
        "    assertions: [{contains: x}]\n"
        "  - id: b\n    prompt: b\n    assertions: [{not_valid_tool_calls: true}]\n"
    )
    assert validate(cli, write_file, text) == [
        "s.yaml:6:18: prompts[0].tool_choice: must be auto, none, required or {name: TOOL}, got the string 'sometimes'",
        "s.yaml:7:31: prompts[0].tools[1].name: tool 's' is declared twice; keep one",
        "s.yaml:11:18: prompts[1].assertions[0]: not_valid_tool_calls checks calls against the declared tools, and this call declares none; add tools:",
    ]


def test_the_readme_example_loads(write_file: Any) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Tools and tool calls", 1)[1]
    example = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    loaded = load_set(write_file("readme.yaml", f"id: readme.tools\nname: README\n{example}"))
    (prompt,) = loaded.prompts
    assert [t["name"] for t in loaded.tools_for(prompt)] == ["search"]
    assert [a.type for a in prompt.assertions] == [
        "tool_called", "tool_sequence", "valid_tool_calls", "tool_call_f1", "not_tool_called",
    ]  # fmt: skip
