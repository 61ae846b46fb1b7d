r"""The JavaScript -> Python regex translator, table-driven.

Each row: a JavaScript pattern and flags, the translation expected, and sample texts with the
verdict of JavaScript's ``new RegExp(pattern, flags).test(text)``, recorded from Node.js 20
(``node -e 'console.log(new RegExp(p, f).test(t))'``). The translation must give the same verdict
on every sample with the ``regex`` module, as evalkit's regex assertion searches.
"""

from __future__ import annotations

import pytest
import regex

from evalkit.assertions.compiling import compile_regex
from evalkit.importers.jsregex import UntranslatableRegex, translate

WS = r"[\t-\r \xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]"
NOT_EOL = r"[^\n\r\u2028\u2029]"

# (pattern, flags, evalkit value, {text: what JavaScript's test() returns})
CASES: list[tuple[str, str, str, dict[str, bool]]] = [
    # plain patterns pass through
    ("Paris", "", "Paris", {"Paris!": True, "paris": False}),
    ("colou?r", "", "colou?r", {"color": True, "colour": True, "colr": False}),
    ("a|b", "", "a|b", {"b": True, "c": False}),
    # \d \w are ASCII in JavaScript, Unicode in Python
    (r"\d{3}-\d{4}", "", "[0-9]{3}-[0-9]{4}", {"555-1234": True, "٥٥٥-١٢٣٤": False}),
    (r"^\w+$", "", r"^[A-Za-z0-9_]+\Z", {"abc_1": True, "café": False}),
    (r"\D", "", "[^0-9]", {"12": False, "1٣": True}),
    (r"^\W$", "", r"^[^A-Za-z0-9_]\Z", {"é": True, "a": False}),
    # \s is JavaScript's whitespace: U+FEFF yes, U+0085 no
    (r"a\sb", "", f"a{WS}b", {"a b": True, "a\ufeffb": True, "a\x85b": False, "a\u3000b": True}),
    (
        r"\S+",
        "",
        r"[^\t-\r \xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]+",
        {"\x85": True, "\ufeff": False},
    ),
    # \b sees ASCII word characters only
    (r"\bcat\b", "", r"(?a:\b)cat(?a:\b)", {"a cat.": True, "écat": True, "cats": False}),
    (r"\Bé", "", r"(?a:\B)é", {"xé": False, "éé": True}),
    # . excludes the four line terminators; $ is the very end without m
    ("a.b", "", f"a{NOT_EOL}b", {"a-b": True, "a\rb": False, "a\u2028b": False, "a\nb": False}),
    ("a.b", "s", "/a.b/s", {"a\nb": True, "a\rb": True}),
    ("end$", "", r"end\Z", {"the end": True, "the end\n": False}),
    ("^b", "m", r"(?<![^\n\r\u2028\u2029])b", {"a\nb": True, "a\rb": True, "a\u2028b": True, "ab": False}),
    ("a$", "m", r"a(?![^\n\r\u2028\u2029])", {"a\rb": True, "ab": False, "a": True}),
    ("^x", "", "^x", {"x": True, "a\nx": False}),
    # flags
    ("hello", "i", "/hello/i", {"HeLLo": True, "help": False}),
    ("hello", "g", "hello", {"say hello": True}),
    ("hello", "y", r"\A(?:hello)", {"hello there": True, "say hello": False}),
    ("a|b", "y", r"\A(?:a|b)", {"ba": True, "cb": False}),
    ("x", "d", "x", {"x": True}),
    (r"\p{L}+", "u", r"\p{L}+", {"日本": True, "123": False}),
    (r"\p{Script=Greek}", "u", r"\p{Script=Greek}", {"α": True, "a": False}),
    (r"\P{L}", "u", r"\P{L}", {"abc": False, "ab1": True}),
    (r"\u{1F600}", "u", "😀", {"hi 😀": True, "hi": False}),
    # named groups and backreferences
    (r"(?<year>\d{4})-\k<year>", "", r"(?P<year>[0-9]{4})-(?(year)(?P=year))", {"2024-2024": True, "2024-2025": False}),
    (r"(a)?b\1", "", r"(a)?b(?(1)\1)", {"b": True, "aba": True}),
    (r"(\w)\1", "", r"([A-Za-z0-9_])(?(1)\1)", {"hello": True, "helo": False}),
    (r"\1(a)", "", r"(?(1)\1)(a)", {"a": True}),
    # lookarounds are kept (Python's regex module allows variable-length lookbehind)
    (r"(?<=\$)\d+", "", r"(?<=\$)[0-9]+", {"$42": True, "42": False}),
    (r"(?<!no )way", "", r"(?<!no )way", {"no way": False, "a way": True}),
    (r"(?<=a|bc)d", "", r"(?<=a|bc)d", {"bcd": True, "xd": False}),
    (r"foo(?!bar)", "", r"foo(?!bar)", {"foobaz": True, "foobar": False}),
    # escapes JavaScript has and Python reads otherwise
    (r"\/api\/v1", "", "/api/v1", {"GET /api/v1": True}),
    (r"\a\e\q", "", "aeq", {"aeq": True, "\x07": False}),
    (r"\cJ", "", r"\n", {"a\nb": True, "cJ": False}),
    (r"\c1", "", r"\\c1", {"\\c1": True}),
    (r"[\c1]", "", r"[\x11]", {"\x11": True, "1": False}),
    (r"\0", "", r"\x00", {"\x00": True, "0": False}),
    (r"\12", "", r"\n", {"\n": True, "12": False}),
    (r"\8", "", "8", {"8": True}),
    (r"\x41\u0042", "", "AB", {"AB": True}),
    (r"\xZ", "", "xZ", {"xZ": True}),
    (r"\uD83D\uDE00", "", "😀", {"😀": True}),
    (r"\k", "", "k", {"k": True}),
    (r"\p{L}", "", r"p\{L\}", {"p{L}": True, "a": False}),
    (r"\v\f", "", r"\x0b\f", {"\x0b\x0c": True}),
    # Annex B: braces that are no quantifier are themselves
    ("a{,5}", "", r"a\{,5\}", {"a{,5}": True, "aaa": False}),
    ("{foo}", "", r"\{foo\}", {"{foo}": True}),
    ("x{2,}?", "", "x{2,}?", {"xx": True, "x": False}),
    ("a{2}", "", "a{2}", {"aa": True, "a": False}),
    ("]", "", r"\]", {"]": True}),
    # classes
    ("[]", "", "(?!)", {"": False, "a": False}),
    ("[^]", "", "(?s:.)", {"\n": True, "": False}),
    (r"[\s\S]+", "", "(?s:.)+", {"\n\r": True}),
    (r"[^\s\S]", "", "(?!)", {"a": False}),
    (r"[\d-z]", "", r"[0-9\-z]", {"-": True, "5": True, "q": False}),
    (r"[a-z\d]", "", "[a-z0-9]", {"q": True, "٣": False}),
    (
        r"[^\d\s]",
        "",
        r"[^0-9\t-\r \xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]",
        {"x": True, " ": False},
    ),
    (r"[a\D]", "", "(?:[a]|[^0-9])", {"a": True, "b": True, "5": False}),
    (r"[^a\W]", "", "(?:(?![a])[A-Za-z0-9_])", {"a": False, "b": True, "-": False}),
    (r"[\W\D]", "", "(?:[^A-Za-z0-9_]|[^0-9])", {"5": False, "a": True}),
    (r"[^\D\W]", "", "(?:(?=[0-9])[A-Za-z0-9_])", {"5": True, "a": False}),
    (r"[\b]", "", r"[\x08]", {"\b": True, "b": False}),
    (r"[&&~|[]", "", r"[\&\&\~\|\[]", {"&": True, "[": True, "a": False}),
    (r"[\-^]", "", r"[\-\^]", {"^": True, "-": True}),
    (r"[é-ü]", "", "[é-ü]", {"ö": True, "e": False}),
    (r"[\u{1F600}-\u{1F64F}]", "u", "[😀-🙏]", {"🙂": True, "a": False}),
    # what the user wrote as /pattern/flags is a pattern with literal slashes in promptfoo
    ("/foo/i", "", "//foo/i/", {"/foo/i": True, "FOO": False}),
]


