"""The environment's proxy for an endpoint, chosen as curl chooses it (evalkit.proxies); the
calls themselves are tested against a real proxy in tests/providers/test_network.py."""

from __future__ import annotations

import pytest

from evalkit.errors import InputError
from evalkit.proxies import Proxy, environment_proxy, exempt


@pytest.mark.parametrize(
    ("host", "port", "no_proxy", "expected"),
    [
        ("127.0.0.1", 80, "127.0.0.0/8", True),
        ("127.200.3.4", 80, "10.0.0.0/8,127.0.0.0/8", True),
        ("10.1.2.3", 443, " 10.0.0.0/8 ", True),
        ("11.0.0.1", 443, "10.0.0.0/8", False),
        ("::1", 80, "::1/128", True),
        ("[fd00::5]", 80, "fd00::/8", True),
        ("127.0.0.1", 80, "::/0", False),  # an IPv6 range never covers an IPv4 address
        ("api.example.com", 443, "127.0.0.0/8", False),  # a name is not resolved to match a range
        ("127.0.0.1", 80, "127.0.0.1", True),
        ("::1", 80, "[::1]", True),
        ("api.example.com", 443, "example.com", True),
        ("api.example.com", 443, ".example.com", True),
        ("api.example.com", 443, "*.example.com", True),
        ("example.com", 443, ".example.com", True),
        ("notexample.com", 443, "example.com", False),
        ("API.Example.COM.", 443, "example.com", True),
        ("anything", 443, "*", True),
        ("localhost", 8080, "localhost:8080", True),
        ("localhost", 80, "localhost:8080", False),
        ("127.0.0.1", 8080, "127.0.0.0/8:8080", True),  # a range and a port
        ("127.0.0.1", 80, "127.0.0.0/8:8080", False),
        ("localhost", 80, "", False),
        ("localhost", 80, "300.0.0.0/8,,", False),
    ],
)
def test_no_proxy_entries_as_curl_reads_them(host: str, port: int, no_proxy: str, expected: bool) -> None:
    assert exempt(host, port, no_proxy) is expected


def test_the_lowercase_variable_wins_and_https_uses_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://upper:3128")
    monkeypatch.setenv("https_proxy", "http://lower:3128")
    monkeypatch.setenv("HTTP_PROXY", "http://plain:3128")
    assert environment_proxy("https://api.example.com/v1") == Proxy("http://lower:3128", "https_proxy")
    assert environment_proxy("http://api.example.com/v1") == Proxy("http://plain:3128", "HTTP_PROXY")


def test_all_proxy_serves_when_the_scheme_has_none_and_a_bare_host_is_http(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ALL_PROXY", "proxy.corp:3128")
    assert environment_proxy("https://api.example.com") == Proxy("http://proxy.corp:3128", "ALL_PROXY")


def test_no_proxy_exempts_before_the_proxy_is_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ALL_PROXY", "ftp://proxy.corp")
    monkeypatch.setenv("NO_PROXY", "127.0.0.0/8")
    assert environment_proxy("http://127.0.0.1:8000/v1") is None
    with pytest.raises(InputError, match=r"^\$ALL_PROXY 'ftp://proxy.corp': a ftp:// proxy cannot be used"):
        environment_proxy("http://10.0.0.1:8000/v1")


def test_a_proxy_is_shown_without_its_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://alice:s3cret@proxy.corp:3128")
    proxy = environment_proxy("https://api.example.com")
    assert str(proxy) == "http://***@proxy.corp:3128 (from HTTPS_PROXY)"
    monkeypatch.setenv("HTTPS_PROXY", "socks4://alice:s3cret@proxy.corp:1080")
    with pytest.raises(InputError) as caught:
        environment_proxy("https://api.example.com")
    assert "s3cret" not in str(caught.value)
