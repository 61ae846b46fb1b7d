"""A set's templates are bounded in time and size (README "Templates, variables, data files and
conversations"): a loop that would run for hours and an expression that would build gigabytes are
refused at exit 2 naming file:line, before anything is called or stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evalkit.sets import sandbox
from evalkit.sets.sandbox import Limits
from evalkit.sets.templates import Renderer, TemplateProblem
from tests.fakeserver import FakeServer

NESTED_LOOP = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
HUGE_POWER = "{{ (9999**9999)**9999 }}"
OVER = "over 1,000,000 characters (or items), the limit of a template's values; make it shorter"


def problem(source: str, renderer: Renderer | None = None, **variables: Any) -> str:
    with pytest.raises(TemplateProblem) as caught:
        (renderer or Renderer()).text(source, variables)
    return caught.value.message


# --- time -------------------------------------------------------------------------------------

SHORT = Limits(template_s=0.05, set_s=0.08)


@pytest.mark.parametrize(
    "source",
    [
        NESTED_LOOP,
        "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",  # output too
        "{% for i in rows %}{% for j in rows %}{% for k in rows %}{% endfor %}{% endfor %}{% endfor %}",
        "{% for i in rows recursive %}{% if loop.depth < 9 %}{{ loop(rows) }}{% endif %}{% endfor %}",
    ],
)
def test_a_template_that_runs_too_long_is_stopped_at_its_limit(source: str) -> None:
    message = problem(source, Renderer(Limits(template_s=0.05)), rows=list(range(1000)))
    assert message == (
        "the template took over 0.05 s to render (the limit per template); make it do less (fewer or smaller loops)"
    )


def test_a_sets_templates_together_are_stopped_at_the_sets_limit() -> None:
    renderer = Renderer(SHORT)
    first = problem(NESTED_LOOP, renderer)  # spends its 0.05 s of the set's 0.08 s
    assert first.startswith("the template took over 0.05 s")
    set_message = (
        "the set's templates took over 0.08 s to render in all (the limit per set); make them do less, or split the set"
    )
    assert problem(NESTED_LOOP + " ", renderer) == set_message  # the rest of the set's time, then no more
    assert problem("{% if true %}quick{% endif %}", renderer) == set_message


# --- size -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "what"),
    [
        ("{{ 'x' | center(1000000000) }}", "the padded text"),
        ("{{ 'x'.ljust(1000000000) }}", "the padded text"),
        ("{{ 'x'.zfill(1000000000) }}", "the padded text"),
        ("{{ '%1000000000s' | format('x') }}", "the formatted text"),
        ("{{ '%*s' | format(1000000000, 'x') }}", "the formatted text"),
        ("{{ '%1000000000s' % 'x' }}", "the formatted text"),
        ("{{ '{:>1000000000}'.format('x') }}", "the formatted text"),
        ("{{ '{:>{w}}'.format('x', w=10**9) }}", "the formatted text"),
        ("{{ ('{0}' * 1000).format('a' * 10000) }}", "the formatted text"),
        ("{{ ('%(a)s' * 1000) % {'a': 'a' * 10000} }}", "the formatted text"),
        ("{{ 'x' | indent(1000000000) }}", "the indented text"),
        ("{{ 'x\\ny' | indent(width=1000000000) }}", "the indented text"),
        ("{{ 'x' | center(width=1000000000) }}", "the padded text"),
        ("{{ '\\t'.expandtabs(tabsize=1000000000) }}", "the expanded text"),
        ("{{ 'a b c d' | wordwrap(1, true, 'x' * 1000000) }}", "the wrapped text"),
        ("{{ ('a' * 1000000) | indent('b' * 1000) }}", "the indented text"),
        ("{{ (['a' * 1000000] * 1000) | join }}", "the joined text"),
        ("{{ (['a'] * 1000000) | join(',') }}", "the joined text"),
        ("{{ ('a' * 1000).join(['b' * 1000] * 1000) }}", "the joined text"),
        ("{{ ('a' * 1000000) | replace('', 'bbbb') }}", "the replaced text"),
        ("{{ ('a' * 1000000).replace('a', 'bb') }}", "the replaced text"),
        ("{% set a = 'a' * 1000000 %}{{ a ~ a ~ a }}", "joining with ~"),
        ("{% set a = 'a' * 1000000 %}{{ a + a }}", "adding with +"),
        ("{% set a = ['a'] * 1000000 %}{{ (a + a) | length }}", "adding with +"),
        (
            "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
            "joining with ~",
        ),
        ("{{ ['a' * 1000000] * 1000000 }}", "the value shown"),
        ("{{ (['a'] * 1000000) | string }}", "the text"),
        ("{{ (['a' * 1000000] * 1000) | tojson }}", "the text"),
        ("{{ (['a' * 1000000] * 1000) | e }}", "the text"),
        ("{{ ('<' * 1000000) | e }}", "the e filter's result"),
        ("{{ ([['a'] * 1000000] * 1000) | sum(start=[]) }}", "the sum"),
        ("{{ 'aaaa'.translate({97: 'x' * 1000000}) }}", "the translated text"),
        ("{{ 'a b c d' | wordwrap(1, wrapstring='x' * 1000000) }}", "the wrapped text"),
        ("{{ range(10) | batch(1000000000, 'x') | list }}", "the requested size"),
        ("{{ lipsum(100000, min=100000, max=100000) }}", "the lorem ipsum text"),
        ("{{ 'a' * 1000000 }}{{ 'a' * 1000000 }}", "the template's text"),
        (
            "{% macro m() %}{% for i in range(2000) %}{{ 'a' * 1000 }}{% endfor %}{% endmacro %}{{ m() | length }}",
            "the block's text",
        ),
        (
            "{% set b %}{% for i in range(2000) %}{{ 'a' * 1000 }}{% endfor %}{% endset %}{{ b | length }}",
            "the block's text",
        ),
        ("{% filter upper %}{% for i in range(2000) %}{{ 'a' * 1000 }}{% endfor %}{% endfilter %}", "the block's text"),
    ],
)
def test_a_value_over_the_size_limit_is_refused_before_it_is_built(source: str, what: str) -> None:
    """The real limits: each of these would build a gigabyte or more (or crash with MemoryError)."""
    assert problem(source) == f"{what} would be {OVER}"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (HUGE_POWER, "the power would be over 1,000,000 bits, the limit of a template's numbers"),
        (
            "{% set ns = namespace(n=3) %}{% for i in range(40) %}{% set ns.n = ns.n * ns.n %}{% endfor %}",
            "the product would be over 1,000,000 bits, the limit of a template's numbers",
        ),
        (
            "{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{{ ns.l.extend(ns.l) }}{% endfor %}",
            "not allowed in the template sandbox: access to attribute 'extend' of 'list' object is unsafe.",
        ),
    ],
)
def test_numbers_and_lists_cannot_grow_without_bound(source: str, message: str) -> None:
    assert problem(source) == message


@pytest.mark.parametrize(
    "source",
    [
        "{% if v %}" * 2000 + "{% endif %}" * 2000,
        "{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}",
        "{{ 1" + " + 1" * 20000 + " }}",
    ],
)
def test_a_template_nested_too_deeply_to_read_is_refused(source: str) -> None:
    assert problem(source, v=1) == "the template is nested too deeply to read (blocks or brackets); flatten it"


def test_a_variable_named_many_times_is_sized_on_the_fast_path_too() -> None:
    """A template of text and names is joined without Jinja; its size is still the limit's."""
    assert problem("{{ v }}" * 101, v="x" * 10_000) == f"the template's text would be {OVER}"
    assert len(Renderer().text("{{ v }}" * 100, {"v": "x" * 10_000})) == 1_000_000  # at the limit: fine


