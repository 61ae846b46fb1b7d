r"""JavaScript regular expressions -> the ``regex`` module's syntax, with JavaScript's meaning.

promptfoo's ``regex`` assertion is ``new RegExp(value).test(output)``: ECMAScript syntax, with
Annex B's leniencies when the ``u`` flag is absent. Python's ``regex`` module reads most of it
alike but means some of it differently, so the pattern is parsed and written out again:

- ``\d`` ``\w`` ``\b`` are ASCII in JavaScript and Unicode in Python: they become ``[0-9]``,
  ``[A-Za-z0-9_]`` and ``(?a:\b)``; ``\s`` becomes JavaScript's own whitespace set (it has
  U+FEFF and lacks U+0085).
- ``.`` excludes JavaScript's four line terminators (\n \r U+2028 U+2029), not only \n; ``$``
  without ``m`` is the very end (``\Z``), not "also before a final newline"; with ``m``, ``^`` and
  ``$`` see all four terminators.
- ``(?<name>`` becomes ``(?P<name>``; a backreference to a group that has not taken part matches
  the empty string in JavaScript and fails in Python, so ``\1`` becomes ``(?(1)\1)`` and
  ``\k<name>`` ``(?(name)(?P=name))``.
- Annex B forms without ``u``: identity escapes (``\a`` is "a"), a ``{`` that starts no quantifier,
  legacy octal escapes, ``\cX``, and ``[^]`` (any character) and ``[]`` (nothing) in any mode.
- Flags: ``i`` and ``s`` are kept as flags, ``m`` and ``u`` by translation; ``g`` is dropped (a
  test on a fresh RegExp starts at 0 either way), ``y`` anchors at the start (``\A``), ``d``
  changes nothing a test sees.

What has no exact translation raises ``UntranslatableRegex``, never a guess: the ``v`` flag's set
syntax, ``(?i:...)`` modifier groups (Node.js 23+), lone surrogate escapes, group names Python
cannot hold, and JavaScript syntax errors (promptfoo fails such an assertion whatever the output).
Differences that remain: without ``u`` JavaScript matches UTF-16 code units (``.`` matches half an
emoji), Python code points; JavaScript clears a quantified group's captures on each repetition.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DIGIT = "0-9"
WORD = "A-Za-z0-9_"
SPACE = r"\t-\r \xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
TERMINATORS = r"\n\r\u2028\u2029"
_SETS = {"d": DIGIT, "w": WORD, "s": SPACE}
_SYNTAX = set("^$\\.*+?()[]{}|/")
_SPECIAL = set(".^$*+?{}[]\\|()")
_CLASS_SPECIAL = set("\\]-[^&~|")
_QUANTIFIER = re.compile(r"\{(\d+)(,(\d*))?\}")
_CONTROL = {"f": 0x0C, "n": 0x0A, "r": 0x0D, "t": 0x09, "v": 0x0B}
_DELIMITED = re.compile(r"\A/(.*)/([A-Za-z]*)\Z", re.DOTALL)  # how evalkit reads a regex value


class UntranslatableRegex(ValueError):
    """No exact translation exists; the message says why."""


@dataclass(frozen=True, slots=True)
class Translation:
    """A JavaScript pattern and flags, and the same regex for Python's ``regex`` module."""

    pattern: str
    flags: str  # evalkit's: a subset of "is"
    notes: tuple[str, ...] = ()

    @property
    def value(self) -> str:
        """The value of an evalkit ``regex`` assertion: ``/pattern/flags``, or the bare pattern
        when it has no flags and evalkit would not read it as delimited."""
        if self.flags or _DELIMITED.match(self.pattern):
            return f"/{self.pattern}/{self.flags}"
        return self.pattern


@dataclass(frozen=True, slots=True)
class _Char:
    code: int


@dataclass(frozen=True, slots=True)
class _Set:
    text: str  # the positive set, as class content
    negated: bool


@dataclass(frozen=True, slots=True)
class _Raw:
    text: str  # emitted as is: a boundary, a backreference, a property escape


_Item = _Char | _Set | _Raw


def translate(source: str, flags: str = "") -> Translation:
    """``source`` (a RegExp pattern) and its ``flags`` as a Python ``regex`` pattern."""
    notes = _check_flags(flags)
    parser = _Parser(source, unicode="u" in flags, multiline="m" in flags, dotall="s" in flags)
    body = parser.pattern()
    if "y" in flags:
        body = rf"\A(?:{body})"
    out_flags = "".join(f for f in "is" if f in flags)
    _compiles(body, out_flags, source)
    return Translation(body, out_flags, tuple(notes))


