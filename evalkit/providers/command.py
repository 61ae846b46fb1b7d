"""The ``command`` adapter: your program, given the request as one JSON document on stdin; its
answer on stdout (README, "Testing your application").

The command line is split like a shell would and run without a shell, in evalkit.yaml's folder;
an argument may be a template (``{{ prompt }}``), rendered per request. stdout is the answer: a
JSON object (``output``, ``model``, ...) when it parses as one, else the text itself. The command
runs in a session of its own (``evalkit.procs``): at ``timeout_s``, or once stdout passes
``max_response_mb``, everything it started is killed. A non-zero exit is the item's error with the
first line of stderr. Commands are not retried.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from evalkit import procs
from evalkit.config import ProviderConfig, split_command
from evalkit.errors import InputError, ProviderError
from evalkit.providers.app import app_completion, app_request
from evalkit.records import Completion, CompletionRequest

MB = 1024 * 1024
MAX_STDERR_BYTES = 64 * 1024


class CommandProvider:
    adapter = "command"

    def __init__(self, config: ProviderConfig) -> None:
        assert config.command is not None
        self.instance_id = config.id
        self._label = f"provider '{config.id}'"
        try:
            self.argv = split_command(config.command)
        except ValueError as exc:
            raise InputError(f"{self._label}: cannot split the command ({exc})") from None
        if not self.argv:
            raise InputError(f"{self._label}: the command is empty")
        self._render = config.render
        self.cwd = config.root or Path.cwd()
        self.timeout_s = config.timeout_s
        self.max_response_mb = config.max_response_mb
        self.max_bytes = int(config.max_response_mb * MB)

    def arguments(self, names: dict[str, object]) -> list[str]:
        if self._render is None:
            return list(self.argv)
        try:
            return [self.argv[0], *(str(self._render(a, names)) for a in self.argv[1:])]
        except Exception as exc:  # a template failed for this prompt's values: this item's error
            raise ProviderError(f"{self._label}: an argument's template failed: {exc}") from None

    async def complete(self, request: CompletionRequest) -> Completion:
        names = app_request(request)
        argv = self.arguments(names)
        started = time.perf_counter()
        try:
            done = await procs.run(
                argv,
                self.cwd,
                json.dumps(names).encode(),
                timeout_s=self.timeout_s,
                max_output=self.max_bytes,
                max_stderr=MAX_STDERR_BYTES,
            )
        except TimeoutError:
            raise ProviderError(
                f"{self._label}: the command did not finish within timeout_s ({self.timeout_s:g} s); "
                "it and everything it started were ended"
            ) from None
        except OSError as exc:  # (TimeoutError is an OSError: it is caught first)
            raise ProviderError(f"{self._label}: cannot run {argv[0]!r} ({exc.strerror})") from None
        if done.out is None:
            raise ProviderError(
                f"{self._label}: the command printed more than max_response_mb ({self.max_response_mb:g} MB); "
                "it was ended"
            )
        latency_ms = (time.perf_counter() - started) * 1000.0
        if done.status != 0:
            first = next((line.strip() for line in done.err.decode(errors="replace").splitlines() if line.strip()), "")
            raise ProviderError(
                f"{self._label}: the command exited with status {done.status}{': ' + first if first else ''}"
            )
        return app_completion(
            _answer(done.out), request, instance=self.instance_id, adapter=self.adapter, latency_ms=latency_ms
        )

    async def aclose(self) -> None:
        return None


def _answer(out: bytes) -> object:
    """stdout as an answer: a JSON object when it parses as one, else its text without the
    surrounding whitespace (the newline a program ends its output with), as promptfoo's exec."""
    text = out.decode("utf-8", errors="replace").strip()
    if text.startswith("{"):
        try:
            decoded = json.loads(text)
        except (ValueError, RecursionError):
            return text
        if isinstance(decoded, dict):
            return decoded
    return text
