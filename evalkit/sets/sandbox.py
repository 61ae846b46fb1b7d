"""The bounds on rendering a set's templates (README "Templates, variables, data files and
conversations"): time and size, which Jinja2's sandbox leaves open.

Time: every loop step, call, filter, attribute or item look-up and operator of a template checks
a deadline, so a nested ``{% for %}`` stops at ``Limits.template_s`` seconds per template, and
a set's templates together at ``Limits.set_s``. Size: what can build a large value in one step
(``*``, ``**``, ``+``, ``%``, ``~``, ``format``, ``center``, ``indent``, ``join``, ``replace``,
``ljust`` ...) is sized before it runs, every ``{{ }}`` before it becomes text, and what a
template renders as it streams out: no value over ``Limits.text`` characters (or items), no
integer over ``Limits.int_bits`` bits, no set rendering over ``Limits.set_text`` characters in
all. Lists, mappings and sets cannot be changed in place (``append``, ``update``): a loop cannot
grow one past what an operator would refuse. Over a bound, rendering stops with ``OverLimit``.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from itertools import islice
from typing import Any


@dataclass(frozen=True, slots=True)
class Limits:
    template_s: float = 1.0  # seconds one template may take to render
    set_s: float = 30.0  # seconds a set's templates may take in all
    text: int = 1_000_000  # characters (or items) in any value a template builds or renders
    set_text: int = 100_000_000  # characters a set's templates render in all
    int_bits: int = 1_000_000  # bits of any integer a template computes


LIMITS = Limits()  # what every load uses (tests lower it)


class OverLimit(Exception):
    """A template went over a bound; the message says which, for the user."""


@dataclass(slots=True)
class Budget:
    """What one load's templates have spent: seconds rendering through Jinja and characters."""

    limits: Limits
    seconds: float = 0.0
    chars: int = 0

    def count(self, chars: int) -> None:
        self.chars += chars
        if self.chars > self.limits.set_text:
            raise OverLimit(
                f"the set's templates render over {self.limits.set_text:,} characters in all (the limit "
                "per set); render less, or split the set"
            )


@dataclass(slots=True)
class _Run:
    deadline: float
    limits: Limits
    per_set: bool  # the set's time runs out before this template's


_CURRENT: ContextVar[_Run | None] = ContextVar("evalkit_template_run", default=None)


def _limits() -> Limits:
    run = _CURRENT.get()
    return LIMITS if run is None else run.limits


def tick() -> None:
    """Stop the template under way when its time (or its set's) is up."""
    run = _CURRENT.get()
    if run is not None and time.monotonic() > run.deadline:
        if run.per_set:
            raise OverLimit(
                f"the set's templates took over {run.limits.set_s:g} s to render in all (the limit per set); "
                "make them do less, or split the set"
            )
        raise OverLimit(
            f"the template took over {run.limits.template_s:g} s to render (the limit per template); "
            "make it do less (fewer or smaller loops)"
        )


def render(template: Any, variables: Mapping[str, Any], budget: Budget) -> str:
    """``template`` rendered within ``budget``'s limits (OverLimit otherwise), counted in it."""
    limits = budget.limits
    start = time.monotonic()
    left = limits.set_s - budget.seconds
    run = _Run(start + min(limits.template_s, left), limits, left < limits.template_s)
    token = _CURRENT.set(run)
    parts, size, most = [], 0, limits.text
    try:
        tick()
        # the chunks as they come (what Template.render joins), sized before the text is made
        for chunk in template.root_render_func(template.new_context(dict(variables))):
            size += len(chunk)
            if size > most:
                bound(size, "the template's text")
            parts.append(chunk)
    finally:
        _CURRENT.reset(token)
        budget.seconds += time.monotonic() - start
    text = "".join(parts)
    budget.count(len(text))
    return text


