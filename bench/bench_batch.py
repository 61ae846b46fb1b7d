"""A 20,000-prompt ``run --batch`` against the loopback batch server (issue 30).

    python bench/bench_batch.py                       # 20,000 prompts, openai and anthropic
    python bench/bench_batch.py --n 200 --json out.json

The server is tests/batchserver.py in its own process (both providers' documented batch
endpoints over real HTTP on 127.0.0.1; each batch answers ``in_progress`` to its first two status
reads, then ends with its results shuffled). Per adapter, each step a fresh evalkit process with
its wall time and the peak RSS of its process tree:

- submit: ``evalkit run set.yaml --batch --no-wait`` (load, plan, build and upload the requests,
  store the submission);
- collect: ``evalkit collect --wait --format json --output out.json`` (poll, read the results, grade,
  compare, store the run, report);
- the whole path in one process: ``evalkit run set.yaml --batch`` (submit, wait, collect) on a
  fresh database, polling every 0.2 s.

Before each adapter a fixed pure-Python loop is timed (bench_scale.py's calibration): the
machine is shared, and the loop says how fast it was then; each step also records the CPU time
of its process (user + system), which the other work on the machine moves far less than the
wall time.

Each prompt has a ``contains`` and a ``regex`` assertion (one pattern for all) that its answer passes.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))

from bench.measure import calibrate, compile_evalkit, measure  # noqa: E402

PATTERN = "'^answer: question [0-9]+$'"


def write_project(folder: Path, n: int, url: str) -> None:
    lines = ["id: bench.batch", "name: Batch bench", "prompts:"]
    for i in range(n):
        lines.append(
            f"  - {{id: p{i}, prompt: question {i}, assertions: [{{contains: answer}}, {{regex: {PATTERN}}}]}}"
        )
    (folder / "set.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "evalkit.yaml").write_text(
        f"""batch_poll_s: 0.2
providers:
  - id: oa
    adapter: openai
    model: gpt-bench
    base_url: {url}
    max_retries: 0
    timeout_s: 120
    cost: {{input_per_mtok: 0.15, output_per_mtok: 0.6}}
  - id: an
    adapter: anthropic
    model: claude-bench
    base_url: {url}
    max_retries: 0
    timeout_s: 120
    cost: {{input_per_mtok: 0.8, output_per_mtok: 4.0}}
""",
        encoding="utf-8",
    )


def step(folder: Path, args: list[str], db: Path) -> dict[str, object]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = measure(
        [sys.executable, "-m", "evalkit", *args, "--db", str(db)], cwd=folder, env={"PYTHONPATH": str(REPO)}
    )
    if result.returncode != 0:
        raise SystemExit(f"evalkit {' '.join(args)} exited {result.returncode}: {result.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the step's process, waited for (the server runs on)
    cpu_s = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return {"wall_s": round(result.wall_s, 3), "cpu_s": round(cpu_s, 3), "peak_rss_mb": round(result.peak_rss_mb, 1)}


def bench_adapter(folder: Path, provider: str) -> dict[str, object]:
    loop_s = calibrate()  # how fast this shared machine was just then (bench/measure.py)
    db = folder / f"{provider}-split.duckdb"
    submit = step(folder, ["run", "set.yaml", "--batch", "--no-wait", "--provider", provider], db)
    collect = step(folder, ["collect", "--wait", "--format", "json", "--output", f"{provider}.json"], db)
    doc = json.loads((folder / f"{provider}.json").read_text(encoding="utf-8"))
    whole = step(
        folder,
        ["run", "set.yaml", "--batch", "--provider", provider, "--format", "json"],
        folder / f"{provider}-whole.duckdb",
    )
    return {
        "calibration_loop_s": round(loop_s, 2),
        "prompts": doc["prompt_count"],
        "passed": doc["passed_count"],
        "batch_ids": doc["batch"]["batch_ids"],
        "cost": doc["cost"],
        "standard_cost": doc["batch"]["standard_cost"],
        "submit": submit,
        "collect": collect,
        "submit_plus_collect_s": round(float(submit["wall_s"]) + float(collect["wall_s"]), 3),  # type: ignore[arg-type]
        "whole_run_batch": whole,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    compile_evalkit()
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.batchserver", "--in-progress-polls", "2"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        ready = server.stdout.readline().split()
        url = f"http://127.0.0.1:{ready[1]}/v1"
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            write_project(folder, args.n, url)
            results = {"n": args.n, "openai": bench_adapter(folder, "oa"), "anthropic": bench_adapter(folder, "an")}
    finally:
        server.terminate()
        server.communicate(timeout=30)
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
