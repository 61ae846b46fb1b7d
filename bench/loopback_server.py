"""A fast loopback OpenAI-compatible server for benchmarks: fixed answers, configurable latency.

    python bench/loopback_server.py --port 0 --latency-ms 200

Prints ``READY <port>`` on stdout once listening. Answers every ``POST .../chat/completions``
with a fixed chat completion (model ``bench-model``) after the configured delay; keep-alive
HTTP/1.1 on raw asyncio streams, so the server is never the bottleneck of what is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json

ANSWER = '{"answer": 42, "text": "The answer is 42."}'


def body(answer: str) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "model": "bench-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21},
        }
    ).encode()


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, latency_s: float, payload: bytes) -> None:
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: keep-alive\r\n"
        + f"Content-Length: {len(payload)}\r\n\r\n".encode()
    )
    try:
        while True:
            request = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in request.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:].strip())
            if length:
                await reader.readexactly(length)
            if latency_s:
                await asyncio.sleep(latency_s)
            writer.write(head + payload)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--answer", default=ANSWER)
    args = parser.parse_args()
    payload = body(args.answer)
    server = await asyncio.start_server(
        lambda r, w: handle(r, w, args.latency_ms / 1000.0, payload), "127.0.0.1", args.port, backlog=1024
    )
    port = server.sockets[0].getsockname()[1]
    print(f"READY {port}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
