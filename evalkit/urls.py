"""An http(s) URL as it goes on the wire, checked where the config is read and where it is called."""

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
    def parse(cls, url: str) -> Endpoint:
        """The endpoint of ``url``; ValueError saying why it cannot be one."""
        parts = urlsplit(url)
        port = parts.port  # ValueError for a port that is not a number in 0..65535
        if parts.scheme not in ("http", "https"):
            raise ValueError("it must start with http:// or https://")
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

    def joined(self, path: str) -> Endpoint:
        """This endpoint with ``path`` appended to its path ("" is the endpoint itself)."""
        if not path:
            return self
        base, _, query = self.target.partition("?")
        target = base.rstrip("/") + "/" + quote(path.lstrip("/"), safe=_QUERY_SAFE)
        return Endpoint(self.scheme, self.host, self.port, target + (f"?{query}" if query else ""))
