"""The proxy an endpoint is called through, chosen from the environment as curl chooses it
(README "HTTP"): ``https_proxy`` / ``HTTPS_PROXY`` for an https URL, ``http_proxy`` /
``HTTP_PROXY`` for an http one, else ``all_proxy`` / ``ALL_PROXY`` (the lowercase name first);
none when ``no_proxy`` / ``NO_PROXY`` names the host: ``*``, a domain (its subdomains included,
a leading dot or not), an IP address, or a CIDR range (``127.0.0.0/8``, ``10.0.0.0/8``,
``fd00::/8``), each optionally with ``:port``.

httpx reads NO_PROXY itself but not its CIDR ranges, so evalkit decides per endpoint and gives
httpx the one proxy (or none). A proxy scheme httpx cannot use is refused before any call, the
variable named: SOCKS (``socks5://``, ``socks5h://``) only when httpx's ``socks`` extra is
installed.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import os
from dataclasses import dataclass
from urllib.parse import urlsplit

from evalkit.errors import InputError
from evalkit.urls import redacted

SOCKS = ("socks5", "socks5h")
USABLE = ("http", "https", *SOCKS)


@dataclass(frozen=True, slots=True)
class Proxy:
    """A proxy URL (it may hold credentials: show it ``redacted``) and where it came from: an
    environment variable, or None for a provider's ``proxy:``."""

    url: str
    variable: str | None = None

    def __str__(self) -> str:
        where = f" (from {self.variable})" if self.variable else ""
        return f"{redacted(self.url)}{where}"


def environment_proxy(url: str) -> Proxy | None:
    """The environment's proxy for calls to ``url`` (an http or https URL), None when there is
    none or NO_PROXY exempts its host. InputError when it is one httpx cannot use."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    names = (f"{scheme}_proxy", f"{scheme.upper()}_PROXY", "all_proxy", "ALL_PROXY")
    found = next(((name, os.environ[name].strip()) for name in names if os.environ.get(name, "").strip()), None)
    if found is None:
        return None
    no_proxy = os.environ.get("no_proxy") or os.environ.get("NO_PROXY") or ""
    try:
        port = parts.port
    except ValueError:
        port = None
    if exempt(parts.hostname or "", port or (443 if scheme == "https" else 80), no_proxy):
        return None
    name, value = found
    proxy = Proxy(value if "://" in value else f"http://{value}", name)  # no scheme: http, as curl
    check_proxy(proxy)
    return proxy


def check_proxy(proxy: Proxy) -> None:
    """InputError naming where ``proxy`` came from when httpx cannot use it."""
    source = f"${proxy.variable}" if proxy.variable else "proxy:"
    fix = f"unset {proxy.variable} or add the host to NO_PROXY" if proxy.variable else "fix it in evalkit.yaml"
    scheme = proxy.url.partition("://")[0].lower()
    if scheme not in USABLE:
        raise InputError(
            f"{source} {redacted(proxy.url)!r}: a {scheme}:// proxy cannot be used "
            f"(http://, https://, socks5:// or socks5h://); {fix}"
        )
    if scheme in SOCKS and importlib.util.find_spec("socksio") is None:
        raise InputError(
            f"{source} {redacted(proxy.url)!r}: a SOCKS proxy needs httpx's socks extra, which is not installed: "
            f"pip install 'httpx[socks]' (or {fix})"
        )
    try:
        parts = urlsplit(proxy.url)
        parts.port  # noqa: B018 - ValueError for a port that is not a number in 0..65535
    except ValueError as exc:
        raise InputError(f"{source} {redacted(proxy.url)!r} is not a usable URL ({exc}); {fix}") from None
    if not parts.hostname:
        raise InputError(f"{source} {redacted(proxy.url)!r} is not a usable URL (no host); {fix}")


def exempt(host: str, port: int, no_proxy: str) -> bool:
    """Whether ``no_proxy`` (NO_PROXY's comma-separated entries) exempts ``host``:``port``."""
    host = host.strip("[]").rstrip(".").lower()
    address = _address(host)
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        name, entry_port = _split_port(entry)
        if not name or (entry_port is not None and entry_port != port):
            continue
        if name == "*":
            return True
        if "/" in name:
            try:
                network = ipaddress.ip_network(name, strict=False)
            except ValueError:
                continue
            if address is not None and address.version == network.version and address in network:
                return True
        elif address is not None or _address(name) is not None:
            if address is not None and address == _address(name):
                return True
        else:
            name = name.removeprefix("*").lstrip(".").rstrip(".")
            if name and (host == name or host.endswith("." + name)):
                return True
    return False


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _split_port(entry: str) -> tuple[str, int | None]:
    """An entry's host (an IPv6 address unbracketed) and its ``:port``, if it has one."""
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    if entry.count(":") == 1:
        host, _, port = entry.partition(":")
        return (host, int(port)) if port.isdigit() else (entry, None)
    return entry, None  # a name, an IPv4 address or range, or an IPv6 address or range
