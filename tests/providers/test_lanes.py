"""The one-connection lanes of a direct endpoint's client (evalkit/providers/lanes.py), driven
directly through an ``httpx.AsyncClient`` against a loopback server: a lane serves one request at
a time, comes back when the response body is closed or the request fails, and no more than
``count`` are opened."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import httpx
import pytest

from evalkit.providers.lanes import LaneTransport
from tests.fakeserver import FakeServer, Reply

GUARD_S = 60  # a bound so that a lane never given back fails the test instead of hanging it


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer().start()
    yield fake
    fake.stop()


def run(count: int, body: Callable[[httpx.AsyncClient, LaneTransport], Awaitable[Any]]) -> LaneTransport:
    """``body`` run with a client over ``count`` lanes; the transport, once the client is closed."""
    transport = LaneTransport(False, count)

    async def main() -> None:
        async with httpx.AsyncClient(transport=transport) as client:
            await asyncio.wait_for(body(client, transport), GUARD_S)

    asyncio.run(main())
    return transport


def ports(server: FakeServer) -> list[int]:
    return [r.client_port for r in server.requests]


def test_each_open_response_holds_its_own_lane_and_a_closed_one_lends_it_again(server: FakeServer) -> None:
    async def body(client: httpx.AsyncClient, lanes: LaneTransport) -> None:
        first = await client.send(client.build_request("GET", f"{server.url}/a"), stream=True)
        second = await client.send(client.build_request("GET", f"{server.url}/b"), stream=True)
        assert (lanes.opened, lanes.idle) == (2, 0)
        await first.aread()  # read whole, its connection stays open for the next request
        await first.aclose()
        assert lanes.idle == 1
        third = await client.get(f"{server.url}/c")  # the lane the first gave back
        assert third.status_code == 200
        await second.aclose()
        assert (lanes.opened, lanes.idle) == (2, 2)

    lanes = run(2, body)
    first, second, third = ports(server)
    assert first != second
    assert third == first
    assert server.connections == 2
    assert lanes.opened == 0  # closing the client closed every lane


def test_no_more_lanes_than_count_are_opened_and_a_request_waits_for_a_free_one(server: FakeServer) -> None:
    async def body(client: httpx.AsyncClient, lanes: LaneTransport) -> None:
        answers = await asyncio.gather(*(client.get(f"{server.url}/{n}") for n in range(12)))
        assert [a.status_code for a in answers] == [200] * 12
        assert lanes.opened == 3

    run(3, body)
    assert server.calls == 12
    assert server.max_open_connections <= 3
    assert len(set(ports(server))) <= 3


def test_a_request_that_fails_gives_its_lane_back(server: FakeServer) -> None:
    server.enqueue(Reply(reset=True))

    async def body(client: httpx.AsyncClient, lanes: LaneTransport) -> None:
        with pytest.raises(httpx.TransportError):
            await client.get(f"{server.url}/reset")
        assert (lanes.opened, lanes.idle) == (1, 1)
        assert (await client.get(f"{server.url}/after")).status_code == 200  # one lane: the same

    run(1, body)
    assert server.calls == 2


def test_a_body_closed_twice_gives_its_lane_back_once(server: FakeServer) -> None:
    async def body(client: httpx.AsyncClient, lanes: LaneTransport) -> None:
        response = await client.send(client.build_request("GET", f"{server.url}/a"), stream=True)
        await response.aread()
        await response.aclose()
        await response.stream.aclose()  # a second close of the lane's body
        assert (lanes.opened, lanes.idle) == (1, 1)

    run(1, body)


def test_the_lanes_of_plain_http_endpoints_share_one_non_verifying_context(server: FakeServer) -> None:
    async def body(client: httpx.AsyncClient, lanes: LaneTransport) -> None:
        answers = await asyncio.gather(*(client.get(f"{server.url}/{i}") for i in range(3)))
        assert [a.status_code for a in answers] == [200, 200, 200]
        assert lanes.opened == 3

    lanes = run(3, body)
    other = LaneTransport(False, 2)
    assert lanes.context is other.context  # one for the process: httpx builds one per transport
    assert (lanes.context.verify_mode, lanes.context.check_hostname) == (ssl.CERT_NONE, False)
    verifying = ssl.create_default_context()
    assert LaneTransport(verifying, 2).context is verifying
