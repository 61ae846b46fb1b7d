"""The floor of scenario (b): the least any Python client can take, measured like the tools are.

    python bench/floor_client.py URL N CONCURRENCY [--import-stack] [--httpx]

Posts N chat completions (the body evalkit sends) to URL over CONCURRENCY keep-alive
connections, one request at a time on each, on raw asyncio streams: no HTTP library, no
parsing beyond Content-Length and ``json.loads``, no grading, no storing. With
``--import-stack`` it first imports what evalkit must load before its first call, whatever
its own code does: click (the command line), ruamel.yaml (reading the set), jsonschema
(validating it) and httpx (calling). With ``--httpx`` the same lanes are one ``httpx.AsyncClient``
each (one connection, one shared TLS context, ``response.json()``): the floor of httpx's public
API, what evalkit's HTTP layer can at best be. Prints the number of answers read.
"""

from __future__ import annotations

import asyncio
import json
import sys
from urllib.parse import urlsplit


async def run(url: str, n: int, concurrency: int) -> int:
    parts = urlsplit(url)
    path = parts.path.rstrip("/") + "/chat/completions"
    body = json.dumps(
        {"model": "bench", "messages": [{"role": "user", "content": "Question?"}], "temperature": 0, "max_tokens": 32}
    ).encode()
    head = f"POST {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\n"
    request = (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    todo = iter(range(n))
    answered = 0

    async def lane() -> None:
        nonlocal answered
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        for _ in todo:
            writer.write(request)
            await writer.drain()
            lines = (await reader.readuntil(b"\r\n\r\n")).split(b"\r\n")
            length = next(int(line[15:]) for line in lines if line[:15].lower() == b"content-length:")
            json.loads(await reader.readexactly(length))
            answered += 1
        writer.close()

    await asyncio.gather(*(lane() for _ in range(min(concurrency, n))))
    return answered


async def run_httpx(url: str, n: int, concurrency: int) -> int:
    import ssl

    import httpx

    context = ssl.create_default_context()  # one for all lanes: building one costs ~19 ms
    body = {
        "model": "bench",
        "messages": [{"role": "user", "content": "Question?"}],
        "temperature": 0,
        "max_tokens": 32,
    }
    target = url.rstrip("/") + "/chat/completions"
    todo = iter(range(n))
    answered = 0

    async def lane() -> None:
        nonlocal answered
        async with httpx.AsyncClient(verify=context, trust_env=False, limits=httpx.Limits(max_connections=1)) as client:
            for _ in todo:
                (await client.post(target, json=body)).json()
                answered += 1

    await asyncio.gather(*(lane() for _ in range(min(concurrency, n))))
    return answered


def main() -> None:
    url, n, concurrency = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if "--import-stack" in sys.argv[4:]:
        import click  # noqa: F401
        import httpx  # noqa: F401
        import jsonschema  # noqa: F401
        from ruamel.yaml import YAML

        YAML(typ="safe")
    print(asyncio.run((run_httpx if "--httpx" in sys.argv[4:] else run)(url, n, concurrency)))


if __name__ == "__main__":
    main()
