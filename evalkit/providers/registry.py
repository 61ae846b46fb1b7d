"""The registry of provider adapters (README "Plugins").

Each adapter is registered by name with what evalkit asks of an instance of it:

- ``build(config)``: the ``evalkit.protocols.Provider`` object (no network traffic yet);
- ``check(config)``: raise now, before any call, what would stop the instance (a missing key,
  answers file or model file);
- ``endpoint(config)``: what its answers come from, for the completion cache's key (docs/contract.md "The completion cache");
- ``alias(config)``: the model alias sent when neither ``model:`` nor ``--model`` names one, or
  None when the instance needs one.

The built-ins register in ``evalkit.providers`` through ``register``, the call a plugin's class
reaches through ``register_class``. A plugin adapter (entry point group ``evalkit.providers``,
its name the adapter) is a class with ``from_config(options)``: ``options`` holds the instance's
``id`` and every key of its evalkit.yaml entry that evalkit does not read itself (those it reads
are the config schema's ``x-plugin-keys``); the object returned implements the Provider
protocol. evalkit holds it to that protocol (``PluginProvider``): an exception of its own is the
item's error, naming it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from evalkit import plugins
from evalkit.config import ProviderConfig
from evalkit.errors import EvalkitError, InputError, ProviderError
from evalkit.protocols import Provider
from evalkit.records import Completion, CompletionRequest, ServingRecord

Build = Callable[[ProviderConfig], Provider]
Check = Callable[[ProviderConfig], None]
Identity = Callable[[ProviderConfig], str]
Alias = Callable[[ProviderConfig], "str | None"]


def _nothing(config: ProviderConfig) -> None:
    return None


def _named(config: ProviderConfig) -> str:
    return config.adapter


def _no_alias(config: ProviderConfig) -> str | None:
    return None


def _cached(config: ProviderConfig) -> bool:
    """A model endpoint's answers are cached unless its instance says ``cache: false`` (README,
    "Configuration (`evalkit.yaml`)")."""
    return config.cache is not False


@dataclass(frozen=True, slots=True)
class Adapter:
    name: str
    build: Build
    check: Check
    endpoint: Identity
    alias: Alias
    description: str
    origin: str = "evalkit"  # the distribution that registered it
    # whether the completion cache keeps and replays this instance's answers (docs/contract.md "The completion cache")
    cached: Callable[[ProviderConfig], bool] = _cached


_REGISTRY: plugins.Registry[Adapter] = plugins.Registry("provider adapter", plugins.PROVIDERS)
_ADAPTERS = _REGISTRY.entries  # the adapters by name (tests snapshot and restore it)


def register(
    name: str,
    *,
    build: Build,
    description: str,
    check: Check = _nothing,
    endpoint: Identity = _named,
    alias: Alias = _no_alias,
    origin: str = "evalkit",
    cached: Callable[[ProviderConfig], bool] = _cached,
) -> Adapter:
    """Register the adapter ``name``. A name registered twice is refused."""
    return _REGISTRY.add(Adapter(name, build, check, endpoint, alias, description, origin, cached))


def names() -> list[str]:
    """The registered adapters, in registration order (the built-ins first)."""
    return _REGISTRY.names()


def get(name: str) -> Adapter | None:
    return _REGISTRY.get(name)


def adapters() -> list[Adapter]:
    return _REGISTRY.records()


def from_plugins(wanted: Iterable[str]) -> dict[str, str]:
    """Register the plugin adapters among ``wanted`` (adapters a config names that are not
    registered). Returns the errors of those that failed to load, by name; a name no plugin
    provides is left to the caller."""
    return _REGISTRY.from_plugins(wanted, lambda name, obj, origin: register_class(name, obj, origin=origin))


def register_class(name: str, cls: Any, *, origin: str, description: str = "") -> Adapter:
    """Register a plugin's class: ``cls.from_config(options)`` builds each instance."""
    label = f"plugin adapter '{name}' ({origin})"
    # check() builds the object at plan time (a from_config that raises is exit 2 before anything
    # runs) and keeps it for build(), which the run asks of the very same config object
    checked: dict[int, tuple[ProviderConfig, Provider]] = {}

    def check(config: ProviderConfig) -> None:
        if id(config) not in checked:
            checked[id(config)] = (config, make(config))

    def build(config: ProviderConfig) -> Provider:
        held = checked.pop(id(config), None)
        return held[1] if held is not None and held[0] is config else make(config)

    def make(config: ProviderConfig) -> Provider:
        try:
            made = cls.from_config(dict(config.options))
        except Exception as exc:  # a third party's code: any failure is its own, named
            raise InputError(_at(config, f"{label}: from_config failed: {plugins.failure(exc)}")) from None
        missing = [m for m in ("complete", "aclose") if not callable(getattr(made, m, None))]
        if missing:
            raise InputError(
                _at(config, f"{label}: from_config returned {type(made).__name__}, which has no {', '.join(missing)}()")
            )
        return PluginProvider(made, config, label)

    def endpoint(config: ProviderConfig) -> str:
        # its keys say where its answers come from; hashed, never kept as text (a key may be secret)
        written = json.dumps(dict(config.options), sort_keys=True, ensure_ascii=False, default=str)
        return f"plugin {name} {origin} sha256:{hashlib.sha256(written.encode()).hexdigest()[:16]}"

    return register(
        name,
        build=build,
        check=check,
        endpoint=endpoint,
        alias=_named,
        description=plugins.summary(cls, description, origin),
        origin=origin,
    )


