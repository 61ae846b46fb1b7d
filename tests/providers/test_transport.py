"""The HTTP layer (``JsonClient``, ``check_url``, ``get_status``) on httpx, against real servers
on 127.0.0.1: TLS, keep-alive, faults, the connection bound.

Connections are counted on the server's side (accepted, most open at once, the client port of
each request). Nothing here sleeps to synchronise or measures time: a timeout is tested against
a peer that answers much later or never.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import socket
import ssl
import threading
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar

import pytest
import trustme

from evalkit.errors import InputError, ProviderError, ProviderRefused
from evalkit.providers.http import JsonClient, check_url, get_status
from evalkit.providers.retry import RetryPolicy, TransientError
from tests.fakeserver import FakeServer, Recorded, Reply

T = TypeVar("T")
NAME = "provider 'fake'"
PAYLOAD = {"model": "fake-alias", "messages": [{"role": "user", "content": "hello"}]}


def run(main: Callable[[], Awaitable[T]]) -> T:
    """``asyncio.run(main())``."""

    async def wrapped() -> T:
        return await main()

    return asyncio.run(wrapped())


@contextlib.asynccontextmanager
async def json_client(base_url: str, **options: Any) -> AsyncIterator[JsonClient]:
    client = JsonClient(NAME, base_url, **options)
    try:
        yield client
    finally:
        await client.aclose()


def post(base_url: str, path: str = "/v1/chat/completions", **options: Any) -> dict[str, Any]:
    """One ``post`` (no retry policy) through a fresh client; the decoded body."""

    async def main() -> dict[str, Any]:
        async with json_client(base_url, **options) as client:
            body, _ = await client.post(path, PAYLOAD)
            return body

    return run(main)


def calls(base_url: str, count: int, **options: Any) -> list[dict[str, Any]]:
    """``count`` sequential calls through one client; the decoded bodies."""

    async def main() -> list[dict[str, Any]]:
        async with json_client(base_url, **options) as client:
            return [(await client.call("/v1/chat/completions", {**PAYLOAD, "n": n}))[0] for n in range(count)]

    return run(main)


def ports(server: FakeServer) -> list[int]:
    return [r.client_port for r in server.requests]


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port nothing listens on: bound (so nothing else takes it) but not listening, so a
    connection attempt is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that completes TCP connections (the kernel's backlog) but never reads or sends."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield sock.getsockname()[1]


# --- TLS ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def tls_server(ca: trustme.CA) -> Iterator[Callable[..., FakeServer]]:
    """Start HTTPS servers whose certificate (signed by the test CA) names ``names``."""
    servers: list[FakeServer] = []

    def start(*names: str) -> FakeServer:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert(*names).configure_cert(context)
        server = FakeServer(tls=context).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def trust_test_ca(ca: trustme.CA, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """SSL_CERT_FILE names the test CA: JsonClient trusts it instead of certifi's bundle."""
    pem = tmp_path / "test-ca.pem"
    ca.cert_pem.write_to_path(str(pem))
    monkeypatch.setenv("SSL_CERT_FILE", str(pem))


def test_tls_server_url_names_localhost(tls_server: Callable[..., FakeServer]) -> None:
    server = tls_server("localhost")
    assert server.url == f"https://localhost:{server.port}"


@pytest.mark.usefixtures("trust_test_ca")
@pytest.mark.parametrize(("names", "host"), [(("localhost",), "localhost"), (("127.0.0.1",), "127.0.0.1")])
def test_posts_json_over_tls(tls_server: Callable[..., FakeServer], names: tuple[str, ...], host: str) -> None:
    server = tls_server(*names)
    server.enqueue(Reply(json={"answer": 42}))
    body = post(f"https://{host}:{server.port}/v1", "chat/completions", headers={"X-Test": "yes"})
    assert body == {"answer": 42}
    [request] = server.requests
    assert request.method == "POST"
    assert request.path == "/v1/chat/completions"
    assert request.json == PAYLOAD
    assert request.headers["host"] == f"{host}:{server.port}"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["x-test"] == "yes"


