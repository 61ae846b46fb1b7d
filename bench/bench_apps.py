"""The application adapters' speed (issue 26, point 10), in one invocation.

    python bench/bench_apps.py                  # (b) 500 x 200 ms at c32; python adapter 20,000 calls
    python bench/bench_apps.py --n 10 --calls 200 --runs 1   # the CI smoke

1. Scenario (b) of bench_promptfoo.py (N prompts, each with a contains, a regex and a JSON-schema
   assertion, 200 ms latency, concurrency 32, the cache off) against one loopback server
   (bench/loopback_server.py), run by the ``openai`` adapter and by the ``http`` adapter (the
   same chat-completions endpoint called as "your service": a body template rendering a chat
   request, the answer read at ``choices.0.message.content``, the model at ``model``), interleaved, each a
   whole ``evalkit run`` in a fresh process. Target: the http adapter within 10% of openai.
2. The ``python`` adapter's own overhead per call at 0 ms work: ``calls`` calls through the real
   adapter object (``PythonProvider.complete``, one at a time on one event loop) of a function
   that returns a constant answer object, less a bare loop calling the same function with the
   same request dict, for a sync function (run in the adapter's worker thread) and an
   ``async def`` (awaited on the loop). Target: under 0.2 ms per call.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))

from bench.bench_promptfoo import evalkit_suite, run_evalkit  # noqa: E402
from bench.measure import Server, compile_evalkit  # noqa: E402

HTTP_PROVIDER = """\
providers:
  - id: bench
    adapter: http
    url: '{url}/chat/completions'
    body: '{{"model": "bench", "messages": {{{{ messages | tojson }}}}, "temperature": {{{{ params.temperature }}}} }}'
    response: {{output: choices.0.message.content, model: model}}
    max_concurrency: {concurrency}
    timeout_s: 300
"""

APP = """\
ANSWER = {"output": "The answer is 42.", "model": "fn-1"}


def work(request):
    return ANSWER


async def awork(request):
    return ANSWER