def bound(size: int, what: str, limit: int | None = None) -> None:
    """Refuse a value of ``size`` characters (or items) over the limit (``limit``, else the
    current render's)."""
    limit = _limits().text if limit is None else limit
    if size > limit:
        raise OverLimit(
            f"{what} would be over {limit:,} characters (or items), the limit of a template's values; make it shorter"
        )


def text_size(value: Any, limit: int | None = None) -> int:
    """About how long ``str(value)`` is, worked out without making it (stops past ``limit``)."""
    limit = _limits().text if limit is None else limit
    if isinstance(value, str):
        return len(value)
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return 24
    if isinstance(value, int):
        return value.bit_length() * 3 // 10 + 2
    attrs = getattr(value, "_Namespace__attrs", None)  # jinja2's namespace(): shown as its mapping
    if isinstance(attrs, dict):
        value = attrs
    if isinstance(value, dict):
        items: Iterable[Any] = (part for pair in value.items() for part in pair)
    elif isinstance(value, list | tuple | set | frozenset):
        items = value
    else:
        return 64  # a macro, a loop, a cycler: a short repr
    total = 2
    for item in items:
        total += text_size(item, limit) + 4
        if total > limit:
            break
    return total


def concat(*parts: Any) -> str:
    """``a ~ b``: each part as text, joined, sized first."""
    bound(sum(text_size(p) for p in parts), "joining with ~")
    return "".join(str(p) for p in parts)


def joined(parts: Iterable[str]) -> str:
    """The text of a block (a macro's body, ``{% set %}...{% endset %}``, ``{% filter %}``), sized
    as it is made: jinja2 joins them with ``Environment.concat``."""
    out, size, limit = [], 0, _limits().text
    for part in parts:
        size += len(part)
        if size > limit:
            bound(size, "the block's text")
        out.append(part)
    return "".join(out)


def counted(iterable: Any) -> Iterator[Any]:
    """A ``{% for %}``'s items, each step checking the time."""
    for item in iterable:
        tick()
        yield item


_SHORT = (str, float, bool, type(None))  # as text: a string itself (sized as built), or short


def finalize(value: Any) -> Any:
    """A ``{{ }}`` value, sized before it becomes text."""
    if type(value) not in _SHORT:
        bound(text_size(value), "the value shown")
    return value


# --- operators ------------------------------------------------------------------------------

MAX_EXPONENT = 10_000
_SEQUENCES = (str, list, tuple)


def check_binop(op: str, left: Any, right: Any) -> None:
    """Refuse ``left op right`` when its result would be over the limits."""
    limits = _limits()
    ints = type(left) is int and type(right) is int
    if op == "**" and isinstance(right, int) and abs(right) > MAX_EXPONENT and abs(left) > 1:
        raise OverLimit(f"an exponent above {MAX_EXPONENT:,} is not allowed in a template")
    if op == "**" and ints and right > 0 and abs(left) > 1 and right * left.bit_length() > limits.int_bits:
        raise OverLimit(f"the power would be over {limits.int_bits:,} bits, the limit of a template's numbers")
    if op == "*" and ints and left.bit_length() + right.bit_length() > limits.int_bits:
        raise OverLimit(f"the product would be over {limits.int_bits:,} bits, the limit of a template's numbers")
    if op == "*":
        for seq, count in ((left, right), (right, left)):
            if isinstance(seq, _SEQUENCES) and isinstance(count, int) and len(seq) * count > limits.text:
                raise OverLimit(f"repeating a value beyond {limits.text:,} items is not allowed")
    if op == "+" and isinstance(left, _SEQUENCES) and isinstance(right, _SEQUENCES):
        bound(len(left) + len(right), "adding with +")
    if op == "%" and isinstance(left, str):
        printf_size(left, right if isinstance(right, tuple | dict) else (right,))


_PRINTF_WIDTH = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?")
_FORMAT_WIDTH = re.compile(r"\{[^{}]*:[^{}]*?(\d+)[^{}]*\}|\{[^{}]*:[^{}]*\{")


