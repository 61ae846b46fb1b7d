"""Templates and variables (README "Templates, variables, data files and conversations"): what renders where, what an error says, and that the
joined fast path renders exactly what jinja2's sandbox renders."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jinja2 import StrictUndefined
from jinja2.sandbox import SandboxedEnvironment

from evalkit.errors import SetError
from evalkit.records import Prompt
from evalkit.runner import build_request
from evalkit.sets import load_set
from evalkit.sets.templates import Renderer, TemplateProblem, has_template
from tests.conftest import REPO

# --- the renderer ---------------------------------------------------------------------------

ORACLE = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
NAMES = ("product", "question", "n", "items")
VALUES = {"product": "Acme", "question": "Open on Sunday?\n", "n": 3, "items": ["a", "b"]}
text_part = st.text(alphabet=st.sampled_from(list("ab {}%#-\n\r\t:é")), max_size=6)
name_part = st.sampled_from(NAMES).map(lambda n: "{{ " + n + " }}")
trimmed_part = st.sampled_from(NAMES).map(lambda n: "{{- " + n + " -}}")


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(text_part, name_part, trimmed_part), max_size=6))
def test_rendering_equals_the_sandboxed_environment(parts: list[str]) -> None:
    source = "".join(parts)
    try:
        expected: str | None = ORACLE.from_string(source).render(VALUES)
    except Exception:  # a syntax error the text happens to spell: both must refuse it
        expected = None
    try:
        got: str | None = Renderer().text(source, VALUES)
    except TemplateProblem:
        got = None
    assert got == (expected if has_template(source) else source)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("About {{ product }}: {{ question }}", "About Acme: Open on Sunday?\n"),
        ("ends with a newline {{ n }}\n", "ends with a newline 3\n"),  # kept, like the untemplated text
        ("{{ n * 2 }} {{ items | join('+') }} {{ range(2) | list }}", "6 a+b [0, 1]"),
        ("{% for i in items %}[{{ i }}]{% endfor %}", "[a][b]"),
        ("{# a comment #}kept", "kept"),
        ("{% raw %}{{ not a variable }}{% endraw %}", "{{ not a variable }}"),
        ("{{ '{{' }} literally", "{{ literally"),
        ("a {single} brace and { { spaced", "a {single} brace and { { spaced"),  # no template: as written
    ],
)
def test_renders(source: str, expected: str) -> None:
    assert Renderer().text(source, VALUES) == expected


@pytest.mark.parametrize(
    ("source", "missing", "message"),
    [
        ("{{ produkt }}", "produkt", "'produkt' is undefined"),
        ("{{ product }} {{ later }}", "later", "'later' is undefined"),
        ("{{ product | upper }} {{ gone }}", "gone", "'gone' is undefined"),  # through Jinja itself
        ("{{ items.missing }}", None, "undefined value in the template: 'list object' has no attribute 'missing'"),
        ("{{ product.__class__ }}", None, "not allowed in the template sandbox: access to attribute '__class__' of 'str' object is unsafe."),
        ("{{ 'ab' * 10000000 }}", None, "repeating a value beyond 1,000,000 items is not allowed"),
        ("{{ 9 ** 999999 }}", None, "an exponent above 10,000 is not allowed in a template"),
        ("{{ n / 0 }}", None, "the template failed: ZeroDivisionError: division by zero"),
        ("{% if n %}open", None, "template syntax error: Unexpected end of template. Jinja was looking for the following tags: 'elif' or 'else' or 'endif'. The innermost block that needs to be closed is 'if'; to send the braces as text, write {{ '{{' }} or wrap the text in {% raw %}...{% endraw %}"),
        ("line one\n{{ n }\n", None, "template syntax error: unexpected '}' (line 2 of the text); to send the braces as text, write {{ '{{' }} or wrap the text in {% raw %}...{% endraw %}"),
    ],
)  # fmt: skip
def test_problems(source: str, missing: str | None, message: str) -> None:
    with pytest.raises(TemplateProblem) as caught:
        Renderer().text(source, VALUES)
    assert (caught.value.missing, caught.value.message) == (missing, message)


def test_a_value_renders_every_string_inside_and_keeps_what_it_need_not_touch() -> None:
    renderer = Renderer()
    value = {"value": "{{ product }}", "max": 3, "also": ["{{ n }}", "plain"]}
    assert renderer.value(value, VALUES) == {"value": "Acme", "max": 3, "also": ["3", "plain"]}
    untouched = {"type": "object", "required": ["email"]}
    assert renderer.value(untouched, VALUES) is untouched
    with pytest.raises(TemplateProblem) as caught:
        renderer.value({"value": ["ok", "{{ nope }}"]}, VALUES)
    assert (caught.value.path, caught.value.missing) == (("value", 1), "nope")


# --- templates in a set file ----------------------------------------------------------------


def test_every_templated_string_renders_with_the_prompts_variables(write_file: Any) -> None:
    path = write_file(
        "t.yaml",
        """
        id: t.render
        name: Rendering
        vars: {product: Acme, pattern: "\\\\bopen\\\\b", limit: 2}
        system: "About {{ product }} only."
        prompts:
          - id: a
            prompt: "Is {{ product }} open?"
            reference: "{{ product }} is open."
            assertions:
              - regex: "/{{ pattern }}/i"
              - {type: levenshtein, value: {value: "{{ product }} is open", max: 3}, weight: 2}
              - contains_all: ["{{ product }}", open]
              - not_contains: "{not a template}"
          - id: b
            vars: {product: Beta}
            system: "{{ product }} support."
            prompt: "Is {{ product }} open?"
            assertions: [{icontains: "{{ product }}"}]
        """,
    )
    loaded = load_set(path)
    assert loaded.system == "About Acme only."
    a, b = loaded.prompts
    assert (a.prompt, a.reference, a.system) == ("Is Acme open?", "Acme is open.", None)
    assert [(x.type, x.value, x.weight) for x in a.assertions] == [
        ("regex", "/\\bopen\\b/i", 1.0),
        ("levenshtein", {"value": "Acme is open", "max": 3}, 2.0),
        ("contains_all", ["Acme", "open"], 1.0),
        ("not_contains", "{not a template}", 1.0),
    ]
    assert a.assertions[0].compiled.pattern.search("we are OPEN")  # compiled as rendered
    assert (b.prompt, b.system, b.assertions[0].value) == ("Is Beta open?", "Beta support.", "Beta")
    assert dict(a.vars) == {"product": "Acme", "pattern": "\\bopen\\b", "limit": 2}
    assert dict(b.vars) == {"product": "Beta", "pattern": "\\bopen\\b", "limit": 2}  # the prompt's over the set's


def test_a_set_system_rendered_differently_per_prompt_is_each_prompts_own(write_file: Any) -> None:
    path = write_file(
        "t.yaml",
        """
        id: t.system
        name: System per prompt
        vars: {tone: short}
        system: "Be {{ tone }}."
        prompts:
          - {id: a, prompt: hi, assertions: [{contains: x}]}
          - {id: b, prompt: hi, vars: {tone: warm}, assertions: [{contains: x}]}
          - {id: c, prompt: hi, system: "", assertions: [{contains: x}]}
        """,
    )
    loaded = load_set(path)
    assert loaded.system is None
    assert [loaded.system_for(p) for p in loaded.prompts] == ["Be short.", "Be warm.", None]
    assert [m.content for m in build_request(loaded, loaded.prompts[1], "m").messages] == ["Be warm.", "hi"]


def test_a_set_without_templates_loads_as_written_and_never_imports_jinja2() -> None:
    code = (
        "import sys; from evalkit.sets import load_set; "
        f"s = load_set({str(REPO / 'tests/data/valid/full_prompt_set.yaml')!r}); "
        "print('jinja2' in sys.modules, len(s.prompts))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == "False"


@pytest.mark.parametrize(
    ("body", "line"),
    [
        (
            "prompts:\n  - id: a\n    prompt: 'About {{ product }}'\n    assertions: [{contains: x}]",
            "t.yaml:5:13: prompts[0].prompt: undefined variable 'product' in the template; "
            "define it in vars: (the set's or the prompt's)",
        ),
        (
            "vars: {product: A}\nprompts:\n  - id: a\n    prompt: 'About {{ prodct }}'\n    assertions: [{contains: x}]",
            "t.yaml:6:13: prompts[0].prompt: undefined variable 'prodct' in the template; "
            "define it in vars: (the set's or the prompt's); did you mean 'product'?",
        ),
        (
            "system: 'Be {{ tone }}'\nprompts:\n  - {id: a, prompt: hi, assertions: [{contains: x}]}",
            "t.yaml:3:9: system: undefined variable 'tone' in the template; define it in vars: (the set's or the prompt's)",
        ),
        (
            "vars: {p: 'a('}\nprompts:\n  - id: a\n    prompt: hi\n    assertions: [{regex: '{{ p }}'}]",
            "t.yaml:7:26: prompts[0].assertions[0].regex: invalid regex 'a(': missing ) at position 2 "
            "(rendered from '{{ p }}')",
        ),
        (
            "prompts:\n  - id: a\n    prompt: hi\n    reference: '{% if %}'",
            "t.yaml:6:16: prompts[0].reference: template syntax error: Expected an expression, got 'end of "
            "statement block'; to send the braces as text, write {{ '{{' }} or wrap the text in {% raw %}...{% endraw %}",
        ),
        (
            "vars: {s: {a: 1}}\nprompts:\n  - id: a\n    prompt: '{{ s.__class__ }}'\n    assertions: [{contains: x}]",
            "t.yaml:6:13: prompts[0].prompt: not allowed in the template sandbox: access to attribute "
            "'__class__' of 'dict' object is unsafe.",
        ),
        (
            "prompts:\n  - id: a\n    prompt: hi\n    assertions: [{type: contains, value: '{{ gone }}'}]",
            "t.yaml:6:42: prompts[0].assertions[0].value: undefined variable 'gone' in the template; "
            "define it in vars: (the set's or the prompt's)",
        ),
        (
            "vars: [a, b]\nprompts:\n  - {id: a, prompt: hi, assertions: [{contains: x}]}",
            "t.yaml:3:7: vars: expected a mapping, got a list",
        ),
    ],
)
def test_errors_name_the_string_and_the_variable(cli: Any, write_file: Any, body: str, line: str) -> None:
    write_file("t.yaml", f"id: t.e\nname: E\n{body}\n")
    result = cli("validate", "t.yaml")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [line, "1 error in 1 file"]
    run = cli("run", "t.yaml")
    assert run.exit_code == 2
    assert run.stderr.splitlines()[0] == f"Error: {line}"


def test_a_rendered_value_is_checked_as_rendered(write_file: Any) -> None:
    path = write_file(
        "t.yaml",
        """
        id: t.empty
        name: Empty after rendering
        vars: {word: ""}
        prompts:
          - id: a
            prompt: hi
            assertions: [{contains: "{{ word }}"}]
        """,
    )
    with pytest.raises(SetError) as caught:
        load_set(path)
    assert [str(i) for i in caught.value.issues] == [
        f"{path}:7:29: prompts[0].assertions[0].contains: must be a non-empty string (rendered from '{{{{ word }}}}')"
    ]


def test_the_fingerprint_follows_the_rendered_prompt(write_file: Any) -> None:
    from evalkit.runner import set_fingerprint

    text = "id: t.f\nname: F\nvars: {{product: {0}}}\nprompts:\n  - {{id: a, prompt: 'About {{{{ product }}}}', assertions: [{{contains: x}}]}}\n"
    first = set_fingerprint(load_set(write_file("t.yaml", text.format("Acme"))))
    same = set_fingerprint(load_set(write_file("t.yaml", text.format("Acme"))))
    other = set_fingerprint(load_set(write_file("t.yaml", text.format("Beta"))))
    written = set_fingerprint(
        load_set(
            write_file(
                "t.yaml", "id: t.f\nname: F\nprompts:\n  - {id: a, prompt: About Acme, assertions: [{contains: x}]}\n"
            )
        )
    )
    assert first == same == written != other  # what is sent, not how it was written


def test_a_prompt_record_keeps_its_variables_for_python_checks(write_file: Any) -> None:
    path = write_file(
        "t.yaml",
        """
        id: t.vars
        name: Vars
        vars: {city: Paris}
        prompts:
          - {id: a, prompt: "Capital?", reference: "{{ city }}"}
        """,
    )
    (prompt,) = load_set(path).prompts
    assert prompt == Prompt(id="a", prompt="Capital?", reference="Paris", vars={"city": "Paris"})


def test_the_schema_describes_the_new_keys() -> None:
    import json

    schema = json.loads((REPO / "schemas" / "prompt-set.schema.json").read_text(encoding="utf-8"))
    defs = schema["$defs"]
    prompt, template = defs["prompt"]["properties"], defs["template"]["properties"]
    assert set(template) == set(prompt) - {"id"}
    for key in ("vars", "template", "cases", "prompts", "system"):
        assert schema["properties"][key].get("description") or defs[key].get("description"), key
    for key in ("prompt", "messages", "vars", "system", "reference"):
        assert prompt[key]["description"], key
    assert defs["message"]["properties"]["role"]["enum"] == ["system", "user", "assistant"]
