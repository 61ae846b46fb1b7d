"""Render promptfoo's Nunjucks templates with Jinja2, where the two languages agree.

Nunjucks is a JavaScript port of Jinja2: variables, ``if``/``for``/``set``, ``raw``, comments and
whitespace control read alike. What differs is refused with the construct named
(``TemplateMismatch``), never rendered with a different meaning:

- filters outside the agreed set (``AGREED_FILTERS``; ``dump`` and promptfoo's ``load`` are
  provided with JavaScript's JSON.stringify / JSON.parse meaning), tests outside ``AGREED_TESTS``;
- method calls (``name.toUpperCase()``), ``for k, v in obj`` (Nunjucks unpacks objects, Jinja2
  does not), ``include``/``import``/``extends``/``macro``/``call``/``filter`` blocks;
- the ``env`` global (promptfoo exposes environment variables to templates: an imported set must
  not copy a machine's environment, secrets included, into a file);
- attribute access on a string, list or number other than ``.length`` (JavaScript properties).

Values print as JavaScript's String() does (``true``, ``1`` for 1.0, ``a,b`` for a list, nothing
for null), an empty list or mapping is true (as in JavaScript), an undefined variable prints as
nothing (Nunjucks' default), a mapping's ``.key`` reads
the key (never a Python method), and a negative index is undefined, as in JavaScript. Nunjucks'
``elseif`` is read as ``elif``. Rendering runs in Jinja2's sandbox.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jinja2 import Template, nodes
    from jinja2.sandbox import SandboxedEnvironment

AGREED_FILTERS = frozenset(
    ("abs", "capitalize", "d", "default", "first", "float", "int", "join", "last", "length", "list", "lower",
     "replace", "reverse", "safe", "sort", "sum", "trim", "upper", "dump", "load")
)  # fmt: skip
AGREED_TESTS = frozenset(
    ("callable", "defined", "divisibleby", "equalto", "even", "iterable", "lower", "mapping", "number", "odd",
     "string", "undefined", "upper")
)  # fmt: skip
_BLOCKS = {"Include": "include", "Import": "import", "FromImport": "import", "Extends": "extends",
           "Macro": "macro", "CallBlock": "call", "FilterBlock": "filter", "Block": "block"}  # fmt: skip
_ELSEIF = re.compile(r"\{%(-?)(\s*)elseif\b")


class TemplateMismatch(ValueError):
    """The template uses Nunjucks that Jinja2 does not read alike (or cannot be read at all)."""


@dataclass(frozen=True, slots=True)
class Rendered:
    text: str
    undefined: tuple[str, ...]  # variables the template reads that were not given (printed as nothing)


def js_string(value: Any) -> str:
    """``value`` as JavaScript's String() prints it (null and undefined as Nunjucks: nothing)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _js_number(value)
    if isinstance(value, list | tuple):
        return ",".join(js_string(v) for v in value)
    if isinstance(value, Mapping):
        return "[object Object]"
    return str(value)


def _js_number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "0"
    # Number::toString: the shortest digits that round-trip (repr's), placed as ECMA-262 says
    _, digit_tuple, exponent = Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    k = len(digits)
    n = k + int(exponent)
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = f"{digits[:n]}.{digits[n:]}"
    elif -6 < n <= 0:
        text = f"0.{'0' * -n}{digits}"
    else:
        mantissa = digits if k == 1 else f"{digits[0]}.{digits[1:]}"
        text = f"{mantissa}e{'+' if n - 1 >= 0 else '-'}{abs(n - 1)}"
    return f"-{text}" if value < 0 else text


def _js_json(value: Any) -> Any:
    """``value`` with whole floats as integers, as JSON.stringify writes them."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    if isinstance(value, list | tuple):
        return [_js_json(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _js_json(v) for k, v in value.items()}
    return value


def dump(value: Any, indent: int | None = None) -> str:
    """Nunjucks' ``dump``: JSON.stringify(value, null, indent)."""
    separators = (",", ": ") if indent else (",", ":")
    return json.dumps(_js_json(value), ensure_ascii=False, indent=indent or None, separators=separators)


