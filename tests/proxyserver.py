"""A small HTTP proxy on 127.0.0.1 for tests: CONNECT tunnels (https through a proxy) and plain
forwarding of absolute-form requests (http through a proxy), one request per connection.

Each request is recorded (method, target, Proxy-Authorization). With ``credentials`` a request
without the matching ``Proxy-Authorization: Basic`` is answered 407.
"""

from __future__ import annotations

import base64
import contextlib
import socket
import socketserver
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


@dataclass(frozen=True)
class ProxiedRequest:
    method: str
    target: str
    authorization: str | None


class ProxyServer:
    def __init__(self, credentials: str | None = None) -> None:
        self.requests: list[ProxiedRequest] = []
        self._expected = "Basic " + base64.b64encode(credentials.encode()).decode() if credentials else None
        owner = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                owner._handle(self.request)

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ProxyServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handle(self, client: socket.socket) -> None:
        reader = client.makefile("rb")
        try:
            self._serve(client, reader)
        finally:
            reader.close()  # else the socket's file descriptor outlives the server's close

    def _serve(self, client: socket.socket, reader: Any) -> None:
        line = reader.readline().decode("latin-1").rstrip("\r\n")
        if not line:
            return
        method, target, _ = line.split(" ", 2)
        headers: list[tuple[str, str]] = []
        while (header := reader.readline().decode("latin-1").rstrip("\r\n")) != "":
            name, _, value = header.partition(":")
            headers.append((name.strip(), value.strip()))
        auth = next((v for k, v in headers if k.lower() == "proxy-authorization"), None)
        self.requests.append(ProxiedRequest(method, target, auth))
        if self._expected is not None and auth != self._expected:
            client.sendall(
                b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            return
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            upstream = socket.create_connection((host, int(port)))
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            _pipe(client, upstream, reader)
            return
        parts = urlsplit(target)
        upstream = socket.create_connection((parts.hostname or "", parts.port or 80))
        origin_form = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        kept = [(k, v) for k, v in headers if not k.lower().startswith("proxy-") and k.lower() != "connection"]
        head = f"{method} {origin_form} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in kept)
        upstream.sendall((head + "Connection: close\r\n\r\n").encode("latin-1"))
        length = int(next((v for k, v in headers if k.lower() == "content-length"), "0"))
        if length:
            upstream.sendall(reader.read(length))
        with upstream:
            while data := upstream.recv(65536):
                client.sendall(data)


def _pipe(client: socket.socket, upstream: socket.socket, reader: Any) -> None:
    """Relay bytes both ways until either side closes (what the client sent already buffered first)."""
    buffered = reader.peek() if hasattr(reader, "peek") else b""
    if buffered:
        upstream.sendall(reader.read(len(buffered)))

    def relay(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    back = threading.Thread(target=relay, args=(upstream, client), daemon=True)
    back.start()
    relay(client, upstream)
    back.join(30)
    upstream.close()
