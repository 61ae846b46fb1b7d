"""A real HTTP server on 127.0.0.1 for tests: scripted answers, injected latency and faults.

Each request is recorded (method, path, headers, JSON body). Replies come from a queue of
scripted ``Reply`` objects, else from a handler function, else the default: an OpenAI-style
chat completion echoing the last user message. A reply can delay, return any status, headers
or raw bytes, or reset the connection without answering.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
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


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    json: Any


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


class FakeServer:
    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.queue: deque[Reply] = deque()
        self.handler: Callable[[Recorded], Reply] | None = None
        self.model: str | None = "fake-model-1"
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # silence
                return

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    payload = json.loads(raw) if raw else None
                except ValueError:
                    payload = raw.decode("utf-8", "replace")
                recorded = Recorded(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, payload)
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
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            do_POST = _handle
            do_GET = _handle

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

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