def load(text: Any) -> Any:
    """promptfoo's ``load`` filter: JSON.parse."""
    try:
        return json.loads(str(text))
    except json.JSONDecodeError as exc:
        raise TemplateMismatch(f"load: not JSON ({exc.msg})") from None
    except RecursionError:
        raise TemplateMismatch("load: JSON nested too deeply to read; flatten it") from None


def _listish(value: Any, name: str) -> Any:
    if not isinstance(value, list | tuple):
        raise TemplateMismatch(f"'{name}' of {js_string(value)!r}: Nunjucks fails on what is not a list")
    return value


def join(value: Any, separator: str = "", attribute: str | None = None) -> str:
    """Nunjucks' ``join``: Array.join (a string or number is an error there)."""
    items = _listish(value, "join")
    if attribute is not None:
        items = [item.get(attribute) if isinstance(item, Mapping) else None for item in items]
    return str(separator).join("" if item is None else js_string(item) for item in items)


def total(value: Any, attribute: str | None = None, start: Any = 0) -> Any:
    """Nunjucks' ``sum`` (of a list only)."""
    items = _listish(value, "sum")
    if attribute is not None:
        items = [item.get(attribute) if isinstance(item, Mapping) else None for item in items]
    result = start
    for item in items:
        result = result + item
    return result


def reverse(value: Any) -> Any:
    """Nunjucks' ``reverse``: a string reversed, or a reversed copy of a list."""
    if isinstance(value, str):
        return value[::-1]
    return list(reversed(_listish(value, "reverse")))


_INT = re.compile(r"\s*([+-]?\d+)")
_FLOAT = re.compile(r"\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[+-]?Infinity)")


def to_int(value: Any, default: Any = None) -> Any:
    """Nunjucks' ``int``: parseInt(String(value), 10), the default when that is NaN."""
    found = _INT.match(js_string(value))
    return int(found.group(1)) if found else default


def to_float(value: Any, default: Any = None) -> Any:
    """Nunjucks' ``float``: parseFloat(String(value)), the default when that is NaN."""
    found = _FLOAT.match(js_string(value))
    return float(found.group(1).replace("Infinity", "inf")) if found else default


def render(source: str, variables: Mapping[str, Any]) -> Rendered:
    """``source`` rendered with ``variables``; TemplateMismatch when Jinja2 would read it otherwise."""
    from jinja2 import TemplateError
    from jinja2.exceptions import SecurityError

    if "{" not in source:
        return Rendered(source, ())
    template, names = _compiled(source)
    undefined = tuple(sorted(names - set(variables)))
    try:
        text = template.render({name: _js_value(value) for name, value in variables.items()})
    except (TemplateError, SecurityError, TypeError, ValueError, ArithmeticError, LookupError, RecursionError) as exc:
        if isinstance(exc, TemplateMismatch):
            raise
        raise TemplateMismatch(f"rendering failed: {type(exc).__name__}: {exc}") from None
    return Rendered(text, undefined)


@functools.lru_cache(maxsize=1024)
def _compiled(source: str) -> tuple[Template, frozenset[str]]:
    """The template checked and compiled once (every row of a data file renders the same prompt),
    with the variables it reads."""
    from jinja2 import TemplateError, meta

    env = _environment()
    try:
        tree = env.parse(_ELSEIF.sub(r"{%\1\2elif", source))
    except TemplateError as exc:
        raise TemplateMismatch(f"not a template Jinja2 reads: {exc}") from None
    _check(tree)
    return env.from_string(tree), frozenset(meta.find_undeclared_variables(tree))


class _JsArray(list[Any]):
    """A list that is true when empty, as a JavaScript array is."""

    def __bool__(self) -> bool:
        return True


class _JsObject(dict[str, Any]):
    """A mapping that is true when empty, as a JavaScript object is."""

    def __bool__(self) -> bool:
        return True