"""


def adapter_run(adapter: str, *, n: int, url: str, concurrency: int) -> dict[str, Any]:
    """One whole ``evalkit run`` of scenario (b) through ``adapter`` (openai or http)."""
    with tempfile.TemporaryDirectory(prefix="evalkit-bench-") as tmp:
        folder = Path(tmp)
        evalkit_suite(folder, "bench.apps", n, url, concurrency, "Question number {i}: what is the answer?", 32)
        if adapter == "http":
            (folder / "evalkit.yaml").write_text(HTTP_PROVIDER.format(url=url, concurrency=concurrency))
        measured, doc = run_evalkit(folder, concurrency)
    if doc["passed_count"] != n:
        raise SystemExit(f"{adapter}: {doc['passed_count']} of {n} passed: {json.dumps(doc)[:2000]}")
    run_s = (
        datetime.fromisoformat(doc["finished_at"]).timestamp() - datetime.fromisoformat(doc["started_at"]).timestamp()
    )
    return {"wall_s": measured.wall_s, "peak_rss_mb": measured.peak_rss_mb, "run_phase_s": run_s}


def speed_b(n: int, runs: int, concurrency: int = 32, latency_ms: int = 200) -> dict[str, Any]:
    """openai and http, ``runs`` interleaved pairs against one server; the medians compared."""
    server = Server(str(BENCH / "loopback_server.py"), "--latency-ms", str(latency_ms))
    walls: dict[str, list[float]] = {"openai": [], "http": []}
    rss: dict[str, list[float]] = {"openai": [], "http": []}
    phases: dict[str, list[float]] = {"openai": [], "http": []}
    try:
        for index in range(runs):
            order = ("openai", "http") if index % 2 == 0 else ("http", "openai")
            for adapter in order:
                row = adapter_run(adapter, n=n, url=server.url, concurrency=concurrency)
                walls[adapter].append(round(row["wall_s"], 3))
                rss[adapter].append(round(row["peak_rss_mb"], 1))
                phases[adapter].append(round(row["run_phase_s"], 3))
    finally:
        server.stop()
    median = {a: statistics.median(w) for a, w in walls.items()}
    paired = [h / o for h, o in zip(walls["http"], walls["openai"], strict=True)]
    return {
        "prompts": n, "concurrency": concurrency, "latency_ms": latency_ms, "runs": runs,
        "ideal_s": round(n * latency_ms / 1000 / concurrency, 3),
        "wall_s": walls, "peak_rss_mb": rss, "run_phase_s": phases,
        "median_wall_s": {a: round(m, 3) for a, m in median.items()},
        "median_run_phase_s": {a: round(statistics.median(p), 3) for a, p in phases.items()},
        "http_vs_openai": round(median["http"] / median["openai"], 3),
        "http_vs_openai_paired_median": round(statistics.median(paired), 3),
    }  # fmt: skip


async def _overhead(function: Any, provider: Any, request: Any, calls: int, awaited: bool) -> dict[str, float]:
    from evalkit.providers.app import app_request

    argument = app_request(request)
    for _ in range(min(calls, 200)):  # warm: the worker thread started, the first answers built
        await provider.complete(request)
    started = time.perf_counter()
    for _ in range(calls):
        await provider.complete(request)
    adapter_s = time.perf_counter() - started
    started = time.perf_counter()
    if awaited:
        for _ in range(calls):
            await function(argument)
    else:
        for _ in range(calls):
            function(argument)
    bare_s = time.perf_counter() - started
    return {
        "adapter_us_per_call": round(adapter_s / calls * 1e6, 2),
        "bare_us_per_call": round(bare_s / calls * 1e6, 3),
        "overhead_ms_per_call": round((adapter_s - bare_s) / calls * 1000, 4),
    }


def python_overhead(calls: int, repeat: int) -> dict[str, Any]:
    """The python adapter's own cost per call at 0 ms work, sync and async (see the module's
    text): the median of ``repeat`` rounds."""
    from evalkit.config import ProviderConfig
    from evalkit.providers.pyfunc import PythonProvider
    from evalkit.records import CompletionRequest, Message

    request = CompletionRequest((Message("user", "What is the answer?"),), "python", {"temperature": 0}, "p1", "bench")
    results: dict[str, Any] = {"calls": calls}
    with tempfile.TemporaryDirectory(prefix="evalkit-bench-") as tmp:
        (Path(tmp) / "app.py").write_text(APP)
        for name, kind in (("work", "sync"), ("awork", "async")):
            config = ProviderConfig(id="fn", adapter="python", function=f"app.py:{name}", root=Path(tmp))
            provider = PythonProvider(config)

            async def measure_one(p: PythonProvider = provider) -> list[dict[str, float]]:
                try:
                    return [await _overhead(p.function, p, request, calls, p.awaited) for _ in range(repeat)]
                finally:
                    await p.aclose()

            rounds = asyncio.run(measure_one())
            overheads = [r["overhead_ms_per_call"] for r in rounds]
            results[kind] = {"rounds": rounds, "overhead_ms_per_call": statistics.median(overheads)}
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=500, help="prompts in (b)")
    parser.add_argument("--runs", type=int, default=5, help="interleaved openai/http pairs")
    parser.add_argument("--calls", type=int, default=20_000, help="python adapter calls per function")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of the python adapter's calls")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    args = parser.parse_args()
    compile_evalkit()
    results = {"b": speed_b(args.n, args.runs), "python": python_overhead(args.calls, args.repeat)}
    b, py = results["b"], results["python"]
    print(
        f"(b) {b['prompts']} prompts x {b['latency_ms']} ms, c{b['concurrency']}, median of {b['runs']}: "
        f"openai {b['median_wall_s']['openai']} s, http {b['median_wall_s']['http']} s, "
        f"http/openai {b['http_vs_openai']} (paired runs: median {b['http_vs_openai_paired_median']}; "
        f"target at most 1.10); run phase: openai {b['median_run_phase_s']['openai']} s, "
        f"http {b['median_run_phase_s']['http']} s"
    )
    for kind in ("sync", "async"):
        print(
            f"python adapter, {kind} function: {py[kind]['overhead_ms_per_call']} ms/call overhead, median of "
            f"{args.repeat} rounds of {args.calls:,} calls (target < 0.2)"
        )
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
