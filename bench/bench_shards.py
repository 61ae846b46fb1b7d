"""A sharded run: N prompts split as S shards, S processes, then the merge and the gate (issue 30,
point 8).

    python bench/bench_shards.py                              # 20,000 prompts, 8 shards
    python bench/bench_shards.py --prompts 200 --shards 2 --no-whole
    python bench/bench_shards.py --json bench/results/issue30_shards.json

The prompts (each with a ``contains`` assertion the fixed answer meets) go to the loopback
OpenAI-compatible server (``loopback_server.py``, its own process, 0 ms latency by default), as
``S`` CI jobs would send them: ``S`` ``evalkit run --shard I/S`` processes started at once, each
into its own database (privacy ``metadata``, the default). Then, each a whole command in a fresh
process as the final CI job runs it: ``evalkit merge`` of the S databases into an empty one, and
``evalkit gate`` of the group (JSON report to a file). Wall time and the peak RSS of each
process tree; with ``--whole`` (the default) the same prompts in one unsharded ``evalkit run``
for comparison. The final job runs ``--gate-rounds`` times (the best is kept: the machine's load
only ever adds time). On a 2-core machine the S processes share two cores, so the shards' wall clock
here says what evalkit costs per prompt, not what S runners would take.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import threading
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))

from bench.measure import Measure, Server, compile_evalkit, measure  # noqa: E402


def project(folder: Path, prompts: int, url: str, concurrency: int) -> None:
    (folder / "evalkit.yaml").write_text(
        "default_provider: loop\nproviders:\n"
        f"  - {{id: loop, adapter: openai, base_url: '{url}', model: bench, api_key_env: BENCH_KEY,"
        f" max_concurrency: {concurrency}, max_retries: 0}}\n",
        encoding="utf-8",
    )
    lines = ["id: bench.shards", "name: Shards benchmark", "prompts:"]
    lines += [
        f"  - {{id: p{i:06d}, prompt: 'Question {i}?', assertions: [{{contains: '42'}}]}}" for i in range(prompts)
    ]
    (folder / "set.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")


def figures(m: Measure, what: str) -> dict[str, float]:
    if m.returncode != 0:
        raise SystemExit(f"{what} exited {m.returncode}: {m.stderr[-2000:]}")
    return {"wall_s": round(m.wall_s, 2), "peak_rss_mb": round(m.peak_rss_mb, 1)}


def children_cpu_s() -> float:
    """CPU seconds (user + system) of every child process waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command: list[str], cwd: Path, what: str) -> dict[str, float]:
    """One command in a fresh process: its wall time, peak RSS and CPU seconds (the CPU time
    moves far less than the wall time with the machine's load)."""
    before = children_cpu_s()
    result = figures(measure(command, env=ENV, cwd=cwd), what)
    return result | {"cpu_s": round(children_cpu_s() - before, 2)}


def evalkit(*args: str) -> list[str]:
    return [sys.executable, "-m", "evalkit", *args]


ENV = {"BENCH_KEY": "sk-bench", "NO_COLOR": "1", "EVALKIT_DB": ""}


def shards(folder: Path, count: int) -> tuple[float, list[dict[str, float]]]:
    """Every shard at once, as the jobs of a matrix start: (wall s of all, each shard's figures)."""
    import time

    results: list[Measure | None] = [None] * count

    def one(index: int) -> None:
        results[index - 1] = measure(
            evalkit("run", "set.yaml", "--shard", f"{index}/{count}", "--run-group", "bench",
                    "--db", f"shard-{index}.duckdb", "--format", "json", "--output", f"shard-{index}.json"),
            env=ENV, cwd=folder,
        )  # fmt: skip

    started = time.perf_counter()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(1, count + 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    return wall, [figures(m, f"shard {i}") for i, m in enumerate(results, 1) if m is not None]


def final_job(folder: Path, parts: list[str]) -> tuple[dict[str, float], dict[str, float]]:
    """The final CI job on a fresh database: the merge of every shard's database, then the gate."""
    (folder / "gate.duckdb").unlink(missing_ok=True)
    merge = timed(evalkit("merge", *parts, "--db", "gate.duckdb"), folder, "merge")
    gate = timed(evalkit("gate", "--run-group", "bench", "--db", "gate.duckdb", "--format", "json",
                         "--output", "gate.json"), folder, "gate")  # fmt: skip
    return merge, gate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=20_000)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--whole", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--gate-rounds", type=int, default=3, help="merge + gate this many times; the best is kept")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    compile_evalkit()
    server = Server(str(BENCH / "loopback_server.py"), "--port", "0", "--latency-ms", str(args.latency_ms))
    try:
        with tempfile.TemporaryDirectory(prefix="evalkit-shards-") as tmp:
            folder = Path(tmp)
            project(folder, args.prompts, server.url, args.concurrency)
            load_before = os.getloadavg()[0]
            cpu_before = children_cpu_s()
            wall, each = shards(folder, args.shards)
            shards_cpu = children_cpu_s() - cpu_before
            sizes = [
                json.loads((folder / f"shard-{i}.json").read_text())["prompt_count"] for i in range(1, args.shards + 1)
            ]
            parts = [str(folder / f"shard-{i}.duckdb") for i in range(1, args.shards + 1)]
            rounds = [final_job(folder, parts) for _ in range(args.gate_rounds)]
            merge, gate = min(rounds, key=lambda r: r[0]["wall_s"] + r[1]["wall_s"])
            gated = json.loads((folder / "gate.json").read_text())
            results = {
                "prompts": args.prompts, "shards": args.shards, "latency_ms": args.latency_ms,
                "concurrency": args.concurrency, "shard_prompts": sizes,
                "load_average_at_start": round(load_before, 2),
                "shards_wall_s": round(wall, 2), "shards_cpu_s": round(shards_cpu, 2), "shard": each,
                "merge": merge, "gate": gate, "merge_plus_gate_s": round(merge["wall_s"] + gate["wall_s"], 2),
                "merge_plus_gate_cpu_s": round(merge["cpu_s"] + gate["cpu_s"], 2),
                "merge_plus_gate_s_rounds": [round(m["wall_s"] + g["wall_s"], 2) for m, g in rounds],
                "gated": {k: gated[k] for k in ("prompt_count", "passed_count", "error_count")}
                | {"state": gated["comparison"]["state"]},
            }  # fmt: skip
            if args.whole:
                results["whole_run"] = timed(evalkit("run", "set.yaml", "--db", "whole.duckdb", "--format", "json",
                                                     "--output", "whole.json"), folder, "the unsharded run")  # fmt: skip
    finally:
        server.stop()
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
