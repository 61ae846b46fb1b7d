"""The fast path of the YAML reader (plain data straight from libyaml's events) gives what the
full path (node graph, ruamel's constructor) gives, and hands everything else to it."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalkit.errors import SetError
from evalkit.sets import yamlfast
from evalkit.sets.validation import schema_issues
from evalkit.sets.yamldoc import _parse_slowly, parse_document
from evalkit.sets.yamlfast import DECLINED, plain_data
from tests.sets.test_properties import SETTINGS, YAML_PIECES, quoted

# every test here runs under libyaml's C parser and the pure-Python one (tests/sets/conftest.py)
pytestmark = pytest.mark.usefixtures("yaml_parser")

SCALARS = [
    "012", "0o17", "0x1F", "-0", "+12", "1e3", "1.", ".5", "-.5", "+.inf", "-.Inf", ".NaN", ".nan", "1_000",
    "0b101", "true", "True", "TRUE", "tRue", "false", "~", "null", "Null", "NULL", "yes", "no", "on",
    "2001-12-14", "2001-12-14 21:59:43", "1:20", "0.1", "1e-3", "-1E+3", "0x_1", "+0o7", "12abc", "3.0e",
    "1.5.5", "+", ".", "0", "00", "-0.0", "'1'", '"true"', "|\n  x\n", ">\n  y\n", "0o8", "0xG", "<<x",
]  # fmt: skip


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return type(a) is type(b) and a == b


NON_FINITE = ["+.inf", "-.Inf", ".NaN", ".nan", "1e999", "-1E+400"]


@pytest.mark.parametrize("scalar", [s for s in SCALARS if s not in NON_FINITE])
def test_a_plain_scalar_reads_as_the_full_path_reads_it(scalar: str) -> None:
    text = f"k: {scalar}\n"
    fast = plain_data(text, {})
    assert fast is not DECLINED
    assert same(fast["k"], _parse_slowly(text, "f.yaml").data["k"])


@pytest.mark.parametrize("scalar", NON_FINITE)
def test_an_infinite_or_nan_number_goes_the_full_way(scalar: str) -> None:
    """So a document read on the fast path holds none, and the schema step does not look."""
    text = f"k: {scalar}\n"
    assert plain_data(text, {}) is DECLINED
    doc = parse_document(text, "f.yaml")
    assert not doc.finite
    assert not math.isfinite(doc.data["k"])
    assert same(doc.data["k"], _parse_slowly(text, "f.yaml").data["k"])
    assert parse_document("k: 1.5\n", "f.yaml").finite


@pytest.mark.parametrize(
    "text",
    [
        "a: &x 1\nb: *x\n",  # aliases: the alias bomb check
        "a: !!str 1\n",  # tags
        "<<: {a: 1}\n",  # merge keys
        "1: a\n",  # a key that is not a string
        "a: 1\na: 2\n",  # a repeated key
        "--- a\n--- b\n",  # several documents
        "%YAML 1.1\n---\na: 1\n",  # a directive
        "? [a]\n: b\n",  # a complex key
        "a: " + "[" * 70 + "]" * 70 + "\n",  # deeper than MAX_DEPTH
    ],
)
def test_what_the_fast_path_declines_goes_the_full_way(text: str) -> None:
    assert plain_data(text, {}) is DECLINED
    try:
        slow: Any = _parse_slowly(text, "f.yaml").data
    except SetError as exc:
        slow = exc.issues
    try:
        read: Any = parse_document(text, "f.yaml").data
    except SetError as exc:
        read = exc.issues
    assert read == slow


TEXT = "id: a\nname: b\nprompts:\n  - {id: p, prompt: hi, assertions: [{contains: x}]}\n"


def test_a_valid_file_has_no_node_graph_until_a_position_is_asked_for() -> None:
    doc = parse_document(TEXT, "f.yaml")
    assert doc.tree is None
    slow = _parse_slowly(TEXT, "f.yaml")
    assert slow.tree is not None
    assert doc.position(("prompts", 0, "assertions", 0)) == slow.position(("prompts", 0, "assertions", 0)) == (4, 38)


def test_a_large_set_reports_a_bad_assertion_as_a_whole_validation_would() -> None:
    """Past schemaparts.MIN_PROMPTS, each distinct assertion is checked once: the issue of a bad one
    still names its own prompt and line, and the same assertion elsewhere is not hidden."""
    lines = ["id: a", "name: b", "prompts:"]
    lines += [f"  - {{id: p{i}, prompt: hi, assertions: [{{contains: x}}]}}" for i in range(100)]
    lines[3 + 70] = "  - {id: p70, prompt: hi, assertions: [{contains: ''}, {containz: x}]}"
    lines[3 + 90] = "  - {id: p90, prompt: hi, assertions: [{containz: x}]}"
    doc = parse_document("\n".join(lines) + "\n", "f.yaml")
    issues = schema_issues("prompts", doc)
    assert [(i.line, i.path) for i in issues] == [
        (74, "prompts[70].assertions[0].contains"),
        (74, "prompts[70].assertions[1]"),
        (94, "prompts[90].assertions[0]"),
    ]
    assert "did you mean 'contains'?" in issues[2].message


@contextmanager
def fast_path(enabled: bool) -> Iterator[None]:
    before = yamlfast.ENABLED
    yamlfast.ENABLED = enabled
    try:
        yield
    finally:
        yamlfast.ENABLED = before


def canonical(value: Any) -> Any:
    """``value`` with its types spelled out (1, 1.0 and True are equal in Python) and NaN equal to itself."""
    if isinstance(value, dict):
        return ("map", tuple((canonical(k), canonical(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("seq", tuple(canonical(v) for v in value))
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")
    return (type(value).__name__, value)


def read(text: str, fast: bool) -> Any:
    """What the reader makes of ``text``: the data and the text of its floats two levels down
    (what a tolerance is read from), or the issues."""
    with fast_path(fast):
        try:
            doc = parse_document(text, "f.yaml")
        except SetError as exc:
            return "issues", exc.issues
    data = doc.data
    pairs = [(s, n) for s, v in data.items() if isinstance(v, dict) for n in v] if isinstance(data, dict) else []
    floats = {(s, n): doc.float_text(str(s), str(n)) for s, n in pairs if isinstance(s, str) and isinstance(n, str)}
    return "data", canonical(data), floats


FLOW_SCALARS = [s for s in SCALARS if "\n" not in s]
ODD_KEYS = st.sampled_from(["<<", "1", "true", "~", "'q'", '"k x"', "a"])  # declined, or a repeat
# an odd key declines the whole document: one key in 40, so that most documents take the fast path
KEYS = st.integers(0, 39).flatmap(lambda n: ODD_KEYS if n == 0 else st.text("abcdefgh", min_size=1, max_size=3))
LEAVES = st.sampled_from(FLOW_SCALARS) | st.text(max_size=8).map(quoted)
FLOW = st.recursive(
    LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]")
        | st.lists(st.tuples(KEYS, inner), max_size=4).map(lambda kv: "{" + ", ".join(f"{k}: {v}" for k, v in kv) + "}")
    ),
    max_leaves=12,
)
BLOCK = st.lists(st.tuples(KEYS, FLOW | st.sampled_from(SCALARS)), min_size=1, max_size=4).map(
    lambda kv: "".join(f"\n  {k}: {v.rstrip()}" for k, v in kv)
)
DOCUMENTS = st.lists(st.tuples(KEYS, FLOW | BLOCK | st.sampled_from(SCALARS)), min_size=1, max_size=5).map(
    lambda kv: "".join(f"{k}: {v.rstrip()}\n" for k, v in kv)
)


@pytest.mark.slow
@SETTINGS
@given(DOCUMENTS)
def test_the_fast_path_reads_generated_documents_as_the_plain_path_does(text: str) -> None:
    """Nested block and flow collections of every kind of scalar, keys repeated or not strings."""
    assert read(text, fast=True) == read(text, fast=False)


@SETTINGS
@given(st.lists(YAML_PIECES, max_size=40).map("".join))
def test_the_fast_path_reads_yaml_like_text_as_the_plain_path_does(text: str) -> None:
    assert read(text, fast=True) == read(text, fast=False)


def test_the_switch_restores_the_plain_path() -> None:
    with fast_path(False):
        assert plain_data(TEXT, {}) is DECLINED
        assert parse_document(TEXT, "f.yaml").tree is not None
    assert plain_data(TEXT, {}) is not DECLINED
