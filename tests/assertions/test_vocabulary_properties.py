"""Property-based tests of the vocabulary's algebra (README "Assertions"), each against an oracle written
here: a negation holds exactly when its type does not (for every registered type), the any/all
forms are any/all of ``contains``, the ``i`` forms are ``contains`` on case-folded text,
``levenshtein`` agrees with a plain full dynamic programme, ``equals_json`` is an equivalence that
ignores key order and tells ``true`` from ``1``, and a prompt's score is its weighted mean.
A misspelt type name is never answered with its opposite."""

from __future__ import annotations

import json
import re
import textwrap
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from evalkit.assertions import registry
from evalkit.assertions.jsondoc import MAX_CANDIDATES, find_json, json_equal
from evalkit.assertions.registry import Context
from evalkit.assertions.text import WHITESPACE, banded_distance, distance_within
from evalkit.graders.deterministic import check, grade_assertions
from evalkit.records import Assertion, Prompt, ToolCall
from evalkit.sets.validation import suggest

PLAIN = Context()
PROPERTIES = settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)

# A small alphabet, so that substrings, case pairs, folds and whitespace actually occur.
LETTERS = st.sampled_from(["a", "b", "A", "B", "ß", "S", "s", "é", "É", "ς", "Σ", "σ", "İ", "ﬁ", " ", "\n", "{", "1"])
TEXT = st.text(LETTERS, max_size=10)
NEEDLE = st.text(LETTERS, min_size=1, max_size=3)
NEEDLES = st.lists(NEEDLE, min_size=1, max_size=4)

CHECKS = """
def score_by_length(response, context):
    return (len(response) % 3) / 2

def breaks_on_braces(response, context):
    if "{" in response:
        raise ValueError("a brace")
    return response.startswith("a")
"""


@pytest.fixture(autouse=True)
def checks_file(isolated: Path) -> None:
    # the grader's check() compiles values relative to the working folder
    (isolated / "checks.py").write_text(textwrap.dedent(CHECKS), encoding="utf-8")


def verdict(kind: str, value: Any, response: str, context: Context = PLAIN) -> Any:
    return check(Assertion(kind, value), response, context)


def holds(kind: str, value: Any, response: str) -> bool:
    return bool(verdict(kind, value, response).passed)


# --- not_X holds exactly when X does not, for every registered type ----------------------------

JSON_SCALARS = (
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([1.0, 0.5, -0.0]) | st.sampled_from("ab")
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("abc"), inner, max_size=3),
    max_leaves=6,
)
SCHEMAS = st.sampled_from(
    [
        {"type": "object"},
        {"type": "array", "items": {"type": "integer"}},
        {"type": "object", "required": ["a"]},
        {"type": "string", "pattern": "^a"},
        True,
    ]
)
TOOL_NAMES = st.sampled_from(["search", "lookup", "fetch"])
VALUES: dict[str, st.SearchStrategy[Any]] = {
    "exact": TEXT,
    "contains": NEEDLE,
    "icontains": NEEDLE,
    "contains_any": NEEDLES,
    "contains_all": NEEDLES,
    "icontains_any": NEEDLES,
    "icontains_all": NEEDLES,
    "starts_with": NEEDLE.filter(lambda s: s.strip(WHITESPACE) != ""),
    "regex": st.sampled_from(["a", "^A", "/a+b/i", "/^s$/m", "ß|ss", "\\d", "/σ/iu", "^$"]),
    "json_schema": SCHEMAS.filter(lambda s: s is not True),
    "equals_json": JSON_VALUES,
    "contains_json": SCHEMAS,
    "levenshtein": st.fixed_dictionaries({"value": TEXT, "max": st.integers(0, 4)}),
    "word_count": st.fixed_dictionaries({}, optional={"min": st.integers(0, 3), "max": st.integers(3, 5)}).filter(bool),
    "latency_ms": st.integers(0, 1000) | st.floats(0, 1000),
    "cost": st.floats(0, 1),
    "python": st.sampled_from(["checks.py:score_by_length", "checks.py:breaks_on_braces"]),
    "tool_called": TOOL_NAMES | st.fixed_dictionaries({"name": TOOL_NAMES, "arguments": SCHEMAS}),
    "tool_sequence": st.lists(TOOL_NAMES, min_size=1, max_size=3)
    | st.fixed_dictionaries({"steps": st.lists(TOOL_NAMES, min_size=1, max_size=3), "exact": st.booleans()}),
    "valid_tool_calls": st.just(True),
    "tool_call_f1": st.fixed_dictionaries(
        {"expected": st.lists(TOOL_NAMES, min_size=1, max_size=3)}, optional={"min": st.floats(0, 1)}
    ),
    "context_contains": NEEDLE,
    # model-graded (README "Model-graded assertions"): without a judgement in the context, undecided
    "rubric": NEEDLE.filter(str.strip)
    | st.fixed_dictionaries({"value": NEEDLE.filter(str.strip)}, optional={"threshold": st.floats(0, 1)}),
    "factuality": st.just(True) | NEEDLE.filter(str.strip),
    "similar": st.fixed_dictionaries({"value": NEEDLE.filter(str.strip)}, optional={"min": st.floats(0, 1)}),
}
RESPONSES = TEXT | JSON_VALUES.map(json.dumps) | st.tuples(TEXT, JSON_VALUES.map(json.dumps)).map("".join)
CONTEXTS = st.builds(
    Context,
    latency_ms=st.none() | st.floats(0, 2000),
    cost=st.none() | st.floats(0, 2),
    tool_calls=st.lists(st.builds(ToolCall, TOOL_NAMES, JSON_VALUES | TEXT), max_size=3).map(tuple),
    tools=st.lists(st.fixed_dictionaries({"name": TOOL_NAMES}, optional={"parameters": SCHEMAS}), max_size=2).map(
        tuple
    ),
    recorded_context=st.none() | TEXT | st.lists(TEXT, max_size=2) | JSON_VALUES,
)


