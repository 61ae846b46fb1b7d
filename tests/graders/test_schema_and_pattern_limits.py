"""What a regex or a JSON Schema may ask of evalkit.

- A JSON Schema never makes evalkit fetch anything: a $ref or $dynamicRef that does not resolve
  within the schema is a load error, wherever the schema changes its base URI (checked against a
  loopback server that counts what it is asked for).
- Only schema positions hold references: ``$ref``-shaped data under enum, const, default or
  examples is data.
- Schema patterns are read by the ``regex`` engine: ECMA-262 Unicode property escapes load and
  match, in ``pattern`` and ``patternProperties`` (also as additionalProperties and
  unevaluatedProperties see them), with a time limit.
- A regex that would compile to a huge program (counted repeats, which the engine unrolls) or
  nest groups too deeply is a load error with file:line, in bounded memory, for regex assertions
  and schema patterns alike. The size estimate is checked against the engine's own parse.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalkit import load_set
from evalkit.assertions import compiling as assertions
from evalkit.assertions.compiling import compile_json_schema
from evalkit.assertions.jsondoc import json_schema
from evalkit.assertions.regexshape import REGEX_MAX_DEPTH, REGEX_MAX_SIZE, regex_shape
from evalkit.assertions.registry import Context
from evalkit.errors import SetError
from evalkit.graders.deterministic import grade_assertions
from evalkit.records import Prompt, PromptSet
from tests.conftest import REPO
from tests.fakeserver import FakeServer, Reply


def write_set(path: Path, assertion_list: list[dict[str, Any]]) -> Path:
    """A one-prompt set written as indented JSON, so each assertion starts on a line of its own."""
    document = {
        "id": "graders.limits",
        "name": "Limits",
        "prompts": [{"id": "only", "prompt": "Answer.", "assertions": assertion_list}],
    }
    path.write_text(json.dumps(document, indent=1), encoding="utf-8")
    return path


def load_prompt(assertion_list: list[dict[str, Any]]) -> Prompt:
    prompt_set = load_set(write_set(Path("set.yaml"), assertion_list))
    assert isinstance(prompt_set, PromptSet)
    return prompt_set.prompts[0]


def load_error(assertion_list: list[dict[str, Any]]) -> str:
    with pytest.raises(SetError) as caught:
        load_prompt(assertion_list)
    message = str(caught.value)
    assert re.match(r"set\.yaml:\d+:\d+: prompts\[0\]\.assertions\[0\]\.(regex|json_schema): ", message), message
    assert len(message.splitlines()) == 1
    return message


def holds(schema: Any, response: str) -> bool:
    return grade_assertions(load_prompt([{"json_schema": schema}]), response).passed


@pytest.fixture
def schema_host() -> Any:
    """A loopback server that would serve any schema asked of it, and records that it was asked."""
    server = FakeServer().start()
    server.handler = lambda _request: Reply(json={"type": "integer"})
    try:
        yield server
    finally:
        server.stop()


# --- nothing is fetched ----------------------------------------------------------------


def remote_schemas(url: str) -> list[Any]:
    return [
        # the issue's case: a nested $id used to switch the load-time check off
        {"$defs": {"x": {"$id": "urn:x"}}, "$ref": f"{url}/integer.json"},
        {"$dynamicRef": f"{url}/integer.json"},
        {"properties": {"n": {"$dynamicRef": f"{url}/integer.json#node"}}},
        # a relative $ref under a nested base URI that only the network could resolve
        {"$defs": {"x": {"$id": f"{url}/folder/", "items": {"$ref": "integer.json"}}}, "$ref": "#/$defs/x"},
        {"$id": f"{url}/root.json", "properties": {"n": {"$ref": "integer.json"}}},
    ]


@pytest.mark.parametrize("case", range(5))
def test_a_reference_only_the_network_could_resolve_is_a_load_error(schema_host: FakeServer, case: int) -> None:
    schema = remote_schemas(schema_host.url)[case]
    message = load_error([{"json_schema": schema}])
    assert "does not resolve within the schema (nothing is fetched)" in message
    assert schema_host.calls == 0


def test_validate_and_run_fetch_nothing(
    cli: Any, fake_config: Path, fake_llm: FakeServer, schema_host: FakeServer, db_file: Path
) -> None:
    write_set(Path("set.yaml"), [{"json_schema": remote_schemas(schema_host.url)[0]}])
    validated = cli("validate", "set.yaml")
    assert validated.exit_code == 2, validated.stdout + validated.stderr
    assert "set.yaml:" in validated.stdout + validated.stderr
    ran = cli("run", "set.yaml")
    assert ran.exit_code == 2, ran.stderr
    assert ran.exception is None
    assert ran.stderr.startswith("Error: set.yaml:")
    assert "$ref" in ran.stderr
    assert len(ran.stderr.strip().splitlines()) == 1
    assert fake_llm.calls == 0
    assert schema_host.calls == 0
    assert not db_file.exists()


def test_references_within_the_schema_resolve_under_nested_base_uris() -> None:
    schema = {
        "$id": "https://example.com/root.json",
        "$defs": {"int": {"$id": "int.json", "type": "integer"}, "node": {"$anchor": "node", "type": "string"}},
        "properties": {"n": {"$ref": "int.json"}, "s": {"$ref": "#node"}, "m": {"$ref": "#/$defs/int"}},
    }
    assert holds(schema, '{"n": 1, "s": "x", "m": 2}')
    assert not holds(schema, '{"n": "1"}')
    assert not holds(schema, '{"s": 1}')


def test_a_dynamic_reference_resolves_within_the_schema() -> None:
    schema = {
        "$id": "https://example.com/tree",
        "$dynamicAnchor": "node",
        "type": "object",
        "properties": {"children": {"type": "array", "items": {"$dynamicRef": "#node"}}},
        "required": ["children"],
    }
    assert holds(schema, '{"children": [{"children": []}]}')
    assert not holds(schema, '{"children": [{}]}')


def test_the_meta_schema_is_known_without_fetching() -> None:
    schema = {"$ref": "https://json-schema.org/draft/2020-12/schema"}
    assert holds(schema, '{"type": "string"}')
    assert not holds(schema, '{"type": 5}')


# --- $ref-shaped data is data ----------------------------------------------------------


REF_DATA = '{"$ref": "#/$defs/a_string"}'


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        pytest.param({"enum": [{"$ref": "#/$defs/a_string"}]}, REF_DATA, '"a string"', id="enum"),
        pytest.param({"const": {"$ref": "#/$defs/a_string"}}, REF_DATA, '{"$ref": "#/x"}', id="const"),
        pytest.param({"type": "object", "default": {"$ref": "http://127.0.0.1:9/x.json"}}, "{}", "1", id="default"),
        pytest.param({"type": "array", "examples": [{"$ref": "#/nowhere"}]}, "[]", REF_DATA, id="examples"),
        pytest.param(
            {"properties": {"a": {"const": {"$dynamicRef": "#nowhere"}}}},
            '{"a": {"$dynamicRef": "#nowhere"}}',
            '{"a": 1}',
            id="nested-const",
        ),
    ],
)
def test_ref_shaped_data_is_not_a_reference(schema: dict[str, Any], valid: str, invalid: str) -> None:
    prompt = load_prompt([{"json_schema": schema}])
    assert grade_assertions(prompt, valid).passed
    assert not grade_assertions(prompt, invalid).passed


def test_the_suites_naive_replacement_case() -> None:
    schema = {"$defs": {"a_string": {"type": "string"}}, "enum": [{"$ref": "#/$defs/a_string"}]}
    assert holds(schema, '{"$ref": "#/$defs/a_string"}')
    assert not holds(schema, '"this is a string"')


def test_a_property_named_ref_is_a_subschema_not_a_reference() -> None:
    schema = {"properties": {"$ref": {"type": "string"}}}
    assert holds(schema, '{"$ref": "x"}')
    assert not holds(schema, '{"$ref": 1}')


# --- ECMA-262 Unicode property escapes in schema patterns ------------------------------


@pytest.mark.parametrize(
    ("schema", "response", "passed"),
    [
        pytest.param({"pattern": "^\\p{Letter}+$"}, '"école"', True, id="pattern-letters"),
        pytest.param({"pattern": "^\\p{Letter}+$"}, '"école1"', False, id="pattern-digit"),
        pytest.param({"pattern": "^\\p{digit}+$"}, '"\\u09ea\\u09e8"', True, id="pattern-bengali-digits"),
        pytest.param({"pattern": "^\\P{L}$"}, '"1"', True, id="pattern-negated"),
        pytest.param({"patternProperties": {"^\\p{Lu}": {"type": "integer"}}}, '{"École": 1}', True, id="pp-match"),
        pytest.param(
            {"patternProperties": {"^\\p{Lu}": {"type": "integer"}}}, '{"École": "x"}', False, id="pp-invalid"
        ),
        pytest.param(
            {"patternProperties": {"^\\p{Lu}": {}}, "additionalProperties": False}, '{"École": 1}', True, id="ap-taken"
        ),
        pytest.param(
            {"patternProperties": {"^\\p{Lu}": {}}, "additionalProperties": False}, '{"école": 1}', False, id="ap-extra"
        ),
        pytest.param(
            {"allOf": [{"patternProperties": {"^\\p{Lu}": {}}}], "unevaluatedProperties": False},
            '{"École": 1}',
            True,
            id="unevaluated-taken",
        ),
        pytest.param(
            {"allOf": [{"patternProperties": {"^\\p{Lu}": {}}}], "unevaluatedProperties": False},
            '{"école": 1}',
            False,
            id="unevaluated-extra",
        ),
        pytest.param({"propertyNames": {"pattern": "^\\p{Ll}+$"}}, '{"ab": 1}', True, id="property-names"),
        pytest.param({"propertyNames": {"pattern": "^\\p{Ll}+$"}}, '{"Ab": 1}', False, id="property-names-invalid"),
    ],
)
def test_unicode_property_escapes_load_and_match(schema: dict[str, Any], response: str, passed: bool) -> None:
    assert holds(schema, response) is passed


def test_patterns_keep_the_regex_engine_through_a_recursive_ref_to_a_root_naming_its_dialect() -> None:
    # jsonschema switches validator class wherever a (sub)schema names $schema: the $ref back to
    # the root must not bring Python's re back
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {"name": {"pattern": "^\\p{Letter}+$"}, "next": {"$ref": "#"}},
    }
    assert holds(schema, '{"name": "école", "next": {"name": "ça"}}')
    assert not holds(schema, '{"name": "école", "next": {"name": "1"}}')


@pytest.mark.parametrize(
    "schema",
    [
        pytest.param({"pattern": "(a"}, id="pattern"),
        pytest.param({"patternProperties": {"[z-a]": {}}}, id="pattern-properties"),
        pytest.param({"properties": {"a": {"pattern": "\\p{NoSuchProperty}"}}}, id="nested"),
    ],
)
def test_an_invalid_schema_pattern_is_still_a_load_error(schema: dict[str, Any]) -> None:
    message = load_error([{"json_schema": schema}])
    assert "invalid regex" in message


def test_a_catastrophic_schema_pattern_gives_up_with_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(assertions, "SCHEMA_PATTERN_TIMEOUT_S", 0.05)
    validator = compile_json_schema({"type": "string", "pattern": "^(a|aa)+$"})
    result = json_schema(validator, json.dumps("a" * 40 + "!"), Context())
    assert not result.passed
    assert "gave up" in result.reason


def schema_gave_up(kind: str, why: str) -> str:
    return f"{kind}: a pattern of the schema gave up{why} (catastrophic backtracking?)"


HOSTILE_SCHEMA = {"type": "object", "properties": {"a": {"pattern": "^(a|aa)+$"}}}
HOSTILE_JSON = json.dumps({"a": "a" * 40 + "!"})


@pytest.mark.timeout(30)
def test_a_prompts_schema_patterns_share_its_regex_time_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    # each catastrophic schema pattern took its own second, on the event loop
    import asyncio

    from evalkit.assertions import patterns
    from evalkit.graders.deterministic import DeterministicGrader

    monkeypatch.setattr(patterns, "REGEX_TIMEOUT_S", 0.2)
    prompt = load_prompt([{"json_schema": HOSTILE_SCHEMA}, {"contains_json": HOSTILE_SCHEMA}, {"regex": "(aa|a)+$"}])
    result = asyncio.run(DeterministicGrader().grade(None, prompt, HOSTILE_JSON, None))  # type: ignore[arg-type]
    spent = ": this prompt's 0.2 s of regex time is spent"
    assert [a.reason for a in result.assertions] == [
        schema_gave_up("json_schema", " after 0.2 s"),
        schema_gave_up("contains_json", spent),
        f"regex (aa|a)+$: gave up{spent} (catastrophic backtracking?)",
    ]


@pytest.mark.timeout(30)
def test_a_runs_schema_patterns_share_its_regex_time(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from evalkit.assertions import patterns
    from evalkit.graders.deterministic import DeterministicGrader

    monkeypatch.setattr(patterns, "REGEX_TIMEOUT_S", 0.2)
    monkeypatch.setattr(patterns, "RUN_REGEX_S", 0.5)
    prompt = load_prompt([{"json_schema": HOSTILE_SCHEMA}])
    grader = DeterministicGrader()

    async def main() -> list[str]:
        return [(await grader.grade(None, prompt, HOSTILE_JSON, None)).reason for _ in range(8)]  # type: ignore[arg-type]

    reasons = asyncio.run(main())
    whole = "assertion failed: " + schema_gave_up("json_schema", " after 0.2 s")  # the prompt's reason
    spent = "assertion failed: " + schema_gave_up("json_schema", ": the run's 0.5 s of regex time is spent")
    # a search that gives up has taken its whole limit: two of 0.2 s leave the run less than one
    assert reasons[0] == whole
    assert reasons[1] in (whole, spent)
    assert reasons[2:] == [spent] * 6


# --- a regex too large to compile ------------------------------------------------------

OVER = REGEX_MAX_SIZE + 1


@pytest.mark.parametrize(
    "pattern",
    [
        pytest.param(f"a{{{OVER}}}", id="count"),
        pytest.param(f"a{{{OVER},}}", id="count-open"),
        pytest.param(f"a{{{OVER},{OVER * 2}}}?", id="count-range-lazy"),
        pytest.param("(?:a{101}){100}", id="nested"),
        pytest.param("((a{22}){22}){22}", id="nested-three"),
        pytest.param("(?:ab){5001}", id="group-of-two"),
        pytest.param(f"[a-z]{{{OVER}}}", id="class"),
        pytest.param(f"\\p{{L}}{{{OVER}}}", id="property"),
        pytest.param("(?:[)]a{101}){100}", id="paren-in-class"),
        pytest.param("/a{1 0 0 0 1}/x", id="verbose-count-with-spaces"),
        pytest.param("/a{1 # comment\n0001}/x", id="verbose-count-with-comment"),
        pytest.param("(?x)(?:a{101}) {100}", id="verbose-inline"),
        pytest.param("(?x: # [\n)#(?:b{101}){100}]", id="verbose-comment-hides-a-class"),
        pytest.param("a(?x)(?:b{101}) {100}", id="verbose-unscoped-mid-pattern"),
        pytest.param("a{" + "0" * 60 + f"{OVER}}}", id="leading-zeros"),
        pytest.param("a{" + "9" * 5000 + "}", id="five-thousand-digits"),
    ],
)
def test_a_counted_repeat_too_large_to_compile_is_a_load_error(pattern: str) -> None:
    message = load_error([{"regex": pattern}])
    assert "regex too large" in message
    assert f"at most {REGEX_MAX_SIZE:,}" in message
    assert len(message) < 400  # the pattern is cut, not echoed whole


@pytest.mark.parametrize(
    "schema",
    [
        pytest.param({"type": "string", "pattern": f"a{{{OVER}}}"}, id="pattern"),
        pytest.param({"patternProperties": {"(?:x{101}){100}": {}}}, id="pattern-properties"),
        pytest.param({"$defs": {"d": {"pattern": f"^.{{{OVER},}}$"}}}, id="under-defs"),
        pytest.param({"items": {"propertyNames": {"pattern": f"b{{{OVER}}}"}}}, id="property-names"),
    ],
)
def test_a_schema_pattern_too_large_to_compile_is_a_load_error(schema: dict[str, Any]) -> None:
    message = load_error([{"json_schema": schema}])
    assert "invalid JSON Schema at " in message
    assert "regex too large" in message


@pytest.mark.parametrize(
    ("pattern", "response"),
    [
        pytest.param(f"a{{{REGEX_MAX_SIZE}}}", "a" * REGEX_MAX_SIZE, id="count-at-the-limit"),
        pytest.param("^.{0,1000000000}$", "anything", id="large-maximum-is-cheap"),
        pytest.param(
            "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
            "0" * 8 + "-0000" * 3 + "-" + "0" * 12,
            id="uuid",
        ),
        pytest.param("[a{100000}]", "{", id="braces-in-a-class-are-literal"),
        pytest.param("a\\{100000}", "a{100000}", id="escaped-brace-is-literal"),
        pytest.param("/a{1 0}/x", "a" * 10, id="verbose-count"),
    ],
)
def test_patterns_within_the_limit_load_and_match(pattern: str, response: str) -> None:
    result = grade_assertions(load_prompt([{"regex": pattern}]), response)
    assert result.passed, result.reason


def test_a_schema_pattern_at_the_limit_loads_and_matches() -> None:
    schema = {"type": "string", "pattern": f"^a{{{REGEX_MAX_SIZE - 2}}}$"}
    assert holds(schema, json.dumps("a" * (REGEX_MAX_SIZE - 2)))
    assert not holds(schema, json.dumps("a" * (REGEX_MAX_SIZE - 3)))


BIG_CASES = [
    pytest.param({"regex": "a{1000000000}"}, id="regex-count"),
    pytest.param({"regex": "((a{1000}){1000}){1000}"}, id="regex-nested"),
    pytest.param({"regex": "/a{1 000 000 000}/x"}, id="regex-verbose"),
    pytest.param({"regex": "a{" + "0" * 60 + "1000000000}"}, id="regex-leading-zeros"),
    pytest.param({"json_schema": {"type": "string", "pattern": "a{1000000000}"}}, id="schema-pattern"),
    pytest.param({"json_schema": {"patternProperties": {"(?:x{100000}){100000}": {}}}}, id="schema-pattern-properties"),
]


@pytest.mark.parametrize("assertion", BIG_CASES)
def test_validate_refuses_a_huge_regex_in_bounded_memory(write_file: Any, assertion: dict[str, Any]) -> None:
    # Before the fix `a{1000000000}` grew validate to 24 GB; under a 1 GiB address-space limit
    # it now ends with exit 2 instead of a MemoryError
    write_set(Path("set.yaml"), [assertion])

    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    done = subprocess.run(
        [sys.executable, "-m", "evalkit", "validate", "set.yaml"],
        capture_output=True,
        text=True,
        preexec_fn=limit_memory,
        cwd=Path.cwd(),
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(Path.cwd())},
        timeout=120,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert "regex too large" in output
    assert "Traceback" not in output


# --- a regex nested too deeply ---------------------------------------------------------

DEEP = "(" * 400 + "a" + ")" * 400


@pytest.mark.parametrize(
    "assertion",
    [
        pytest.param({"regex": DEEP}, id="regex"),
        pytest.param({"regex": "(?:" * 300 + "a" + ")" * 300}, id="regex-non-capturing"),
        pytest.param({"regex": "/" + "(?x:" * 300 + "a" + ")" * 300 + "/"}, id="regex-delimited-flags"),
        pytest.param({"json_schema": {"type": "string", "pattern": DEEP}}, id="schema-pattern"),
        pytest.param({"json_schema": {"patternProperties": {DEEP: {}}}}, id="schema-pattern-properties"),
    ],
)
def test_a_regex_nested_too_deeply_is_a_load_error(assertion: dict[str, Any]) -> None:
    message = load_error([assertion])
    assert f"deep (at most {REGEX_MAX_DEPTH})" in message


def test_run_with_a_deeply_nested_regex_exits_2_before_any_call(
    cli: Any, fake_config: Path, fake_llm: FakeServer, db_file: Path
) -> None:
    write_set(Path("set.yaml"), [{"contains": "a"}, {"json_schema": {"type": "string", "pattern": DEEP}}])
    result = cli("run", "set.yaml")
    assert result.exit_code == 2, result.stderr
    assert result.exception is None
    assert re.match(r"Error: set\.yaml:\d+:\d+: prompts\[0\]\.assertions\[1\]\.json_schema: ", result.stderr)
    assert len(result.stderr.strip().splitlines()) == 1
    assert fake_llm.calls == 0
    assert not db_file.exists()


def test_nesting_at_the_limit_still_compiles() -> None:
    pattern = "(" * REGEX_MAX_DEPTH + "a" + ")" * REGEX_MAX_DEPTH
    result = grade_assertions(load_prompt([{"regex": pattern}]), "a")
    assert result.passed


# --- the size estimate against the regex engine's own parse --------------------------------

TOKENS = [
    "a", "b", "ab", " ", "#", "\n", "\\(", "\\[", "\\{", "\\p{L}", "\\x{41}", "(", ")", "(?:", "(?x)",
    "(?x:", "(?-x:", "(?i)", "(?V1)", "(?#c)", "(?P<n>", "(?=", "(?<=", "(?>", "(?|", "(?(1)", "[", "]",
    "[^", "[:alpha:]", "{", "}", "{2}", "{3,}", "{,5}", "{2,3}", "{ 3 }", "{1 2}", "{0}", "*", "+", "?",
    "|", ",", "2", "-", "&&", "\\p{", "\\g<", "\\N{", "(?(?=a)", "(?-x)", "(? x)", "{1#x\n2}", "\t",
    "(?#a\\)", "(?|a|(?x)b)", "(?(?<=a)", "(?V0)", "(?R)", "(?-1)", "(?1)",
]  # fmt: skip


def engine_size(pattern: str, flags: int) -> int | None:
    """What the engine's parse (its DEBUG dump) unrolls: repeats multiply their content by their
    minimum; a set is one item. None when the pattern does not compile."""
    import regex

    dump = io.StringIO()
    try:
        with contextlib.redirect_stdout(dump):
            regex.compile(pattern, flags | regex.DEBUG)
    except Exception:  # not a pattern; or the dump itself fails on some nodes (\\p{L} in regex 2026.5)
        return None
    nodes: list[tuple[int, str, list[Any]]] = []
    stack: list[tuple[int, list[Any]]] = [(-1, nodes)]
    for line in dump.getvalue().splitlines():
        indent = len(line) - len(line.lstrip(" "))
        while stack[-1][0] >= indent:
            stack.pop()
        children: list[Any] = []
        stack[-1][1].append((indent, line.strip(), children))
        stack.append((indent, children))

    def size(node: tuple[int, str, list[Any]]) -> int:
        _, text, children = node
        if not children:
            return 0 if text in ("BRANCH", "OR", "EITHER") else 1  # an empty alternative compiles to nothing
        if text.startswith("SET_"):
            return 1
        inner = sum(size(child) for child in children)
        repeat = re.match(r"\w+_REPEAT (\d+) ", text)
        return inner * max(int(repeat.group(1)), 1) if repeat else inner

    return sum(size(node) for node in nodes)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=14).map("".join), st.booleans())
def test_the_size_estimate_is_never_below_the_engines(pattern: str, verbose: bool) -> None:
    import regex

    flags = regex.UNICODE | (regex.VERBOSE if verbose else 0)
    actual = engine_size(pattern, flags)
    if actual is None:
        return
    assert regex_shape(pattern, verbose=verbose).size >= actual
