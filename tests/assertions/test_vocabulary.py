"""The vocabulary of README "Assertions", type by type: each holds and fails on examples with a readable
reason, and each ``not_`` form holds exactly when its type does not (except when no verdict could
be reached: then both fail). Then weights, thresholds and what ``python`` checks may return.

Sets are written as JSON (which is YAML) into the test's working folder, loaded with
``evalkit.load_set`` and graded with ``grade_assertions``: the path from the file to the verdict.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

from evalkit import load_set
from evalkit.assertions.registry import Context
from evalkit.graders.deterministic import DeterministicGrader, check, grade_assertions
from evalkit.records import Assertion, AssertionResult, CallFacts, Grade, Prompt, PromptSet, ToolCall
from tests.assertions.test_registry import DESIGN_41

CHECKS = """
def is_yes(response, context):
    return response.strip().lower() == "yes"

def seven_tenths(response, context):
    return 0.7

def three_tenths(response, context):
    return 0.3

def verdict(response, context):
    return {"pass": False, "score": 0.4, "reason": "too short: " + str(len(response)) + " characters"}

def passing_verdict(response, context):
    return {"pass": True, "score": 0.9}

def polite(response, context):
    return {"pass": True, "reason": "no rude words"}

def raises(response, context):
    raise ValueError("the check broke on " + repr(response))

def says_maybe(response, context):
    return "maybe"

def out_of_range(response, context):
    return 1.5

def echo_context(response, context):
    seen = (context["prompt_id"], context["prompt"], context["reference"], context["latency_ms"], context["cost"])
    return {"pass": False, "score": 0.0, "reason": repr(seen)}