def test_every_registered_type_has_values_here() -> None:
    assert set(VALUES) == set(registry.positive_names())


@PROPERTIES
@given(data=st.data(), kind=st.sampled_from(sorted(VALUES)), response=RESPONSES, context=CONTEXTS)
def test_a_negation_holds_exactly_when_its_type_does_not(
    data: st.DataObject, kind: str, response: str, context: Context
) -> None:
    value = data.draw(VALUES[kind], label="value")
    kind_type, negated_type = registry.get(kind), registry.get(f"not_{kind}")
    assert kind_type is not None
    assert negated_type is not None
    compiled = kind_type.check(value, registry.Where(Path(".")))
    positive = kind_type.evaluate(compiled, response, context)
    negative = negated_type.evaluate(compiled, response, context)
    if positive.undecided:  # no verdict (a check raised, no recorded latency): neither holds
        assert not positive.passed
        assert not negative.passed
        assert negative.undecided
        return
    assert negative.passed is (not positive.passed)
    assert negative.score == pytest.approx(1.0 - positive.score)
    assert bool(negative.reason) is positive.passed  # a failure always says why; a success says nothing
    assert bool(positive.reason) is negative.passed
    # and the grader records the same verdicts
    assert verdict(kind, value, response, context).passed is positive.passed
    assert verdict(f"not_{kind}", value, response, context).passed is negative.passed


# --- the any / all / i forms ---------------------------------------------------------------------


@PROPERTIES
@given(needles=NEEDLES, response=TEXT)
def test_contains_any_and_all_are_any_and_all_of_contains(needles: list[str], response: str) -> None:
    each = [holds("contains", n, response) for n in needles]
    assert each == [n in response for n in needles]
    assert holds("contains_any", needles, response) is any(each)
    assert holds("contains_all", needles, response) is all(each)


@PROPERTIES
@given(needle=NEEDLE, response=TEXT)
def test_icontains_is_contains_on_casefolded_text(needle: str, response: str) -> None:
    folded = holds("contains", needle.casefold(), response.casefold())
    assert holds("icontains", needle, response) is folded
    assert folded is (needle.casefold() in response.casefold())


@PROPERTIES
@given(needles=NEEDLES, response=TEXT)
def test_icontains_any_and_all_are_any_and_all_of_icontains(needles: list[str], response: str) -> None:
    each = [holds("icontains", n, response) for n in needles]
    any_held, all_held = holds("icontains_any", needles, response), holds("icontains_all", needles, response)
    assert any_held is any(each)
    assert all_held is all(each)
    if all_held:
        assert any_held
    if holds("contains_all", needles, response):  # the case-sensitive form is the stricter one
        assert all_held


@PROPERTIES
@given(needle=NEEDLE, left=TEXT, right=TEXT)
def test_icontains_finds_a_needle_written_in_any_case(needle: str, left: str, right: str) -> None:
    assert holds("icontains", needle, left + needle.upper() + right)
    assert holds("icontains", needle.upper(), left + needle.lower() + right)


