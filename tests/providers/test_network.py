"""Proxies, CAs and bounded responses (README "HTTP"), against real servers on 127.0.0.1 that the
test starts: the fake endpoint (plain or TLS signed by a throwaway CA) and a small proxy."""

from __future__ import annotations

import asyncio
import gzip
import importlib.util
import json
import socket
import ssl
import subprocess
import tracemalloc
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from evalkit.errors import InputError, ProviderError
from evalkit.providers.http import JsonClient
from evalkit.providers.retry import TransientError
from tests.fakeserver import FakeServer, Reply
from tests.proxyserver import ProxiedRequest, ProxyServer

NAME = "provider 'fake'"
PAYLOAD = {"model": "fake-alias", "messages": [{"role": "user", "content": "hello"}]}
PASSWORD = "pr0xy-S3CRET-pw"
MB = 1024 * 1024

ONE_PROMPT = """
id: net.demo
name: Network
prompts:
  - id: one
    prompt: hello
    assertions: [{contains: echo}]
"""


def post(base_url: str, path: str = "/v1/chat/completions", **options: Any) -> dict[str, Any]:
    """One ``post`` through a fresh client; the decoded body."""

    async def main() -> dict[str, Any]:
        client = JsonClient(NAME, base_url, **options)
        try:
            body, _ = await client.post(path, PAYLOAD)
            return body
        finally:
            await client.aclose()

    return asyncio.run(main())


@pytest.fixture
def proxy() -> Iterator[ProxyServer]:
    server = ProxyServer().start()
    yield server
    server.stop()


@pytest.fixture
def authenticated_proxy() -> Iterator[ProxyServer]:
    server = ProxyServer(credentials=f"alice:{PASSWORD}").start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def ca_file(ca: trustme.CA, tmp_path: Path) -> Path:
    pem = tmp_path / "work" / "certs" / "corp.pem"
    pem.parent.mkdir(parents=True, exist_ok=True)
    ca.cert_pem.write_to_path(str(pem))
    return pem


@pytest.fixture
def tls_llm(ca: trustme.CA) -> Iterator[FakeServer]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(context)
    server = FakeServer(tls=context).start()
    yield server
    server.stop()


def config(write_file: Any, base_url: str, **fields: Any) -> Path:
    extra = "".join(f"\n            {key}: {value}" for key, value in fields.items())
    write_file("sets/net.yaml", ONE_PROMPT)
    return write_file(
        "evalkit.yaml",
        f"""
        default_provider: fake
        providers:
          - id: fake
            adapter: openai
            base_url: {base_url}
            model: fake-alias
            max_retries: 0
            timeout_s: 5{extra}
        """,
    )


# --- proxies ------------------------------------------------------------------------------------