def _js_value(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return _JsArray(_js_value(v) for v in value)
    if isinstance(value, Mapping):
        return _JsObject({k: _js_value(v) for k, v in value.items()})
    return value


def _check(tree: nodes.Template) -> None:
    from jinja2 import nodes

    for node in tree.find_all(nodes.Node):
        kind = type(node).__name__
        if kind in _BLOCKS:
            raise TemplateMismatch(f"'{_BLOCKS[kind]}' is not converted")
        if isinstance(node, nodes.Filter) and node.name not in AGREED_FILTERS:
            raise TemplateMismatch(f"filter '{node.name}' is not read alike by Nunjucks and Jinja2")
        if isinstance(node, nodes.Test) and node.name not in AGREED_TESTS:
            raise TemplateMismatch(f"test 'is {node.name}' is not read alike by Nunjucks and Jinja2")
        if isinstance(node, nodes.For) and not isinstance(node.target, nodes.Name):
            raise TemplateMismatch("'for a, b in ...' unpacks differently in Nunjucks (objects) and Jinja2")
        if isinstance(node, nodes.Call) and not (isinstance(node.node, nodes.Name) and node.node.name == "range"):
            raise TemplateMismatch("function and method calls are not converted (only range())")
        if isinstance(node, nodes.Name) and node.name == "env" and node.ctx == "load":
            raise TemplateMismatch("'env' reads environment variables; put the values in vars instead")


_ENV: list[SandboxedEnvironment] = []


def _js_property(env: SandboxedEnvironment, obj: Any, name: str, undefined: type[Any]) -> Any:
    """``obj.name`` as Nunjucks reads it: a key of an object, a list's or string's length, else
    undefined on undefined; any other property is JavaScript's own and refused."""
    if isinstance(obj, undefined):
        return obj
    if isinstance(obj, Mapping):
        return obj[name] if name in obj else env.undefined(obj=obj, name=name)
    if isinstance(obj, list | str) and name == "length":
        return len(obj)
    shown = "a string" if isinstance(obj, str) else "a list" if isinstance(obj, list) else "a value"
    raise TemplateMismatch(f"'.{name}' of {shown} is a JavaScript property Jinja2 does not have")


def _environment() -> SandboxedEnvironment:
    if _ENV:
        return _ENV[0]
    from jinja2 import Undefined
    from jinja2.sandbox import SandboxedEnvironment

    class JsUndefined(Undefined):
        """Prints as nothing, and reads on as undefined, like JavaScript's undefined in Nunjucks."""

        __slots__ = ()

        def __str__(self) -> str:
            return ""

        def __getattr__(self, name: str) -> Any:
            if name.startswith("__"):
                raise AttributeError(name)
            return self

        def __getitem__(self, key: Any) -> Any:
            return self

    class NunjucksEnvironment(SandboxedEnvironment):
        def getattr(self, obj: Any, attribute: str) -> Any:
            if not isinstance(obj, Undefined | Mapping | list | str | int | float):  # loop, range: Jinja2's own
                return super().getattr(obj, attribute)
            return self._lookup(obj, attribute)

        def getitem(self, obj: Any, argument: Any) -> Any:
            if isinstance(argument, str):
                if not isinstance(obj, Undefined | Mapping | list | str | int | float):
                    return super().getitem(obj, argument)
                return self._lookup(obj, argument)
            if isinstance(obj, list | str) and isinstance(argument, int) and not isinstance(argument, bool):
                return obj[argument] if 0 <= argument < len(obj) else self.undefined(obj=obj, name=str(argument))
            return self.undefined(obj=obj, name=str(argument))

        def _lookup(self, obj: Any, name: str) -> Any:
            return _js_property(self, obj, name, Undefined)

    env = NunjucksEnvironment(autoescape=False, keep_trailing_newline=True, undefined=JsUndefined, finalize=js_string)
    env.filters = {name: f for name, f in env.filters.items() if name in AGREED_FILTERS}
    env.filters.update(dump=dump, load=load, join=join, sum=total, int=to_int, float=to_float, reverse=reverse)
    env.tests = {name: t for name, t in env.tests.items() if name in AGREED_TESTS}
    env.globals = {"range": env.globals["range"]}
    _ENV.append(env)
    return env
