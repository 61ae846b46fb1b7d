"""Plugins: other packages' assertion types, provider adapters and retriever kinds, found through
entry points (groups ``evalkit.assertions``, ``evalkit.providers``, ``evalkit.retrievers``; the
entry point's name is the type, adapter or kind).

Entry points are read only when a file names something evalkit does not have built in, and only
the named ones are imported: a broken plugin is one error line naming it (its distribution and
what failed) for the sets that use it, and nothing at all for the others.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

GROUPS = ("evalkit.assertions", "evalkit.providers", "evalkit.retrievers")


class PluginError(Exception):
    """A plugin that cannot be loaded; the message names it."""


@dataclass(frozen=True, slots=True)
class Plugin:
    group: str
    name: str
    value: str  # module:attribute
    distribution: str
    version: str


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
    """The plugin's object, or PluginError naming it."""
    from importlib.metadata import EntryPoint

    try:
        return EntryPoint(plugin.name, plugin.value, plugin.group).load()
    except Exception as exc:  # a third party's code: any failure is its own, named
        raise PluginError(
            f"plugin '{plugin.name}' ({plugin.group}, from {plugin.distribution} {plugin.version}, "
            f"{plugin.value}) cannot be loaded: {type(exc).__name__}: {exc}"
        ) from None
