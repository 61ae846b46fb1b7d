"""Nunjucks templates rendered with Jinja2 where the two agree, and refused where they do not.

The expected outputs were recorded from Nunjucks 3.2.4 configured as promptfoo configures it
(``nunjucks.configure({autoescape: false})``, a ``load`` filter = JSON.parse), with
``env.renderString(template, vars)``.
"""

from __future__ import annotations

from typing import Any

import pytest

from evalkit.sets.nunjucks import TemplateMismatch, js_string, render

# (template, vars, what Nunjucks renders)
AGREE: list[tuple[str, dict[str, Any], str]] = [
    ("Hello {{ name }}!", {"name": "Ada"}, "Hello Ada!"),
    ("Hello {{name}}", {"name": "Ada"}, "Hello Ada"),
    ("{{ missing }}|{{ missing.deeper }}|{{ obj.nope }}", {"obj": {}}, "||"),
    (
        "{{ n }} {{ f }} {{ half }} {{ yes }} {{ nothing }}",
        {"n": 3, "f": 2.0, "half": 0.5, "yes": True, "nothing": None},
        "3 2 0.5 true ",
    ),
    ("{{ items }}", {"items": ["a", 1, True]}, "a,1,true"),
    ("{{ obj }}", {"obj": {"a": 1}}, "[object Object]"),
    ("{{ obj.items }} {{ obj['keys'] }}", {"obj": {"items": "x", "keys": "y"}}, "x y"),
    ("{{ s.length }} {{ xs.length }} {{ xs[0] }}{{ xs[-1] }}", {"s": "abc", "xs": ["p", "q"]}, "3 2 p"),
    ("{% if lang == 'fr' %}Bonjour{% elif lang == 'de' %}Hallo{% else %}Hi{% endif %}", {"lang": "de"}, "Hallo"),
    ("{% if lang == 'fr' %}Bonjour{% elseif lang == 'de' %}Hallo{% endif %}", {"lang": "de"}, "Hallo"),
    (
        "{% for x in xs %}{{ loop.index }}.{{ x }}{% if not loop.last %}, {% endif %}{% endfor %}",
        {"xs": ["a", "b"]},
        "1.a, 2.b",
    ),
    ("{% set greeting = 'Hi ' ~ name %}{{ greeting }}", {"name": "Bo"}, "Hi Bo"),
    ("{{ name | upper }} {{ name | lower }} {{ name | length }} {{ ' x ' | trim }}", {"name": "Ada"}, "ADA ada 3 x"),
    ("{{ missing | default('none') }} {{ empty | default('e', true) }}", {"empty": ""}, "none e"),
    (
        "{{ xs | join(', ') }} {{ xs | first }} {{ xs | last }} {{ xs | reverse | join }}",
        {"xs": ["a", "b"]},
        "a, b a b ba",
    ),
    ("{{ text | replace('a', 'o') }} {{ word | capitalize }}", {"text": "banana", "word": "hELLO"}, "bonono Hello"),
    ("{{ obj | dump }}", {"obj": {"a": [1, 2.0], "b": "é"}}, '{"a":[1,2],"b":"é"}'),
    ("{{ obj | dump(2) }}", {"obj": {"a": 1}}, '{\n  "a": 1\n}'),
    ("{{ (raw | load).k }}", {"raw": '{"k": "v"}'}, "v"),
    ("{{ '7' | int + 1 }} {{ -3 | abs }} {{ [3, 1, 2] | sort | join }} {{ [1, 2] | sum }}", {}, "8 3 123 3"),
    ("{% raw %}{{ kept }}{% endraw %}", {}, "{{ kept }}"),
    ("a {# note #}b", {}, "a b"),
    ("{%- if x -%}  yes  {%- endif -%}", {"x": 1}, "yes"),
    ("line\n", {}, "line\n"),
    ("{% for i in range(3) %}{{ i }}{% endfor %}", {}, "012"),
    ("{{ n is odd }} {{ x is defined }} {{ y is undefined }}", {"n": 3, "x": 1}, "true true true"),
    ("no template here: {not one}", {}, "no template here: {not one}"),
    (
        "{% if f %}yes{% else %}no{% endif %}|{% if o %}yes{% endif %}|{{ f or 'd' }}|{{ f | length }}",
        {"f": [], "o": {}},
        "yes|yes||0",
    ),
    (
        "{{ x | int }}|{{ y | int }}|{{ z | float }}|{{ w | int }}|{{ w | int(7) }}",
        {"x": "12abc", "y": "3.7", "z": "1.5x", "w": "n"},
        "12|3|1.5||7",
    ),
    (
        "{{ s | sort }}|{{ s | list | join('-') }}|{{ s | reverse }}|{{ xs | join(', ') }}",
        {"s": "cba", "xs": [1, None, True]},
        "a,b,c|c-b-a|abc|1, , true",
    ),
    ("{{ rows | join(', ', 'name') }} {{ [1, 2.5] | sum }}", {"rows": [{"name": "a"}, {"name": "b"}]}, "a, b 3.5"),
]