# --- starts_with and word_count ------------------------------------------------------------------


@PROPERTIES
@given(prefix=VALUES["starts_with"], response=TEXT)
def test_starts_with_compares_both_without_leading_whitespace(prefix: str, response: str) -> None:
    expected = response.lstrip(WHITESPACE).startswith(prefix.lstrip(WHITESPACE))
    assert holds("starts_with", prefix, response) is expected


@PROPERTIES
@given(value=VALUES["word_count"], response=TEXT)
def test_word_count_is_within_its_bounds(value: dict[str, int], response: str) -> None:
    count = len(response.split())
    expected = value.get("min", 0) <= count <= value.get("max", count)
    assert holds("word_count", value, response) is expected


# --- levenshtein against a full dynamic programme -------------------------------------------------


def full_distance(a: str, b: str) -> int:
    """Every cell of the classic table: insertions, deletions, substitutions cost 1."""
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (x != y))
    return row[len(b)]


SHORT = st.text(st.sampled_from("abcé "), max_size=12)


@PROPERTIES
@given(a=SHORT, b=SHORT, limit=st.integers(0, 14))
def test_distance_within_agrees_with_the_full_table(a: str, b: str, limit: int) -> None:
    distance = full_distance(a, b)
    found = distance_within(a, b, limit)
    assert found == (distance if distance <= limit else None)
    assert distance_within(b, a, limit) == found


@PROPERTIES
@given(a=SHORT, b=SHORT, limit=st.integers(0, 14))
def test_the_banded_distance_agrees_with_the_full_table(a: str, b: str, limit: int) -> None:
    # what distance_within uses when the texts are long and max is small
    distance = full_distance(a, b)
    assert banded_distance(a, b, limit) == (distance if distance <= limit else None)
    assert banded_distance(b, a, limit) == (distance if distance <= limit else None)


@PROPERTIES
@given(target=SHORT, response=SHORT, limit=st.integers(0, 6), pad=st.text(st.sampled_from(WHITESPACE), max_size=2))
def test_levenshtein_holds_within_the_bound_of_the_trimmed_texts(
    target: str, response: str, limit: int, pad: str
) -> None:
    expected = full_distance(response.strip(WHITESPACE), target.strip(WHITESPACE)) <= limit
    assert holds("levenshtein", {"value": target, "max": limit}, pad + response + pad) is expected


@PROPERTIES
@given(base=SHORT, edits=st.lists(st.tuples(st.integers(0, 20), st.sampled_from("xyz")), max_size=4))
def test_levenshtein_holds_for_a_few_edits(base: str, edits: list[tuple[int, str]]) -> None:
    edited = list(base)
    for position, char in edits:  # each edit an insertion: at most len(edits) apart
        edited.insert(position % (len(edited) + 1), char)
    assert distance_within("".join(edited), base, len(edits)) is not None


# --- equals_json: an equivalence, by value ---------------------------------------------------------


