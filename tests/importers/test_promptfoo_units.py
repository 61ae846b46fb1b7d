"""The pieces of the promptfoo importer, table-driven, each row a rule of promptfoo's source or docs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evalkit.importers.promptfoo.asserts import Converted, NotConverted, Scope, convert, split_commas
from evalkit.importers.promptfoo.render import (
    Message,
    RenderProblem,
    references_undefined,
    render_prompt,
    resolve_variables,
)
from evalkit.importers.promptfoo.source import Loc
from evalkit.importers.promptfoo.tests import shorthand

# promptfoo's assertionFromString (src/csv.ts): a CSV __expected cell -> an assertion
SHORTHANDS: list[tuple[str, dict[str, Any]]] = [
    ("Paris", {"type": "equals", "value": "Paris"}),
    ("Paris: the capital", {"type": "equals", "value": "Paris: the capital"}),
    ("contains: Paris", {"type": "contains", "value": "Paris"}),
    ("contains:Paris", {"type": "contains", "value": "Paris"}),
    ("not-icontains: london", {"type": "not-icontains", "value": "london"}),
    ("icontains-any: a, b", {"type": "icontains-any", "value": " a, b"}),
    ("is-json", {"type": "is-json", "value": None}),
    ("levenshtein(3): Rome", {"type": "levenshtein", "value": "Rome", "threshold": 3.0}),
    ("levenshtein: Rome", {"type": "levenshtein", "value": "Rome", "threshold": 0.75}),
    ("starts-with: T", {"type": "starts-with", "value": "T", "threshold": 0.75}),
    ("latency(500)", {"type": "latency", "value": None, "threshold": 500.0}),
    ("regex: ^\\d+$", {"type": "regex", "value": "^\\d+$"}),
    ("fn: output.length < 9", {"type": "javascript", "value": "output.length < 9"}),
    ("eval:output === 'x'", {"type": "javascript", "value": "output === 'x'"}),
    ("file://check.js", {"type": "javascript", "value": "file://check.js"}),
    ("grade: is polite", {"type": "llm-rubric", "value": " is polite"}),
    ("llm-rubric: is polite", {"type": "llm-rubric", "value": " is polite"}),
    ("python: 'a' in output", {"type": "python", "value": "'a' in output"}),
    ("file://check.py:verify", {"type": "python", "value": "check.py:verify"}),
    ("similar(0.8): hello", {"type": "similar", "value": "hello", "threshold": 0.8}),
]


@pytest.mark.parametrize(("cell", "assertion"), SHORTHANDS)
def test_csv_shorthands(cell: str, assertion: dict[str, Any]) -> None:
    assert shorthand(cell) == assertion


# promptfoo's parseCommaSeparatedValues (src/assertions/contains.ts)
COMMAS = [
    ("a,b", ["a", "b"]),
    (" a , b ,, c ", ["a", "b", "c"]),
    ('"a, b", c', ["a, b", "c"]),
    ('"say \\"hi\\"", "x""y"', ['say "hi"', 'x"y']),
    ("single", ["single"]),
]


@pytest.mark.parametrize(("text", "fields"), COMMAS)
def test_comma_lists(text: str, fields: list[str]) -> None:
    assert split_commas(text) == fields


def converted(assertion: dict[str, Any], variables: dict[str, Any] | None = None, base: Path = Path()) -> Any:
    found = convert(assertion, Loc("t.yaml", fixed_line=1), Scope(base, base, variables or {}))
    if isinstance(found, NotConverted):
        return ("not converted", found.what, found.hint)
    assert isinstance(found, Converted)
    return found.item


CONVERSIONS: list[tuple[dict[str, Any], Any]] = [
    ({"type": "equals", "value": 4}, {"exact": "4"}),
    ({"type": "equals", "value": True}, {"exact": "true"}),
    ({"type": "equals", "value": 2.0}, {"exact": "2"}),
    ({"type": "equals", "value": [1, 2]}, {"equals_json": [1, 2]}),
    ({"type": "not-equals", "value": "x"}, {"not_exact": "x"}),
    ({"type": "contains", "value": 42}, {"contains": "42"}),
    ({"type": "contains", "value": "{{ city }}"}, {"contains": "Paris"}),
    ({"type": "icontains-all", "value": ["{{ city }}", 7]}, {"icontains_all": ["Paris", "7"]}),
    ({"type": "contains-any", "value": "a, b"}, {"contains_any": ["a", "b"]}),
    ({"type": "is-json"}, {"json_schema": True}),
    ({"type": "is-json", "value": "type: array"}, {"json_schema": {"type": "array"}}),
    ({"type": "contains-json", "value": {"type": "object"}}, {"contains_json": {"type": "object"}}),
    ({"type": "levenshtein", "value": "Rome"}, {"levenshtein": {"value": "Rome", "max": 5}}),
    ({"type": "levenshtein", "value": "Rome", "threshold": 2.5}, {"levenshtein": {"value": "Rome", "max": 2}}),
    ({"type": "levenshtein", "value": "Rome", "threshold": 0.75}, {"levenshtein": {"value": "Rome", "max": 0}}),
    ({"type": "latency", "threshold": 1500}, {"latency_ms": 1500}),
    ({"type": "cost", "threshold": 0.01}, {"cost": 0.01}),
    ({"type": "word-count", "value": "3"}, {"word_count": {"min": 3, "max": 3}}),
    ({"type": "word-count", "value": {"min": 2.5, "max": 9.5}}, {"word_count": {"min": 3, "max": 9}}),
    ({"type": "regex", "value": "\\d+", "weight": 2}, {"type": "regex", "value": "[0-9]+", "weight": 2}),
    ({"type": "icontains", "value": "x", "weight": 0}, {"type": "icontains", "value": "x", "weight": 0}),
    ({"type": "contains", "value": ""}, ("not converted", "contains", "contains needs a non-empty string or a number")),
    ({"type": "contains-any", "value": ["a", ""]},
     ("not converted", "contains-any", "an empty string in contains-any always matches; remove it")),
    ({"type": "latency"}, ("not converted", "latency", "latency needs a threshold")),
    ({"type": "contains", "value": "x", "weight": -1}, ("not converted", "contains weight -1", "evalkit weights are numbers, 0 or more")),
    ({"type": "word-count", "value": 2.5},
     ("not converted", "word-count", "word-count: no answer has a fractional or negative number of words")),
    ({"type": "regex", "value": "a**"},
     ("not converted", "regex", "/a**/ is not a valid JavaScript regex: nothing to repeat before '*'")),
    ({"type": "is-json", "value": {"type": "nonsense"}},
     ("not converted", "is-json", "evalkit refuses the converted value: invalid JSON Schema at type: 'nonsense' is not valid under any of the given schemas")),
    ({"type": "contains", "value": "{{ city | title }}"},
     ("not converted", "contains", "its template: filter 'title' is not read alike by Nunjucks and Jinja2")),
    ({"value": "x"}, ("not converted", "assertion", "not a promptfoo assertion: it needs type:")),
    # the tool assertions (promptfoo.dev/docs/configuration/expected-outputs: deterministic, agent trajectories)
    ({"type": "is-valid-openai-tools-call"}, {"valid_tool_calls": True}),
    ({"type": "not-is-valid-openai-tools-call"}, {"not_valid_tool_calls": True}),
    ({"type": "tool-call-f1", "value": ["search", "lookup"]}, {"tool_call_f1": {"expected": ["search", "lookup"], "min": 1}}),
    ({"type": "tool-call-f1", "value": "search, lookup", "threshold": 0.5},
     {"tool_call_f1": {"expected": ["search", "lookup"], "min": 0.5}}),
    ({"type": "tool-call-f1"}, ("not converted", "tool-call-f1",
                                "tool-call-f1 needs the expected tool names (a list, or a comma-separated string)")),
    ({"type": "trajectory:tool-used", "value": "{{ tool }}"}, {"tool_called": "search"}),
    ({"type": "trajectory:tool-used", "value": {"name": "search"}}, {"tool_called": "search"}),
    ({"type": "not-trajectory:tool-used", "value": "delete"}, {"not_tool_called": "delete"}),
    ({"type": "trajectory:tool-used", "value": {"name": "search", "min": 2}}, ("not converted", "trajectory:tool-used",
      "only one tool name converts (a list or min/max counts: one tool_called each)")),
    ({"type": "trajectory:tool-sequence", "value": ["search", "lookup"]}, {"tool_sequence": ["search", "lookup"]}),
    ({"type": "trajectory:tool-sequence", "value": {"steps": ["search", "lookup"], "mode": "exact"}},
     {"tool_sequence": {"steps": ["search", "lookup"], "exact": True}}),
    ({"type": "trajectory:tool-sequence", "value": {"steps": ["a"], "mode": "any"}}, ("not converted",
      "trajectory:tool-sequence", "trajectory:tool-sequence mode 'any': evalkit has in_order and exact")),
]  # fmt: skip


@pytest.mark.parametrize(("assertion", "expected"), CONVERSIONS)
def test_assertion_conversions(assertion: dict[str, Any], expected: Any) -> None:
    assert converted(assertion, {"city": "Paris", "tool": "search"}) == expected


def test_value_files_are_read_relative_to_the_config(tmp_path: Path) -> None:
    (tmp_path / "schema.yaml").write_text("type: object\nrequired: [a]\n", encoding="utf-8")
    (tmp_path / "expected.txt").write_text("  Paris\n", encoding="utf-8")
    assert converted({"type": "is-json", "value": "file://schema.yaml"}, base=tmp_path) == {
        "json_schema": {"type": "object", "required": ["a"]}
    }
    assert converted({"type": "equals", "value": "file://expected.txt"}, base=tmp_path) == {"exact": "Paris"}
    assert converted({"type": "contains", "value": "file://make.js"}, base=tmp_path) == (
        "not converted", "contains", "its value is computed by a script; evalkit values are written out",
    )  # fmt: skip


def test_resolve_variables_fills_placeholders_as_promptfoo_does() -> None:
    variables = {"greeting": "Hi {{ name }}, {{ name }}", "name": "Ada", "cost": "{{ price }}", "price": "$&5"}
    # the first placeholder of each var per round, up to five rounds; '$&' in a replacement is the
    # match, so 'cost' keeps its placeholder and grows each round (as Node.js gives it)
    assert resolve_variables(variables) == {
        "greeting": "Hi Ada, Ada",
        "name": "Ada",
        "cost": "{{ price }}55555",
        "price": "$&5",
    }
    assert resolve_variables({"a": "{{ missing }} {{ b }}", "b": "x"}) == {"a": "{{ missing }} {{ b }}", "b": "x"}


def test_references_undefined() -> None:
    assert references_undefined("Hello {{ name }}", {}) is True
    assert references_undefined("Hello {{ name | upper }}", {"name": "x"}) is False
    assert references_undefined("{{ env.HOME }}", {}) is False
    assert references_undefined("{% for x in items %}{{ x }}{% endfor %}", {"items": []}) is False
    assert references_undefined("{# {{ nope }} #}", {}) is False


RENDERED = [
    ("Hi {{ name }}", {"name": "Ada"}, (Message("user", "Hi Ada"),)),
    ('[{"role": "system", "content": "Be {{ tone }}."}, {"role": "user", "content": "{{ q }}"}]',
     {"tone": "brief", "q": 'Say "x"'}, (Message("system", "Be brief."), Message("user", 'Say "x"'))),
    ("- role: user\n  content: 'Hi {{ name }}'", {"name": "Bo"}, (Message("user", "Hi Bo"),)),
    ("Unclosed {{ tag here\n{{ name }}", {"name": "x"}, (Message("user", "Unclosed {{ tag here\n{{ name }}"),)),
    ("Var {{ v }}", {"v": "{{ w }}!", "w": "set"}, (Message("user", "Var set!"),)),
    ("Var {{ v }}", {"v": "{{ nothere }}!"}, (Message("user", "Var {{ nothere }}!"),)),
]  # fmt: skip


@pytest.mark.parametrize(("raw", "variables", "messages"), RENDERED)
def test_prompt_rendering(raw: str, variables: dict[str, Any], messages: tuple[Message, ...]) -> None:
    assert render_prompt(raw, variables).messages == messages


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ('[{"role": "tool", "content": "x"}]', "the chat role 'tool' is not converted"),
        ('[{"role": "user", "content": [{"type": "image_url"}]}]', "a message whose content is not text"),
        ('{"not": "a list"}', "the prompt is JSON but not a list of {role, content} messages"),
        ("[1, 2,]", "the rendered prompt looks like JSON but is not valid JSON"),
        ("{{ x.toUpperCase() }}", "its template: function and method calls are not converted"),
        ("[" * 100_000 + "]" * 100_000, "the prompt is JSON nested too deeply to read; flatten it"),
        ("[" * 900 + "]" * 900, "the prompt is JSON nested too deeply to read; flatten it"),
        ("{{ x }}" + "]" * 100_000, "the prompt is JSON nested too deeply to read; flatten it"),
    ],
)
def test_prompts_that_are_not_converted(raw: str, message: str) -> None:
    with pytest.raises(RenderProblem) as caught:
        render_prompt(raw, {"x": "[" * 100_000})
    assert message in str(caught.value)


def test_an_imported_schema_asserts_its_formats_and_names_those_evalkit_cannot_check() -> None:
    from evalkit.assertions.compiling import compile_json_schema
    from evalkit.assertions.jsondoc import json_schema
    from evalkit.assertions.registry import Context

    schema = {"type": "object", "properties": {"email": {"format": "email"}, "took": {"format": "duration"}}}
    found = convert({"type": "is-json", "value": schema}, Loc("t.yaml", fixed_line=1), Scope(Path(), Path(), {}))
    assert isinstance(found, Converted)
    assert found.partly == ("evalkit does not check format duration: any string holds",)
    validator = compile_json_schema(found.item["json_schema"])
    assert json_schema(validator, '{"email": "ada@example.org", "took": "P1D"}', Context()).passed
    failed = json_schema(validator, '{"email": "x", "took": "P1D"}', Context())
    assert (failed.passed, failed.reason) == (False, "json_schema: $.email: 'x' is not a 'email'")