@pytest.mark.parametrize(("template", "variables", "expected"), AGREE)
def test_renders_as_nunjucks_does(template: str, variables: dict[str, Any], expected: str) -> None:
    assert render(template, variables).text == expected


def test_undefined_variables_are_named() -> None:
    assert render("{{ a }} {{ b.c }} {% for x in xs %}{{ x }}{% endfor %}", {"a": 1}).undefined == ("b", "xs")


MISMATCH = [
    ("{{ name | title }}", "filter 'title' is not read alike by Nunjucks and Jinja2"),
    ("{{ name | nl2br }}", "filter 'nl2br' is not read alike by Nunjucks and Jinja2"),
    ("{{ x | round }}", "filter 'round' is not read alike by Nunjucks and Jinja2"),
    ("{{ name.toUpperCase() }}", "function and method calls are not converted (only range())"),
    ("{% for k, v in obj %}{{ k }}{% endfor %}", "'for a, b in ...' unpacks differently"),
    ("{{ env.OPENAI_API_KEY }}", "'env' reads environment variables; put the values in vars instead"),
    ("{% include 'other.njk' %}", "'include' is not converted"),
    ("{% macro m() %}x{% endmacro %}", "'macro' is not converted"),
    ("{{ x === 1 }}", "not a template Jinja2 reads"),
    ("{{ unclosed", "not a template Jinja2 reads"),
    ("{{ x is truthy }}", "test 'is truthy' is not read alike"),
    ("{{ s.trim }}", "'.trim' of a string is a JavaScript property Jinja2 does not have"),
    ("{{ '{' | load }}", "load: not JSON"),
    ("{{ 1 + 'a' }}", "rendering failed: TypeError"),
    ("{{ s | join(', ') }}", "'join' of 'abc': Nunjucks fails on what is not a list"),
    ("{{ s | sum }}", "'sum' of 'abc': Nunjucks fails on what is not a list"),
]


@pytest.mark.parametrize(("template", "message"), MISMATCH)
def test_disagreements_are_refused(template: str, message: str) -> None:
    with pytest.raises(TemplateMismatch) as caught:
        render(template, {"name": "x", "x": 1.5, "obj": {}, "s": "abc"})
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1e21, "1e+21"), (1e-7, "1e-7"), (0.1, "0.1"), (-0.0, "0"), (float("nan"), "NaN"), (float("-inf"), "-Infinity"),
     ([None, [1, 2]], ",1,2"), (12345678901234567890.0, "12345678901234567000")],
)  # fmt: skip
def test_js_string(value: Any, expected: str) -> None:
    assert js_string(value) == expected


@pytest.mark.parametrize("depth", [900, 100_000])
def test_a_var_nested_too_deeply_is_refused_not_a_crash(depth: int) -> None:
    """JSON too deep to parse (load), or parsed but too deep to print, is a mismatch (listed),
    not a RecursionError traceback."""
    with pytest.raises(TemplateMismatch, match=r"nested too deeply to read|rendering failed: RecursionError"):
        render("{{ raw | load }}", {"raw": "[" * depth + "]" * depth})
