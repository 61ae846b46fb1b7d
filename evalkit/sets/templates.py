"""Jinja2 templates in set files (README "Templates, variables, data files and conversations"), rendered when a set loads.

A string without ``{{``, ``{%`` or ``{#`` is returned as written: a set that uses no templates
pays one substring test per string and never imports jinja2. The others are parsed once per
source (per load) in jinja2's sandboxed environment, with ``StrictUndefined`` (an undefined
variable is an error, not an empty string), no autoescape (a prompt is not HTML), no loader (a
template cannot include or import files) and the trailing newline kept (a templated block
scalar ends like the same text untemplated). Rendering is bounded in time and size (sandbox.py,
README "Templates, variables, data files and conversations"), so a one-line template can neither
loop for hours nor ask for gigabytes: each ``{% for %}`` checks the time at every step and each
``~`` sizes its parts (both put in the parsed tree before it compiles).

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

from evalkit.sets import sandbox
from evalkit.sets.sandbox import Budget, Limits, OverLimit
from evalkit.sets.yamldoc import DataPath

if TYPE_CHECKING:
    from jinja2 import Template
    from jinja2.sandbox import SandboxedEnvironment

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
    from jinja2 import StrictUndefined
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Bounded(ImmutableSandboxedEnvironment):
        """Jinja2's sandbox with every operator, call, look-up and filter bounded (sets/sandbox.py)."""

        intercepted_binops = frozenset({"*", "**", "+", "%"})

        def call_binop(self, context: Any, op: str, left: Any, right: Any) -> Any:
            sandbox.tick()
            sandbox.check_binop(op, left, right)
            return self.binop_table[op](left, right)

        def getattr(self, obj: Any, attribute: str) -> Any:
            sandbox.tick()
            return super().getattr(obj, attribute)

        def getitem(self, obj: Any, argument: Any) -> Any:
            sandbox.tick()
            return super().getitem(obj, argument)

        def call(self, context: Any, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
            values = list(args)
            sandbox.check_call(obj, values, kwargs)
            return sandbox.check_result(super().call(context, obj, *values, **kwargs), "the call's result")

    env = Bounded(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True, finalize=sandbox.finalize)
    env.filters = {name: sandbox.sized_filter(name, func) for name, func in env.filters.items()}
    env.concat = sandbox.joined  # type: ignore[method-assign]  # what joins a block's output
    return env


class Renderer:
    """Renders strings with variables; compiled templates are kept per source for one load."""

    def __init__(self, limits: Limits | None = None) -> None:
        self._compiled: dict[str, _Compiled | TemplateProblem] = {}
        self._budget = Budget(limits or sandbox.LIMITS)  # time and size, for the whole load

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
            except KeyError:
                # a plain name Jinja cannot resolve either (names of its globals take the slow path)
                missing = next(name for _, name in joined.slots if name not in variables)
                raise TemplateProblem(f"'{missing}' is undefined", missing) from None
            return self._counted(out)
        return _render(compiled, variables, self._budget)

    def _counted(self, out: list[str]) -> str:
        """The joined text of ``out``, sized first: a value named many times is as long as many."""
        size = sum(map(len, out))
        try:
            sandbox.bound(size, "the template's text", self._budget.limits.text)
            self._budget.count(size)
        except OverLimit as exc:
            raise TemplateProblem(str(exc)) from None
        return "".join(out)

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

    def request(self, value: Any, variables: Mapping[str, Any]) -> Any:
        """``value`` rendered as ``value`` does, under bounds of its own: an application adapter
        renders one request's body or arguments at a time over a whole run, so what a set's load
        may render in all holds per request (README, "Testing your application")."""
        self._budget = Budget(self._budget.limits)
        return self.value(value, variables)

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
        template = env.from_string(_bounded(tree))
    except TemplateSyntaxError as exc:
        where = f" (line {exc.lineno} of the text)" if "\n" in source.rstrip("\n") else ""
        message = (exc.message or "invalid syntax").rstrip(".")
        return TemplateProblem(f"template syntax error: {message}{where}; {LITERAL_HINT}")
    except RecursionError:  # jinja2 reads and compiles a template recursively
        return TemplateProblem("the template is nested too deeply to read (blocks or brackets); flatten it")
    names = tuple(sorted(free, key=lambda n: (source.find(n), n)))
    return _Compiled(template, joined, names)


def _bounded(tree: Any) -> Any:
    """``tree`` with each ``{% for %}`` checking the time at every step and each ``~`` sized before
    it joins (sets/sandbox.py: ``counted`` and ``concat``)."""
    from jinja2 import nodes
    from jinja2.visitor import NodeTransformer

    def helper(name: str, *args: Any) -> Any:
        return nodes.Call(nodes.ImportedName(f"evalkit.sets.sandbox.{name}"), list(args), [], None, None)

    class Bound(NodeTransformer):
        def visit_For(self, node: Any) -> Any:
            node = self.generic_visit(node)
            node.iter = helper("counted", node.iter)
            return node

        def visit_Concat(self, node: Any) -> Any:
            return helper("concat", *(self.visit(part) for part in node.nodes))

    return Bound().visit(tree)


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


def _render(compiled: _Compiled, variables: Mapping[str, Any], budget: Budget) -> str:
    from jinja2.exceptions import SecurityError, TemplateError, UndefinedError

    try:
        return sandbox.render(compiled.template, variables, budget)
    except OverLimit as exc:
        raise TemplateProblem(str(exc)) from None
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
    except MemoryError:  # what no bound foresaw (sets/sandbox.py sizes what it knows first)
        raise TemplateProblem("the template needs more memory than there is; make it build less") from None
    except (ArithmeticError, LookupError, TypeError, ValueError, AttributeError, RecursionError) as exc:
        # an expression of the template's own went wrong ({{ 1 / 0 }}, {{ 'a' + 1 }}, a filter's input)
        raise TemplateProblem(f"the template failed: {type(exc).__name__}: {exc}") from None