@pytest.mark.usefixtures("trust_test_ca")
def test_tls_connection_is_kept_alive(tls_server: Callable[..., FakeServer]) -> None:
    server = tls_server("localhost")
    answers = calls(server.url, 3)
    assert [a["choices"][0]["message"]["content"] for a in answers] == ["echo: hello"] * 3
    assert server.connections == 1
    assert len(set(ports(server))) == 1


def test_untrusted_certificate_is_a_transient_verify_error(tls_server: Callable[..., FakeServer]) -> None:
    server = tls_server("localhost")  # signed by the test CA, which certifi's bundle does not hold
    with pytest.raises(TransientError, match="connection error") as caught:
        post(server.url)
    assert "certificate verify failed" in str(caught.value).lower()
    assert server.calls == 0


@pytest.mark.usefixtures("trust_test_ca")
@pytest.mark.parametrize(
    ("names", "host", "why"),
    [
        (("other.example",), "localhost", "Hostname mismatch"),
        (("localhost",), "127.0.0.1", "IP address mismatch"),
    ],
)
def test_certificate_for_another_host_is_refused(
    tls_server: Callable[..., FakeServer], names: tuple[str, ...], host: str, why: str
) -> None:
    server = tls_server(*names)
    with pytest.raises(TransientError, match="connection error") as caught:
        post(f"https://{host}:{server.port}")
    message = str(caught.value)
    assert "certificate verify failed" in message.lower()
    assert why in message
    assert server.calls == 0


def test_tls_handshake_that_never_completes_times_out(silent_port: int) -> None:
    with pytest.raises(TransientError, match=r"timed out after 0\.2 s"):
        post(f"https://127.0.0.1:{silent_port}", timeout_s=0.2)


# --- keep-alive ---------------------------------------------------------------------------------


def test_sequential_calls_reuse_one_connection(fake_llm: FakeServer) -> None:
    answers = calls(fake_llm.url, 5)
    assert len(answers) == 5
    assert [r.json["n"] for r in fake_llm.requests] == [0, 1, 2, 3, 4]
    assert fake_llm.connections == 1
    assert len(set(ports(fake_llm))) == 1


def test_connection_close_is_followed_by_a_new_connection(fake_llm: FakeServer) -> None:
    fake_llm.enqueue(Reply(json={"first": True}, close=True), Reply(json={"second": True}), Reply(json={"third": True}))
    assert calls(fake_llm.url, 3) == [{"first": True}, {"second": True}, {"third": True}]
    first, second, third = ports(fake_llm)
    assert first != second
    assert second == third
    assert fake_llm.connections == 2


def test_idle_connection_the_server_closed_is_not_reused(fake_llm: FakeServer) -> None:
    """A server's idle keep-alive timeout while the event loop is busy (here: blocked until the
    server has closed the connection), before the next call."""
    hang_up, closed = threading.Event(), threading.Event()
    fake_llm.enqueue(Reply(json={"first": True}, hang_up=hang_up, closed=closed), Reply(json={"second": True}))

    async def main() -> list[dict[str, Any]]:
        async with json_client(fake_llm.url) as client:
            first, _ = await client.post("/v1", PAYLOAD)
            hang_up.set()
            assert closed.wait(30)  # blocks the loop: the FIN is on the socket, unread
            second, _ = await client.post("/v1", PAYLOAD)
            return [first, second]

    assert run(main) == [{"first": True}, {"second": True}]
    assert fake_llm.connections == 2


# --- faults -------------------------------------------------------------------------------------


def test_connection_refused_is_a_transient_connection_error(closed_port: int) -> None:
    with pytest.raises(TransientError, match=r"provider 'fake': connection error \(ConnectError: "):
        post(f"http://127.0.0.1:{closed_port}")


