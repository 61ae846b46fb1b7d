"""The ``http`` adapter: any JSON API (your service, a gateway, a hosted agent) called with a body
rendered from the request, its answer read at dotted paths (README, "Testing your application").

It goes through the same HTTP layer as the model adapters (``evalkit.providers.http``: one
httpx client per endpoint, retries and Retry-After, the whole-call ``timeout_s``,
``max_response_mb``, proxies and CAs). Headers may read the environment as ``{{ env.NAME }}``;
those values are secrets like a key: masked in every error and in the answers.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import replace
from typing import Any

from evalkit.config import ProviderConfig, header_env, unset_env
from evalkit.errors import InputError, ProviderError
from evalkit.providers.app import app_completion, app_request, dig, top_level
from evalkit.providers.http import provider_client
from evalkit.records import Completion, CompletionRequest


def check(config: ProviderConfig) -> None:
    """Before any call: every variable a header names is set."""
    missing = unset_env(config.headers)
    if missing:
        where = f"{config.where}: " if config.where else ""
        raise InputError(
            f"{where}provider '{config.id}': environment variable {', '.join(missing)} is not set "
            f"(its headers name env.{missing[0]}); export it before the run"
        )


class HttpAppProvider:
    adapter = "http"

    def __init__(self, config: ProviderConfig) -> None:
        assert config.url is not None
        assert config.render is not None
        check(config)
        self.instance_id = config.id
        self.config = config
        self._render = config.render
        environment = {name: os.environ[name].strip() for name in header_env(config.headers)}
        headers = {k: str(self._render(v, {"env": environment})).strip() for k, v in config.headers.items()}
        self.client = provider_client(
            replace(config, headers={}), config.url, headers, None, tuple(environment.values())
        )

    def body(self, request: CompletionRequest) -> bytes | None:
        names = app_request(request)
        if self.config.method == "GET":
            return None
        if self.config.body is None:
            return json.dumps(names).encode()
        rendered = self._render(self.config.body, names)
        return (rendered if isinstance(rendered, str) else json.dumps(rendered)).encode()

    async def complete(self, request: CompletionRequest) -> Completion:
        try:
            content = self.body(request)
        except Exception as exc:  # the template failed for this prompt's values: this item's error
            raise ProviderError(f"provider '{self.instance_id}': the body template failed: {exc}") from None
        answer, latency_ms = await self.client.call_raw(self.config.method, content)
        return self.parse(answer, request, latency_ms)

    def parse(self, answer: Any, request: CompletionRequest, latency_ms: float) -> Completion:
        paths = self.config.response
        found: dict[str, Any] = {}
        for key in ("output", "model", "tool_calls", "context"):
            path = paths.get(key)
            if path is None:
                continue
            with contextlib.suppress(KeyError):  # a missing model or context: not reported
                found[key] = dig(answer, path)
        if "output" not in found and not found.get("tool_calls"):  # a feature that only acted has no text
            raise ProviderError(
                f"provider '{self.instance_id}': the answer has nothing at response.output {paths['output']!r}; "
                f"{top_level(answer)}"
            )
        usage = paths.get("usage") or {}
        counts = {}
        for key, path in usage.items():
            try:
                counts[key] = dig(answer, path)
            except KeyError:
                continue
        if counts:
            found["usage"] = counts
        output = found.get("output")
        if output is not None and not isinstance(output, str):
            found["output"] = json.dumps(output, ensure_ascii=False)  # an object or a number: its JSON text
        return app_completion(found, request, instance=self.instance_id, adapter=self.adapter, latency_ms=latency_ms)

    async def aclose(self) -> None:
        await self.client.aclose()