def printf_size(fmt: str, args: Any) -> None:
    """Refuse ``fmt % args`` (and ``fmt | format(...)``) whose widths or values are over the limit."""
    values = list(args.values()) if isinstance(args, dict) else list(args)
    size = len(fmt) + _fields_size(fmt.count("%") - 2 * fmt.count("%%"), values)
    for match in _PRINTF_WIDTH.finditer(fmt):
        for written in match.groups():
            if written and written.isdigit():
                size += int(written)
            elif written == "*":  # the width is an argument
                size += sum(v for v in values if type(v) is int and v > 0)
    bound(size, "the formatted text")


def _fields_size(fields: int, values: list[Any]) -> int:
    """The text ``fields`` placeholders make of ``values``: each value once, and the longest again
    for every placeholder beyond them (``'{0}{0}{0}'`` repeats one)."""
    sizes = [text_size(v) for v in values]
    return sum(sizes) + max(0, fields - len(sizes)) * max(sizes, default=0)


def format_size(fmt: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
    """Refuse ``fmt.format(...)`` whose widths or values are over the limit."""
    values = [*args, *kwargs.values()]
    size = len(fmt) + _fields_size(fmt.count("{") - 2 * fmt.count("{{"), values)
    for match in _FORMAT_WIDTH.finditer(fmt):
        if match.group(1):
            size += int(match.group(1))
        else:  # a nested width ({:{w}}): the argument
            size += sum(v for v in values if type(v) is int and v > 0)
    bound(size, "the formatted text")


# --- filters and methods --------------------------------------------------------------------


def _int(value: Any) -> int:
    return value if type(value) is int else 0


def _join(args: list[Any], at: int, separator: Any) -> None:
    """Size a join of ``args[at]`` by ``separator``; the items are read into a list in its place
    (an iterator is read once)."""
    items = list(islice(args[at], _limits().text + 1))
    bound(len(items), "the joined list")
    bound(sum(text_size(i) for i in items) + text_size(separator) * len(items), "the joined text")
    args[at] = items


def _replace(text: Any, old: Any, new: Any, count: Any = None) -> None:
    if isinstance(text, str) and isinstance(old, str) and isinstance(new, str):
        times = text.count(old) if old else len(text) + 1
        if type(count) is int and count >= 0:
            times = min(times, count)
        bound(len(text) + times * (len(new) - len(old)), "the replaced text")


def _padded(text: Any, width: Any = 0, fillchar: Any = " ") -> None:
    bound(max(text_size(text), _int(width)), "the padded text")


def _indent(text: Any, width: Any = 4, first: Any = False, blank: Any = False) -> None:
    per_line = len(width) if isinstance(width, str) else _int(width)
    lines = text.count("\n") + 1 if isinstance(text, str) else 1
    bound(text_size(text) + lines * per_line, "the indented text")


def _wordwrap(
    text: Any, width: Any = 79, break_long_words: Any = True, wrapstring: Any = None, break_on_hyphens: Any = True
) -> None:
    if isinstance(text, str) and isinstance(wrapstring, str):
        breaks = min(len(text), len(text) // max(_int(width), 1) + text.count(" ") + text.count("\n") + 1)
        bound(len(text) + breaks * len(wrapstring), "the wrapped text")


def _counts(*args: Any, **kwargs: Any) -> None:
    """A filter whose numbers are sizes (batch, slice, tojson's indent)."""
    for value in (*args[1:], *kwargs.values()):
        bound(_int(value), "the requested size")


def _sum(items: Any, attribute: Any = None, start: Any = 0) -> None:
    if isinstance(start, _SEQUENCES) or isinstance(items, list | tuple):
        values = items if isinstance(items, list | tuple) else ()
        bound(sum(len(v) for v in (start, *values) if isinstance(v, _SEQUENCES)), "the sum")


def _format(value: Any, *args: Any, **kwargs: Any) -> None:
    if isinstance(value, str):
        printf_size(value, kwargs or args)


def _translate(text: Any, table: Any = None) -> None:
    if isinstance(text, str) and isinstance(table, dict):
        longest = max((text_size(v) for v in table.values() if v is not None), default=1)
        bound(len(text) * max(longest, 1), "the translated text")


_FILTERS: dict[str, Callable[..., None]] = {
    "center": _padded,
    "indent": _indent,
    "replace": _replace,
    "wordwrap": _wordwrap,
    "batch": _counts,
    "slice": _counts,
    "tojson": _counts,
    "sum": _sum,
    "format": _format,
}
_METHODS: dict[str, Callable[..., None]] = {
    "ljust": _padded,
    "rjust": _padded,
    "center": _padded,
    "zfill": _padded,
    "replace": _replace,
    "translate": _translate,
    "expandtabs": lambda text, tabsize=8: bound(len(text) + text.count("\t") * _int(tabsize), "the expanded text"),
}


# filters that make their value text first (``str(value)``): a list of long strings is sized first
_STRINGIFYING = frozenset(
    [
        "string",
        "e",
        "escape",
        "forceescape",
        "tojson",
        "pprint",
        "upper",
        "lower",
        "title",
        "capitalize",
        "trim",
        "striptags",
        "wordcount",
        "urlize",
        "urlencode",
        "truncate",
        "safe",
        "center",
        "indent",
        "wordwrap",
        "replace",
        "format",
    ]
)


_READS = frozenset(["join", *_FILTERS])  # the filters whose arguments are sized before they run


def check_filter(name: str, args: list[Any], kwargs: dict[str, Any]) -> None:
    """Refuse a filter whose result would be over the limits; ``args`` starts with its value
    (a join's items are read into a list in place, so they are read once)."""
    tick()
    if name in _STRINGIFYING and args and not isinstance(args[0], str):
        bound(text_size(args[0]), "the text")
    if name == "join":
        _join(args, 0, kwargs.get("d", args[1] if len(args) > 1 else ""))
        return
    check = _FILTERS.get(name)
    if check is not None:
        check(*args, **kwargs)


def check_call(obj: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    """Refuse a call (a method of a string, ``lipsum``) whose result would be over the limits."""
    tick()
    owner = getattr(getattr(obj, "__wrapped__", obj), "__self__", None)  # the sandbox wraps str.format
    name = getattr(obj, "__name__", "")
    if isinstance(owner, str):
        if name == "join" and args:
            _join(args, 0, owner)
        elif name == "format":
            format_size(owner, tuple(args), kwargs)
        elif name == "format_map" and args and isinstance(args[0], Mapping):
            format_size(owner, (), args[0])
        elif name in _METHODS:
            _METHODS[name](owner, *args, **kwargs)
    elif name == "generate_lorem_ipsum":  # lipsum(n, html, min, max): up to n * max words
        n = kwargs.get("n", args[0] if args else 5)
        most = kwargs.get("max", args[3] if len(args) > 3 else 100)
        bound(_int(n) * _int(most) * 12, "the lorem ipsum text")


def check_result(value: Any, what: str) -> Any:
    """``value`` when its size is within the limit (what a filter or call built)."""
    if isinstance(value, str | list | tuple | dict | set | frozenset):
        bound(len(value), what)
    elif type(value) is int and value.bit_length() > _limits().int_bits:
        raise OverLimit(f"{what} would be over {_limits().int_bits:,} bits, the limit of a template's numbers")
    return value


def sized_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` (a filter) with its arguments and result sized."""
    from jinja2.utils import _PassArg

    passed = 0 if _PassArg.from_obj(func) is None else 1  # a context or environment comes first

    what = f"the {name} filter's result"

    @functools.wraps(func)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        if name in _READS or (name in _STRINGIFYING and not isinstance(args[passed], str)):
            values = list(args[passed:])
            check_filter(name, values, kwargs)
            args = (*args[:passed], *values)
        else:
            tick()
        return check_result(func(*args, **kwargs), what)

    return bounded