def _check_flags(flags: str) -> list[str]:
    for flag in flags:
        if flag not in "dgimsuvy" or flags.count(flag) > 1:
            raise UntranslatableRegex(f"invalid flags {flags!r} (JavaScript refuses them)")
    if "v" in flags:
        raise UntranslatableRegex("the v flag (set notation in classes) is not translated")
    notes = []
    if "g" in flags:
        notes.append("flag g dropped: a test on a new RegExp starts at the beginning either way")
    if "y" in flags:
        notes.append(r"flag y: the match must start at the beginning, translated as \A")
    return notes


def _compiles(body: str, flags: str, source: str) -> None:
    import regex

    bits = regex.UNICODE | (regex.IGNORECASE if "i" in flags else 0) | (regex.DOTALL if "s" in flags else 0)
    try:
        regex.compile(body, bits)
    except regex.error as exc:
        raise UntranslatableRegex(f"no exact translation of /{source}/ ({exc})") from None


def _groups(source: str) -> tuple[int, list[str]]:
    """The number of capturing groups and the group names, in order."""
    count, names, i, in_class = 0, [], 0, False
    while i < len(source):
        char = source[i]
        if char == "\\":
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "(" and not source.startswith("(?", i):
            count += 1
        elif source.startswith("(?<", i) and source[i + 3 : i + 4] not in ("=", "!"):
            count += 1
            end = source.find(">", i)
            names.append(source[i + 3 : end] if end > 0 else "")
        i += 1
    return count, names


