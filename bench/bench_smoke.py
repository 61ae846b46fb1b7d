"""The README's first command on this machine: the smoke set on the real local model.

    python bench/bench_smoke.py [--repeat 3]

Records the wall time of `evalkit run sets/smoke.yaml --no-cache` (a fresh process each time,
model start-up included) and the model's own speed: llama.cpp's generation and prompt-processing
rates (its ``timings``) on a fixed 64-token generation at temperature 0.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import urllib.request
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))

from bench.measure import Server, compile_evalkit, measure  # noqa: E402


def smoke_runs(repeat: int) -> list[dict[str, float]]:
    runs = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="evalkit-bench-") as tmp:
            m = measure(
                [sys.executable, "-m", "evalkit", "run", str(BENCH.parent / "sets" / "smoke.yaml"), "--no-cache",
                 "--format", "json", "--db", str(Path(tmp) / "smoke.duckdb")],
                cwd=Path(tmp),
            )  # fmt: skip
        doc = json.loads(m.stdout)
        runs.append({"wall_s": m.wall_s, "peak_rss_mb": m.peak_rss_mb, "pass_rate": doc["pass_rate"],
                     "output_tokens": doc["usage"]["output_tokens"]})  # fmt: skip
    return runs


def model_speed() -> dict[str, float]:
    server = Server(str(BENCH / "model_server.py"))
    try:
        body = json.dumps(
            {
                "model": "x",
                "temperature": 0,
                "max_tokens": 64,
                "messages": [{"role": "user", "content": "Write a short story about a lighthouse keeper."}],
            }
        ).encode()
        request = urllib.request.Request(
            f"{server.url}/chat/completions", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            timings = json.loads(response.read())["timings"]
    finally:
        server.stop()
    return {
        "generation_tokens_per_s": round(timings["predicted_per_second"], 1),
        "prompt_tokens_per_s": round(timings["prompt_per_second"], 1),
        "generated_tokens": timings["predicted_n"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    compile_evalkit()
    runs = smoke_runs(args.repeat)
    walls = [r["wall_s"] for r in runs]
    print(f"smoke set: {len(runs)} fresh runs, wall median {statistics.median(walls):.2f} s "
          f"(min {min(walls):.2f}, max {max(walls):.2f}), peak RSS {max(r['peak_rss_mb'] for r in runs):.0f} MB, "
          f"pass rates {sorted({r['pass_rate'] for r in runs})}, output tokens {runs[0]['output_tokens']}")  # fmt: skip
    print(f"model: {model_speed()}")


if __name__ == "__main__":
    main()