def canonical(value: Any) -> Any:
    """An independent oracle: booleans apart from numbers, numbers by exact value, objects as sets."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("number", Fraction(value))
    if isinstance(value, dict):
        return ("object", frozenset((k, canonical(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("array", tuple(canonical(v) for v in value))
    return (type(value).__name__, value)


@PROPERTIES
@given(a=JSON_VALUES, b=JSON_VALUES)
def test_equals_json_is_symmetric_and_matches_the_oracle(a: Any, b: Any) -> None:
    forward = holds("equals_json", a, json.dumps(b))
    assert forward is holds("equals_json", b, json.dumps(a))
    assert forward is (canonical(a) == canonical(b))
    assert json_equal(a, b) is forward


@PROPERTIES
@given(value=JSON_VALUES, seed=st.randoms(use_true_random=False), indent=st.sampled_from([None, 2]))
def test_equals_json_ignores_key_order_and_layout(value: Any, seed: Any, indent: int | None) -> None:
    def shuffled(node: Any) -> Any:
        if isinstance(node, dict):
            keys = list(node)
            seed.shuffle(keys)
            return {k: shuffled(node[k]) for k in keys}
        if isinstance(node, list):
            return [shuffled(v) for v in node]
        return node

    assert holds("equals_json", value, " \n" + json.dumps(shuffled(value), indent=indent) + "\t")


@PROPERTIES
@given(number=st.integers(-(10**6), 10**6))
def test_equals_json_compares_numbers_by_value_but_never_booleans_with_numbers(number: int) -> None:
    assert holds("equals_json", number, json.dumps(float(number)))
    assert holds("equals_json", float(number), json.dumps(number))
    assert not holds("equals_json", True, json.dumps(number))
    assert not holds("equals_json", number, "false" if number == 0 else "true")
    assert not holds("equals_json", str(number), json.dumps(number))


# --- contains_json finds what a plain scan finds -------------------------------------------------


def scanned_json(text: str) -> tuple[bool, Any]:
    """The documented search, step by step: the first fenced block that parses, else the first
    ``{`` or ``[`` from which a whole object or array parses (at most MAX_CANDIDATES tried)."""
    for block in re.finditer(r"```[ \t]*(?:json[ \t]*)?\r?\n(.*?)```", text, re.DOTALL | re.IGNORECASE):
        try:
            return True, json.loads(block.group(1).strip(WHITESPACE), parse_constant=_refuse)
        except (ValueError, RecursionError):
            continue
    decoder = json.JSONDecoder(parse_constant=_refuse)
    for tried, opener in enumerate(re.finditer(r"[\[{]", text)):
        if tried >= MAX_CANDIDATES:
            break
        try:
            return True, decoder.raw_decode(text, opener.start())[0]
        except (ValueError, RecursionError):
            continue
    return False, None


def _refuse(name: str) -> Any:
    raise ValueError(name)


PIECES = st.one_of(
    JSON_VALUES.map(json.dumps),
    st.sampled_from([" ", "\n", "\t", "\0", "prose ", "{", "[", "}", "]", "NaN", "```", "```json\n", ":", ","]),
)


@PROPERTIES
@given(pieces=st.lists(PIECES, max_size=6))
def test_contains_json_finds_what_the_plain_scan_finds(pieces: list[str]) -> None:
    text = "".join(pieces)
    found, value = find_json(text)
    expected_found, expected = scanned_json(text)
    assert found is expected_found
    assert json_equal(value, expected) if found else value is None


# --- the weighted score ---------------------------------------------------------------------------

WEIGHTS = st.integers(0, 5) | st.sampled_from([0.5, 0.25, 2.5])


@PROPERTIES
@given(
    parts=st.lists(st.tuples(st.booleans(), WEIGHTS), min_size=1, max_size=6).filter(
        lambda parts: any(w > 0 for _, w in parts)
    ),
    threshold=st.none() | st.sampled_from([0.0, 0.25, 0.5, 0.6, 0.75, 1.0]),
)
def test_a_prompt_scores_its_weighted_mean(parts: list[tuple[bool, float]], threshold: float | None) -> None:
    assertions = tuple(
        Assertion("contains" if holds_ else "not_contains", "yes", weight=float(w)) for holds_, w in parts
    )
    result = grade_assertions(Prompt("p", "q", assertions, threshold=threshold), "yes")
    weighted = sum(Fraction(w) for held, w in parts if held) / sum(Fraction(w) for _, w in parts)
    assert result.score == pytest.approx(float(weighted))
    assert [a.weight for a in result.assertions] == [float(w) for _, w in parts]  # weight 0 recorded too
    if threshold is None:
        assert result.passed is all(held for held, w in parts if w > 0)
    else:
        assert result.passed is (weighted >= Fraction(threshold))


# --- did you mean: never the opposite ---------------------------------------------------------------


def misspellings(name: str) -> st.SearchStrategy[str]:
    """One character dropped, doubled or replaced in ``name``, past any not_ prefix."""
    start = 4 if name.startswith("not_") else 0
    index = st.integers(start, len(name) - 1)
    dropped = index.map(lambda i: name[:i] + name[i + 1 :])
    doubled = index.map(lambda i: name[:i] + name[i] + name[i:])
    replaced = st.tuples(index, st.sampled_from("aeiozx")).map(lambda t: name[: t[0]] + t[1] + name[t[0] + 1 :])
    return (dropped | doubled | replaced).filter(lambda typo: typo != name and typo not in registry.names())


@PROPERTIES
@given(data=st.data(), name=st.sampled_from(registry.names()))
def test_a_misspelt_name_is_never_answered_with_its_opposite(data: st.DataObject, name: str) -> None:
    typo = data.draw(misspellings(name), label="typo")
    found = suggest(typo, registry.names())
    assume(found is not None)
    assert found.startswith("not_") is name.startswith("not_"), (typo, found)