def test_read_timeout_is_transient(fake_llm: FakeServer) -> None:
    fake_llm.enqueue(Reply(json={"late": True}, delay_s=30))  # the client has given up long before
    with pytest.raises(TransientError, match=r"^provider 'fake': timed out after 0\.2 s$"):
        post(fake_llm.url, timeout_s=0.2)
    assert fake_llm.calls == 1


def test_reset_connection_is_transient_and_the_next_call_reconnects(fake_llm: FakeServer) -> None:
    fake_llm.enqueue(Reply(reset=True), Reply(json={"after": "reset"}))

    async def main() -> tuple[TransientError, dict[str, Any]]:
        async with json_client(fake_llm.url) as client:
            with pytest.raises(TransientError, match="connection error") as caught:
                await client.post("/v1", PAYLOAD)
            body, _ = await client.post("/v1", PAYLOAD)
            return caught.value, body

    error, body = run(main)
    assert error.retry_after is None
    assert body == {"after": "reset"}
    assert fake_llm.connections == 2


@pytest.mark.parametrize(
    ("encoding", "compress"),
    [
        ("gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("deflate", lambda data: zlib.compress(data)[2:-4]),  # raw deflate, without the zlib wrapper
        ("GZip", gzip.compress),
    ],
)
def test_compressed_reply_is_decoded(fake_llm: FakeServer, encoding: str, compress: Callable[[bytes], bytes]) -> None:
    answer = {"choices": [{"message": {"content": "squeezed " * 50}}]}
    fake_llm.enqueue(Reply(body=compress(json.dumps(answer).encode()), headers={"Content-Encoding": encoding}))
    assert post(fake_llm.url) == answer


def test_corrupt_gzip_body_is_a_malformed_json_error(fake_llm: FakeServer) -> None:
    fake_llm.enqueue(Reply(body=b"\x1f\x8b not really gzip", headers={"Content-Encoding": "gzip"}))
    with pytest.raises(ProviderError, match=r"malformed JSON in the response body \(HTTP 200\)") as caught:
        post(fake_llm.url)
    assert not isinstance(caught.value, TransientError)


def test_429_carries_retry_after(fake_llm: FakeServer) -> None:
    fake_llm.enqueue(Reply(status=429, json={"error": {"message": "rate limited"}}, headers={"Retry-After": "7"}))
    with pytest.raises(TransientError, match=r"^provider 'fake': HTTP 429: rate limited$") as caught:
        post(fake_llm.url)
    assert caught.value.retry_after == 7.0


def test_call_retries_a_429_after_its_retry_after(fake_llm: FakeServer) -> None:
    fake_llm.enqueue(Reply(status=429, headers={"Retry-After": "0"}, json={}), Reply(json={"ok": True}))
    assert calls(fake_llm.url, 1, retry=RetryPolicy(max_retries=1, backoff_s=0.0)) == [{"ok": True}]
    assert fake_llm.calls == 2


def test_call_without_retries_reports_the_transient_fault_as_an_item_error(fake_llm: FakeServer) -> None:
    fake_llm.enqueue(Reply(status=503, json={"error": "down for maintenance"}))
    with pytest.raises(ProviderError, match=r"HTTP 503: down for maintenance \(after 1 attempt\)$") as caught:
        calls(fake_llm.url, 1)
    assert not isinstance(caught.value, TransientError)
    assert isinstance(caught.value.__cause__, TransientError)


@pytest.mark.parametrize(
    "body",
    [
        {"error": {"message": "the model is overloaded", "type": "server_error"}},
        {"error": "the model is overloaded"},
        {"message": "the model is overloaded"},
        {"detail": "the model is overloaded"},
        {"detail": [{"loc": ["body"], "msg": "the model is overloaded", "type": "x"}]},
    ],
)
def test_500_puts_the_api_message_in_the_error(fake_llm: FakeServer, body: dict[str, Any]) -> None:
    fake_llm.enqueue(Reply(status=500, json=body))
    with pytest.raises(TransientError, match=r"^provider 'fake': HTTP 500: the model is overloaded$"):
        post(fake_llm.url)


def test_500_with_a_text_body_puts_the_text_in_the_error(fake_llm: FakeServer) -> None:
    fake_llm.enqueue(Reply(status=502, body=b"  Bad Gateway  \n"))
    with pytest.raises(TransientError, match=r"^provider 'fake': HTTP 502: Bad Gateway$"):
        post(fake_llm.url)


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (Reply(body=b"<html>not json</html>"), r"malformed JSON in the response body \(HTTP 200\)"),
        (Reply(body=b""), r"malformed JSON in the response body \(HTTP 200\)"),
        (Reply(json=["a", "list"]), r"expected a JSON object in the response body, got list"),
    ],
)
def test_a_body_that_is_not_a_json_object_is_an_item_error(fake_llm: FakeServer, reply: Reply, message: str) -> None:
    fake_llm.enqueue(reply)
    with pytest.raises(ProviderError, match=message) as caught:
        post(fake_llm.url)
    assert type(caught.value) is ProviderError


