"""Model-graded assertions beside generation (issue 29, point 8), in one invocation.

    python bench/bench_judged_speed.py                     # (b): 500 x 200 ms at c32, 5 interleaved pairs
    python bench/bench_judged_speed.py --n 10 --runs 1     # the CI smoke

Scenario (b) of bench_promptfoo.py (N prompts, each with a contains, a regex and a JSON-schema
assertion, 200 ms latency, concurrency 32, the cache off), run as a whole ``evalkit run`` in a fresh
process, without and with one ``rubric`` per prompt. The judge is a second loopback server
(bench/loopback_server.py) answering ``{"level": 4, ...}`` after 200 ms, with ``max_concurrency``
32 as the generator's. The two kinds of run are interleaved against the same two servers.
Target: the run with rubrics within 1.25x of the run without (a prompt's judge call starts when
its answer arrives, while the generator goes on; judged after generation the run would take 2x).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))

from bench.bench_promptfoo import evalkit_suite, run_evalkit  # noqa: E402
from bench.measure import Server, compile_evalkit  # noqa: E402

JUDGE_ANSWER = '{"level": 4, "reason": "meets the rubric"}'


def judged_run(*, n: int, url: str, judge_url: str | None, concurrency: int) -> dict[str, Any]:
    """One whole ``evalkit run`` of (b); with ``judge_url``, one rubric per prompt."""
    with tempfile.TemporaryDirectory(prefix="evalkit-bench-") as tmp:
        folder = Path(tmp)
        suite = evalkit_suite(
            folder, "bench.judged", n, url, concurrency, "Question number {i}: what is the answer?", 32
        )
        if judge_url is not None:
            text = suite.read_text().replace(
                "      - json_schema: {type: object, required: [answer]}\n",
                "      - json_schema: {type: object, required: [answer]}\n"
                "      - rubric: States the answer as a number\n",
            )
            suite.write_text(text)
            config = folder / "evalkit.yaml"
            config.write_text(
                config.read_text() + f"  - {{id: judge, adapter: openai, base_url: '{judge_url}', model: judge, "
                f"max_concurrency: {concurrency}, timeout_s: 300}}\njudge: {{provider: judge}}\ndefault_provider: bench\n"
            )
        measured, doc = run_evalkit(folder, concurrency)
    if doc["passed_count"] != n:
        raise SystemExit(f"{doc['passed_count']} of {n} passed: {json.dumps(doc)[:2000]}")
    return {"wall_s": measured.wall_s, "peak_rss_mb": measured.peak_rss_mb, "grader": doc["grader"],
            "judge": doc.get("judge")}  # fmt: skip


def speed(n: int, runs: int, concurrency: int = 32, latency_ms: int = 200) -> dict[str, Any]:
    """Runs without and with rubrics, interleaved; the medians compared."""
    gen = Server(str(BENCH / "loopback_server.py"), "--latency-ms", str(latency_ms))
    judge = Server(str(BENCH / "loopback_server.py"), "--latency-ms", str(latency_ms), "--answer", JUDGE_ANSWER)
    walls: dict[str, list[float]] = {"plain": [], "rubric": []}
    rss: dict[str, list[float]] = {"plain": [], "rubric": []}
    seen: dict[str, Any] = {}
    try:
        for index in range(runs):
            order = ("plain", "rubric") if index % 2 == 0 else ("rubric", "plain")
            for kind in order:
                row = judged_run(n=n, url=gen.url, judge_url=judge.url if kind == "rubric" else None,
                                 concurrency=concurrency)  # fmt: skip
                walls[kind].append(round(row["wall_s"], 3))
                rss[kind].append(round(row["peak_rss_mb"], 1))
                seen[kind] = {"grader": row["grader"], "judge": row["judge"]}
    finally:
        gen.stop()
        judge.stop()
    median = {k: statistics.median(w) for k, w in walls.items()}
    paired = [r / p for r, p in zip(walls["rubric"], walls["plain"], strict=True)]
    return {
        "prompts": n, "concurrency": concurrency, "latency_ms": latency_ms, "runs": runs,
        "ideal_s": round(n * latency_ms / 1000 / concurrency, 3),
        "wall_s": walls, "peak_rss_mb": rss, "last_run": seen,
        "median_wall_s": {k: round(m, 3) for k, m in median.items()},
        "rubric_vs_plain": round(median["rubric"] / median["plain"], 3),
        "rubric_vs_plain_paired_median": round(statistics.median(paired), 3),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=500, help="prompts")
    parser.add_argument("--runs", type=int, default=5, help="interleaved pairs (without / with rubrics)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    args = parser.parse_args()
    compile_evalkit()
    results = speed(args.n, args.runs)
    print(
        f"(b) {results['prompts']} prompts x {results['latency_ms']} ms, c{results['concurrency']}, median of "
        f"{results['runs']}: without rubrics {results['median_wall_s']['plain']} s, with one rubric per prompt "
        f"(a 200 ms judge) {results['median_wall_s']['rubric']} s: {results['rubric_vs_plain']}x "
        f"(paired runs: median {results['rubric_vs_plain_paired_median']}x; target at most 1.25x)"
    )
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