@pytest.mark.parametrize(("pattern", "flags", "expected", "samples"), CASES)
def test_translation_and_verdicts(pattern: str, flags: str, expected: str, samples: dict[str, bool]) -> None:
    translation = translate(pattern, flags)
    assert translation.value == expected
    compiled = compile_regex(translation.value).pattern  # as evalkit's regex assertion reads the value
    for text, js_verdict in samples.items():
        assert (compiled.search(text) is not None) == js_verdict, (pattern, flags, text)


def test_flag_notes() -> None:
    assert translate("x", "g").notes == ("flag g dropped: a test on a new RegExp starts at the beginning either way",)
    assert translate("x", "y").notes == (r"flag y: the match must start at the beginning, translated as \A",)
    assert translate("x", "imsu").notes == ()


UNTRANSLATABLE = [
    # JavaScript syntax errors: promptfoo fails the assertion whatever the output
    ("a**", "", "nothing to repeat before '*'"),
    ("*a", "", "nothing to repeat before '*'"),
    ("a*+", "", "nothing to repeat before '+'"),
    (r"\b+", "", "nothing to repeat before '+'"),
    ("(?<=a)*", "", "nothing to repeat before '*'"),
    ("(a", "", "missing )"),
    ("a)", "", "unmatched )"),
    ("[a", "", "missing ]"),
    ("[z-a]", "", "range out of order in character class"),
    ("a{3,1}", "", "numbers out of order in {3,1}"),
    ("(?P<n>a)", "", "invalid group"),
    ("(?i)a", "", "invalid group"),
    ("(?<a>x)(?<a>y)", "", "duplicate group name 'a'"),
    (r"\k<b>(?<a>x)", "", r"\k must name a group: \k<name>"),
    ("a\\", "", "\\ at end of pattern"),
    # u mode is strict
    (r"\a", "u", r"invalid escape \a"),
    ("a{", "u", "lone {"),
    ("}", "u", "lone '}'"),
    (r"\2(a)", "u", r"backreference \2 to a group that does not exist"),
    (r"[\d-z]", "u", "a class escape cannot bound a range"),
    (r"\u{110000}", "u", r"invalid \u{...} escape"),
    (r"\cü", "u", r"invalid escape \c"),
    ("x", "gg", "invalid flags 'gg'"),
    ("x", "q", "invalid flags 'q'"),
    # no exact translation
    ("[a--b]", "v", "the v flag (set notation in classes) is not translated"),
    ("(?i:a)b", "", "modifier groups such as '(?i:a'... (Node.js 23+) are not translated"),
    (r"\uD83D", "", r"lone surrogate escape \ud83d"),
    ("(?<a$>x)", "", "group name 'a$' in /(?<a$>x)/ cannot be a Python group name"),
    (r"\p{NotAProperty}", "u", r"no exact translation of /\p{NotAProperty}/"),
]


@pytest.mark.parametrize(("pattern", "flags", "message"), UNTRANSLATABLE)
def test_untranslatable_is_reported(pattern: str, flags: str, message: str) -> None:
    with pytest.raises(UntranslatableRegex) as caught:
        translate(pattern, flags)
    assert message in str(caught.value)


def test_translations_compile_with_the_regex_module_alone() -> None:
    for pattern, flags, _, _ in CASES:
        translation = translate(pattern, flags)
        bits = regex.UNICODE | (regex.IGNORECASE if "i" in translation.flags else 0)
        regex.compile(translation.pattern, bits | (regex.DOTALL if "s" in translation.flags else 0))