@pytest.mark.parametrize(
    ("status", "error", "hint"),
    [
        (401, ProviderRefused, "check the API key in $EVALKIT_TEST_KEY"),
        (403, ProviderRefused, "check the API key in $EVALKIT_TEST_KEY"),
        (404, ProviderRefused, "check the model alias and base_url"),
        (400, ProviderError, None),
        (422, ProviderError, None),
        (408, TransientError, None),
        (409, TransientError, None),
    ],
)
def test_status_is_mapped_to_its_error(
    fake_llm: FakeServer, status: int, error: type[ProviderError], hint: str | None
) -> None:
    fake_llm.enqueue(Reply(status=status, json={"error": {"message": "nope sk-SECRET-123"}}))
    with pytest.raises(ProviderError) as caught:
        post(fake_llm.url, key_env="EVALKIT_TEST_KEY", secrets=("sk-SECRET-123",))
    assert type(caught.value) is error
    message = str(caught.value)
    assert message.startswith(f"provider 'fake': HTTP {status}: nope ***")
    assert "SECRET" not in message
    if hint is not None:
        assert message.endswith(hint)


# --- the connection bound -----------------------------------------------------------------------


def test_concurrent_calls_use_at_most_max_connections(fake_llm: FakeServer) -> None:
    # Each request waits until four are in flight: the client must run four at once to finish.
    together = threading.Barrier(4, timeout=60)

    def handler(request: Recorded) -> Reply:
        together.wait()
        return Reply(json={"n": request.json["n"]})

    fake_llm.handler = handler

    async def main() -> list[tuple[dict[str, Any], float]]:
        async with json_client(fake_llm.url, max_connections=4) as client:
            return await asyncio.gather(*(client.call("/v1", {"n": n}) for n in range(20)))

    answers = run(main)
    assert [body for body, _ in answers] == [{"n": n} for n in range(20)]
    assert fake_llm.calls == 20
    assert fake_llm.max_open_connections == 4
    assert fake_llm.connections == 4
    assert len(set(ports(fake_llm))) == 4


# --- check_url ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost",
        "https://api.openai.com",
        "https://api.openai.com/v1",
        "http://127.0.0.1:8080",
        "http://127.0.0.1:8080/v1/",
        "https://[::1]:8443/v1",
        "http://x:1",
        "http://x:65535/path?q=1",
        "https://xn--bcher-kva.example/v1",
        "http://bücher.example/v1",
        "https://例え.jp",
        "http://example.com/a b",
        "http://example.com/v1?q=ä",
    ],
)
def test_check_url_accepts_http_and_https(url: str) -> None:
    check_url(url, "base_url of provider 'fake'")


