"""Text assertions: exact, contains and its case-insensitive and any/all forms, starts_with,
levenshtein, word_count.

- exact: equal after stripping space, \\t, \\n, \\r, \\0 and \\x0b from both ends; case-sensitive.
- contains: case-sensitive substring of the raw response; ``icontains`` compares both after
  Unicode case folding (``str.casefold``: 'STRASSE' contains 'straße').
- contains_any / contains_all (and the ``i`` forms): at least one / every listed string.
- starts_with: the response with leading whitespace stripped starts with the value (whose own
  leading whitespace is stripped too, as ``exact`` strips both: else it could never hold).
- levenshtein ``{value, max}``: the edit distance between the trimmed response and the value is
  at most ``max`` (insertions, deletions and substitutions of one character each), computed in
  bounded work: the cheaper of the whole table (bit-parallel) and the band of ``max`` edits, and
  no verdict when both would exceed MAX_LEVENSHTEIN_STEPS (README "Assertions").
- word_count ``{min, max}``: the number of whitespace-separated words is within (either bound).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evalkit.assertions.excerpt import excerpt
from evalkit.assertions.registry import HELD, AssertionValueError, Context, Outcome, Where, register

WHITESPACE = " \t\n\r\0\x0b"
_STRING = {"type": "string", "minLength": 1}
_STRINGS = {"type": "array", "minItems": 1, "items": _STRING}


def _text(value: Any, where: Where) -> str:
    if not isinstance(value, str):
        raise AssertionValueError("must be a string")
    return value


def _needles(value: Any, where: Where) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise AssertionValueError("must be a list of one or more non-empty strings")
    return tuple(value)


@dataclass(frozen=True, slots=True)
class Needles:
    """The strings of an any/all assertion as written (``source``, shown in reasons) and as
    searched for (``search``: case-folded for the ``i`` forms), index by index."""

    source: tuple[str, ...]
    search: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Folded:
    """An ``icontains`` value as written (shown in reasons) and case-folded (searched for)."""

    source: str
    folded: str


def _plain_needles(value: Any, where: Where) -> Needles:
    needles = _needles(value, where)
    return Needles(needles, needles)


def _folded_needles(value: Any, where: Where) -> Needles:
    needles = _needles(value, where)
    return Needles(needles, tuple(v.casefold() for v in needles))


def exact(expected: str, response: str, context: Context) -> Outcome:
    got = response.strip(WHITESPACE)
    if got == expected.strip(WHITESPACE):
        return HELD
    return Outcome(False, 0.0, f"exact: expected {excerpt(expected, 60)}, got {excerpt(got, 60)}")


def contains(needle: str, response: str, context: Context) -> Outcome:
    if needle in response:
        return HELD
    return Outcome(False, 0.0, f"contains {excerpt(needle, 60)}: not found")


def icontains(needle: Folded, response: str, context: Context) -> Outcome:
    if needle.folded in response.casefold():
        return HELD
    return Outcome(False, 0.0, f"icontains {excerpt(needle.source, 60)}: not found (ignoring case)")


def _any(name: str, fold: bool) -> Callable[[Needles, str, Context], Outcome]:
    def evaluate(needles: Needles, response: str, context: Context) -> Outcome:
        text = response.casefold() if fold else response
        if any(n in text for n in needles.search):
            return HELD
        shown = ", ".join(excerpt(n, 30) for n in needles.source[:5]) + (", ..." if len(needles.source) > 5 else "")
        return Outcome(False, 0.0, f"{name}: none of {shown} found")

    return evaluate


def _all(name: str, fold: bool) -> Callable[[Needles, str, Context], Outcome]:
    def evaluate(needles: Needles, response: str, context: Context) -> Outcome:
        text = response.casefold() if fold else response
        missing = [shown for shown, n in zip(needles.source, needles.search, strict=True) if n not in text]
        if not missing:
            return HELD
        shown = ", ".join(excerpt(n, 30) for n in missing[:5]) + (", ..." if len(missing) > 5 else "")
        return Outcome(False, 0.0, f"{name}: {len(missing)} of {len(needles.source)} not found ({shown})")

    return evaluate


def starts_with(prefix: str, response: str, context: Context) -> Outcome:
    head = response.lstrip(WHITESPACE)
    if head.startswith(prefix):
        return HELD
    return Outcome(False, 0.0, f"starts_with {excerpt(prefix, 60)}: starts with {excerpt(head[: len(prefix)], 60)}")


def _levenshtein_value(value: Any, where: Where) -> tuple[str, int]:
    if not isinstance(value, dict) or "value" not in value or "max" not in value:
        raise AssertionValueError("levenshtein needs {value: TEXT, max: N} (N: the largest edit distance that holds)")
    text, limit = value["value"], value["max"]
    if not isinstance(text, str):
        raise AssertionValueError("levenshtein: value must be a string")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise AssertionValueError(f"levenshtein: max must be a whole number of edits, 0 or more, got {limit!r}")
    return text.strip(WHITESPACE), limit


MAX_LEVENSHTEIN_STEPS = 1_000_000_000  # about a second of either algorithm (README "Assertions")
_STEP_PER_DIAGONAL = 3000  # what a diagonal's Python step costs, in the bit-parallel one's steps


class TooFar(Exception):
    """Two texts too long, and ``max`` too large, to compare within MAX_LEVENSHTEIN_STEPS."""

    def __init__(self, steps: int) -> None:
        super().__init__(steps)
        self.steps = steps


def distance_within(a: str, b: str, limit: int) -> int | None:
    """The edit distance of ``a`` and ``b`` when it is at most ``limit``, else None; TooFar when
    neither algorithm would finish within MAX_LEVENSHTEIN_STEPS: the bit-parallel one costs
    len(a) x len(b) steps, the banded one (``limit`` the band) about
    (limit + 1)² x 3000 + (2 x limit + 1) x the longer length."""
    if abs(len(a) - len(b)) > limit:
        return None
    # a common prefix and suffix cost no edits: strings that nearly match are cut short first
    head = _common_prefix(a, b)
    tail = _common_prefix(a[head:][::-1], b[head:][::-1])
    a, b = a[head : len(a) - tail], b[head : len(b) - tail]
    whole = len(a) * len(b)
    banded = (limit + 1) ** 2 * _STEP_PER_DIAGONAL + (2 * limit + 1) * max(len(a), len(b))
    if min(whole, banded) > MAX_LEVENSHTEIN_STEPS:
        raise TooFar(min(whole, banded))
    if whole <= banded:
        found = edit_distance(a, b)
        return found if found <= limit else None
    return banded_distance(a, b, limit)


def banded_distance(a: str, b: str, limit: int) -> int | None:
    """The edit distance of ``a`` and ``b`` when it is at most ``limit``, else None, by Ukkonen's
    diagonal transitions: for e = 0, 1, ... edits, how far along each diagonal d = j - i (|d| <= e)
    the table's cells hold at most e, each slid along its run of equal characters by slices
    compared whole. (limit + 1)² steps, whatever the lengths."""
    n, m = len(a), len(b)
    goal = m - n
    furthest: dict[int, int] = {}
    for edits in range(limit + 1):
        reached: dict[int, int] = {}
        for d in range(max(-edits, -n), min(edits, m) + 1):
            if edits == 0:
                i = 0
            else:  # a substitution along d, an insertion from d - 1, a deletion from d + 1
                i = max(furthest.get(d, -1) + 1, furthest.get(d - 1, -1), furthest.get(d + 1, -1) + 1)
                i = min(i, n, m - d)  # past an end: the cell there is at most one edit further
            if i < n and i + d < m:
                i += _slide(a, i, b, i + d)
            if d == goal and i >= n:
                return edits
            reached[d] = i
        furthest = reached
    return None


def _slide(a: str, i: int, b: str, j: int) -> int:
    """How many characters ``a[i:]`` and ``b[j:]`` share at their start: blocks of doubling size
    compared whole, then the first unequal one searched."""
    n = min(len(a) - i, len(b) - j)
    low, step = 0, 8
    while low < n:
        high = min(low + step, n)
        x, y = a[i + low : i + high], b[j + low : j + high]
        if x != y:
            return low + _common_prefix(x, y)
        low, step = high, step * 2
    return n


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance by Myers' bit-parallel algorithm (Hyyrö's form for whole strings): one
    pass over ``b`` with the columns of the shorter string ``a`` as the bits of an integer,
    O(len(b) x len(a) / 64) machine work instead of the table's len(a) x len(b) Python steps."""
    if len(a) > len(b):
        a, b = b, a
    m = len(a)
    if m == 0:
        return len(b)
    peq: dict[str, int] = {}
    for i, char in enumerate(a):
        peq[char] = peq.get(char, 0) | (1 << i)
    full = (1 << m) - 1
    top = 1 << (m - 1)
    pv, mv, score = full, 0, m
    for char in b:
        eq = peq.get(char, 0)
        xv = eq | mv
        xh = (((eq & pv) + pv) ^ pv) | eq
        ph = mv | (~(xh | pv) & full)
        mh = pv & xh
        if ph & top:
            score += 1
        elif mh & top:
            score -= 1
        ph = ((ph << 1) | 1) & full
        mh = (mh << 1) & full
        pv = mh | (~(xv | ph) & full)
        mv = ph & xv
    return score


