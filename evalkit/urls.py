"""An http(s) URL checked where the config is read and where it is called, and its identity for
the completion cache. httpx does the encoding on the wire; this only says whether a URL is one
evalkit can call (without echoing any password it carries) and spells it canonically.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, urlsplit

# RFC 3986 characters that stay as written in a path and in a query; anything else (spaces,
# non-ASCII, quotes, braces) is percent-encoded, as httpx does. '%' stays: escapes already made.
_PATH_SAFE = "/%:@!$&'()*+,;=-._~"
_QUERY_SAFE = _PATH_SAFE + "?"


@dataclass(frozen=True, slots=True)
class Endpoint:
    """An http(s) URL as it goes on the wire: an ASCII host (IDNA), a port, an encoded target."""

    scheme: str
    host: str
    port: int | None
    target: str

    @classmethod
    def parse(cls, url: str, *, userinfo: bool = False) -> Endpoint:
        """The endpoint of ``url``; ValueError saying why it cannot be one. A user:password@ is
        refused unless ``userinfo`` (a proxy's credentials): an endpoint's key goes in api_key_env."""
        parts = urlsplit(url)
        port = parts.port  # ValueError for a port that is not a number in 0..65535
        if parts.scheme not in ("http", "https"):
            raise ValueError("it must start with http:// or https://")
        if not userinfo and "@" in parts.netloc:
            raise ValueError("credentials in the URL (user:password@) are never sent; put the key in api_key_env")
        host = parts.hostname or ""
        if not host:
            raise ValueError("no host")
        if any(c.isspace() or not c.isprintable() for c in host):
            raise ValueError("spaces or control characters in the host")
        if not host.isascii():  # IDNA 2008 with UTS 46 mapping, as httpx does (not Python's IDNA 2003)
            import idna

            try:
                host = idna.encode(host, uts46=True).decode("ascii")
            except idna.IDNAError as exc:
                raise ValueError(f"the host is not a valid domain name ({exc})") from None
        if port == 0:
            raise ValueError("port 0")
        if any(ord(c) < 32 or ord(c) == 127 for c in url):
            raise ValueError("control characters")
        target = quote(parts.path or "/", safe=_PATH_SAFE)
        if parts.query:
            target += "?" + quote(parts.query, safe=_QUERY_SAFE)
        return cls(parts.scheme, host, port, target)

    @property
    def authority(self) -> str:
        """The Host header: the host (bracketed when IPv6) and any port written in the URL."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = {"http": 80, "https": 443}[self.scheme]
        return host if self.port in (None, default) else f"{host}:{self.port}"


def redacted(url: str) -> str:
    """``url`` with any user:password@ shown as ***@ (for messages)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    authority, slash, tail = rest.partition("/")
    if "@" not in authority:
        return url
    return f"{scheme}://***@{authority.rpartition('@')[2]}{slash}{tail}"


def userinfo_secrets(url: str | None) -> tuple[str, ...]:
    """The user:password (as written and decoded) in ``url``, to mask in every message."""
    if not url:
        return ()
    parts = urlsplit(url)
    authority = parts.netloc.rpartition("@")
    if not authority[1]:
        return ()
    found = [authority[0], *(p for p in (parts.password, parts.username) if p)]
    from urllib.parse import unquote

    found += [unquote(p) for p in found]
    return tuple(sorted({p for p in found if p}, key=len, reverse=True))
