"""Property-based tests of the assertion matchers against independent one-line oracles."""

from __future__ import annotations

import json
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalkit.assertions.compiling import compile_json_schema, compile_regex
from evalkit.assertions.jsondoc import json_schema
from evalkit.assertions.patterns import search
from evalkit.assertions.registry import Context
from evalkit.assertions.text import contains, exact

# README "Assertions": exact strips these characters, and only these.
STRIPPED = " \t\n\r\0\x0b"
NOT_STRIPPED = "\u00a0\x0c\u2028\u2029\x85\u3000\x1c\ufeff"

PROPERTIES = settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)

# Small alphabets so that equal strings, substrings and edge characters actually occur.
EDGY = st.sampled_from(
    ["a", "b", "A", "é", "É", "ß", "/", "\\", ".", "*", "(", "[", "{", "$", "^", "|", "#", *STRIPPED]
)
EDGY_TEXT = st.text(EDGY | st.sampled_from(list(NOT_STRIPPED)) | st.characters(), max_size=12)
PADDING = st.text(st.sampled_from(list(STRIPPED)), max_size=4)


@PROPERTIES
@given(needle=EDGY_TEXT.filter(bool), prefix=EDGY_TEXT, suffix=EDGY_TEXT, include=st.booleans())
def test_contains_is_substring(needle: str, prefix: str, suffix: str, include: bool) -> None:
    text = prefix + (needle if include else "") + suffix
    assert contains(needle, text, Context()).passed == (needle in text)


@PROPERTIES
@given(expected=EDGY_TEXT, response=EDGY_TEXT)
def test_exact_is_equality_after_strip(expected: str, response: str) -> None:
    assert exact(expected, response, Context()).passed == (expected.strip(STRIPPED) == response.strip(STRIPPED))


@PROPERTIES
@given(core=EDGY_TEXT, left=PADDING, right=PADDING, left2=PADDING, right2=PADDING)
def test_exact_ignores_padding_from_the_stripped_set(core: str, left: str, right: str, left2: str, right2: str) -> None:
    assert exact(left2 + core + right2, left + core + right, Context()).passed


@PROPERTIES
@given(
    core=EDGY_TEXT.filter(lambda s: s.strip(STRIPPED) != ""), pad=st.sampled_from(list(NOT_STRIPPED)), end=st.booleans()
)
def test_exact_keeps_other_whitespace(core: str, pad: str, end: bool) -> None:
    response = core + pad if end else pad + core
    assert not exact(core, response, Context()).passed


@PROPERTIES
@given(
    literal=EDGY_TEXT.filter(lambda s: s and not s.startswith("/")),
    prefix=EDGY_TEXT,
    suffix=EDGY_TEXT,
    include=st.booleans(),
)
def test_escaped_literal_regex_matches_iff_substring(literal: str, prefix: str, suffix: str, include: bool) -> None:
    # A pattern starting with "/" may read as /pattern/flags; a bare escaped literal cannot.
    text = prefix + (literal if include else "") + suffix
    # control characters written as \xNN escapes: a pattern may not hold them as they are
    pattern = "".join(f"\\x{ord(c):02x}" if c < " " or c == "\x7f" else re.escape(c) for c in literal)
    compiled = compile_regex(pattern)
    assert search(compiled, text, Context()).passed == (literal in text)


def _reject(name: str) -> None:
    raise ValueError(name)


def is_strict_json(text: str) -> bool:
    try:
        json.loads(text.strip(STRIPPED), parse_constant=_reject)
    except ValueError:
        return False
    return True


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3),
    max_leaves=8,
)
JSON_TEXT = st.builds(lambda value, indent: json.dumps(value, indent=indent), JSON_VALUES, st.none() | st.just(1))
NEAR_JSON = st.text(
    st.sampled_from(list('{}[]",:0123456789.-+eE truefalsnNaIiy\\') + list(STRIPPED) + ["\x0c"]), max_size=12
)


@PROPERTIES
@given(
    body=JSON_TEXT | NEAR_JSON | st.text(max_size=12),
    left=st.text(st.sampled_from([*STRIPPED, "\x0c", "`", "\u00a0"]), max_size=3),
    right=st.text(st.sampled_from([*STRIPPED, "\x0c", "`", "\u00a0"]), max_size=3),
)
def test_empty_schema_accepts_exactly_strict_json(body: str, left: str, right: str) -> None:
    response = left + body + right
    assert json_schema(compile_json_schema({}), response, Context()).passed == is_strict_json(response)


@PROPERTIES
@given(value=JSON_VALUES, left=PADDING, right=PADDING)
def test_empty_schema_accepts_every_json_document(value: object, left: str, right: str) -> None:
    assert json_schema(compile_json_schema({}), left + json.dumps(value) + right, Context()).passed