"""


@pytest.fixture(autouse=True)
def checks_file(isolated: Path) -> Path:
    """checks.py beside the set files, for the ``python`` assertions."""
    path = isolated / "checks.py"
    path.write_text(textwrap.dedent(CHECKS), encoding="utf-8")
    return path


PLAIN = Context()


def load_prompt(assertions: list[dict[str, Any]], **extra: Any) -> Prompt:
    prompt = {"id": "only", "prompt": "Answer the question.", "reference": "Yes.", "assertions": assertions, **extra}
    document = {"id": "vocabulary.case", "name": "Vocabulary", "tools": TOOLS, "prompts": [prompt]}
    path = Path("set.yaml")
    path.write_text(json.dumps(document), encoding="utf-8")
    prompt_set = load_set(path)
    assert isinstance(prompt_set, PromptSet)
    return prompt_set.prompts[0]


def grade(assertions: list[dict[str, Any]], response: str, context: Context = PLAIN, **extra: Any) -> Grade:
    return grade_assertions(load_prompt(assertions, **extra), response, context)


def one(kind: str, value: Any, response: str, context: Context = PLAIN) -> AssertionResult:
    """The verdict of one assertion, graded as a prompt of its own (whose verdict is the same)."""
    result = grade([{kind: value}], response, context)
    assert len(result.assertions) == 1
    assertion = result.assertions[0]
    assert assertion.type == kind
    assert result.passed == assertion.passed
    return assertion


TOOLS = ({"name": "search", "parameters": {"type": "object", "required": ["query"]}}, {"name": "lookup"})
SEARCHED = (ToolCall("search", {"query": "refunds"}), ToolCall("lookup", {"id": 7}))
FAST = Context(latency_ms=500.0, cost=0.002, tool_calls=SEARCHED, tools=TOOLS, recorded_context=["Refunds: 30 days."])
SLOW = Context(latency_ms=501.0, cost=0.0025, tools=TOOLS, recorded_context="Hours: 9 to 5.")

# (type, value, (response, context) that holds, (response, context) that fails, the failure's reason)
VOCABULARY = [
    ("exact", "no", (" no\n", FAST), ("No.", FAST), "exact: expected 'no', got 'No.'"),
    ("contains", "Monday", ("Open on Monday", FAST), ("open on monday", FAST), "contains 'Monday': not found"),
    ("regex", "/^mon(day)?\\b/im", ("Open:\nMonday", FAST), ("Tuesday", FAST), "regex /^mon(day)?\\b/im: no match"),
    (
        "json_schema",
        {"type": "object", "required": ["email"]},
        ('{"email": "a@example.org"}', FAST),
        ('{"name": "x"}', FAST),
        "json_schema: $: 'email' is a required property",
    ),
    (
        "icontains",
        "STRASSE",
        ("Die Straße ist lang", FAST),
        ("Die Gasse", FAST),
        "icontains 'STRASSE': not found (ignoring case)",
    ),
    (
        "contains_any",
        ["Monday", "Tuesday"],
        ("Tuesday only", FAST),
        ("monday", FAST),
        "contains_any: none of 'Monday', 'Tuesday' found",
    ),
    (
        "contains_all",
        ["Monday", "Friday"],
        ("Monday to Friday", FAST),
        ("Monday to Thursday", FAST),
        "contains_all: 1 of 2 not found ('Friday')",
    ),
    (
        "icontains_any",
        ["MONDAY", "Tuesday"],
        ("monday", FAST),
        ("Wednesday", FAST),
        "icontains_any: none of 'MONDAY', 'Tuesday' found",
    ),
    (
        "icontains_all",
        ["MONDAY", "friday"],
        ("Monday to FRIDAY", FAST),
        ("monday", FAST),
        "icontains_all: 1 of 2 not found ('friday')",
    ),
    ("starts_with", "Yes", ("\n  Yes, it is.", FAST), ("Well, yes", FAST), "starts_with 'Yes': starts with 'Wel'"),
    (
        "equals_json",
        {"a": 1, "b": [True, None]},
        (' {"b": [true, null], "a": 1.0} ', FAST),
        ('{"a": 1, "b": [1, null]}', FAST),
        'equals_json: expected \'{"a": 1, "b": [true, null]}\', got \'{"a": 1, "b": [1, null]}\'',
    ),
    (
        "contains_json",
        {"type": "object", "required": ["email"]},
        ('Here it is:\n```json\n{"email": "a@example.org"}\n```\nAnything else?', FAST),
        ('Here it is: {"name": "x"} and more', FAST),
        "contains_json: $: 'email' is a required property",
    ),
    (
        "contains_json",
        True,
        ("The list [1, 2] is the answer", FAST),
        ("No JSON here {but braces}", FAST),
        "contains_json: no JSON object or array in the response",
    ),
    (
        "levenshtein",
        {"value": "kitten", "max": 3},
        (" sitting\n", FAST),
        ("sitting down", FAST),
        "levenshtein: more than 3 edits from 'kitten'",
    ),
    ("word_count", {"min": 2, "max": 4}, ("one two three", FAST), ("one", FAST), "word_count: 1 word, wanted 2 to 4"),
    ("word_count", {"max": 2}, ("one two", FAST), ("one two three", FAST), "word_count: 3 words, wanted at most 2"),
    ("latency_ms", 500, ("any", FAST), ("any", SLOW), "latency_ms: took 501 ms, more than 500 ms"),
    ("cost", 0.002, ("any", FAST), ("any", SLOW), "cost: $0.002500, more than $0.002"),
    ("python", "checks.py:is_yes", ("Yes", FAST), ("No", FAST), "python checks.py:is_yes: returned False"),
    ("tool_called", "lookup", ("", FAST), ("", SLOW), "tool_called: no call of 'lookup' (no tool calls)"),
    ("tool_sequence", ["search", "lookup"], ("", FAST), ("", SLOW),
     "tool_sequence: expected in order search -> lookup; got no tool calls"),
    ("valid_tool_calls", True, ("", FAST), ("", SLOW), "valid_tool_calls: the answer made no tool calls"),
    ("tool_call_f1", {"expected": ["search", "lookup"]}, ("", FAST), ("", SLOW),
     "tool_call_f1: 0.00 below 1 (called: none; expected: lookup, search)"),
    ("context_contains", "30 DAYS", ("", FAST), ("", SLOW), "context_contains: '30 DAYS' is not in the recorded context"),
]  # fmt: skip
CASE_IDS = [f"{kind}-{i}" for i, (kind, *_) in enumerate(VOCABULARY)]

# the reason not_<type> gives when its type holds: the value as written, quoted or as JSON
NEGATED_REASONS = {
    "exact": "not_exact: exact 'no' holds",
    "contains": "not_contains: contains 'Monday' holds",
    "regex": "not_regex: regex '/^mon(day)?\\\\b/im' holds",
    "icontains": "not_icontains: icontains 'STRASSE' holds",
    "contains_any": "not_contains_any: contains_any ['Monday', 'Tuesday'] holds",
    "icontains_all": "not_icontains_all: icontains_all ['MONDAY', 'friday'] holds",
    "equals_json": 'not_equals_json: equals_json \'{"a": 1, "b": [true, null]}\' holds',
    "latency_ms": "not_latency_ms: latency_ms 500 holds",
    "cost": "not_cost: cost 0.002 holds",
    "python": "not_python: python 'checks.py:is_yes' holds",
}


def test_the_cases_cover_every_type() -> None:
    assert {kind for kind, *_ in VOCABULARY} == DESIGN_41


@pytest.mark.parametrize(("kind", "value", "holding", "failing", "reason"), VOCABULARY, ids=CASE_IDS)
def test_each_type_holds_and_fails_with_a_reason(
    kind: str, value: Any, holding: tuple[str, Context], failing: tuple[str, Context], reason: str
) -> None:
    held = one(kind, value, *holding)
    assert (held.passed, held.value, held.reason) == (True, 1.0, "")
    failed = one(kind, value, *failing)
    assert (failed.passed, failed.value, failed.reason) == (False, 0.0, reason)


@pytest.mark.parametrize(("kind", "value", "holding", "failing", "reason"), VOCABULARY, ids=CASE_IDS)
def test_each_negation_holds_exactly_when_its_type_does_not(
    kind: str, value: Any, holding: tuple[str, Context], failing: tuple[str, Context], reason: str
) -> None:
    negated = f"not_{kind}"
    refused = one(negated, value, *holding)
    assert not refused.passed
    assert refused.value == 0.0
    assert refused.reason.startswith(f"{negated}: {kind} ")
    assert refused.reason.endswith(" holds")
    if kind in NEGATED_REASONS and not isinstance(value, bool):
        assert refused.reason == NEGATED_REASONS[kind]
    held = one(negated, value, *failing)
    assert (held.passed, held.value, held.reason) == (True, 1.0, "")


def test_a_type_and_its_negation_graded_together_never_agree() -> None:
    assertions = [{kind: value} for kind, value, *_ in VOCABULARY]
    negations = [{f"not_{kind}": value} for kind, value, *_ in VOCABULARY]
    for response in ("Yes", "Monday to Friday", '{"email": "x"}', ""):
        result = grade(assertions + negations, response, FAST)
        half = len(assertions)
        for positive, negative in zip(result.assertions[:half], result.assertions[half:], strict=True):
            assert positive.passed != negative.passed, (response, positive, negative)


# --- no verdict: both forms fail ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "value", "context", "reason"),
    [
        pytest.param(
            "python",
            "checks.py:raises",
            FAST,
            "python checks.py:raises: ValueError: the check broke on 'Yes'",
            id="python-raises",
        ),
        pytest.param(
            "python",
            "checks.py:says_maybe",
            FAST,
            "python checks.py:says_maybe: returned 'maybe'; return a bool, a score or {'pass': ...}",
            id="python-returns-a-string",
        ),
        pytest.param(
            "python",
            "checks.py:out_of_range",
            FAST,
            "python checks.py:out_of_range: returned 1.5, not a score in 0..1",
            id="python-score-out-of-range",
        ),
        pytest.param(
            "latency_ms", 500, Context(cost=0.1), "latency_ms: the answer has no recorded latency", id="no-latency"
        ),
        pytest.param(
            "cost",
            1,
            Context(latency_ms=1.0),
            "cost: the call has no priced cost (set cost: on the instance in evalkit.yaml)",
            id="no-cost",
        ),
    ],
)
def test_without_a_verdict_a_type_and_its_negation_both_fail(
    kind: str, value: Any, context: Context, reason: str
) -> None:
    positive = one(kind, value, "Yes", context)
    assert (positive.passed, positive.reason) == (False, reason)
    negative = one(f"not_{kind}", value, "Yes", context)
    assert (negative.passed, negative.reason) == (False, f"not_{kind}: {reason}")


@pytest.mark.slow
def test_a_regex_that_gives_up_fails_its_negation_too() -> None:
    result = one("not_regex", "(a|aa)+$", "a" * 40 + "!")
    assert not result.passed
    assert result.reason == "not_regex: regex (a|aa)+$: gave up after 1 s (catastrophic backtracking?)"


# --- edges of single types ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "value", "response", "passed"),
    [
        pytest.param("icontains", "straße", "STRASSE", True, id="icontains-folds-eszett"),
        pytest.param("icontains", "ΣΊΣΥΦΟΣ", "σίσυφος", True, id="icontains-final-sigma"),
        pytest.param("icontains", "a", "b", False, id="icontains-absent"),
        pytest.param("contains_any", ["x", "y"], "", False, id="contains-any-empty-response"),
        pytest.param("contains_all", ["Mon", "Mon"], "Mon", True, id="contains-all-repeated-needle"),
        pytest.param("icontains_all", ["STRASSE", "É"], "straße é", True, id="icontains-all-folded"),
        pytest.param("starts_with", "  Yes", "Yes.", True, id="starts-with-value-leading-space-stripped"),
        pytest.param("starts_with", "Yes ", "Yes\n", False, id="starts-with-keeps-trailing-space-of-value"),
        pytest.param("starts_with", "Yes", "yes", False, id="starts-with-case-sensitive"),
        pytest.param("starts_with", "Yes", "\u00a0Yes", False, id="starts-with-nbsp-not-stripped"),
        pytest.param("equals_json", 1, " 1.0 ", True, id="equals-json-int-float"),
        pytest.param("equals_json", True, "1", False, id="equals-json-true-is-not-1"),
        pytest.param("equals_json", 1, "true", False, id="equals-json-1-is-not-true"),
        pytest.param("equals_json", "1", "1", False, id="equals-json-string-is-not-number"),
        pytest.param("equals_json", None, "null", True, id="equals-json-null"),
        pytest.param("equals_json", [1, 2], "[2, 1]", False, id="equals-json-arrays-ordered"),
        pytest.param("equals_json", {"a": 1}, '{"a": 1, "b": 2}', False, id="equals-json-extra-key"),
        pytest.param("equals_json", {"a": 1}, '```json\n{"a": 1}\n```', False, id="equals-json-no-fence-stripping"),
        pytest.param("equals_json", 1, "NaN", False, id="equals-json-nan-is-not-json"),
        pytest.param("contains_json", True, '```\n{"a": 1}\n```', True, id="contains-json-bare-fence"),
        pytest.param("contains_json", True, "```json\n{broken\n``` then [1]", True, id="contains-json-after-bad-fence"),
        pytest.param("contains_json", True, "[1, 2", False, id="contains-json-unbalanced"),
        pytest.param("contains_json", {"type": "array"}, 'x {"a": [1]} y', False, id="contains-json-first-value"),
        pytest.param("levenshtein", {"value": "abc", "max": 0}, " abc ", True, id="levenshtein-zero-trimmed"),
        pytest.param("levenshtein", {"value": "abc", "max": 0}, "abd", False, id="levenshtein-zero-one-off"),
        pytest.param("levenshtein", {"value": "", "max": 2}, "ab", True, id="levenshtein-empty-target"),
        pytest.param("levenshtein", {"value": "", "max": 2}, "abc", False, id="levenshtein-empty-target-far"),
        pytest.param("levenshtein", {"value": "ß", "max": 1}, "ss", False, id="levenshtein-by-code-point"),
        pytest.param("word_count", {"min": 0, "max": 0}, " \n ", True, id="word-count-none"),
        pytest.param("word_count", {"min": 3}, "a\tb\u00a0c", True, id="word-count-unicode-whitespace"),
        pytest.param("latency_ms", 0, "x", False, id="latency-zero-bound"),
    ],
)
def test_edges(kind: str, value: Any, response: str, passed: bool) -> None:
    assert one(kind, value, response, Context(latency_ms=0.5)).passed is passed


# (format, a string of it, a string that is not): what promptfoo's ajv-formats refuses, evalkit does
FORMATS = [
    ("email", "ada@example.org", "x"),
    ("date", "2026-12-02", "02/12/2026"),
    ("date-time", "2026-12-02T09:10:00Z", "2026-12-02 09:10"),
    ("time", "09:10:00+01:00", "9am"),
    ("uri", "https://example.org/a?b=c", "example.org/a"),
    ("uri-reference", "../a?b=c", "\\\\server\\share"),
    ("uuid", "2eb8aa08-aa98-11ea-b4aa-73b441d16380", "2eb8aa08-aa98-11ea-b4aa-73b441d1638"),
    ("ipv4", "192.168.0.1", "192.168.0.256"),
    ("ipv6", "::1", "12345::"),
    ("hostname", "example.org", "-a-.org"),
    ("json-pointer", "/a/b~0", "a/b"),
    ("uri-template", "https://example.org/{id}", "https://example.org/{id"),
    ("regex", "^a+$", "^(abc]"),
]


@pytest.mark.parametrize(("kind", "wrap"), [("json_schema", "{}"), ("contains_json", "The record: {} as asked.")])
@pytest.mark.parametrize(("name", "good", "bad"), FORMATS, ids=[f[0] for f in FORMATS])
def test_a_schema_format_is_asserted(kind: str, wrap: str, name: str, good: str, bad: str) -> None:
    schema = {"type": "object", "properties": {"field": {"type": "string", "format": name}}}
    assert one(kind, schema, wrap.format(json.dumps({"field": good}))).passed
    failed = one(kind, schema, wrap.format(json.dumps({"field": bad})))
    assert not failed.passed
    assert failed.reason == f"{kind}: $.field: {bad!r} is not a {name!r}"


def test_a_format_as_a_json_string_schema_is_asserted_too() -> None:
    schema = json.dumps({"properties": {"email": {"format": "email"}}})
    assert not one("json_schema", schema, '{"email": "x"}').passed
    assert one("json_schema", schema, '{"email": "ada@example.org"}').passed


def test_the_formats_no_library_checks_are_those_the_readme_lists() -> None:
    # pyproject.toml declares a checker for every other Draft 2020-12 format
    from evalkit.assertions.compiling import unchecked_formats

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    listed = re.search(r"formats no library checks \(([^)]*)\)", readme)
    assert listed is not None
    assert (
        set(re.findall(r"`([a-z-]+)`", listed.group(1))) == unchecked_formats() == {"duration", "iri", "iri-reference"}
    )


def test_latency_and_cost_hold_at_their_bound() -> None:
    context = Context(latency_ms=120.0, cost=0.25)
    assert one("latency_ms", 120, "x", context).passed
    assert not one("latency_ms", 119.9, "x", context).passed
    assert one("cost", 0.25, "x", context).passed
    assert not one("cost", 0.2499, "x", context).passed


# --- python: what a check may return ------------------------------------------------------------


def test_a_python_score_holds_from_one_half() -> None:
    held = one("python", "checks.py:seven_tenths", "x")
    assert (held.passed, held.value, held.reason) == (True, 0.7, "")
    failed = one("python", "checks.py:three_tenths", "x")
    assert (failed.passed, failed.value, failed.reason) == (False, 0.3, "python checks.py:three_tenths: scored 0.3")


def test_a_python_dict_gives_its_verdict_score_and_reason() -> None:
    failed = one("python", "checks.py:verdict", "four")
    assert (failed.passed, failed.value, failed.reason) == (False, 0.4, "too short: 4 characters")
    held = one("python", "checks.py:passing_verdict", "x")
    assert (held.passed, held.value) == (True, 0.9)


def test_a_python_reason_is_reported_when_the_check_holds() -> None:
    held = one("python", "checks.py:polite", "x")
    assert (held.passed, held.value, held.reason) == (True, 1.0, "no rude words")
    assert grade([{"python": "checks.py:polite"}], "x").reason == "assertion holds: no rude words"
    both = grade([{"python": "checks.py:polite"}, FAILS], "x")
    assert both.reason == "1 of 2 assertions failed: contains 'Friday': not found; held: no rude words"


def test_the_negation_of_a_score_is_its_complement() -> None:
    negated = one("not_python", "checks.py:three_tenths", "x")
    assert negated.passed
    assert negated.value == pytest.approx(0.7)
    refused = one("not_python", "checks.py:seven_tenths", "x")
    assert not refused.passed
    assert refused.value == pytest.approx(0.3)


def test_a_python_check_is_given_the_context() -> None:
    result = one("python", "checks.py:echo_context", "x", Context(latency_ms=12.5, cost=0.01))
    assert result.reason == repr(("", "", None, 12.5, 0.01))  # grade_assertions passes the context as given
    prompt = load_prompt([{"python": "checks.py:echo_context"}])
    prompt_set = load_set(Path("set.yaml"))
    assert isinstance(prompt_set, PromptSet)
    call = CallFacts(latency_ms=3.0, cost=None, model="m")
    graded = asyncio.run(DeterministicGrader().grade(prompt_set, prompt, "x", None, call))
    assert graded.assertions[0].reason == repr(("only", "Answer the question.", "Yes.", 3.0, None))


def test_a_python_file_is_relative_to_the_set_file(isolated: Path, checks_file: Path) -> None:
    folder = isolated / "sets" / "deep"
    folder.mkdir(parents=True)
    (folder.parent / "mine.py").write_text("def ok(response, context):\n    return 'deep' in response\n")
    document = {
        "id": "vocabulary.relative",
        "name": "Relative",
        "prompts": [{"id": "p", "prompt": "q", "assertions": [{"python": "../mine.py:ok"}]}],
    }
    (folder / "set.yaml").write_text(json.dumps(document), encoding="utf-8")
    prompt_set = load_set(folder / "set.yaml")
    assert isinstance(prompt_set, PromptSet)
    assert grade_assertions(prompt_set.prompts[0], "deep down").passed
    assert not grade_assertions(prompt_set.prompts[0], "shallow").passed


def test_a_python_file_may_define_dataclasses(isolated: Path) -> None:
    (isolated / "typed.py").write_text(
        "from __future__ import annotations\n"
        "from dataclasses import dataclass\n\n"
        "@dataclass\nclass Verdict:\n    ok: bool\n\n"
        "def check(response: str, context: dict) -> bool:\n    return Verdict(response == 'ok').ok\n",
        encoding="utf-8",
    )
    assert one("python", "typed.py:check", "ok").passed


# --- weights and thresholds ---------------------------------------------------------------------

HOLDS = {"type": "contains", "value": "Monday"}
FAILS = {"type": "contains", "value": "Friday"}


def test_the_long_form_weighs_the_score() -> None:
    result = grade([{**HOLDS, "weight": 3}, {**FAILS, "weight": 1}], "Monday")
    assert result.score == 0.75
    assert not result.passed
    assert result.reason == "1 of 2 assertions failed: contains 'Friday': not found"
    assert [(a.type, a.passed, a.weight) for a in result.assertions] == [
        ("contains", True, 3.0),
        ("contains", False, 1.0),
    ]


def test_the_short_and_long_forms_mix_and_the_weight_defaults_to_one() -> None:
    result = grade([{"contains": "Monday"}, {"type": "contains", "value": "Friday"}, {**HOLDS, "weight": 2}], "Monday")
    assert [a.weight for a in result.assertions] == [1.0, 1.0, 2.0]
    assert result.score == 0.75


def test_weight_zero_is_recorded_but_not_counted() -> None:
    result = grade([HOLDS, {**FAILS, "weight": 0}], "Monday")
    assert result.passed
    assert result.score == 1.0
    assert result.reason == "assertion holds"
    recorded = result.assertions[1]
    assert (recorded.type, recorded.passed, recorded.weight, recorded.reason) == (
        "contains",
        False,
        0.0,
        "contains 'Friday': not found",
    )


def test_a_threshold_passes_a_prompt_whose_weighted_score_reaches_it() -> None:
    assertions = [{**HOLDS, "weight": 3}, {**FAILS, "weight": 1}]
    reached = grade(assertions, "Monday", threshold=0.75)
    assert (reached.passed, reached.score) == (True, 0.75)
    assert (
        reached.reason
        == "score 0.75 reaches the threshold 0.75; 1 of 2 assertions failed: contains 'Friday': not found"
    )
    below = grade(assertions, "Monday", threshold=0.8)
    assert (below.passed, below.score) == (False, 0.75)
    assert (
        below.reason == "score 0.75 is below the threshold 0.8; 1 of 2 assertions failed: contains 'Friday': not found"
    )


def test_a_threshold_counts_python_scores_and_ignores_weight_zero() -> None:
    assertions = [
        {"type": "python", "value": "checks.py:three_tenths", "weight": 2},
        {**HOLDS, "weight": 1},
        {**FAILS, "weight": 0},
    ]
    result = grade(assertions, "Monday", threshold=0.5)
    assert result.score == pytest.approx((2 * 0.3 + 1) / 3)
    assert result.passed
    assert result.reason == (  # the weight-0 assertion that failed is not counted
        "score 0.53 reaches the threshold 0.5; 1 of 2 assertions failed: python checks.py:three_tenths: scored 0.3"
    )


def test_without_a_threshold_a_python_score_above_one_half_passes_the_prompt_at_its_score() -> None:
    result = grade([{"python": "checks.py:seven_tenths"}, HOLDS], "Monday")
    assert result.passed
    assert result.score == pytest.approx(0.85)


def test_a_threshold_of_zero_passes_everything_and_of_one_needs_every_counted_point() -> None:
    assert grade([FAILS], "Monday", threshold=0).passed
    assert not grade([{"python": "checks.py:passing_verdict"}], "x", threshold=1).passed
    assert grade([HOLDS, {**FAILS, "weight": 0}], "Monday", threshold=1).passed


# --- levenshtein's work is bounded ------------------------------------------------------------


@functools.cache
def megabyte_text() -> str:
    return "".join(chr(97 + (i * 7919 + i // 26) % 26) for i in range(1_000_000))


def megabyte_apart(edits: int) -> str:
    """megabyte_text() with ``edits`` characters substituted, spread over its whole length."""
    chars = list(megabyte_text())
    for n in range(edits):
        chars[(n * 2 + 1) * len(chars) // (edits * 2)] = "#"
    return "".join(chars)


def levenshtein(value: str, limit: int, response: str, negated: bool = False) -> AssertionResult:
    kind = "not_levenshtein" if negated else "levenshtein"
    return check(Assertion(kind, {"value": value, "max": limit}), response)


@pytest.mark.timeout(30)
def test_levenshtein_on_megabyte_texts_works_within_the_band_of_max() -> None:
    # the whole table of two 1 MB texts is 10^12 cells: the band of max is 31 diagonals
    assert levenshtein(megabyte_text(), 15, megabyte_apart(15)).passed
    failed = levenshtein(megabyte_text(), 15, megabyte_apart(16))
    assert not failed.passed
    assert failed.reason.startswith("levenshtein: more than 15 edits from ")
    assert not levenshtein(megabyte_text(), 15, megabyte_text()[::-1]).passed


@pytest.mark.timeout(30)
@pytest.mark.parametrize("negated", [False, True], ids=["levenshtein", "not_levenshtein"])
def test_levenshtein_gives_up_past_its_bound_and_says_so(negated: bool) -> None:
    result = levenshtein(megabyte_text(), 100_000, megabyte_text()[::-1], negated)
    assert not result.passed  # no verdict: neither form holds
    assert result.reason == ("not_levenshtein: " if negated else "") + (
        "levenshtein: gave up: 1,000,000 and 1,000,000 characters within 100,000 edits would take "
        "1,000,000,000,000 steps (at most 1,000,000,000); lower max or shorten the value"
    )
