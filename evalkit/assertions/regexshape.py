"""How large a regex is before the ``regex`` engine compiles it.

The engine unrolls the minimum count of every counted repeat when it compiles (``a{1000000}``
takes ~270 MB, ``a{1000000000}`` more memory than the machine has; nested repeats multiply),
and its parser recurses once per nested group. ``regex_shape`` scans a pattern without
compiling it and returns an upper estimate of both, so a pattern beyond the limits is refused
as a load error in bounded memory and stack. The scan follows the engine's syntax where that
decides what a quantifier repeats (groups and their prefixes, character classes, escapes with
braces, verbose mode's whitespace and comments, counts such as ``{1 000}`` that verbose mode
reads as ``{1000}``) and over-estimates wherever it is coarse.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

REGEX_MAX_SIZE = 10_000
REGEX_MAX_DEPTH = 50
SIZE_CAP = 10**9  # sizes are clipped here so nested huge counts stay small integers
# what follows '(' before a group's content: a name, a lookaround, an atomic or branch-reset
# group, a call, or a conditional's group-name condition (a lookaround condition is scanned)
_GROUP_PREFIX = re.compile(
    r"\?(?:P?<(?![=!])[^>]*>|'[^']*'|P[=>][^)]*|&[^)]*|<[=!]|[>|=!]|\((?:[\w&+-]+|<\w+>|'\w+')\))"
)
_INLINE_FLAGS = re.compile(r"\?\^?([a-zA-Z0-9]*)(?:-([a-zA-Z0-9]*))?([:)])")
_CALL = re.compile(r"\?(?:R|[-+]?[0-9]+)\)")
_COUNT = re.compile(r"\{(?=[0-9,])([0-9]*)(?:,[0-9]*)?\}")  # '{}' is two characters
_POSIX_CLASS = re.compile(r"\[:\^?\w+:\]")
_NAMED_ESCAPE = {"{": "}", "<": ">"}
_ESCAPE_NAME = re.compile(r"[A-Za-z0-9_=:&. -]*")  # anything else makes the engine read the characters


class RegexShape(NamedTuple):
    size: int  # at least the number of items compiling unrolls (clipped at SIZE_CAP)
    depth: int  # the deepest nesting of groups


def regex_shape(body: str, verbose: bool = False) -> RegexShape:
    """An upper estimate of what compiling ``body`` unrolls, and how deeply its groups nest.

    The size sums, over the pattern's items, the product of the minimum counts of the repeats
    around each. Where the scan is coarse it over-estimates. Verbose mode (whitespace and
    ``#`` comments ignored) is followed with its scoped ``(?x:...)`` / ``(?-x:...)`` groups and
    its unscoped ``(?x)`` / ``(?-x)``, which apply to the rest of their group; as older versions
    of the engine applied an unscoped ``(?x)`` to the whole pattern, for good, the scan is also
    made that way and the larger estimate counts."""
    first = _scan(body, verbose, global_verbose=False)
    if "(?" not in body or "x" not in body:  # no flag group can switch verbose mode
        return first
    second = _scan(body, True, global_verbose=True)
    return RegexShape(max(first.size, second.size), max(first.depth, second.depth))


def _scan(body: str, verbose: bool, global_verbose: bool) -> RegexShape:
    frames = [_Frame(verbose)]  # the open groups, innermost last
    depth, i, n = 0, 0, len(body)
    while i < n:
        frame, ch = frames[-1], body[i]
        if frame.verbose and (ch.isspace() or ch == "#"):
            i = _skip_ignored(body, i)
        elif ch == "(":
            i, inner = _open_group(body, i + 1, frame, global_verbose)
            if inner is not None:
                frames.append(inner)
                depth = max(depth, len(frames) - 1)
        elif ch == ")" and len(frames) > 1:
            inner = frames.pop()
            if not inner.keeps:  # an unscoped flag inside it holds on after it
                frames[-1].verbose = inner.verbose
            frames[-1].add(max(inner.size, 1))
            i += 1
        elif ch == "{" and (count := _match(_COUNT, body, i, frame.verbose)) is not None:
            i, times = count
            frame.repeat(times)
        elif ch == "|":
            frame.last = 0
            i += 1
        elif ch in "*+?":
            i += 1
        elif ch == "\\":
            end = _skip_escape(body, i)
            # a group call inside its own group is read as its characters: count them all
            frame.add(end - i - 1 if body.startswith("g<", i + 1) else 1)
            i = end
        else:
            i = _skip_class(body, i) if ch == "[" else i + 1
            frame.add(1)
    while len(frames) > 1:  # unbalanced: compiling reports it; count what is there
        inner = frames.pop()
        frames[-1].add(max(inner.size, 1))
    return RegexShape(frames[0].size, depth)


@dataclass(slots=True)
class _Frame:
    """One open group of the scan."""

    verbose: bool
    keeps: bool = True  # whether the engine restores the flags at its end (not after (?| or (?(?=...)
    size: int = 0  # the group so far
    last: int = 0  # the size of its last item: what a quantifier repeats

    def add(self, size: int) -> None:
        self.size = min(self.size + size, SIZE_CAP)
        self.last = size

    def repeat(self, times: int) -> None:
        times = max(times, 1)
        self.size = min(self.size + self.last * (times - 1), SIZE_CAP)
        self.last = min(self.last * times, SIZE_CAP)


def _open_group(body: str, i: int, frame: _Frame, global_verbose: bool) -> tuple[int, _Frame | None]:
    """The group opening at body[i - 1]: where its content starts, and its frame (None when it
    has no content: a comment or an unscoped flag group, which the frame takes in)."""
    if not body.startswith("?", i):  # the engine reads '(?' as one token, even in verbose mode
        return i, _Frame(frame.verbose)
    if body.startswith("?#", i):
        return _skip_comment(body, i + 2), None
    text, where = _lookahead(body, i + 1, frame.verbose)
    text, where = "?" + text, [i, *where]
    call = _CALL.match(text)
    if call:  # (?R), (?1), (?-1), (?+1): an item
        frame.add(1)
        return where[call.end() - 1] + 1, None
    flags = _INLINE_FLAGS.match(text)
    if flags:
        on, off = flags.group(1), flags.group(2) or ""
        verbose = ("x" in on or frame.verbose) and "x" not in off
        if flags.group(3) == ")":
            if not global_verbose:  # unscoped: to the end of the group; a quantifier sees past it
                frame.verbose = verbose
            return where[flags.end() - 1] + 1, None
        return where[flags.end() - 1] + 1, _Frame(verbose)
    prefix = _GROUP_PREFIX.match(text)
    # the engine does not restore the flags after a branch-reset group nor after a conditional
    # on a lookaround (whose condition, scanned as a group of its own, is prefix-less here)
    keeps = not (text.startswith("?|") or (prefix is None and text.startswith("?(")))
    return (where[prefix.end() - 1] + 1 if prefix else i + 1), _Frame(frame.verbose, keeps)


def _lookahead(body: str, i: int, verbose: bool, limit: int = 256) -> tuple[str, list[int]]:
    """The characters from body[i] that the engine reads as a group's prefix (verbose mode
    skips whitespace and comments), up to its first ':', ')' or '>', and where each one is."""
    chars: list[str] = []
    where: list[int] = []
    while i < len(body) and len(chars) < limit:
        if verbose and (body[i].isspace() or body[i] == "#"):
            i = _skip_ignored(body, i)
            continue
        chars.append(body[i])
        where.append(i)
        if body[i] in ":)>":
            break
        i += 1
    return "".join(chars), where


def _match(pattern: re.Pattern[str], body: str, i: int, verbose: bool) -> tuple[int, int] | None:
    """A counted repeat ``{m}``, ``{m,}``, ``{m,n}`` or ``{,n}`` at body[i]: where it ends and m."""
    if not verbose:
        found = pattern.match(body, i)
        return None if found is None else (found.end(), _number(found.group(1)))
    chars: list[str] = []
    j = i
    while j < len(body):  # verbose mode reads '{1 000 # a comment\n 000}' as {1000000}
        if body[j].isspace() or body[j] == "#":
            j = _skip_ignored(body, j)
            continue
        chars.append(body[j])
        j += 1
        if chars[-1] == "}" or chars[-1] not in "{,0123456789":
            break
    found = pattern.fullmatch("".join(chars))
    return None if found is None else (j, _number(found.group(1)))


def _number(digits: str) -> int:
    significant = digits.lstrip("0")
    return SIZE_CAP if len(significant) > 9 else int(significant or "0")


def _skip_comment(body: str, i: int) -> int:
    """Past the ')' that ends the (?#...) comment whose text starts at body[i] (``\\)`` does not)."""
    while i < len(body):
        if body[i] == "\\":
            i += 2
        elif body[i] == ")":
            return i + 1
        else:
            i += 1
    return len(body)


def _skip_ignored(body: str, i: int) -> int:
    """Past the whitespace and '#' comments that verbose mode ignores."""
    while i < len(body):
        if body[i].isspace():
            i += 1
        elif body[i] == "#":
            end = body.find("\n", i)
            i = len(body) if end < 0 else end + 1
        else:
            break
    return i


def _skip_escape(body: str, i: int) -> int:
    """Past the escape at body[i], with its name in braces or angle brackets (\\p{L}, \\x{41},
    \\g<name>) when it has one: the engine reads an escape it cannot use as literal characters
    (``\\p{a{3}}`` is 'p{', 'a' three times, '}'), so a name holds no pattern syntax."""
    j = i + 2
    if j < len(body) and ((body[i + 1] in "pPNx" and body[j] == "{") or (body[i + 1] in "gL" and body[j] == "<")):
        name = _ESCAPE_NAME.match(body, j + 1)
        if name and body.startswith(_NAMED_ESCAPE[body[j]], name.end()):
            return name.end() + 1
    return min(j, len(body))


def _skip_class(body: str, i: int) -> int:
    """Past the character class at body[i], ending it at the earliest ']' that can end it."""
    j = i + 1
    if body.startswith("^", j):
        j += 1
    if body.startswith("]", j):
        j += 1
    while j < len(body):
        if body[j] == "\\":
            j += 2
        elif body[j] == "[" and (posix := _POSIX_CLASS.match(body, j)):
            j = posix.end()
        elif body[j] == "]":
            return j + 1
        else:
            j += 1
    return len(body)