def _common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of ``a`` and ``b``: a binary search on slices
    compared whole (a few C comparisons instead of a Python step per character)."""
    low, high = 0, min(len(a), len(b))  # a[:low] == b[:low]; a[:high + 1] != b[:high + 1] or past an end
    if a[:high] == b[:high]:
        return high
    while low < high:
        middle = (low + high + 1) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def levenshtein(compiled: tuple[str, int], response: str, context: Context) -> Outcome:
    target, limit = compiled
    text = response.strip(WHITESPACE)
    try:
        found = distance_within(text, target, limit)
    except TooFar as exc:
        reason = (
            f"levenshtein: gave up: {len(text):,} and {len(target):,} characters within {limit:,} edits would take "
            f"{exc.steps:,} steps (at most {MAX_LEVENSHTEIN_STEPS:,}); lower max or shorten the value"
        )
        return Outcome(False, 0.0, reason, undecided=True)  # not_levenshtein does not hold either
    if found is not None:
        return HELD
    return Outcome(
        False, 0.0, f"levenshtein: more than {limit} edit{'s' if limit != 1 else ''} from {excerpt(target, 60)}"
    )


def _word_count_value(value: Any, where: Where) -> tuple[int | None, int | None]:
    if not isinstance(value, dict) or not value or set(value) - {"min", "max"}:
        raise AssertionValueError("word_count needs {min: A, max: B} (either or both)")
    bounds = []
    for key in ("min", "max"):
        bound = value.get(key)
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int) or bound < 0):
            raise AssertionValueError(f"word_count: {key} must be a whole number, 0 or more, got {bound!r}")
        bounds.append(bound)
    low, high = bounds
    if low is not None and high is not None and low > high:
        raise AssertionValueError(f"word_count: min {low} is above max {high}; no answer could hold")
    return low, high


def word_count(compiled: tuple[int | None, int | None], response: str, context: Context) -> Outcome:
    low, high = compiled
    count = len(response.split())
    if (low is None or count >= low) and (high is None or count <= high):
        return HELD
    wanted = f"at least {low}" if high is None else f"at most {high}" if low is None else f"{low} to {high}"
    return Outcome(False, 0.0, f"word_count: {count} word{'s' if count != 1 else ''}, wanted {wanted}")


def _string(value: Any, where: Where) -> str:
    if not isinstance(value, str) or not value:
        raise AssertionValueError("must be a non-empty string")
    return value


def _folded_string(value: Any, where: Where) -> Folded:
    needle = _string(value, where)
    return Folded(needle, needle.casefold())


def _prefix(value: Any, where: Where) -> str:
    prefix = _string(value, where).lstrip(WHITESPACE)
    if not prefix:
        raise AssertionValueError("must not be only whitespace (the response is compared with it stripped)")
    return prefix


register("exact", check=_text, evaluate=exact, schema={"type": "string"},
         description="The whole response, whitespace-trimmed; case-sensitive.")  # fmt: skip
register("contains", check=_string, evaluate=contains, schema=_STRING,
         description="Case-sensitive substring of the response.")  # fmt: skip
register("icontains", check=_folded_string, evaluate=icontains, schema=_STRING,
         description="Substring of the response, ignoring case (Unicode case folding).")  # fmt: skip
for _name, _fold in (("contains_any", False), ("icontains_any", True)):
    register(_name, check=_folded_needles if _fold else _plain_needles, evaluate=_any(_name, _fold), schema=_STRINGS,
             description=f"At least one of the listed strings is a substring{' (ignoring case)' if _fold else ''}.")  # fmt: skip
for _name, _fold in (("contains_all", False), ("icontains_all", True)):
    register(_name, check=_folded_needles if _fold else _plain_needles, evaluate=_all(_name, _fold), schema=_STRINGS,
             description=f"Every listed string is a substring{' (ignoring case)' if _fold else ''}.")  # fmt: skip
register("starts_with", check=_prefix, evaluate=starts_with, schema=_STRING,
         description="The response, leading whitespace stripped, starts with this.")  # fmt: skip
register(
    "levenshtein", check=_levenshtein_value, evaluate=levenshtein,
    schema={"type": "object", "required": ["value", "max"], "additionalProperties": False,
            "properties": {"value": {"type": "string"}, "max": {"type": "integer", "minimum": 0}}},
    description="{value: TEXT, max: N}: the trimmed response is at most N edits from TEXT.",
)  # fmt: skip
register(
    "word_count", check=_word_count_value, evaluate=word_count,
    schema={"type": "object", "minProperties": 1, "additionalProperties": False,
            "properties": {"min": {"type": "integer", "minimum": 0}, "max": {"type": "integer", "minimum": 0}}},
    description="{min: A, max: B} (either): the number of words is within.",
)  # fmt: skip
