"""The registry of retriever kinds (README "Plugins", docs/contract.md "Retrieval evaluation").

Each kind is registered by name with ``build(config, resources)``: a ``Retriever``
(``evalkit.protocols``: ``search`` one question at a time, asked concurrently) or a
``BatchRetriever`` (every question in one call, like the built-in ``lexical`` over the set's
corpus). The built-ins (http, command, lexical) register below, one call each, through
``register``, the call a plugin's class reaches through ``register_class``; their modules are
imported only when one is built.

A plugin kind (entry point group ``evalkit.retrievers``, its name the kind) is a class with
``from_config(options)``: ``options`` holds the retriever's ``id`` and every key of its
evalkit.yaml entry that evalkit does not read itself (those it reads are the config schema's
``x-plugin-keys``: ``provenance`` is declared there as for any other kind); the object returned
implements the Retriever protocol. evalkit holds it to that protocol (``PluginRetriever``): an
exception of its own is that question's error, naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from evalkit import plugins
from evalkit.config import RetrieverConfig
from evalkit.errors import EvalkitError, InputError, RetrieverError
from evalkit.protocols import Retriever
from evalkit.records import Ranking

if TYPE_CHECKING:
    from evalkit.sets.corpus import Corpus


@runtime_checkable
class BatchRetriever(Protocol):
    """A retriever that answers every question in one call and derives its own provenance."""

    @property
    def provenance(self) -> Mapping[str, str]: ...

    def search_many(self, questions: Sequence[str], limit: int) -> list[Ranking]: ...


@dataclass(frozen=True, slots=True)
class Resources:
    """What a kind may need beyond its config: the question set's corpus and an index cache folder."""

    corpus: Corpus | None = None
    cache_dir: Path | None = None


Build = Callable[[RetrieverConfig, Resources], "Retriever | BatchRetriever"]


@dataclass(frozen=True, slots=True)
class RetrieverKind:
    name: str
    build: Build
    description: str
    origin: str = "evalkit"  # the distribution that registered it


_REGISTRY: plugins.Registry[RetrieverKind] = plugins.Registry("retriever kind", plugins.RETRIEVERS)
_KINDS = _REGISTRY.entries  # the kinds by name (tests snapshot and restore it)


def register(name: str, *, build: Build, description: str, origin: str = "evalkit") -> RetrieverKind:
    """Register the kind ``name``. A name registered twice is refused."""
    return _REGISTRY.add(RetrieverKind(name, build, description, origin))


def names() -> list[str]:
    """The registered kinds, in registration order (the built-ins first)."""
    return _REGISTRY.names()


def get(name: str) -> RetrieverKind | None:
    return _REGISTRY.get(name)


def kinds() -> list[RetrieverKind]:
    return _REGISTRY.records()


def from_plugins(wanted: Iterable[str]) -> dict[str, str]:
    """Register the plugin kinds among ``wanted`` (kinds a config names that are not registered).
    Returns the errors of those that failed to load, by name; a name no plugin provides is left
    to the caller."""
    return _REGISTRY.from_plugins(wanted, lambda name, obj, origin: register_class(name, obj, origin=origin))


def register_class(name: str, cls: Any, *, origin: str, description: str = "") -> RetrieverKind:
    """Register a plugin's class: ``cls.from_config(options)`` builds each retriever."""
    label = f"plugin retriever kind '{name}' ({origin})"

    def build(config: RetrieverConfig, resources: Resources) -> Retriever:
        try:
            made = cls.from_config(dict(config.options))
        except Exception as exc:  # a third party's code: any failure is its own, named
            raise InputError(_at(config, f"{label}: from_config failed: {plugins.failure(exc)}")) from None
        missing = [m for m in ("search", "aclose") if not callable(getattr(made, m, None))]
        if missing:
            raise InputError(
                _at(config, f"{label}: from_config returned {type(made).__name__}, which has no {', '.join(missing)}()")
            )
        return PluginRetriever(made, config, label)

    return register(name, build=build, description=plugins.summary(cls, description, origin), origin=origin)


def _at(config: RetrieverConfig, message: str) -> str:
    """``message`` located at the retriever's ``kind:`` in evalkit.yaml (when it came from there)."""
    who = f"retriever '{config.id}'"
    return f"{config.where}: {who}: {message}" if config.where else f"{who}: {message}"


def resolve(config: RetrieverConfig) -> RetrieverKind:
    """The kind of ``config``: registered, else a plugin's (loaded now), else InputError."""
    kind = _REGISTRY.get(config.kind)
    if kind is not None:
        return kind
    errors = from_plugins([config.kind])
    if config.kind in errors:
        raise InputError(_at(config, errors[config.kind]))
    kind = _REGISTRY.get(config.kind)
    if kind is None:
        installed = [n for n in sorted(plugins.installed(_REGISTRY.group)) if n not in _REGISTRY]
        raise InputError(
            _at(config, f"unknown retriever kind '{config.kind}' (known: {', '.join(names() + installed)})")
        )
    return kind


def build(config: RetrieverConfig, resources: Resources) -> Retriever | BatchRetriever:
    """The retriever ``config`` describes (no call made yet)."""
    return resolve(config).build(config, resources)


class PluginRetriever:
    """A plugin's retriever held to the protocol: an exception of its own (not an evalkit error)
    is that question's error, naming it; so is an answer that is not a Ranking of string ids."""

    def __init__(self, inner: Any, config: RetrieverConfig, label: str) -> None:
        self.id = config.id
        self.inner = inner
        self._label = f"retriever '{config.id}' ({label})"

    async def search(self, question: str, limit: int) -> Ranking:
        try:
            ranking = await self.inner.search(question, limit)
        except EvalkitError:  # RetrieverError, ProviderError, ProviderRefused: the protocol's own
            raise
        except Exception as exc:
            raise RetrieverError(f"{self._label}: {plugins.failure(exc)}") from exc
        if not (isinstance(ranking, Ranking) and all(isinstance(i, str) for i in ranking.ids)):
            raise RetrieverError(
                f"{self._label}: search() returned {type(ranking).__name__}, "
                "not an evalkit.records.Ranking of string ids"
            )
        return ranking

    async def aclose(self) -> None:
        try:
            await self.inner.aclose()
        except EvalkitError:
            raise
        except Exception as exc:
            raise RetrieverError(f"{self._label}: aclose() failed: {plugins.failure(exc)}") from exc


def _http(config: RetrieverConfig, resources: Resources) -> Retriever:
    from evalkit.retrieval.http import HttpRetriever

    return HttpRetriever(config)


def _command(config: RetrieverConfig, resources: Resources) -> Retriever:
    from evalkit.retrieval.command import CommandRetriever

    return CommandRetriever(config)


def _lexical(config: RetrieverConfig, resources: Resources) -> BatchRetriever:
    from evalkit.retrieval.lexical import LexicalParams, LexicalRetriever

    if resources.corpus is None:
        raise InputError(f"retriever '{config.id}': the lexical retriever needs a corpus: add corpus: to the set file")
    return LexicalRetriever(resources.corpus, LexicalParams.from_options(config.options), resources.cache_dir)


register("http", build=_http, description='POST {"question", "limit"} to a URL; ranked ids back')
register("command", build=_command, description="a command: the question on stdin, ranked ids on stdout")
register("lexical", build=_lexical, description="BM25 (bm25s) over the question set's corpus; always available")
