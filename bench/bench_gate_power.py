"""What a regression gate catches: detection and false-alarm rates, simulated (issue 25, point 29).

    python bench/bench_gate_power.py --json bench/results/gate_power.json   # the README's table
    python bench/bench_gate_power.py --sizes 20 --trials 10                # a smoke run

Each trial makes a baseline run and a current run of a set of N prompts and asks evalkit's own
gate whether the current run fails: ``compare.compare_run`` with the baseline as the store gives
it back, ``compare.paired_test`` for ``--significance``, then ``compare.gate_passed`` under
``--fail-on-regression`` (nothing is re-implemented here). The model of a set:
- each prompt has its own pass probability q, drawn once per trial from a Beta distribution with
  mean ``--pass-rate`` (0.8) and concentration ``--concentration`` (2: most prompts nearly always
  pass or nearly always fail, some are a coin flip), and each run answers each prompt afresh;
- a true drop of d multiplies every q by (1 - d / pass rate) in the current run, so the expected
  pass rate falls by exactly d; d = 0 measures false alarms.
Scores are 1 for a pass and 0 for a fail, so the mean-score tolerance sees the same drop.
Seeded: the same arguments give the same table.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))

from evalkit.compare import BaselineRun, compare_run, gate_passed, paired_test, per_item  # noqa: E402
from evalkit.records import ItemResult, RunResult, ServingRecord, Tolerances  # noqa: E402

GEN = ServingRecord("sim", "alias", "model-1")


@dataclass(frozen=True)
class GateSpec:
    """A gate as a user asks for it: ``--max-pass-rate-drop T --max-mean-score-drop T
    [--significance ALPHA]`` under ``--fail-on-regression``."""

    name: str
    tolerance: str
    significance: float | None = None


GATES = (
    GateSpec("tolerance 0.1 (default)", "0.1"),
    GateSpec("tolerance 0.05", "0.05"),
    GateSpec("tolerance 0 + --significance 0.05", "0", 0.05),
    GateSpec("tolerance 0 + --significance 0.01", "0", 0.01),
)


def make_run(run_id: str, passes: list[bool], tolerance: str) -> RunResult:
    items = tuple(
        ItemResult(
            id=f"p{i}",
            passed=ok,
            score=1.0 if ok else 0.0,
            reason="",
            serving=GEN,
            adapter="openai",
            yardstick="deterministic",
        )
        for i, ok in enumerate(passes)
    )
    return RunResult.create(
        items,
        run_id=run_id,
        set_id="sim.set",
        set_fingerprint="f" * 16,
        provider="sim",
        model="alias",
        grader="deterministic",
        started_at="2026-12-02T00:00:00+00:00",
        finished_at="2026-12-02T00:00:00+00:00",
        tolerances=Tolerances(Decimal(tolerance), Decimal(tolerance)),
    )


def as_baseline(run: RunResult) -> BaselineRun:
    """The run as the store gives it back as a baseline (with its per-prompt outcomes)."""
    outcomes = per_item((i.id, i.passed, i.score) for i in run.items)
    return BaselineRun(
        run.run_id, run.pass_rate, run.mean_score, run.passed_count, run.sample_count, "f" * 16, items=outcomes
    )


def trial(rng: random.Random, size: int, drop: float, rate: float, concentration: float) -> list[bool]:
    """One baseline and one current run; for each gate, whether it failed the current run."""
    a, b = rate * concentration, (1 - rate) * concentration
    chances = [rng.betavariate(a, b) for _ in range(size)]
    keep = 1 - drop / rate
    before = [rng.random() < q for q in chances]
    after = [rng.random() < q * keep for q in chances]
    failed = []
    paired = None
    for gate in GATES:
        base_run = make_run("base", before, gate.tolerance)
        now = make_run("now", after, gate.tolerance)
        if gate.significance is not None and paired is None:
            paired = paired_test(
                [(i.id, i.passed, i.score) for i in base_run.items], [(i.id, i.passed, i.score) for i in now.items]
            )
        verdict = compare_run(
            now, as_baseline(base_run), now.tolerances, paired if gate.significance else None, gate.significance
        )
        failed.append(not gate_passed(verdict, fail_on_regression=True))
    return failed


def simulate(
    sizes: list[int], drops: list[float], trials: int, rate: float, concentration: float, seed: int
) -> dict[str, Any]:
    rows = []
    for size in sizes:
        for drop in drops:
            rng = random.Random(f"{seed}-{size}-{drop}")
            counts = [0] * len(GATES)
            for _ in range(trials):
                for k, failed in enumerate(trial(rng, size, drop, rate, concentration)):
                    counts[k] += failed
            for gate, count in zip(GATES, counts, strict=True):
                rows.append(
                    {
                        "prompts": size,
                        "true_drop_pp": round(drop * 100, 1),
                        "gate": gate.name,
                        "fail_rate": count / trials,
                    }
                )
    return {"trials": trials, "pass_rate": rate, "concentration": concentration, "seed": seed, "rows": rows}


def table(result: dict[str, Any]) -> str:
    """Markdown: one row per set size and gate, one column per true drop (0: false alarms)."""
    drops = sorted({r["true_drop_pp"] for r in result["rows"]})
    head = " | ".join("no drop (false alarms)" if d == 0 else f"{d:g} pp drop" for d in drops)
    lines = [f"| prompts | gate | {head} |", "|---:|---|" + "---:|" * len(drops)]
    cells: dict[tuple[int, str], dict[float, float]] = {}
    for r in result["rows"]:
        cells.setdefault((r["prompts"], r["gate"]), {})[r["true_drop_pp"]] = r["fail_rate"]
    for (size, gate), by_drop in cells.items():
        shown = " | ".join(f"{by_drop[d] * 100:.1f}%" for d in drops)
        lines.append(f"| {size} | {gate} | {shown} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="50,200,500", help="set sizes, comma-separated")
    parser.add_argument("--drops", default="0,0.05,0.10,0.15", help="true pass-rate drops, comma-separated")
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--pass-rate", type=float, default=0.8)
    parser.add_argument("--concentration", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=20261202)
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    args = parser.parse_args()
    started = time.perf_counter()
    result = simulate(
        [int(s) for s in args.sizes.split(",")],
        [float(d) for d in args.drops.split(",")],
        args.trials,
        args.pass_rate,
        args.concentration,
        args.seed,
    )
    result["wall_s"] = round(time.perf_counter() - started, 1)
    print(table(result))
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