def test_http_proxy_from_the_environment_carries_a_plain_request(
    fake_llm: FakeServer, proxy: ProxyServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    assert post(fake_llm.url)["choices"][0]["message"]["content"] == "echo: hello"
    assert proxy.requests == [ProxiedRequest("POST", f"{fake_llm.url}/v1/chat/completions", None)]
    assert fake_llm.calls == 1


def test_no_proxy_host_is_called_directly(
    fake_llm: FakeServer, proxy: ProxyServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    post(f"{fake_llm.url}/v1")
    assert proxy.requests == []
    assert fake_llm.calls == 1


def test_https_proxy_from_the_environment_tunnels_with_connect(
    tls_llm: FakeServer, proxy: ProxyServer, ca_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    post(f"{tls_llm.url}/v1", ca_bundle=ca_file)
    assert proxy.requests == [ProxiedRequest("CONNECT", f"localhost:{tls_llm.port}", None)]
    assert tls_llm.calls == 1


def test_all_proxy_applies_to_https(
    tls_llm: FakeServer, proxy: ProxyServer, ca_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALL_PROXY", proxy.url)
    post(f"{tls_llm.url}/v1", ca_bundle=ca_file)
    assert [r.method for r in proxy.requests] == ["CONNECT"]


def test_configured_proxy_with_credentials_is_used_and_never_shown(
    cli: Any, write_file: Any, fake_llm: FakeServer, authenticated_proxy: ProxyServer, db_file: Path
) -> None:
    proxy_url = f"http://alice:{PASSWORD}@127.0.0.1:{authenticated_proxy.port}"
    config(write_file, f"{fake_llm.url}/v1", proxy=proxy_url)
    result = cli("run", "sets/net.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert [r.method for r in authenticated_proxy.requests] == ["POST"]
    assert authenticated_proxy.requests[0].authorization is not None
    assert PASSWORD not in result.stdout + result.stderr
    assert PASSWORD.encode() not in db_file.read_bytes()


def test_proxy_credentials_never_appear_in_an_error(write_file: Any, closed_port: int) -> None:
    with pytest.raises(TransientError, match="connection error") as caught:
        post("http://127.0.0.1:9/v1", proxy=f"http://alice:{PASSWORD}@127.0.0.1:{closed_port}")
    assert PASSWORD not in str(caught.value)
    with pytest.raises(InputError) as refused:
        post("http://127.0.0.1:9/v1", proxy=f"http://alice:{PASSWORD}@127.0.0.1:port")
    assert PASSWORD not in str(refused.value)


def test_a_proxy_refusing_the_credentials_is_an_error_without_them(
    fake_llm: FakeServer, authenticated_proxy: ProxyServer
) -> None:
    with pytest.raises(ProviderError) as caught:
        post(f"{fake_llm.url}/v1", proxy=f"http://alice:wrong-{PASSWORD}@127.0.0.1:{authenticated_proxy.port}")
    assert "407" in str(caught.value)
    assert PASSWORD not in str(caught.value)
    assert fake_llm.calls == 0


@pytest.mark.parametrize("no_proxy", ["127.0.0.0/8", "10.0.0.0/8, 127.0.0.0/8", "::1/128,127.0.0.1/32"])
def test_a_cidr_range_in_no_proxy_is_called_directly(
    fake_llm: FakeServer, proxy: ProxyServer, monkeypatch: pytest.MonkeyPatch, no_proxy: str
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", no_proxy)
    post(f"{fake_llm.url}/v1")
    assert proxy.requests == []
    assert fake_llm.calls == 1


def test_a_cidr_range_that_does_not_cover_the_host_keeps_the_proxy(
    fake_llm: FakeServer, proxy: ProxyServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("http_proxy", proxy.url)
    monkeypatch.setenv("no_proxy", "10.0.0.0/8,localhost")
    post(f"{fake_llm.url}/v1")
    assert [r.method for r in proxy.requests] == ["POST"]


def test_a_connection_error_through_an_environment_proxy_names_it(
    closed_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", f"http://alice:{PASSWORD}@127.0.0.1:{closed_port}")
    with pytest.raises(TransientError) as caught:
        post("https://api.example.invalid/v1")
    assert f"connection error through the proxy http://***@127.0.0.1:{closed_port} (from HTTPS_PROXY)" in str(
        caught.value
    )
    assert PASSWORD not in str(caught.value)


def test_a_connection_error_through_a_configured_proxy_names_it(closed_port: int) -> None:
    with pytest.raises(TransientError, match=rf"connection error through the proxy http://127.0.0.1:{closed_port} \("):
        post("http://127.0.0.1:9/v1", proxy=f"http://127.0.0.1:{closed_port}")


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("ALL_PROXY", "socks5://127.0.0.1:1080", "pip install 'httpx[socks]'"),
        ("all_proxy", "socks5h://127.0.0.1:1080", "pip install 'httpx[socks]'"),
        ("HTTP_PROXY", "ftp://proxy.example:21", "a ftp:// proxy cannot be used"),
    ],
)
def test_an_unusable_environment_proxy_is_exit_2_before_any_call(
    cli: Any,
    write_file: Any,
    fake_llm: FakeServer,
    db_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    value: str,
    says: str,
) -> None:
    if "socks" in value and importlib.util.find_spec("socksio") is not None:
        pytest.skip("httpx's socks extra is installed: SOCKS proxies are usable")
    config(write_file, f"{fake_llm.url}/v1")
    monkeypatch.setenv(variable, value)
    checked = cli("validate")
    assert checked.exit_code == 2, checked.stdout + checked.stderr
    assert "evalkit.yaml:5:15: providers[0].base_url: " in checked.stderr  # the endpoint it is for
    result = cli("run", "sets/net.yaml")
    assert result.exit_code == 2, result.stderr
    assert result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr
    for output in (checked.stdout + checked.stderr, result.stderr):
        assert f"${variable} '{value}'" in output
        assert says in output
    assert fake_llm.calls == 0
    assert not db_file.exists()


def test_an_unusable_proxy_exempted_by_no_proxy_is_not_used(
    cli: Any, write_file: Any, fake_llm: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    config(write_file, f"{fake_llm.url}/v1")
    monkeypatch.setenv("ALL_PROXY", "ftp://proxy.example:21")
    monkeypatch.setenv("NO_PROXY", "127.0.0.0/8")
    assert cli("validate").exit_code == 0
    assert cli("run", "sets/net.yaml").exit_code == 0
    assert fake_llm.calls == 1


# --- CAs ----------------------------------------------------------------------------------------


def test_an_endpoint_signed_by_an_unknown_ca_fails(tls_llm: FakeServer) -> None:
    with pytest.raises(TransientError, match="certificate verify failed"):
        post(f"{tls_llm.url}/v1")
    assert tls_llm.calls == 0


def test_ssl_cert_file_is_trusted(tls_llm: FakeServer, ca_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))
    post(f"{tls_llm.url}/v1")
    assert tls_llm.calls == 1


def test_ssl_cert_dir_is_trusted(
    ca: trustme.CA, tls_llm: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "certs"
    folder.mkdir()
    pem = folder / "corp.pem"
    ca.cert_pem.write_to_path(str(pem))
    # OpenSSL finds a certificate in a folder by its subject hash link, as c_rehash makes them
    digest = subprocess.run(
        ["openssl", "x509", "-hash", "-noout", "-in", str(pem)], capture_output=True, text=True, check=True
    ).stdout.strip()
    (folder / f"{digest}.0").symlink_to(pem)
    monkeypatch.setenv("SSL_CERT_DIR", str(folder))
    post(f"{tls_llm.url}/v1")
    assert tls_llm.calls == 1


def test_ca_bundle_in_the_config_is_trusted_relative_to_the_config(
    cli: Any, write_file: Any, tls_llm: FakeServer, ca_file: Path
) -> None:
    config(write_file, f"{tls_llm.url}/v1")
    failed = cli("run", "sets/net.yaml", "--format", "json")
    assert "certificate verify failed" in failed.stdout + failed.stderr
    config(write_file, f"{tls_llm.url}/v1", ca_bundle="certs/corp.pem")
    result = cli("run", "sets/net.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["passed_count"] == 1
    assert tls_llm.calls == 1


def test_a_missing_ca_bundle_is_exit_2_with_its_line(cli: Any, write_file: Any, fake_llm: FakeServer) -> None:
    config(write_file, f"{fake_llm.url}/v1", ca_bundle="certs/missing.pem")
    result = cli("run", "sets/net.yaml")
    assert result.exit_code == 2
    assert "evalkit.yaml:9:" in result.stderr
    assert "certs/missing.pem" in result.stderr
    assert fake_llm.calls == 0


def test_userinfo_in_base_url_is_exit_2_without_the_password(cli: Any, write_file: Any, fake_llm: FakeServer) -> None:
    config(write_file, f"http://bob:{PASSWORD}@127.0.0.1:{fake_llm.port}/v1")
    result = cli("run", "sets/net.yaml")
    assert result.exit_code == 2
    assert "evalkit.yaml:5:" in result.stderr
    assert "credentials in the URL" in result.stderr
    assert PASSWORD not in result.stdout + result.stderr
    assert fake_llm.calls == 0


# --- bounded responses and redirects ------------------------------------------------------------


def test_a_body_over_max_response_mb_is_an_item_error(fake_llm: FakeServer) -> None:
    fake_llm.enqueue(Reply(body=b'{"a": "' + b"x" * (2 * 1024 * 1024) + b'"}'))
    with pytest.raises(ProviderError, match=r"larger than max_response_mb \(1 MB\), read no further") as caught:
        post(fake_llm.url, max_response_mb=1)
    assert not isinstance(caught.value, TransientError)


def test_trailing_whitespace_after_valid_json_counts(fake_llm: FakeServer) -> None:
    fake_llm.enqueue(Reply(body=b'{"ok": true}' + b" " * (2 * 1024 * 1024)))
    with pytest.raises(ProviderError, match="larger than max_response_mb"):
        post(fake_llm.url, max_response_mb=1)


def test_a_gzip_bomb_is_stopped_at_its_inflated_size(fake_llm: FakeServer) -> None:
    bomb = gzip.compress(b'{"a": "' + b"0" * (16 * 1024 * 1024) + b'"}')
    assert len(bomb) < 64 * 1024
    fake_llm.enqueue(Reply(body=bomb, headers={"Content-Encoding": "gzip"}))
    with pytest.raises(ProviderError, match=r"larger than max_response_mb \(1 MB\)"):
        post(fake_llm.url, max_response_mb=1)


def gzipped(pieces: Iterator[bytes]) -> bytes:
    """One gzip member of ``pieces``, compressed as they come (a bomb is never held whole)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    return b"".join(packer.compress(piece) for piece in pieces) + packer.flush()


def test_a_nested_gzip_bomb_is_stopped_before_any_layer_inflates_past_the_limit(fake_llm: FakeServer) -> None:
    inner = gzipped(b"0" * MB for _ in range(64))  # 64 MB of zeros: ~64 KB
    bomb = gzipped(iter([inner]))
    assert len(bomb) < 4096
    fake_llm.enqueue(Reply(body=bomb, headers={"Content-Encoding": "gzip, gzip"}))
    tracemalloc.start()
    try:
        with pytest.raises(ProviderError, match=r"larger than max_response_mb \(1 MB\)"):
            post(fake_llm.url, max_response_mb=1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * MB  # the limit and a step or two, not the 64 MB the layers would inflate to


def test_every_content_encoding_layer_counts_against_the_limit(fake_llm: FakeServer) -> None:
    # the outer layer inflates to 2 MB of empty gzip members after a small answer: the answer
    # itself is small, the layer is not
    empty = gzip.compress(b"")
    inner = gzip.compress(b'{"ok": true}') + empty * (2 * MB // len(empty))
    fake_llm.enqueue(Reply(body=gzipped(iter([inner])), headers={"Content-Encoding": "gzip, gzip"}))
    with pytest.raises(ProviderError, match=r"larger than max_response_mb \(1 MB\)"):
        post(fake_llm.url, max_response_mb=1)


def test_two_layers_under_the_limit_are_both_decoded(fake_llm: FakeServer) -> None:
    body = gzip.compress(zlib.compress(b'{"ok": true}'))
    fake_llm.enqueue(Reply(body=body, headers={"Content-Encoding": "deflate, gzip"}))
    assert post(fake_llm.url, max_response_mb=1) == {"ok": True}


@pytest.mark.parametrize("encoding", ["br", "gzip, " * 6 + "gzip"])
def test_an_encoding_evalkit_does_not_decode_is_an_item_error(fake_llm: FakeServer, encoding: str) -> None:
    fake_llm.enqueue(Reply(body=b'{"ok": true}', headers={"Content-Encoding": encoding}))
    with pytest.raises(ProviderError, match=r"cannot decode it") as caught:
        post(fake_llm.url)
    assert not isinstance(caught.value, TransientError)


def test_a_body_under_the_limit_is_read(fake_llm: FakeServer) -> None:
    fake_llm.enqueue(Reply(body=gzip.compress(b'{"ok": true}'), headers={"Content-Encoding": "gzip"}))
    assert post(fake_llm.url, max_response_mb=1) == {"ok": True}


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_is_an_item_error_naming_the_location_and_not_followed(fake_llm: FakeServer, status: int) -> None:
    other = FakeServer().start()
    try:
        location = f"{other.url}/v1/chat/completions"
        fake_llm.enqueue(Reply(status=status, headers={"Location": location}, json={"choices": []}))
        with pytest.raises(ProviderError, match=rf"HTTP {status} redirect to {location}") as caught:
            post(fake_llm.url, headers={"Authorization": "Bearer sk-SECRET-redirect"}, secrets=("sk-SECRET-redirect",))
        assert not isinstance(caught.value, TransientError)
        assert other.calls == 0
    finally:
        other.stop()


def test_a_redirected_completion_is_not_graded(cli: Any, write_file: Any, fake_llm: FakeServer) -> None:
    config(write_file, f"{fake_llm.url}/v1")
    fake_llm.handler = lambda request: Reply(
        status=302,
        headers={"Location": "http://elsewhere.example/v1"},
        json={"choices": [{"message": {"content": "echo"}}]},
    )
    result = cli("run", "sets/net.yaml", "--format", "json")
    document = json.loads(result.stdout)
    assert document["passed_count"] == 0
    assert "redirect to http://elsewhere.example/v1" in result.stdout


@pytest.fixture
def closed_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]
