"""A loopback server of the providers' documented batch endpoints (real HTTP on 127.0.0.1).

OpenAI's Batch API: ``POST /v1/files`` (multipart, purpose ``batch``), ``POST /v1/batches``,
``GET /v1/batches/{id}``, ``GET /v1/files/{id}/content``; Anthropic's Message Batches:
``POST /v1/messages/batches``, ``GET /v1/messages/batches/{id}``, and the JSONL at its
``results_url``. Each answer is a chat completion (or Message) that echoes the request's last
user message as ``answer: <text>`` (or what ``answer`` returns).

How a batch behaves is scripted, counted in polls rather than seconds so no test waits on the
wall clock: ``in_progress_polls`` status reads say ``in_progress`` first; ``refuse`` names the
custom ids answered with an error; ``outcome`` is ``completed``, ``expired`` or ``cancelled``
(only the first ``answered`` requests are answered, the rest never are) or ``failed`` (the whole
batch refused); results come shuffled. ``later`` scripts the next batches created, one each in
order (a judge's batch after the answers' one), then ``script`` again. ``hold`` keeps every batch
in progress until released; ``max_batches`` refuses batches beyond it (a full queue).

It answers live calls too (``POST /v1/chat/completions``, ``POST /v1/messages``), kept in ``live``
(their bodies), so a test can tell what was not batched. A request forcing a tool (Anthropic
structured output) is answered with that tool's call, its input the answer parsed as JSON.

    python -m tests.batchserver --port 0      # prints READY <port> (the benchmark runs it so)
"""

from __future__ import annotations

import argparse
import email.parser
import email.policy
import itertools
import json
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Script:
    in_progress_polls: int = 0
    outcome: str = "completed"  # completed | expired | cancelled | failed
    answered: int | None = None  # with expired / cancelled: how many requests were answered
    refuse: frozenset[str] = frozenset()  # custom ids answered with an error


@dataclass
class Batch:
    id: str
    kind: str  # openai | anthropic
    requests: list[dict[str, Any]]
    script: Script
    polls: int = 0
    output_file: str | None = None
    error_file: str | None = None


