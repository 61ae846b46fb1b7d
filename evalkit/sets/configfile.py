"""Load evalkit.yaml into a Config, validated like set files (schema, then cross-references).

An adapter or retriever kind the schema does not know (the built-ins are its enums, tested equal
to the registries) may be a plugin's: only then are entry points read, and the named plugin is
imported to check it can be used (an import error, or an object without ``from_config``, is one
issue at the ``adapter:`` / ``kind:`` naming it). A plugin's entry is checked only for the keys
evalkit reads itself (the schema's ``x-plugin-keys``); every other key, with the ``id``, is the
``options`` its ``from_config`` is given.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

from evalkit import plugins
from evalkit.config import (
    APPLICATION_ADAPTERS,
    EMBEDDING_ADAPTERS,
    Config,
    Cost,
    ProviderConfig,
    RetrieverConfig,
    find_config,
)
from evalkit.errors import Issue, SetError
from evalkit.sets.appcheck import application_issues
from evalkit.sets.templates import Renderer
from evalkit.sets.validation import ConfigPlugins, load_schema, schema_issues
from evalkit.sets.yamldoc import Document, duplicate_ids, load_document
from evalkit.urls import Endpoint, redacted

URL_START = re.compile(r"(?i)https?://")
# (section, schema definition, the key naming its implementation, entry point group)
PLUGGABLE = (
    ("providers", "provider", "adapter", plugins.PROVIDERS),
    ("retrievers", "retriever", "kind", plugins.RETRIEVERS),
)


def built_in(definition: str) -> list[str]:
    """The built-in adapters (``provider``) or retriever kinds (``retriever``): the schema's enum."""
    entry = load_schema("config")["$defs"][definition]
    key = "adapter" if definition == "provider" else "kind"
    return list(entry["properties"][key]["enum"])


def evalkit_keys(definition: str) -> frozenset[str]:
    """The keys of a plugin's entry that evalkit reads itself (the rest are the plugin's)."""
    return frozenset(load_schema("config")["$defs"][definition]["x-plugin-keys"])


def load_config(explicit: str | Path | None = None) -> Config:
    """The project config (found per ``evalkit.config.find_config``), or an empty one."""
    path = find_config(explicit)
    if path is None:
        return Config()
    doc = load_document(path)
    issues = config_issues(doc)
    if issues:
        raise SetError(issues)
    return build_config(doc, path)


def config_issues(doc: Document) -> list[Issue]:
    if doc.data is None:
        return []  # an empty evalkit.yaml is a valid, empty config
    data = doc.data if isinstance(doc.data, dict) else {}
    issues, accepted = _plugin_issues(doc, data)
    issues += schema_issues("config", doc, plugins=accepted)
    duplicates, ids = duplicate_ids(doc, "providers")
    issues.extend(duplicates)
    issues.extend(_reference_issues(doc, data, ids))
    issues.extend(_embeddings_issues(doc, data, ids))
    issues.extend(duplicate_ids(doc, "retrievers")[0])
    issues.extend(_retriever_issues(doc, data))
    issues.extend(_url_issues(doc, data))
    issues.extend(_transport_issues(doc, data))
    issues.extend(application_issues(doc, data))
    return sorted(issues, key=lambda i: (i.line, i.col))


def _reference_issues(doc: Document, data: dict[str, Any], ids: set[str]) -> list[Issue]:
    """Every provider instance named (a fallback, the default, the decision grader's) is configured."""
    issues: list[Issue] = []
    for index, provider in enumerate(data.get("providers") or []):
        if not isinstance(provider, dict):
            continue
        fallback = provider.get("fallback")
        if isinstance(fallback, str) and fallback not in ids:
            known = ", ".join(sorted(ids)) or "none configured"
            issues.append(
                doc.issue(("providers", index, "fallback"), f"unknown provider instance '{fallback}' (known: {known})")
            )
        elif fallback is not None and fallback == provider.get("id"):
            issues.append(doc.issue(("providers", index, "fallback"), "an instance cannot fall back to itself"))
    named: list[tuple[tuple[str, ...], Any]] = [(("default_provider",), data.get("default_provider"))]
    for section in ("decision", "judge"):  # the graders' instances (embeddings: _embeddings_issues)
        block = data.get(section)
        named.append(((section, "provider"), block.get("provider") if isinstance(block, dict) else None))
    for path, value in named:
        if isinstance(value, str) and value not in ids:
            known = ", ".join(sorted(ids)) or "none configured"
            issues.append(doc.issue(path, f"unknown provider instance '{value}' (known: {known})"))
    return issues