def _at(config: ProviderConfig, message: str) -> str:
    """``message`` located at the instance's ``adapter:`` in evalkit.yaml (when it came from there)."""
    return (
        f"{config.where}: provider '{config.id}': {message}" if config.where else f"provider '{config.id}': {message}"
    )


def resolve(config: ProviderConfig) -> Adapter:
    """The adapter of ``config``: registered, else a plugin's (loaded now), else InputError."""
    adapter = _REGISTRY.get(config.adapter)
    if adapter is not None:
        return adapter
    errors = from_plugins([config.adapter])
    if config.adapter in errors:
        raise InputError(_at(config, errors[config.adapter]))
    adapter = _REGISTRY.get(config.adapter)
    if adapter is None:
        known = ", ".join([*names(), *(n for n in sorted(plugins.installed(_REGISTRY.group)) if n not in _REGISTRY)])
        raise InputError(f"provider '{config.id}': unknown adapter '{config.adapter}' (known: {known})")
    return adapter


class PluginProvider:
    """A plugin's provider object held to the protocol: its answers carry the instance id and
    adapter, and an exception of its own (not an evalkit error) is that item's error, naming it."""

    def __init__(self, inner: Any, config: ProviderConfig, label: str) -> None:
        self.instance_id = config.id
        self.adapter = config.adapter
        self.inner = inner
        self._label = f"provider '{config.id}' ({label})"

    async def complete(self, request: CompletionRequest) -> Completion:
        try:
            completion = await self.inner.complete(request)
        except EvalkitError:  # ProviderError, ProviderRefused: the protocol's own
            raise
        except Exception as exc:
            raise ProviderError(f"{self._label}: {plugins.failure(exc)}") from exc
        if not (
            isinstance(completion, Completion)
            and isinstance(completion.text, str)
            and isinstance(completion.serving, ServingRecord)
        ):
            raise ProviderError(
                f"{self._label}: complete() returned {type(completion).__name__}, not an evalkit.records.Completion "
                "with a text and a ServingRecord"
            )
        return replace(completion, adapter=self.adapter, serving=replace(completion.serving, provider=self.instance_id))

    async def aclose(self) -> None:
        try:
            await self.inner.aclose()
        except EvalkitError:
            raise
        except Exception as exc:
            raise ProviderError(f"{self._label}: aclose() failed: {plugins.failure(exc)}") from exc
