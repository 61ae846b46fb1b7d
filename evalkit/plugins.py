"""Plugins: other packages' assertion types, provider adapters and retriever kinds, found through
entry points (groups ``evalkit.assertions``, ``evalkit.providers``, ``evalkit.retrievers``; the
entry point's name is the type, adapter or kind).

Entry points are read only when a file names something evalkit does not have built in, and only
the named ones are imported: a broken plugin is one error line naming it (its distribution and
what failed) for the files that use it, and nothing at all for the others. The registries
(``evalkit.assertions.registry``, ``evalkit.providers.registry``, ``evalkit.retrieval.registry``)
turn a loaded object into a registered name; this module only finds, imports and checks the shape
of what a group promises: a function for an assertion type, a class with ``from_config(options)``
for an adapter or a retriever kind.

The three registries are each a ``Registry`` of their own records, after inspect_ai's
``_util/registry.py`` (one registry serves every kind): a name is registered once (a second
registration is refused, naming both origins), names keep their registration order, and a lookup
is one dict access (the grader looks up every assertion of every answer). The built-ins register
through the same ``add`` a plugin reaches (README, "Plugins").
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

ASSERTIONS = "evalkit.assertions"
PROVIDERS = "evalkit.providers"
RETRIEVERS = "evalkit.retrievers"
GROUPS = (ASSERTIONS, PROVIDERS, RETRIEVERS)


class PluginError(Exception):
    """A plugin that cannot be loaded; the message names it."""


@dataclass(frozen=True, slots=True)
class Plugin:
    group: str
    name: str
    value: str  # module:attribute
    distribution: str
    version: str

    def describe(self) -> str:
        """``'name' (group, from dist version, module:attribute)``: how an error names it."""
        return f"plugin '{self.name}' ({self.group}, from {self.distribution} {self.version}, {self.value})"


@dataclass(frozen=True, slots=True)
class Status:
    """An installed plugin and, when it cannot be loaded, why (``evalkit --version --verbose``)."""

    plugin: Plugin
    error: str | None = None


@functools.cache
def installed(group: str) -> dict[str, Plugin]:
    """The plugins of ``group`` by name (the first installed wins on a clash)."""
    from importlib.metadata import entry_points

    found: dict[str, Plugin] = {}
    for ep in entry_points(group=group):
        dist = getattr(ep, "dist", None)
        name = str(getattr(dist, "name", None) or "?")
        version = str(getattr(dist, "version", None) or "?")
        found.setdefault(ep.name, Plugin(group, ep.name, ep.value, name, version))
    return found


def load(plugin: Plugin) -> Any:
    """The plugin's object, checked to be what its group promises, or PluginError naming it."""
    from importlib.metadata import EntryPoint

    try:
        loaded = EntryPoint(plugin.name, plugin.value, plugin.group).load()
    except (Exception, SystemExit) as exc:  # a third party's code: any failure is its own, named
        raise PluginError(f"{plugin.describe()} cannot be loaded: {failure(exc)}") from None
    problem = shape_problem(plugin.group, loaded)
    if problem:
        raise PluginError(f"{plugin.describe()} cannot be used: {problem}")
    return loaded


def shape_problem(group: str, loaded: Any) -> str | None:
    """What is wrong with the object an entry point of ``group`` gave, or None."""
    if group == ASSERTIONS:
        return None if callable(loaded) else f"it is {_kind(loaded)}, not a function of (response, context)"
    if group in (PROVIDERS, RETRIEVERS) and not callable(getattr(loaded, "from_config", None)):
        return f"it is {_kind(loaded)} without a from_config(options) method"
    return None


Register = Callable[[str, Any, str], object]  # (name, loaded object, origin)


class Registered(Protocol):
    """What a registry holds: a record with its name and the distribution that registered it."""

    @property
    def name(self) -> str: ...

    @property
    def origin(self) -> str: ...


T = TypeVar("T", bound=Registered)


class Registry(Generic[T]):
    """The records of one kind (``what``: "assertion type", "provider adapter", ...) by name, in
    registration order, and the entry point ``group`` its plugins come from. ``get(name)`` is the
    record or None; it is the dict's own ``get``, so a lookup runs no Python code."""

    __slots__ = ("entries", "get", "group", "what")

    def __init__(self, what: str, group: str) -> None:
        self.what = what
        self.group = group
        self.entries: dict[str, T] = {}
        self.get: Callable[[str], T | None] = self.entries.get

    def add(self, record: T) -> T:
        """Register ``record`` under its name; a name registered twice is refused (ValueError)."""
        held = self.entries.get(record.name)
        if held is not None:
            raise ValueError(f"{self.what} {record.name!r} is registered twice ({held.origin} and {record.origin})")
        self.entries[record.name] = record
        return record

    def __contains__(self, name: object) -> bool:
        return name in self.entries

    def names(self) -> list[str]:
        """The registered names, in registration order."""
        return list(self.entries)

    def records(self) -> list[T]:
        """The registered records, in registration order."""
        return list(self.entries.values())

    def from_plugins(self, wanted: Iterable[str], register: Register) -> dict[str, str]:
        """``register_wanted`` for this registry's group: the plugins among ``wanted`` not
        registered yet, registered through ``register``; the errors of those that failed, by name."""
        return register_wanted(self.group, wanted, self, register)


def register_wanted(
    group: str, wanted: Iterable[str], registered: Container[str], register: Register
) -> dict[str, str]:
    """Register, through ``register(name, object, origin)``, the plugins of ``group`` among
    ``wanted`` that are not ``registered`` yet; the errors of those that failed to load, by name.
    A name no plugin provides is left to the caller."""
    errors: dict[str, str] = {}
    available = installed(group)
    for name in sorted(set(wanted)):
        plugin = available.get(name)
        if plugin is None or name in registered:
            continue
        try:
            register(name, load(plugin), f"{plugin.distribution} {plugin.version}")
        except PluginError as exc:
            errors[name] = str(exc)
    return errors


def summary(obj: Any, description: str, origin: str) -> str:
    """What a plugin's type, adapter or kind is, for listings: the description given, else the
    first line of its docstring, else where it comes from."""
    return description or (getattr(obj, "__doc__", None) or "").strip().split("\n")[0] or f"from {origin}"


def failure(exc: BaseException) -> str:
    """``Type: message`` on one line (a plugin's message may span several)."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def survey() -> list[Status]:
    """Every installed plugin of every group, each loaded to say whether it can be (the registries
    are not touched: nothing is registered)."""
    statuses: list[Status] = []
    for group in GROUPS:
        for name in sorted(installed(group)):
            plugin = installed(group)[name]
            try:
                load(plugin)
            except PluginError as exc:
                statuses.append(Status(plugin, str(exc).removeprefix(plugin.describe()).strip()))
            else:
                statuses.append(Status(plugin))
    return statuses


def _kind(value: Any) -> str:
    if isinstance(value, type):
        return f"the class {value.__name__}"
    return f"a {type(value).__name__}"
