"""A real HTTP server on 127.0.0.1 for tests: scripted answers, injected latency and faults.

Each request is recorded (method, path, headers, JSON body). Replies come from a queue of
scripted ``Reply`` objects, else from a handler function, else the default: an OpenAI-style
chat completion echoing the last user message. A reply can delay, return any status, headers
or raw bytes, close the connection after answering, or reset it without answering.

With ``tls`` (a server-side ``ssl.SSLContext``) the server speaks HTTPS and ``url`` names
``localhost``. The server counts the connections it accepted and the most it held open at once.
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    json: Any = None
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    reset: bool = False
    close: bool = False  # answer with ``Connection: close``, then close the connection
    hang_up: threading.Event | None = None  # once set (after answering), close the connection unannounced
    closed: threading.Event | None = None  # set once the connection is closed (after ``close`` or ``hang_up``)


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    json: Any
    client_port: int = 0  # the client's end of the connection the request came on


def openai_reply(
    content: str, model: str | None = "fake-model-1", prompt_tokens: int = 10, completion_tokens: int = 5, **extra: Any
) -> Reply:
    body: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop", **extra}
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
    if model is not None:
        body["model"] = model
    return Reply(json=body)


def anthropic_reply(
    text: str, model: str | None = "claude-test-1", input_tokens: int = 12, output_tokens: int = 7
) -> Reply:
    body: dict[str, Any] = {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    }
    if model is not None:
        body["model"] = model
    return Reply(json=body)


def last_user_message(request: Recorded) -> str:
    messages = (request.json or {}).get("messages") or []
    users = [m.get("content", "") for m in messages if m.get("role") == "user"]
    return users[-1] if users else ""


class _HTTPServer(ThreadingHTTPServer):
    """Tracks connections (accepted, open, most open at once) and keeps socket faults quiet."""

    daemon_threads = True

    def __init__(self, owner: FakeServer, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.owner = owner

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        owner = self.owner
        with owner._lock:
            owner.connections += 1
            owner.open_connections += 1
            owner.max_open_connections = max(owner.max_open_connections, owner.open_connections)
        try:
            super().process_request_thread(request, client_address)
        finally:
            with owner._lock:
                owner.open_connections -= 1

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if exc is not None:
            with self.owner._lock:
                self.owner.errors.append(exc)
        if not isinstance(exc, OSError):  # a failed TLS handshake or a reset is expected: kept, not printed
            super().handle_error(request, client_address)


class FakeServer:
    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.requests: list[Recorded] = []
        self.queue: deque[Reply] = deque()
        self.handler: Callable[[Recorded], Reply] | None = None
        self.model: str | None = "fake-model-1"
        self.connections = 0  # accepted so far
        self.open_connections = 0
        self.max_open_connections = 0
        self.errors: list[BaseException] = []  # raised while serving a connection (e.g. a refused handshake)
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body leave at once, not one delayed ACK apart

            def log_message(self, format: str, *args: Any) -> None:  # silence
                return

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    payload = json.loads(raw) if raw else None
                except ValueError:
                    payload = raw.decode("utf-8", "replace")
                recorded = Recorded(
                    self.command,
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    payload,
                    self.client_address[1],
                )
                reply = server._next(recorded)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if reply.reset:
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.connection.close()
                    self.close_connection = True
                    return
                body = reply.body if reply.body is not None else json.dumps(reply.json).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    if reply.close:
                        self.send_header("Connection", "close")  # also ends the handler's keep-alive loop
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True
                if reply.hang_up is not None:  # like a server's idle keep-alive timeout
                    reply.hang_up.wait()
                    self.close_connection = True
                if reply.closed is not None and self.close_connection:
                    self.closing.append(reply.closed)

            def finish(self) -> None:
                super().finish()
                if self.closing:  # closed here, not later by the server, so that the events tell the truth
                    with contextlib.suppress(OSError):  # the client may have gone already
                        self.connection.shutdown(socket.SHUT_WR)
                    self.connection.close()
                for event in self.closing:
                    event.set()

            def setup(self) -> None:
                super().setup()
                self.closing: list[threading.Event] = []

            do_POST = _handle
            do_GET = _handle

        self.httpd = _HTTPServer(self, Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        if tls is not None:
            # The handshake runs on a connection's first read, in its handler thread: a client
            # that refuses the certificate never blocks the accepting thread.
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True, do_handshake_on_connect=False)
            self.url = f"https://localhost:{self.port}"
        # A short poll interval: stop() waits for the serving loop to notice, up to one interval.
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def _next(self, recorded: Recorded) -> Reply:
        with self._lock:
            self.requests.append(recorded)
            if self.queue:
                return self.queue.popleft()
        if self.handler is not None:
            return self.handler(recorded)
        if recorded.path.endswith("/messages"):
            return anthropic_reply(f"echo: {last_user_message(recorded)}", model=self.model)
        return openai_reply(f"echo: {last_user_message(recorded)}", model=self.model)

    def enqueue(self, *replies: Reply) -> None:
        with self._lock:
            self.queue.extend(replies)

    def start(self) -> FakeServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def calls(self) -> int:
        return len(self.requests)


@contextlib.contextmanager
def serving(handler: Callable[[Recorded], Reply] | None = None) -> Iterator[FakeServer]:
    """A server answering by ``handler`` (None: the default echo), started for the block and
    stopped after it."""
    server = FakeServer().start()
    server.handler = handler
    try:
        yield server
    finally:
        server.stop()