def _embeddings_issues(doc: Document, data: dict[str, Any], ids: set[str]) -> list[Issue]:
    """``embeddings: {provider: ID}`` names a configured instance whose adapter can embed
    (README "Embeddings": openai or local)."""
    section = data.get("embeddings")
    wanted = section.get("provider") if isinstance(section, dict) else None
    if not isinstance(wanted, str):
        return []  # absent, or the schema's to say
    path = ("embeddings", "provider")
    if wanted not in ids:
        known = ", ".join(sorted(ids)) or "none configured"
        return [doc.issue(path, f"unknown provider instance '{wanted}' (known: {known})")]
    adapters = [p.get("adapter") for p in data.get("providers") or [] if isinstance(p, dict) and p.get("id") == wanted]
    adapter = adapters[0] if adapters else None
    if isinstance(adapter, str) and adapter not in EMBEDDING_ADAPTERS:
        return [
            doc.issue(
                path,
                f"provider instance '{wanted}' (adapter {adapter}) cannot embed texts: name an instance with "
                "adapter openai (an OpenAI-compatible /embeddings endpoint and an embedding model:) or local",
            )
        ]
    return []


def _retriever_issues(doc: Document, data: dict[str, Any]) -> list[Issue]:
    """A retriever keeps off the built-in's id, and its command splits as a shell would."""
    issues: list[Issue] = []
    for index, retriever in enumerate(data.get("retrievers") or []):
        if not isinstance(retriever, dict):
            continue
        if retriever.get("id") == "lexical" and retriever.get("kind") not in (None, "lexical"):
            issues.append(
                doc.issue(
                    ("retrievers", index, "id"), "the id 'lexical' is the built-in BM25 retriever; choose another id"
                )
            )
        command = retriever.get("command")
        if isinstance(command, str) and not _is_plugin(retriever, "retriever"):
            try:
                shlex.split(command)
            except ValueError as exc:
                issues.append(
                    doc.issue(("retrievers", index, "command"), f"cannot split the command ({exc}); check its quoting")
                )
    return issues


def _url_issues(doc: Document, data: dict[str, Any]) -> list[Issue]:
    """Every endpoint URL of a built-in provider or retriever is one evalkit can call."""
    issues: list[Issue] = []
    for section, key in (("providers", "base_url"), ("providers", "url"), ("retrievers", "url")):
        for index, entry in enumerate(data.get(section) or []):
            url = entry.get(key) if isinstance(entry, dict) and not _is_plugin(entry, section[:-1]) else None
            if isinstance(url, str) and URL_START.match(url):  # the schema speaks of other strings
                try:
                    Endpoint.parse(url)
                except ValueError as exc:
                    issues.append(doc.issue((section, index, key), f"{redacted(url)!r} is not a usable URL ({exc})"))
    return issues


def _plugin_issues(doc: Document, data: dict[str, Any]) -> tuple[list[Issue], ConfigPlugins | None]:
    """One issue per plugin named that cannot be used (at its first use), and the plugin names
    the schema is to accept; None when every adapter and kind named is built in."""
    issues: list[Issue] = []
    accepted: dict[str, tuple[str, ...]] = {}
    for section, definition, key, group in PLUGGABLE:
        own = set(built_in(definition))
        first_use: dict[str, int] = {}
        entries = data.get(section)
        for index, entry in enumerate(entries if isinstance(entries, list) else []):
            name = entry.get(key) if isinstance(entry, dict) else None
            if isinstance(name, str) and name not in own:
                first_use.setdefault(name, index)
        if not first_use:
            continue
        available = {n: p for n, p in plugins.installed(group).items() if n not in own}  # a built-in wins
        accepted[key] = tuple(sorted(available))
        for name, index in first_use.items():
            if name in available:  # else the schema's enum says it is unknown
                try:
                    plugins.load(available[name])
                except plugins.PluginError as exc:
                    issues.append(doc.issue((section, index, key), str(exc)))
    if not accepted:
        return issues, None
    return issues, ConfigPlugins(accepted.get("adapter", ()), accepted.get("kind", ()))


def _is_plugin(entry: Any, definition: str) -> bool:
    key = "adapter" if definition == "provider" else "kind"
    return isinstance(entry, dict) and isinstance(entry.get(key), str) and entry[key] not in built_in(definition)


def _transport_issues(doc: Document, data: dict[str, Any]) -> list[Issue]:
    """A provider's proxy (its credentials never shown) and ca_bundle (a file, relative to the config)."""
    issues: list[Issue] = []
    root = Path(doc.file).parent
    for index, entry in enumerate(data.get("providers") or []):
        if not isinstance(entry, dict) or _is_plugin(entry, "provider"):  # its keys are the plugin's
            continue
        proxy = entry.get("proxy")
        if isinstance(proxy, str) and URL_START.match(proxy):
            try:
                Endpoint.parse(proxy, userinfo=True)
            except ValueError as exc:
                issues.append(
                    doc.issue(("providers", index, "proxy"), f"{redacted(proxy)!r} is not a usable URL ({exc})")
                )
        bundle = entry.get("ca_bundle")
        if isinstance(bundle, str) and bundle and not (root / bundle).is_file():
            issues.append(
                doc.issue(
                    ("providers", index, "ca_bundle"),
                    f"no CA bundle file at {bundle!r} (relative to {Path(doc.file).name}); name a PEM file",
                )
            )
    return issues