@dataclass
class BatchServer:
    script: Script = field(default_factory=Script)
    answer: Callable[[str], str] = lambda text: f"answer: {text}"
    hold: threading.Event = field(default_factory=threading.Event)  # set: every batch stays in progress
    seed: int = 7
    max_batches: int | None = None  # more batches than this are refused (a full queue)
    later: list[Script] = field(default_factory=list)  # the next batches' scripts, in order
    live: list[dict[str, Any]] = field(default_factory=list)  # the bodies of the live calls
    batches: dict[str, Batch] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)
    paths: list[str] = field(default_factory=list)  # every request's method and path, in order
    _ids: itertools.count[int] = field(default_factory=itertools.count)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _httpd: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> BatchServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_GET(self) -> None:
                server._serve(self, "GET", b"")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                server._serve(self, "POST", self.rfile.read(length))

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):06d}"

    # -- the wire -----------------------------------------------------------------------------

    def _serve(self, handler: BaseHTTPRequestHandler, method: str, body: bytes) -> None:
        path = handler.path.split("?", 1)[0]
        with self._lock:
            self.paths.append(f"{method} {path}")
            status, payload, kind = self._route(method, path, body, handler.headers.get("Content-Type", ""))
        handler.send_response(status)
        handler.send_header("Content-Type", kind)
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    def _route(self, method: str, path: str, body: bytes, content_type: str) -> tuple[int, bytes, str]:
        parts = path.strip("/").split("/")
        if method == "POST" and path == "/v1/files":
            return self._upload(body, content_type)
        if method == "POST" and path == "/v1/batches":
            return self._create_openai(json.loads(body))
        if method == "GET" and parts[:2] == ["v1", "batches"] and len(parts) == 3:
            return self._json(self._openai_status(parts[2]))
        if method == "GET" and parts[:2] == ["v1", "files"] and len(parts) == 4 and parts[3] == "content":
            data = self.files.get(parts[2])
            return (200, data, "application/binary") if data is not None else self._error(404, "no such file")
        if method == "POST" and path == "/v1/chat/completions":
            self.live.append(json.loads(body))
            return self._json(self._openai_line({"custom_id": "live", "body": self.live[-1]})["response"]["body"])
        if method == "POST" and path == "/v1/messages":
            self.live.append(json.loads(body))
            return self._json(self._message(self.live[-1]))
        if method == "POST" and path == "/v1/messages/batches":
            return self._create_anthropic(json.loads(body))
        if method == "GET" and parts[:3] == ["v1", "messages", "batches"] and len(parts) == 4:
            return self._json(self._anthropic_status(parts[3]))
        if method == "GET" and parts[:3] == ["v1", "messages", "batches"] and len(parts) == 5 and parts[4] == "results":
            return 200, self._anthropic_results(self.batches[parts[3]]), "application/binary"
        return self._error(404, f"no route {method} {path}")

    def _json(self, body: Any) -> tuple[int, bytes, str]:
        if body is None:
            return self._error(404, "no such batch")
        return 200, json.dumps(body).encode(), "application/json"

    def _error(self, status: int, message: str) -> tuple[int, bytes, str]:
        return (
            status,
            json.dumps({"error": {"type": "invalid_request_error", "message": message}}).encode(),
            "application/json",
        )

    # -- OpenAI ---------------------------------------------------------------------------------

    def _upload(self, body: bytes, content_type: str) -> tuple[int, bytes, str]:
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body
        )
        fields = {part.get_param("name", header="content-disposition"): part for part in message.iter_parts()}
        if fields.get("purpose") is None or fields["purpose"].get_content().strip() != "batch" or "file" not in fields:
            return self._error(400, "purpose must be batch, with a file")
        file_id = self._new_id("file-")
        self.files[file_id] = fields["file"].get_payload(decode=True)
        return self._json({"id": file_id, "object": "file", "purpose": "batch", "bytes": len(self.files[file_id])})

    def _create_openai(self, body: dict[str, Any]) -> tuple[int, bytes, str]:
        if self.max_batches is not None and len(self.batches) >= self.max_batches:
            return self._error(400, "Enqueued token limit reached for gpt-x")
        data = self.files.get(body.get("input_file_id", ""))
        if data is None or body.get("endpoint") != "/v1/chat/completions" or body.get("completion_window") != "24h":
            return self._error(
                400, "input_file_id, endpoint /v1/chat/completions and completion_window 24h are required"
            )
        lines = [json.loads(line) for line in data.splitlines() if line.strip()]
        if any(line.get("method") != "POST" or line.get("url") != "/v1/chat/completions" for line in lines):
            return self._error(400, "every line must POST /v1/chat/completions")
        batch = Batch(self._new_id("batch_"), "openai", lines, self._next_script())
        self.batches[batch.id] = batch
        return self._json(self._openai_status(batch.id, poll=False))

    def _next_script(self) -> Script:
        return self.later.pop(0) if self.later else self.script

    def _ended(self, batch: Batch, poll: bool) -> bool:
        if poll:
            batch.polls += 1
        return not self.hold.is_set() and batch.polls > batch.script.in_progress_polls

    def _openai_status(self, batch_id: str, poll: bool = True) -> dict[str, Any] | None:
        batch = self.batches.get(batch_id)
        if batch is None:
            return None
        total = len(batch.requests)
        body: dict[str, Any] = {
            "id": batch.id, "object": "batch", "endpoint": "/v1/chat/completions", "completion_window": "24h",
            "status": "in_progress", "output_file_id": None, "error_file_id": None, "errors": None,
            "request_counts": {"total": total, "completed": 0, "failed": 0},
        }  # fmt: skip
        if not self._ended(batch, poll):
            body["request_counts"]["completed"] = min(total, batch.polls)  # progress, visibly
            return body
        if batch.script.outcome == "failed":
            body["status"] = "failed"
            body["errors"] = {"object": "list", "data": [{"code": "invalid_file", "message": "the file is malformed"}]}
            return body
        if batch.output_file is None:
            self._write_openai_results(batch)
        answered, refused = self._split(batch)
        body.update(status=batch.script.outcome, output_file_id=batch.output_file, error_file_id=batch.error_file)
        body["request_counts"] = {"total": total, "completed": len(answered), "failed": len(refused)}
        return body

    def _split(self, batch: Batch) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        script = batch.script
        reached = batch.requests if script.outcome == "completed" else batch.requests[: script.answered or 0]
        refused = [r for r in reached if r["custom_id"] in script.refuse]
        return [r for r in reached if r["custom_id"] not in script.refuse], refused

    def _write_openai_results(self, batch: Batch) -> None:
        answered, refused = self._split(batch)
        rng = random.Random(self.seed)
        out = [self._openai_line(r) for r in answered]
        errors = [
            {"id": f"batch_req_{r['custom_id']}", "custom_id": r["custom_id"],
             "response": {"status_code": 400, "request_id": "req_x", "body": {"error": {"message": "the prompt was refused", "type": "invalid_request_error"}}},
             "error": None}
            for r in refused
        ]  # fmt: skip
        rng.shuffle(out)
        batch.output_file = self._new_id("file-")
        self.files[batch.output_file] = "".join(json.dumps(line) + "\n" for line in out).encode()
        if errors:
            batch.error_file = self._new_id("file-")
            self.files[batch.error_file] = "".join(json.dumps(line) + "\n" for line in errors).encode()

    def _openai_line(self, request: dict[str, Any]) -> dict[str, Any]:
        body = request["body"]
        text = self.answer(_last_user(body["messages"]))
        completion = {
            "id": "chatcmpl-batch", "object": "chat.completion", "model": f"{body['model']}-2026",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }  # fmt: skip
        return {
            "id": f"batch_req_{request['custom_id']}", "custom_id": request["custom_id"],
            "response": {"status_code": 200, "request_id": "req_x", "body": completion}, "error": None,
        }  # fmt: skip

    # -- Anthropic ------------------------------------------------------------------------------

    def _create_anthropic(self, body: dict[str, Any]) -> tuple[int, bytes, str]:
        requests = body.get("requests")
        if not isinstance(requests, list) or not requests:
            return self._error(400, "requests: a non-empty list is required")
        for request in requests:
            custom_id = request.get("custom_id", "")
            if not (
                isinstance(custom_id, str)
                and 1 <= len(custom_id) <= 64
                and all(c.isalnum() or c in "_-" for c in custom_id)
            ):
                return self._error(400, f"custom_id {custom_id!r} must match ^[a-zA-Z0-9_-]{{1,64}}$")
            if not isinstance(request.get("params"), dict) or "max_tokens" not in request["params"]:
                return self._error(400, "params with max_tokens are required")
        if len({r["custom_id"] for r in requests}) != len(requests):
            return self._error(400, "custom_id values must be unique within a batch")
        batch = Batch(self._new_id("msgbatch_"), "anthropic", requests, self._next_script())
        self.batches[batch.id] = batch
        return self._json(self._anthropic_status(batch.id, poll=False))

    def _anthropic_status(self, batch_id: str, poll: bool = True) -> dict[str, Any] | None:
        batch = self.batches.get(batch_id)
        if batch is None:
            return None
        total = len(batch.requests)
        ended = self._ended(batch, poll)
        answered, refused = self._split(batch)
        missing = total - len(answered) - len(refused)
        gone = "expired" if batch.script.outcome == "expired" else "canceled"
        counts = {"processing": total, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if ended:
            counts = {"processing": 0, "succeeded": len(answered), "errored": len(refused), "canceled": 0, "expired": 0}
            counts[gone] = missing
        port = self._httpd.server_address[1] if self._httpd else 0
        return {
            "id": batch.id, "type": "message_batch", "processing_status": "ended" if ended else "in_progress",
            "request_counts": counts,
            "results_url": f"http://127.0.0.1:{port}/v1/messages/batches/{batch.id}/results" if ended else None,
        }  # fmt: skip

    def _anthropic_results(self, batch: Batch) -> bytes:
        answered, refused = self._split(batch)
        done = {r["custom_id"] for r in answered} | {r["custom_id"] for r in refused}
        gone = "expired" if batch.script.outcome == "expired" else "canceled"
        lines = [
            {"custom_id": r["custom_id"], "result": {"type": "succeeded", "message": self._message(r["params"])}}
            for r in answered
        ]
        lines += [
            {"custom_id": r["custom_id"], "result": {"type": "errored", "error": {"type": "error", "error": {"type": "invalid_request_error", "message": "the prompt was refused"}}}}
            for r in refused
        ]  # fmt: skip
        lines += [
            {"custom_id": r["custom_id"], "result": {"type": gone}}
            for r in batch.requests
            if r["custom_id"] not in done
        ]
        random.Random(self.seed).shuffle(lines)
        return "".join(json.dumps(line) + "\n" for line in lines).encode()

    def _message(self, params: dict[str, Any]) -> dict[str, Any]:
        text = self.answer(_last_user(params["messages"]))
        content: list[dict[str, Any]] = [{"type": "text", "text": text}]
        forced = params.get("tool_choice") or {}
        used = forced.get("type") == "tool"
        if used:  # structured output: the forced tool's call carries the answer
            content = [{"type": "tool_use", "id": "toolu_1", "name": forced["name"], "input": json.loads(text)}]
        return {
            "id": "msg_batch", "type": "message", "role": "assistant", "model": f"{params['model']}-2026",
            "content": content, "stop_reason": "tool_use" if used else "end_turn",
            "usage": {"input_tokens": 12, "output_tokens": 7},
        }  # fmt: skip


def _last_user(messages: list[dict[str, Any]]) -> str:
    return next((str(m["content"]) for m in reversed(messages) if m.get("role") == "user"), "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--in-progress-polls", type=int, default=0)
    parser.add_argument("--judge", action="store_true", help="answer a judge's requests as tests/judgeserver.py")
    args = parser.parse_args()
    server = BatchServer(Script(in_progress_polls=args.in_progress_polls)).start()
    if args.judge:
        from tests.judgeserver import judge_or_echo

        server.answer = judge_or_echo
    print(f"READY {server.url.rsplit(':', 1)[1].split('/')[0]}", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
