"""The FAQ feature as a service: POST /chat {"question": "..."} answers
{"answer": {"text": ..., "sources": [...]}, "meta": {"model": ...}, "usage": {"in": n, "out": n}}.

    python service.py [--port 8765]

It listens on 127.0.0.1 only and prints its URL once it is ready.
"""

from __future__ import annotations

import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from feature import Feature


def serve(port: int) -> None:
    feature = Feature()
    lock = threading.Lock()  # one question at a time: the model answers one at a time anyway

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                question = json.loads(self.rfile.read(length))["question"]
            except (ValueError, KeyError, TypeError):
                self._send(400, {"error": 'send {"question": "..."}'})
                return
            with lock:
                answer = feature.answer(str(question))
            self._send(
                200,
                {
                    "answer": {"text": answer["output"], "sources": [c["id"] for c in answer["context"]]},
                    "meta": {"model": answer["model"]},
                    "usage": {"in": answer["usage"]["input_tokens"], "out": answer["usage"]["output_tokens"]},
                },
            )

        def _send(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    serve(parser.parse_args().port)