def build_config(doc: Document, path: Path) -> Config:
    data: dict[str, Any] = doc.data or {}
    root = path.parent
    return Config(
        path=path,
        db=Path(data["db"]) if "db" in data else None,
        sets=tuple(root / s for s in data.get("sets", [])),
        privacy=data.get("privacy", "metadata"),
        retention_days=data.get("retention_days", 90),
        default_provider=data.get("default_provider"),
        decision_provider=(data.get("decision") or {}).get("provider"),
        judge_provider=(data.get("judge") or {}).get("provider"),
        embeddings_provider=(data.get("embeddings") or {}).get("provider"),
        cache=data.get("cache", True),
        cache_ttl_days=data.get("cache_ttl_days", 30),
        batch_poll_s=float(data.get("batch_poll_s", 60.0)),
        baselines=Path(data["baselines"]) if "baselines" in data else None,
        providers=tuple(
            _provider(p, root, _where(doc, ("providers", i, "adapter")))
            for i, p in enumerate(data.get("providers", []))
        ),
        retrievers=tuple(
            _retriever(r, root, _where(doc, ("retrievers", i, "kind")))
            for i, r in enumerate(data.get("retrievers", []))
        ),
    )


def _where(doc: Document, path: tuple[str | int, ...]) -> str:
    line, col = doc.position(path)
    return f"{doc.file}:{line}:{col}"


def _plugin_options(raw: dict[str, Any], definition: str) -> dict[str, Any]:
    """A plugin's ``options``: its ``id`` and every key evalkit does not read itself."""
    ours = evalkit_keys(definition)
    return {"id": raw["id"], **{k: v for k, v in raw.items() if k not in ours}}


def _cost(cost: dict[str, Any] | None) -> Cost | None:
    if not cost:
        return None
    return Cost(cost.get("input_per_mtok", 0.0), cost.get("output_per_mtok", 0.0), cost.get("batch_discount", 0.5))


def _provider(raw: dict[str, Any], root: Path, where: str) -> ProviderConfig:
    cost = raw.get("cost")
    defaults = ProviderConfig(id=raw["id"], adapter=raw["adapter"])
    if _is_plugin(raw, "provider"):
        return ProviderConfig(
            id=raw["id"],
            adapter=raw["adapter"],
            model=raw.get("model"),
            priority=raw.get("priority", 0),
            cost=_cost(cost),
            max_concurrency=raw.get("max_concurrency", defaults.max_concurrency),
            fallback=raw.get("fallback"),
            options=_plugin_options(raw, "provider"),
            where=where,
        )
    return ProviderConfig(
        id=raw["id"],
        adapter=raw["adapter"],
        model=raw.get("model"),
        base_url=raw.get("base_url"),
        api_key_env=raw.get("api_key_env"),
        priority=raw.get("priority", 0),
        cost=_cost(cost),
        max_concurrency=raw.get("max_concurrency", defaults.max_concurrency),
        timeout_s=float(raw.get("timeout_s", defaults.timeout_s)),
        max_retries=raw.get("max_retries", defaults.max_retries),
        retry_backoff_s=float(raw.get("retry_backoff_s", defaults.retry_backoff_s)),
        fallback=raw.get("fallback"),
        path=root / raw["path"] if "path" in raw else None,
        model_path=root / raw["model_path"] if "model_path" in raw else None,
        threads=raw.get("threads"),
        n_ctx=raw.get("n_ctx", defaults.n_ctx),
        temperature=float(raw.get("temperature", defaults.temperature)),
        seed=raw.get("seed", defaults.seed),
        headers=dict(raw.get("headers", {})),
        max_response_mb=float(raw.get("max_response_mb", defaults.max_response_mb)),
        proxy=raw.get("proxy"),
        ca_bundle=root / raw["ca_bundle"] if "ca_bundle" in raw else None,
        where=where,
        url=raw.get("url"),
        method=raw.get("method", defaults.method),
        body=raw.get("body"),
        response=dict(raw.get("response", {})),
        function=raw.get("function"),
        command=raw.get("command"),
        cache=raw.get("cache"),
        root=root if raw["adapter"] in APPLICATION_ADAPTERS else None,
        render=Renderer().request if raw["adapter"] in APPLICATION_ADAPTERS else None,
    )


def _retriever(raw: dict[str, Any], root: Path, where: str) -> RetrieverConfig:
    if _is_plugin(raw, "retriever"):
        return RetrieverConfig(
            id=raw["id"],
            kind=raw["kind"],
            provenance=dict(raw.get("provenance", {})),
            options=_plugin_options(raw, "retriever"),
            cwd=root,
            where=where,
        )
    options: dict[str, Any] = {k: raw[k] for k in ("language", "stemming", "k1", "b") if k in raw}
    return RetrieverConfig(
        id=raw["id"],
        kind=raw["kind"],
        url=raw.get("url"),
        command=raw.get("command"),
        provenance=dict(raw.get("provenance", {})),
        timeout_s=float(raw.get("timeout_s", 30.0)),
        max_retries=raw.get("max_retries", 4),
        retry_backoff_s=float(raw.get("retry_backoff_s", 0.5)),
        options=options,
        cwd=root,
        where=where,
    )
