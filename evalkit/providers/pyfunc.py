"""The ``python`` adapter: your own function, ``function: path/file.py:name`` relative to
evalkit.yaml, given the request dict and returning a string or an answer object (README,
"Testing your application").

The file is imported once per process (its folder put on ``sys.path``, as a script's own folder
is, so it can import its neighbours). An ``async def`` is awaited on the run's event loop; a plain
function runs in a worker thread. ``timeout_s`` bounds each call: an async call is cancelled, a
thread cannot be, so its item becomes an error at once and the run does not wait for it (the
thread is a daemon, left to finish on its own, and a new worker takes its place). An exception
is the item's error with its type and message. Python calls are not retried.

The workers are daemon threads of our own rather than ``asyncio.to_thread``: the default
executor's threads are joined when the loop closes, so one hung function would hold the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib.util
import inspect
import queue
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evalkit.config import ProviderConfig
from evalkit.errors import EvalkitError, InputError, ProviderError
from evalkit.providers.app import app_completion, app_request
from evalkit.records import Completion, CompletionRequest

_LOADED: dict[tuple[str, int, str], Callable[..., Any]] = {}
_LOCK = threading.Lock()


def function_of(config: ProviderConfig) -> Callable[..., Any]:
    """The configured function, imported once per process and file version."""
    assert config.function is not None
    file, _, name = config.function.rpartition(":")
    path = ((config.root or Path.cwd()) / file).resolve()
    label = f"{config.where + ': ' if config.where else ''}provider '{config.id}'"
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        raise InputError(f"{label}: no Python file at {file!r} (relative to evalkit.yaml)") from None
    key = (str(path), stamp, name)
    with _LOCK:
        if key not in _LOADED:
            _LOADED[key] = _import(path, name, label)
        return _LOADED[key]


def _import(path: Path, name: str, label: str) -> Callable[..., Any]:
    module_name = f"evalkit_app_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise InputError(f"{label}: {path.name} cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)  # its neighbours import as they do when it runs as a script
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's module failed at import: nothing has been called yet
        raise InputError(f"{label}: importing {path.name} failed: {type(exc).__name__}: {exc}") from None
    function = getattr(module, name, None)
    if not callable(function):
        raise InputError(f"{label}: {path.name} has no function {name!r}")
    return function  # type: ignore[no-any-return]


class Workers:
    """Daemon threads running sync functions: a job takes an idle worker or starts one; a worker
    whose job overran its timeout is simply not counted as idle again until it returns."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[
            tuple[Callable[..., Any], object, asyncio.AbstractEventLoop, asyncio.Future[Any]] | None
        ] = queue.SimpleQueue()
        self._idle = 0
        self._lock = threading.Lock()

    async def run(self, function: Callable[..., Any], argument: object) -> Any:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        with self._lock:
            start = self._idle == 0
            if not start:
                self._idle -= 1
        if start:
            threading.Thread(target=self._work, name="evalkit-python-adapter", daemon=True).start()
        self._jobs.put((function, argument, loop, future))
        return await future

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            function, argument, loop, future = job
            try:
                outcome: tuple[Any, BaseException | None] = (function(argument), None)
            except Exception as exc:  # the user's function: whatever it raised is its item's error
                outcome = (None, exc)
            except BaseException as exc:  # SystemExit, KeyboardInterrupt in its thread: its error too, not ours
                outcome = (None, RuntimeError(f"{type(exc).__name__}: {exc}"))
            with contextlib.suppress(RuntimeError):  # the run is over (its loop closed): nobody waits
                loop.call_soon_threadsafe(_settle, future, outcome)
            with self._lock:
                self._idle += 1

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, 0
        for _ in range(idle):
            self._jobs.put(None)


def _settle(future: asyncio.Future[Any], outcome: tuple[Any, BaseException | None]) -> None:
    if future.done():  # timed out and cancelled meanwhile
        return
    value, error = outcome
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


class PythonProvider:
    adapter = "python"

    def __init__(self, config: ProviderConfig) -> None:
        self.instance_id = config.id
        self.function = function_of(config)
        self.awaited = inspect.iscoroutinefunction(self.function)
        self.timeout_s = config.timeout_s
        self._workers = Workers()
        self._label = f"provider '{config.id}'"

    async def complete(self, request: CompletionRequest) -> Completion:
        argument = app_request(request)
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self.timeout_s):
                if self.awaited:
                    answer = await self.function(argument)
                else:
                    answer = await self._workers.run(self.function, argument)
        except TimeoutError:
            raise ProviderError(
                f"{self._label}: the function did not return within timeout_s ({self.timeout_s:g} s)"
            ) from None
        except EvalkitError:
            raise
        except Exception as exc:
            raise ProviderError(f"{self._label}: the function raised {type(exc).__name__}: {exc}") from None
        latency_ms = (time.perf_counter() - started) * 1000.0
        return app_completion(answer, request, instance=self.instance_id, adapter=self.adapter, latency_ms=latency_ms)

    async def aclose(self) -> None:
        self._workers.close()
