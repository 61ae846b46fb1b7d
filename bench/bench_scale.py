"""The 100,000-answer replay benchmark repeated, and where its load time goes (issues 16 and 17).

    python bench/bench_scale.py                  # 100,000 prompts, 5 runs of the command
    python bench/bench_scale.py --n 2000 --runs 2 --json out.json

One folder is written (bench_promptfoo.write_grading_folder: 100,000 prompts of three
assertions from GRADING_MIX, 100,000 recorded answers, a priced replay instance) and the whole
`evalkit run set.yaml --format json --output out.json` is run ``--runs`` times, each in a fresh
process: grading phase (the run's started_at to finished_at), assertions per second, the whole
command and the peak RSS of its process tree.

Before each run, a fixed pure-Python loop is timed: this machine's speed moves by about 25%
from minute to minute (two shared cores), and the loop shows how fast the machine was then.

Then the load, each step in its own process:
- ruamel's C parser (libyaml) producing the file's events and nothing else: the floor of any
  loading through the chosen YAML library;
- evalkit's parse (the plain data built from those events);
- evalkit's whole load (parse, JSON Schema, per-prompt checks, records), with its peak RSS.
Both under the collector policy the command loads with (evalkit/memory.py: the cyclic collector
paused); before session 10 they ran with it on, and measured 1.5 s (parse) to 5 s (load) more
than the command spends on them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))

from bench.bench_promptfoo import grading_throughput, write_grading_folder  # noqa: E402
from bench.measure import calibrate, compile_evalkit, evalkit_env, measure  # noqa: E402

STEPS = {
    "ruamel C events only (floor)": """
from ruamel.yaml import YAML
from ruamel.yaml.events import StreamEndEvent
text = open("set.yaml", encoding="utf-8").read()
t = time.perf_counter()
_, parser = YAML(typ="safe", pure=False).get_constructor_parser(text)
while type(parser.get_event()) is not StreamEndEvent:
    pass
""",
    "evalkit parse (plain data from the events)": """
from evalkit.memory import collector_policy, loading
from evalkit.sets.yamldoc import parse_document
text = open("set.yaml", encoding="utf-8").read()
t = time.perf_counter()
with collector_policy(), loading():  # as the command loads: the cyclic collector paused
    parse_document(text, "set.yaml")
""",
    "evalkit load (parse, schema, checks, records)": """
from evalkit import api
from evalkit.memory import loading
config = api.load_config("evalkit.yaml")
t = time.perf_counter()
with api.collector_policy(), loading():  # as the command loads: the cyclic collector paused
    api.load_prompt_sets(["set.yaml"], config)
""",
}


def load_step(folder: Path, body: str, checkout: Path | None = None) -> dict[str, float]:
    code = f"import time\n{body}\nprint(time.perf_counter() - t)\n"
    m = measure([sys.executable, "-c", code], cwd=folder, env=evalkit_env(checkout))
    if m.returncode != 0:
        raise SystemExit(f"load step failed: {m.stderr[-2000:]}")
    return {"s": round(float(m.stdout.split()[-1]), 2), "peak_rss_mb": round(m.peak_rss_mb, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--before", type=Path, metavar="CHECKOUT",
        help="another checkout of evalkit: each run of the command is followed by the same run from there",
    )  # fmt: skip
    args = parser.parse_args()
    before = args.before.resolve() if args.before else None
    compile_evalkit()  # as an installed package has it (bench/measure.py)
    if before is not None:
        compile_evalkit(before)
    results: dict[str, object] = {"n": args.n, "runs": [], "load": {}}
    with tempfile.TemporaryDirectory(prefix="evalkit-scale-") as tmp:
        folder = Path(tmp)
        write_grading_folder(folder, args.n)
        results["set_file_mb"] = round((folder / "set.yaml").stat().st_size / 1e6, 1)
        for _ in range(args.runs):
            loop_s = calibrate()
            run = grading_throughput(args.n, folder)
            run["calibration_loop_s"] = round(loop_s, 2)
            results["runs"].append(run)  # type: ignore[attr-defined]
            print(json.dumps(run), flush=True)
            if before is not None:
                then = {"checkout": str(before), **grading_throughput(args.n, folder, checkout=before)}
                results.setdefault("runs before", []).append(then)  # type: ignore[attr-defined]
                print(json.dumps(then), flush=True)
        for name, body in STEPS.items():
            results["load"][name] = {"calibration_loop_s": round(calibrate(), 2), **load_step(folder, body)}  # type: ignore[index]
            print(name, results["load"][name], flush=True)  # type: ignore[index]
            if before is not None and "evalkit" in name:  # ruamel's floor is the same for both
                then = {"checkout": str(before), **load_step(folder, body, before)}
                results.setdefault("load before", {})[name] = then  # type: ignore[union-attr]
                print(name, "before:", then, flush=True)
    runs: list[dict[str, float]] = results["runs"]  # type: ignore[assignment]
    rates = [float(r["assertions_per_s"]) for r in runs]
    results["summary"] = {
        "assertions_per_s_median": round(statistics.median(rates)),
        "assertions_per_s_min": round(min(rates)),
        "assertions_per_s_max": round(max(rates)),
        "whole_command_s_median": round(statistics.median(float(r["whole_command_s"]) for r in runs), 1),
        "peak_rss_mb_max": max(float(r["peak_rss_mb"]) for r in runs),
    }
    if before is not None:
        then_runs: list[dict[str, float]] = results["runs before"]  # type: ignore[assignment]
        results["summary before"] = {
            "assertions_per_s_median": round(statistics.median(float(r["assertions_per_s"]) for r in then_runs)),
            "whole_command_s_median": round(statistics.median(float(r["whole_command_s"]) for r in then_runs), 1),
            "peak_rss_mb_max": max(float(r["peak_rss_mb"]) for r in then_runs),
        }
        print("before:", json.dumps(results["summary before"]))
    print(json.dumps(results["summary"]))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