class _Parser:
    def __init__(self, source: str, unicode: bool, multiline: bool, dotall: bool) -> None:
        self.src = source
        self.i = 0
        self.u = unicode
        self.m = multiline
        self.s = dotall
        self.group_count, self.names = _groups(source)

    def error(self, message: str) -> UntranslatableRegex:
        return UntranslatableRegex(f"/{self.src}/ is not a valid JavaScript regex: {message}")

    def peek(self, ahead: int = 0) -> str:
        j = self.i + ahead
        return self.src[j] if j < len(self.src) else ""

    def pattern(self) -> str:
        out: list[str] = []
        stack: list[str] = []  # the kind of each open group
        quantifiable = False
        while self.i < len(self.src):
            char = self.src[self.i]
            if char in "*+?{":
                text, quantifiable = self.repeat(quantifiable)
            elif char == "(":
                kind, text = self.group_open()
                stack.append(kind)
                quantifiable = False
            elif char == ")":
                text, quantifiable = self.group_close(stack)
            else:
                self.i += 1
                text, quantifiable = self.atom(char)
            out.append(text)
        if stack:
            raise self.error("missing )")
        return "".join(out)

    def repeat(self, quantifiable: bool) -> tuple[str, bool]:
        """A quantifier, and whether what follows it can be quantified (never)."""
        quantifier = self.quantifier()
        if quantifier is None:  # Annex B: a { that starts no quantifier is itself
            self.i += 1
            return r"\{", True
        if not quantifiable:
            raise self.error(f"nothing to repeat before {quantifier!r}")
        return quantifier, False

    def group_close(self, stack: list[str]) -> tuple[str, bool]:
        """The ) closing the innermost open group, and whether that group can be quantified."""
        if not stack:
            raise self.error("unmatched )")
        kind = stack.pop()
        self.i += 1
        return ")", kind == "group" or (kind == "lookahead" and not self.u)

    def atom(self, char: str) -> tuple[str, bool]:
        """One character (or escape, or class) outside groups and quantifiers, as Python's re
        writes it, and whether it can be quantified."""
        if char == "|":
            return "|", False
        if char == "^":
            return (rf"(?<![^{TERMINATORS}])" if self.m else "^"), False
        if char == "$":
            return (rf"(?![^{TERMINATORS}])" if self.m else r"\Z"), False
        if char == ".":
            return ("." if self.s else f"[^{TERMINATORS}]"), True  # with s, Python's DOTALL is the same
        if char == "[":
            return self.char_class(), True
        if char == "\\":
            item = self.escape(in_class=False)
            return _emit(item), not (isinstance(item, _Raw) and item.text.startswith("(?a:"))
        if self.u and char in "]}":
            raise self.error(f"lone {char!r}")
        return _literal(ord(char)), True

    def quantifier(self) -> str | None:
        char = self.src[self.i]
        if char == "{":
            found = _QUANTIFIER.match(self.src, self.i)
            if found is None:
                if self.u:
                    raise self.error("lone {")
                return None
            low, high = int(found.group(1)), found.group(3)
            if high and int(high) < low:
                raise self.error(f"numbers out of order in {found.group()}")
            self.i = found.end()
            text = found.group()
        else:
            self.i += 1
            text = char
        if self.peek() == "?":
            self.i += 1
            text += "?"
        return text

    def group_open(self) -> tuple[str, str]:
        rest = self.src[self.i :]
        for prefix, kind in (("(?:", "group"), ("(?=", "lookahead"), ("(?!", "lookahead")):
            if rest.startswith(prefix):
                self.i += 3
                return kind, prefix
        for prefix in ("(?<=", "(?<!"):
            if rest.startswith(prefix):
                self.i += 4
                return "lookbehind", prefix
        if rest.startswith("(?<"):
            end = rest.find(">")
            name = rest[3:end] if end > 0 else ""
            if not name or not name.isidentifier():
                if end > 0 and re.fullmatch(r"[$\w]+", name):
                    raise UntranslatableRegex(f"group name {name!r} in /{self.src}/ cannot be a Python group name")
                raise self.error("invalid group name")
            if self.names.count(name) > 1:
                raise self.error(f"duplicate group name {name!r}")
            self.i += end + 1
            return "group", f"(?P<{name}>"
        if rest.startswith("(?"):
            if re.match(r"\(\?[ims]*(-[ims]*)?:", rest):
                raise UntranslatableRegex(f"modifier groups such as {rest[:5]!r}... (Node.js 23+) are not translated")
            raise self.error("invalid group")
        self.i += 1
        return "group", "("

    def char_class(self) -> str:
        negated = self.peek() == "^"
        if negated:
            self.i += 1
        items: list[_Item | tuple[int, int]] = []
        while True:
            if self.i >= len(self.src):
                raise self.error("missing ]")
            if self.peek() == "]":
                self.i += 1
                break
            first = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                second = self.class_atom()
                if isinstance(first, _Char) and isinstance(second, _Char):
                    if first.code > second.code:
                        raise self.error("range out of order in character class")
                    items.append((first.code, second.code))
                    continue
                if self.u:
                    raise self.error("a class escape cannot bound a range")
                items.extend([first, _Char(ord("-")), second])
                continue
            items.append(first)
        return _emit_class(items, negated)

    def class_atom(self) -> _Item:
        char = self.src[self.i]
        self.i += 1
        if char != "\\":
            return _Char(ord(char))
        return self.escape(in_class=True)

    def escape(self, in_class: bool) -> _Item:
        if self.i >= len(self.src):
            raise self.error("\\ at end of pattern")
        char = self.src[self.i]
        self.i += 1
        if char in _SETS or char.lower() in _SETS:
            return _Set(_SETS[char.lower()], negated=char.isupper())
        if char in "bB":
            if in_class:
                if char == "b":
                    return _Char(8)
                if self.u:
                    raise self.error("invalid escape \\B in a class")
                return _Char(ord("B"))
            return _Raw(rf"(?a:\{char})")
        if char.isdigit():
            return self.digit_escape(char, in_class)
        if char == "k":
            return self.named_reference(in_class)
        if char == "c":
            return self.control_escape(in_class)
        if char == "-" and in_class:
            return _Char(ord("-"))
        return self.common_escape(char)

    def digit_escape(self, char: str, in_class: bool) -> _Item:
        start = self.i - 1
        if char == "0" and not self.peek().isdigit():
            return _Char(0)
        if self.u and (in_class or char == "0"):
            raise self.error("invalid decimal escape")
        if not in_class:
            digits = re.match(r"\d+", self.src[start:])
            assert digits is not None
            number = int(digits.group())
            if 0 < number <= self.group_count:
                self.i = start + len(digits.group())
                return _Raw(rf"(?({number})\{number})")
            if self.u:
                raise self.error(f"backreference \\{number} to a group that does not exist")
        if char in "89":  # Annex B: an identity escape
            return _Char(ord(char))
        octal = re.match(r"[0-3][0-7]{0,2}|[4-7][0-7]?", self.src[start:])
        assert octal is not None
        self.i = start + len(octal.group())
        return _Char(int(octal.group(), 8))

    def named_reference(self, in_class: bool) -> _Item:
        if in_class or (not self.u and not self.names):
            if self.u:
                raise self.error("invalid escape \\k")
            return _Char(ord("k"))
        found = re.match(r"<([^>]*)>", self.src[self.i :])
        if found is None or found.group(1) not in self.names:
            raise self.error("\\k must name a group: \\k<name>")
        self.i += found.end()
        name = found.group(1)
        return _Raw(f"(?({name})(?P={name}))")

    def control_escape(self, in_class: bool) -> _Item:
        letter = self.peek()
        if letter.isascii() and (letter.isalpha() or (in_class and not self.u and (letter.isdigit() or letter == "_"))):
            self.i += 1
            return _Char(ord(letter) % 32)
        if self.u:
            raise self.error("invalid escape \\c")
        self.i -= 1  # Annex B: the backslash is itself, and "c" is read next
        return _Char(ord("\\"))

    def common_escape(self, char: str) -> _Item:
        if char in _CONTROL:
            return _Char(_CONTROL[char])
        if char == "x":
            found = re.match(r"[0-9A-Fa-f]{2}", self.src[self.i :])
            if found:
                self.i += 2
                return _Char(int(found.group(), 16))
        elif char == "u":
            code = self.unicode_escape()
            if code is not None:
                return _Char(code)
        elif char in "pP" and self.u:
            found = re.match(r"\{([A-Za-z0-9_]+(?:=[A-Za-z0-9_]+)?)\}", self.src[self.i :])
            if found is None:
                raise self.error(f"invalid property escape \\{char}")
            self.i += found.end()
            return _Raw(rf"\{char}{{{found.group(1)}}}")
        if self.u and char not in _SYNTAX:
            raise self.error(f"invalid escape \\{char}")
        return _Char(ord(char))  # an identity escape

    def unicode_escape(self) -> int | None:
        rest = self.src[self.i :]
        if self.u and rest.startswith("{"):
            found = re.match(r"\{([0-9A-Fa-f]+)\}", rest)
            if found is None or int(found.group(1), 16) > 0x10FFFF:
                raise self.error("invalid \\u{...} escape")
            self.i += found.end()
            return _no_surrogate(int(found.group(1), 16), self.src)
        found = re.match(r"[0-9A-Fa-f]{4}", rest)
        if found is None:
            if self.u:
                raise self.error("invalid \\u escape")
            return None
        code = int(found.group(), 16)
        self.i += 4
        low = re.match(r"\\u([Dd][C-Fc-f][0-9A-Fa-f]{2})", self.src[self.i :])
        if 0xD800 <= code <= 0xDBFF and low:
            self.i += 6
            return 0x10000 + ((code - 0xD800) << 10) + (int(low.group(1), 16) - 0xDC00)
        return _no_surrogate(code, self.src)


