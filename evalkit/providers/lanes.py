"""One-connection lanes: the transport of a direct endpoint's ``httpx.AsyncClient``.

Why: httpx's pool checks every connection for every request (encode/httpx#3215): at 0 ms and
concurrency 16, one 16-connection pool took twice as long as 16 lanes. So each lane is an
``httpx.AsyncHTTPTransport`` limited to one connection and lent to one request at a time: taken
when the request is sent, given back when its response body is closed (or the request fails).
At most ``count`` lanes are opened, as the client's ``max_connections`` would allow; a request
that finds none free waits for one. All lanes share one TLS context: given ``verify=False`` (a
plain-http endpoint), httpx builds a non-verifying context for each transport, ~1.5 ms each, so
32 lanes delayed their first calls by ~50 ms (bench/README.md, session 10); one is built for the
process instead, as httpx builds it. The plain version is httpx's own pool: an endpoint reached
through a proxy uses it (``transport=None``, evalkit/providers/http.py), and so does a client
given no transport. Tested directly in tests/providers/test_lanes.py.

This module is imported only when a client is built (httpx is heavy, README "HTTP").
"""

from __future__ import annotations

import asyncio
import functools
import ssl
from collections.abc import AsyncIterator, Callable
from typing import Literal, cast

import httpx


class LaneTransport(httpx.AsyncBaseTransport):
    """``count`` one-connection lanes, each lent to one request at a time."""

    def __init__(self, verify: ssl.SSLContext | Literal[False], count: int) -> None:
        self._verify = unverified_context() if verify is False else verify
        self._count = count
        self._lanes: list[httpx.AsyncHTTPTransport] = []
        self._free: asyncio.Queue[httpx.AsyncHTTPTransport] = asyncio.Queue()

    @property
    def context(self) -> ssl.SSLContext:
        """The TLS context every lane is built with."""
        return self._verify

    @property
    def opened(self) -> int:
        """How many lanes are open (never more than ``count``)."""
        return len(self._lanes)

    @property
    def idle(self) -> int:
        """How many open lanes wait for a request."""
        return self._free.qsize()

    async def _take(self) -> httpx.AsyncHTTPTransport:
        if self._free.empty() and len(self._lanes) < self._count:
            lane = httpx.AsyncHTTPTransport(
                verify=self._verify, limits=httpx.Limits(max_connections=1), trust_env=False
            )
            self._lanes.append(lane)
            return lane
        return await self._free.get()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        lane = await self._take()
        try:
            response = await lane.handle_async_request(request)
        except BaseException:
            self._free.put_nowait(lane)
            raise
        body = cast(httpx.AsyncByteStream, response.stream)  # an async transport's body is async
        stream = _LaneStream(body, lambda: self._free.put_nowait(lane))
        return httpx.Response(
            response.status_code, headers=response.headers, stream=stream, extensions=response.extensions
        )

    async def aclose(self) -> None:
        lanes, self._lanes = self._lanes, []
        for lane in lanes:
            await lane.aclose()


class _LaneStream(httpx.AsyncByteStream):
    """The lane's response body; closing it gives the lane back (once)."""

    def __init__(self, stream: httpx.AsyncByteStream, release: Callable[[], None]) -> None:
        self._stream = stream
        self._release: Callable[[], None] | None = release

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            yield chunk

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        finally:
            release, self._release = self._release, None
            if release is not None:
                release()


@functools.cache
def unverified_context() -> ssl.SSLContext:
    """The context httpx builds for ``verify=False``, built once for the process."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context
