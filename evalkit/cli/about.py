"""``evalkit --version [--verbose]``: the version; verbose, also what is built in and installed.

Verbose lists the built-in assertion types, provider adapters and retriever kinds (the
registries), and every installed plugin of each entry point group with its distribution and
version; each plugin is imported to say whether it can be used, and one that cannot is listed
with why, never failing the listing (nothing is registered: a listing changes nothing).
"""

from __future__ import annotations

from evalkit._version import __version__

GROUP_TITLES = {
    "evalkit.assertions": "assertion types",
    "evalkit.providers": "provider adapters",
    "evalkit.retrievers": "retriever kinds",
}


def version_lines(verbose: bool) -> list[str]:
    """What ``evalkit --version`` prints, one string per line."""
    lines = [f"evalkit, version {__version__}"]  # click's version_option format, kept
    if verbose:
        lines += built_in_lines() + plugin_lines()
    return lines


def built_in_lines() -> list[str]:
    from evalkit.assertions import registry as assertions
    from evalkit.providers import registry as providers
    from evalkit.retrieval import registry as retrievers

    types = [t.name for t in assertions.types() if t.origin == "evalkit"]
    adapters = [a.name for a in providers.adapters() if a.origin == "evalkit"]
    kinds = [k.name for k in retrievers.kinds() if k.origin == "evalkit"]
    return [
        "built in:",
        f"  assertion types: {', '.join(types)} (each also as not_<type>)",
        f"  provider adapters: {', '.join(adapters)}",
        f"  retriever kinds: {', '.join(kinds)}",
    ]


def plugin_lines() -> list[str]:
    from evalkit import plugins

    statuses = plugins.survey()
    built_in = _built_in_names()
    lines = ["plugins:"]
    for group, title in GROUP_TITLES.items():
        found = [s for s in statuses if s.plugin.group == group]
        if not found:
            lines.append(f"  {group} ({title}): none")
            continue
        lines.append(f"  {group} ({title}):")
        for status in found:
            plugin = status.plugin
            line = f"    {plugin.name}  {plugin.distribution} {plugin.version}"
            if plugin.name in built_in[group]:
                line += "  (not used: a built-in has this name)"
            if status.error:
                line += f"  FAILS TO LOAD: {status.error}"
            lines.append(line)
    failing = sum(1 for s in statuses if s.error)
    if failing:
        lines.append(
            f"{failing} plugin{'s' if failing != 1 else ''} cannot be loaded: a file that uses one is an error"
        )
    return lines


def _built_in_names() -> dict[str, set[str]]:
    from evalkit.assertions import registry as assertions
    from evalkit.providers import registry as providers
    from evalkit.retrieval import registry as retrievers

    types = {t.name for t in assertions.types() if t.origin == "evalkit"}
    return {
        "evalkit.assertions": types | {assertions.NEGATION + t for t in types},
        "evalkit.providers": {a.name for a in providers.adapters() if a.origin == "evalkit"},
        "evalkit.retrievers": {k.name for k in retrievers.kinds() if k.origin == "evalkit"},
    }