def _no_surrogate(code: int, source: str) -> int:
    if 0xD800 <= code <= 0xDFFF:
        raise UntranslatableRegex(
            f"lone surrogate escape \\u{code:04x} in /{source}/: Python strings hold code points, not halves"
        )
    return code


def _emit(item: _Item) -> str:
    if isinstance(item, _Char):
        return _literal(item.code)
    if isinstance(item, _Set):
        return f"[{'^' if item.negated else ''}{item.text}]"
    return item.text


def _emit_class(items: list[_Item | tuple[int, int]], negated: bool) -> str:
    """A class as Python reads it; complement escapes (\\D \\W \\S) inside a class become
    alternatives (or lookaheads when negated), since a class cannot hold a complement."""
    positives: list[str] = []
    complements: list[str] = []
    for item in items:
        if isinstance(item, tuple):
            positives.append(f"{_class_literal(item[0])}-{_class_literal(item[1])}")
        elif isinstance(item, _Char):
            positives.append(_class_literal(item.code))
        elif isinstance(item, _Set):
            (complements if item.negated else positives).append(item.text)
        else:
            positives.append(item.text)
    if any(text in positives for text in complements):  # [\s\S], [\d\D], [\w\W]: every character
        return "(?!)" if negated else "(?s:.)"
    body = "".join(positives)
    if not complements:
        if not body:  # [] matches nothing, [^] anything
            return "(?s:.)" if negated else "(?!)"
        return f"[{'^' if negated else ''}{body}]"
    if not negated:
        terms = ([f"[{body}]"] if body else []) + [f"[^{text}]" for text in complements]
        return terms[0] if len(terms) == 1 else f"(?:{'|'.join(terms)})"
    parts = ([f"(?![{body}])"] if body else []) + [f"(?=[{t}])" for t in complements[:-1]] + [f"[{complements[-1]}]"]
    return parts[0] if len(parts) == 1 else f"(?:{''.join(parts)})"


def _printable(char: str) -> bool:
    return char.isprintable() and char not in "\ufeff"


_SHORT = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r", 0x0C: "\\f"}


def _code_escape(code: int) -> str:
    if code in _SHORT:
        return _SHORT[code]
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _literal(code: int) -> str:
    char = chr(code)
    if char in _SPECIAL:
        return "\\" + char
    return char if _printable(char) else _code_escape(code)


def _class_literal(code: int) -> str:
    char = chr(code)
    if char in _CLASS_SPECIAL:
        return "\\" + char
    return char if _printable(char) else _code_escape(code)
