"""The real local model (SmolLM2-135M-Instruct via llama.cpp / xllamacpp) as an OpenAI-compatible
server on 127.0.0.1, for benchmarks that run other tools against it.

    python bench/model_server.py      # prints READY <port>, serves until terminated
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evalkit.config import ProviderConfig
from evalkit.providers.local import model_file, start_server


def warm_up(address: str) -> None:
    """A few completions first, so the first tool measured does not pay the model's warm-up."""
    body = json.dumps(
        {"model": "x", "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 16, "temperature": 0}
    ).encode()
    for _ in range(3):
        request = urllib.request.Request(
            f"{address}/v1/chat/completions", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            response.read()


def main() -> None:
    config = ProviderConfig(id="bench-model", adapter="local", threads=2)
    server, address = start_server(config, model_file(config))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{address}/health", timeout=5) as response:
                if response.status == 200:
                    break
        except OSError:
            time.sleep(0.05)
    warm_up(address)
    print(f"READY {address.rsplit(':', 1)[1]}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    del server


if __name__ == "__main__":
    main()