@pytest.mark.parametrize(
    "url",
    [
        "http://[::1",
        "ftp://x",
        "x",
        "localhost:8080",
        "http://",
        "http://:8080/v1",
        "http://exa mple.com",
        "http://x:0",
        "http://x:70000",
        "http://x:port",
        "http://exa\tmple.com",
        "http://example.com/v1\r\nX-Injected: 1",
    ],
)
def test_check_url_rejects_unusable_urls(url: str) -> None:
    with pytest.raises(InputError) as caught:
        check_url(url, "base_url of provider 'fake'")
    message = str(caught.value)
    assert "is not a usable URL" in message
    assert message.startswith(f"base_url of provider 'fake' {url!r} is not a usable URL (")


def test_the_target_is_percent_encoded_and_keeps_its_params(fake_llm: FakeServer) -> None:
    post(f"{fake_llm.url}/a%2Fb/sp ace;v=1?q=ä&r={{x}}", path="")
    assert fake_llm.requests[-1].path == "/a%2Fb/sp%20ace;v=1?q=%C3%A4&r={x}"  # as httpx encodes it


def test_a_configured_host_header_replaces_the_generated_one_whatever_its_case(fake_llm: FakeServer) -> None:
    post(fake_llm.url + "/v1", headers={"host": "api.example"})
    assert fake_llm.requests[-1].headers["host"] == "api.example"


# --- get_status ---------------------------------------------------------------------------------


def test_get_status_of_a_live_server(fake_llm: FakeServer) -> None:
    fake_llm.enqueue(Reply(json={}), Reply(status=503, json={}))
    assert run(lambda: get_status(f"{fake_llm.url}/health")) == 200
    assert run(lambda: get_status(f"{fake_llm.url}/health")) == 503
    assert [(r.method, r.path) for r in fake_llm.requests] == [("GET", "/health"), ("GET", "/health")]


def test_get_status_is_none_when_nothing_answers(closed_port: int) -> None:
    assert run(lambda: get_status(f"http://127.0.0.1:{closed_port}/health")) is None


def test_get_status_is_none_when_the_connection_is_reset(fake_llm: FakeServer) -> None:
    fake_llm.enqueue(Reply(reset=True))
    assert run(lambda: get_status(fake_llm.url)) is None


def test_deeply_nested_json_in_a_reply_is_a_malformed_json_error(fake_llm: FakeServer) -> None:
    fake_llm.enqueue(Reply(body=b"[" * 100_000 + b"]" * 100_000))
    with pytest.raises(ProviderError, match=r"malformed JSON in the response body"):
        post(fake_llm.url)


@pytest.mark.slow
def test_a_retry_after_holds_off_every_lane_not_only_the_one_that_got_it(fake_llm: FakeServer) -> None:
    fake_llm.enqueue(Reply(status=429, json={"error": "slow down"}, headers={"Retry-After": "1"}))
    received: list[float] = []

    def answer(request: Recorded) -> Reply:
        received.append(time.monotonic())
        return Reply(json={"ok": True})

    fake_llm.handler = answer

    async def main() -> float:
        async with json_client(fake_llm.url, max_connections=4) as client:
            with pytest.raises(TransientError):
                await client.post("/v1/chat/completions", PAYLOAD)
            limited_at = time.monotonic()
            await asyncio.gather(*(client.post("/v1/chat/completions", PAYLOAD) for _ in range(4)))
            return limited_at

    limited_at = run(main)
    assert len(received) == 4
    assert min(received) >= limited_at + 0.9  # Retry-After: 1, counted from just before limited_at


def test_a_retry_after_on_a_500_delays_only_its_own_retry(fake_llm: FakeServer) -> None:
    fake_llm.enqueue(Reply(status=500, json={"error": "oops"}, headers={"Retry-After": "30"}))

    async def main() -> None:
        async with json_client(fake_llm.url, max_connections=2) as client:
            with pytest.raises(TransientError):
                await client.post("/v1/chat/completions", PAYLOAD)
            await asyncio.wait_for(client.post("/v1/chat/completions", PAYLOAD), timeout=10)

    run(main)
    assert fake_llm.calls == 2