def test_a_sets_templates_together_are_bounded_in_size() -> None:
    renderer = Renderer(Limits(set_text=25))
    assert renderer.text("{{ v }}!", {"v": "x" * 9}) == "x" * 9 + "!"
    assert renderer.text("{% if v %}{{ v }}{% endif %}", {"v": "y" * 10}) == "y" * 10  # 20 characters in all
    message = "the set's templates render over 25 characters in all (the limit per set); render less, or split the set"
    assert problem("{{ v }}.", renderer, v="z" * 5) == message
    assert problem("{{ v | upper }}", renderer, v="z") == message


# --- at the command line ----------------------------------------------------------------------


def test_validate_refuses_the_attacks_with_the_real_limits_naming_file_and_line(cli: Any, write_file: Any) -> None:
    write_file(
        "t.yaml",
        f"""
        id: t.bomb
        name: Bombs
        prompts:
          - id: loop
            prompt: "{NESTED_LOOP}"
            assertions: [{{contains: x}}]
          - id: power
            prompt: "{HUGE_POWER}"
            assertions: [{{contains: x}}]
          - id: center
            prompt: "{{{{ 'x' | center(1000000000) }}}}"
            assertions: [{{contains: x}}]
        """,
    )
    result = cli("validate", "t.yaml")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "t.yaml:5:13: prompts[0].prompt: the template took over 1 s to render (the limit per template); "
        "make it do less (fewer or smaller loops)",
        "t.yaml:8:13: prompts[1].prompt: the power would be over 1,000,000 bits, the limit of a template's numbers",
        f"t.yaml:11:13: prompts[2].prompt: the padded text would be {OVER}",
        "3 errors in 1 file",
    ]


def test_run_refuses_a_template_over_its_limits_before_any_call(
    cli: Any, write_file: Any, fake_llm: FakeServer, fake_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sandbox, "LIMITS", Limits(template_s=0.05))
    write_file("cases.csv", "id,n\na,1\nb,2\n")
    write_file(
        "set.yaml",
        f"""
        id: t.slow
        name: Slow rows
        template:
          prompt: "{{{{ n }}}} {NESTED_LOOP}"
          assertions: [{{contains: x}}]
        cases: cases.csv
        """,
    )
    result = cli("run", "set.yaml")
    assert result.exit_code == 2
    first = result.stderr.splitlines()[0]
    assert first.startswith("Error: cases.csv:2:")
    assert "the template took over 0.05 s to render (the limit per template)" in first
    assert fake_llm.calls == 0
