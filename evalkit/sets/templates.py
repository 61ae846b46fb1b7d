"""Jinja2 templates in set files (DESIGN 2.4), rendered when a set loads.

A string without ``{{``, ``{%`` or ``{#`` is returned as written: a set that uses no templates
pays one substring test per string and never imports jinja2. The others are parsed once per
source (per load) in jinja2's sandboxed environment, with ``StrictUndefined`` (an undefined
variable is an error, not an empty string), no autoescape (a prompt is not HTML), no loader (a
template cannot include or import files) and the trailing newline kept (a templated block
scalar ends like the same text untemplated). ``*`` and ``**`` are bounded, so a one-line
template cannot ask for gigabytes.

A template that only substitutes variables (text and ``{{ name }}``, the usual shape of a
data-driven prompt) is rendered by joining its parsed parts with ``str`` of each value, which is
what the code Jinja generates for it does, without building a render context per row: a
100,000-row case file costs a join per string, not a Jinja render. A template naming one of
Jinja's globals (``range``, ``dict`` ...) goes through Jinja itself; an undefined name is the
same error either way.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evalkit.sets.yamldoc import DataPath

if TYPE_CHECKING:
    from jinja2 import Template
    from jinja2.sandbox import SandboxedEnvironment

MAX_REPEAT = 1_000_000  # the longest string or list ``*`` may build
MAX_EXPONENT = 10_000
LITERAL_HINT = "to send the braces as text, write {{ '{{' }} or wrap the text in {% raw %}...{% endraw %}"


def has_template(text: str) -> bool:
    """Whether ``text`` holds Jinja syntax (and so is rendered)."""
    return "{" in text and ("{{" in text or "{%" in text or "{#" in text)


class TemplateProblem(Exception):
    """A string failed to render; ``missing`` names an undefined variable when that is why,
    ``path`` locates the string inside a rendered value (an assertion's mapping or list)."""

    def __init__(self, message: str, missing: str | None = None, path: DataPath = ()) -> None:
        super().__init__(message)
        self.message = message
        self.missing = missing
        self.path = path

    def within(self, part: str | int) -> TemplateProblem:
        return TemplateProblem(self.message, self.missing, (part, *self.path))

    def describe(self, hint: str) -> str:
        """The message for a user: an undefined variable with ``hint`` (where to define it)."""
        if self.missing is not None:
            return f"undefined variable '{self.missing}' in the template; {hint}"
        return self.message


@dataclass(frozen=True, slots=True)
class _Joined:
    """A template of text and variable names: ``parts`` with the names at ``slots``."""

    parts: tuple[str, ...]
    slots: tuple[tuple[int, str], ...]


@dataclass(frozen=True, slots=True)
class _Compiled:
    template: Template
    joined: _Joined | None  # the fast path, when the template is only text and names
    names: tuple[str, ...]  # the free variables, in order of first use


@functools.cache
def _environment() -> SandboxedEnvironment:
    import operator

    from jinja2 import StrictUndefined
    from jinja2.exceptions import SecurityError
    from jinja2.sandbox import SandboxedEnvironment

    class Bounded(SandboxedEnvironment):
        intercepted_binops = frozenset({"*", "**"})

        def call_binop(self, context: Any, op: str, left: Any, right: Any) -> Any:
            if op == "**" and isinstance(right, int) and abs(right) > MAX_EXPONENT and abs(left) > 1:
                raise SecurityError(f"an exponent above {MAX_EXPONENT:,} is not allowed in a template")
            if op == "*":
                for seq, count in ((left, right), (right, left)):
                    if isinstance(seq, str | list | tuple) and isinstance(count, int) and len(seq) * count > MAX_REPEAT:
                        raise SecurityError(f"repeating a value beyond {MAX_REPEAT:,} items is not allowed")
                return operator.mul(left, right)
            return super().call_binop(context, op, left, right)

    return Bounded(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)


class Renderer:
    """Renders strings with variables; compiled templates are kept per source for one load."""

    def __init__(self) -> None:
        self._compiled: dict[str, _Compiled | TemplateProblem] = {}

    def text(self, source: str, variables: Mapping[str, Any]) -> str:
        """``source`` rendered (itself when it holds no template); TemplateProblem otherwise."""
        if not has_template(source):
            return source
        compiled = self._compiled.get(source)
        if compiled is None:
            compiled = self._compiled[source] = _compile(source)
        if isinstance(compiled, TemplateProblem):
            raise compiled
        joined = compiled.joined
        if joined is not None:
            try:
                out = list(joined.parts)
                for index, name in joined.slots:
                    out[index] = str(variables[name])
                return "".join(out)
            except KeyError:
                # a plain name Jinja cannot resolve either (names of its globals take the slow path)
                missing = next(name for _, name in joined.slots if name not in variables)
                raise TemplateProblem(f"'{missing}' is undefined", missing) from None
        return _render(compiled, variables)

    def syntax(self, value: Any) -> TemplateProblem | None:
        """The first template syntax error among the strings of ``value`` (what no variables can
        fix, so it is said once where the template is written), or None."""
        if isinstance(value, str):
            if not has_template(value):
                return None
            compiled = self._compiled.get(value)
            if compiled is None:
                compiled = self._compiled[value] = _compile(value)
            return compiled if isinstance(compiled, TemplateProblem) else None
        parts = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for part, item in parts:
            found = self.syntax(item)
            if found is not None:
                return found.within(part)
        return None

    def value(self, value: Any, variables: Mapping[str, Any]) -> Any:
        """Every string inside ``value`` (a list or mapping: its values, not its keys) rendered;
        ``value`` itself when nothing in it is a template."""
        if isinstance(value, str):
            return self.text(value, variables)
        if isinstance(value, list):
            out = []
            for index, item in enumerate(value):
                try:
                    out.append(self.value(item, variables))
                except TemplateProblem as exc:
                    raise exc.within(index) from None
            return value if all(a is b for a, b in zip(out, value, strict=True)) else out
        if isinstance(value, dict):
            rendered = {}
            for key, item in value.items():
                try:
                    rendered[key] = self.value(item, variables)
                except TemplateProblem as exc:
                    raise exc.within(key) from None
            return value if all(rendered[k] is v for k, v in value.items()) else rendered
        return value


def templated(value: Any) -> bool:
    """Whether any string inside ``value`` holds a template."""
    if isinstance(value, str):
        return has_template(value)
    if isinstance(value, list):
        return any(templated(v) for v in value)
    if isinstance(value, dict):
        return any(templated(v) for v in value.values())
    return False


def _compile(source: str) -> _Compiled | TemplateProblem:
    from jinja2 import meta
    from jinja2.exceptions import TemplateSyntaxError

    env = _environment()
    try:
        tree = env.parse(source)
        free = meta.find_undeclared_variables(tree)
        joined = _joined(tree)  # read before compiling: the code generator may rewrite nodes
        template = env.from_string(tree)
    except TemplateSyntaxError as exc:
        where = f" (line {exc.lineno} of the text)" if "\n" in source.rstrip("\n") else ""
        message = (exc.message or "invalid syntax").rstrip(".")
        return TemplateProblem(f"template syntax error: {message}{where}; {LITERAL_HINT}")
    names = tuple(sorted(free, key=lambda n: (source.find(n), n)))
    return _Compiled(template, joined, names)


def _joined(tree: Any) -> _Joined | None:
    """The fast path of a parsed template that is one output of text and variable names."""
    from jinja2 import nodes

    body = tree.body
    if len(body) != 1 or not isinstance(body[0], nodes.Output):
        return None
    parts: list[str] = []
    slots: list[tuple[int, str]] = []
    for node in body[0].nodes:
        if isinstance(node, nodes.TemplateData):
            parts.append(node.data)
        elif isinstance(node, nodes.Name) and node.ctx == "load" and node.name not in _environment().globals:
            slots.append((len(parts), node.name))
            parts.append("")
        else:
            return None
    return _Joined(tuple(parts), tuple(slots))


def _render(compiled: _Compiled, variables: Mapping[str, Any]) -> str:
    from jinja2.exceptions import SecurityError, TemplateError, UndefinedError

    try:
        return compiled.template.render(variables)
    except UndefinedError as exc:
        env = _environment()
        missing = [n for n in compiled.names if n not in variables and n not in env.globals]
        if missing:
            raise TemplateProblem(str(exc), missing[0]) from None
        raise TemplateProblem(f"undefined value in the template: {exc}") from None
    except SecurityError as exc:
        raise TemplateProblem(f"not allowed in the template sandbox: {exc}") from None
    except TemplateError as exc:
        raise TemplateProblem(f"the template failed: {exc}") from None
    except (ArithmeticError, LookupError, TypeError, ValueError, AttributeError, RecursionError) as exc:
        # an expression of the template's own went wrong ({{ 1 / 0 }}, {{ 'a' + 1 }}, a filter's input)
        raise TemplateProblem(f"the template failed: {type(exc).__name__}: {exc}") from None
