"""Model endpoints behind one interface (``evalkit.protocols.Provider``).

Adapters are a registry (``evalkit.providers.registry``): the four built-ins register below, one
call each, through the call plugin adapters reach too; their modules are imported only when an
instance of theirs is built or checked. ``ProviderPool`` builds instances on first use (a
fallback instance is only started when an item needs it) and closes every one it opened, also
on errors and Ctrl-C.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from evalkit.config import ANTHROPIC_DEFAULT_URL, OPENAI_DEFAULT_URL, ProviderConfig
from evalkit.errors import InputError
from evalkit.protocols import Provider
from evalkit.providers import registry


def build_provider(config: ProviderConfig) -> Provider:
    """A provider object for one configured instance (no network traffic yet)."""
    return registry.resolve(config).build(config)


def check_provider(config: ProviderConfig) -> None:
    """Fail now, before any call, on what would stop this instance: key, answers or model file."""
    registry.resolve(config).check(config)


def endpoint_identity(config: ProviderConfig) -> str:
    """What an instance's answers come from, for the completion cache's key (docs/contract.md "The completion cache"): an HTTP
    adapter and its base URL as it goes on the wire (host in IDNA, default port and trailing
    slash dropped; any user:password@ is never sent, so never part of it), the local model
    file's content hash, a plugin's name, version and keys (hashed). Never a key or a header value."""
    return registry.resolve(config).endpoint(config)


def caches_answers(config: ProviderConfig) -> bool:
    """Whether the completion cache keeps and replays this instance's answers: not for recorded
    answers, and for an application (http, python, command) only with ``cache: true``."""
    return registry.resolve(config).cached(config)


def default_alias(config: ProviderConfig) -> str:
    """The model alias sent when the CLI does not override it."""
    alias = config.model or registry.resolve(config).alias(config)
    if alias:
        return alias
    raise InputError(
        f"provider '{config.id}' has no model alias: add model: to it in evalkit.yaml or pass --model ALIAS"
    )


def _openai(config: ProviderConfig) -> Provider:
    from evalkit.providers.openai import OpenAIProvider

    return OpenAIProvider(config)


def _anthropic(config: ProviderConfig) -> Provider:
    from evalkit.providers.anthropic import AnthropicProvider

    return AnthropicProvider(config)


def _replay(config: ProviderConfig) -> Provider:
    from evalkit.providers.replay import ReplayProvider

    return ReplayProvider(config)


def _local(config: ProviderConfig) -> Provider:
    from evalkit.providers.local import LocalProvider

    return LocalProvider(config)


def _check_http(config: ProviderConfig) -> None:
    from evalkit.providers.http import check_proxy, check_url
    from evalkit.providers.openai import api_key

    api_key(config)
    if config.base_url:
        check_url(config.base_url, f"provider '{config.id}': base_url")
    default = OPENAI_DEFAULT_URL if config.adapter == "openai" else ANTHROPIC_DEFAULT_URL
    check_proxy(config, config.base_url or default)  # the environment's, for this endpoint


def _check_replay(config: ProviderConfig) -> None:
    _replay(config)  # reads and checks the answers file


def _check_local(config: ProviderConfig) -> None:
    from evalkit.providers.local import model_file, require_installed

    require_installed(config)
    model_file(config)


def _http_endpoint(config: ProviderConfig) -> str:
    from evalkit.urls import Endpoint, redacted

    default = OPENAI_DEFAULT_URL if config.adapter == "openai" else ANTHROPIC_DEFAULT_URL
    key, url = ("url", config.url or "") if config.adapter == "http" else ("base_url", config.base_url or default)
    try:
        endpoint = Endpoint.parse(url, userinfo=True)  # refused at load; never part of it
    except ValueError as exc:  # check_provider says so first; an API caller may not have asked it
        raise InputError(f"provider '{config.id}': {key} {redacted(url)!r} is not a usable URL ({exc})") from None
    path, _, query = endpoint.target.partition("?")
    # a query may carry a key (?key=...): it is part of the identity, hashed, never kept as text
    hashed = f"?sha256:{hashlib.sha256(query.encode()).hexdigest()[:16]}" if query else ""
    return f"{config.adapter} {endpoint.scheme}://{endpoint.authority}{path.rstrip('/')}{hashed}"


def _local_endpoint(config: ProviderConfig) -> str:
    from evalkit.providers.local import model_file, model_hash

    # the instance's sampling settings shape its answers as much as the file does
    settings = f"temperature={config.temperature:g} seed={config.seed} n_ctx={config.n_ctx}"
    return f"local sha256:{model_hash(model_file(config))} {settings}"


def _local_alias(config: ProviderConfig) -> str:
    from evalkit.providers.local import model_file

    return model_file(config).name.removesuffix(".gguf").lower()


registry.register(
    "openai",
    build=_openai,
    check=_check_http,
    endpoint=_http_endpoint,
    description="any OpenAI-compatible /chat/completions endpoint",
)
registry.register(
    "anthropic",
    build=_anthropic,
    check=_check_http,
    endpoint=_http_endpoint,
    description="the Anthropic Messages API",
)
registry.register(
    "replay",
    build=_replay,
    check=_check_replay,
    alias=lambda config: "replay",
    cached=lambda config: False,
    description="recorded answers from a JSONL file (never cached)",
)
registry.register(
    "local",
    build=_local,
    check=_check_local,
    endpoint=_local_endpoint,
    alias=_local_alias,
    description="llama.cpp in-process on a loopback port (evalkit-cli[local])",
)


def _http_app(config: ProviderConfig) -> Provider:
    from evalkit.providers.apphttp import HttpAppProvider

    return HttpAppProvider(config)


def _check_http_app(config: ProviderConfig) -> None:
    from evalkit.providers.apphttp import check
    from evalkit.providers.http import check_proxy, check_url

    assert config.url is not None
    check_url(config.url, f"provider '{config.id}': url")
    check_proxy(config, config.url)  # the environment's, for this endpoint
    check(config)


def _python_app(config: ProviderConfig) -> Provider:
    from evalkit.providers.pyfunc import PythonProvider

    return PythonProvider(config)


def _check_python_app(config: ProviderConfig) -> None:
    from evalkit.providers.pyfunc import function_of

    function_of(config)


def _command_app(config: ProviderConfig) -> Provider:
    from evalkit.providers.command import CommandProvider

    return CommandProvider(config)


def _check_command_app(config: ProviderConfig) -> None:
    _command_app(config)  # splits the command line


def _app_endpoint(config: ProviderConfig) -> str:
    """An application's identity for the cache key (README, "Testing your application"): http, its
    method, URL (a query hashed) and body template; python and command, the function file's or the
    command's text (and the command's program file, when it is one)."""
    if config.adapter == "http":
        written = json.dumps(config.body, sort_keys=True, ensure_ascii=False, default=str)
        return f"{_http_endpoint(config)} {config.method} body sha256:{_digest(written.encode())}"
    if config.adapter == "python":
        assert config.function is not None
        file = config.function.rpartition(":")[0]
        return f"python {config.function} sha256:{_digest(_read((config.root or Path.cwd()) / file))}"
    assert config.command is not None
    return f"command sha256:{_digest(config.command.encode())}"


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _app_cached(config: ProviderConfig) -> bool:
    return bool(config.cache)


for _name, _build, _check, _description in (
    ("http", _http_app, _check_http_app, "your application's JSON API: a body template, answers at dotted paths"),
    ("python", _python_app, _check_python_app, "your Python function (path/file.py:name), given the request"),
    ("command", _command_app, _check_command_app, "your program: the request as JSON on stdin, the answer on stdout"),
):
    registry.register(
        _name, build=_build, check=_check, endpoint=_app_endpoint, alias=lambda config: config.adapter,
        cached=_app_cached, description=_description,
    )  # fmt: skip


class ProviderPool:
    """Opens provider instances on demand by id and closes them all at the end."""

    def __init__(
        self, lookup: Callable[[str], ProviderConfig], factory: Callable[[ProviderConfig], Provider] = build_provider
    ) -> None:
        self._lookup = lookup
        self._factory = factory
        self._open: dict[str, Provider] = {}
        self._endpoints: dict[str, str] = {}

    def config(self, instance_id: str) -> ProviderConfig:
        return self._lookup(instance_id)

    def endpoint(self, instance_id: str) -> str:
        """The instance's ``endpoint_identity``, worked out once per pool."""
        if instance_id not in self._endpoints:
            self._endpoints[instance_id] = endpoint_identity(self._lookup(instance_id))
        return self._endpoints[instance_id]

    def get(self, instance_id: str) -> Provider:
        if instance_id not in self._open:
            self._open[instance_id] = self._factory(self._lookup(instance_id))
        return self._open[instance_id]

    async def aclose(self) -> None:
        """Close every opened instance, even when closing one of them fails."""
        opened, self._open = list(self._open.values()), {}
        async with contextlib.AsyncExitStack() as stack:
            for provider in opened:
                stack.push_async_callback(provider.aclose)
