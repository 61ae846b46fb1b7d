"""What the replay benchmark's grading phase executes per answer, counted, not timed (issue 16).

    python bench/bench_grading_ops.py              # 2,000 prompts of GRADING_MIX, top 25 functions
    python bench/bench_grading_ops.py --n 200 --top 10 --json out.json

This machine's speed moves by a third from minute to minute, so a change of a few percent in the
grading phase cannot be seen in its time. This counts instead: the folder of
``bench_promptfoo.write_grading_folder`` is loaded and run once (warm), then the run's items are
run again under ``sys.settrace`` with opcode events, which counts the Python bytecodes executed
and the Python functions called per answer, by function, and ``sys.setprofile``, which counts
the calls into C. The counts are the same on every run of the same code: a change shows as a
change of these numbers. (Time inside C, a regex search or a JSON parse, is not counted.)
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))

from bench.bench_promptfoo import write_grading_folder  # noqa: E402


def count(folder: Path) -> dict[str, Any]:
    from evalkit import api, runner
    from evalkit.graders.deterministic import DeterministicGrader
    from evalkit.pipeline import execute, plan
    from evalkit.providers import ProviderPool

    config = api.load_config(folder / "evalkit.yaml")
    sets = api.load_prompt_sets([str(folder / "set.yaml")], config)
    planned = plan.plan_run(sets, config, db=None, store=False, use_cache=False)
    prompt_set, target = sets[0], planned.targets[0]
    caller = runner.Caller(ProviderPool(execute._lookup(planned)), None, True)
    grader = DeterministicGrader()

    async def run() -> list[Any]:
        return await runner.run_items(
            prompt_set, caller=caller, instance_id=target.provider.id, alias=target.alias, grader=grader, concurrency=8
        )

    asyncio.run(run())  # warm: the provider opened, the caches of the first answers filled
    opcodes: collections.Counter[str] = collections.Counter()
    calls: collections.Counter[str] = collections.Counter()
    c_calls: collections.Counter[str] = collections.Counter()

    def name(frame: FrameType) -> str:
        return f"{frame.f_code.co_qualname} ({Path(frame.f_code.co_filename).name})"

    def tracer(frame: FrameType, event: str, arg: object) -> Any:
        if event == "call":
            frame.f_trace_opcodes = True
            calls[name(frame)] += 1
        elif event == "opcode":
            opcodes[name(frame)] += 1
        return tracer

    def profiler(frame: FrameType, event: str, arg: object) -> None:
        if event == "c_call":
            c_calls[getattr(arg, "__qualname__", repr(arg))] += 1

    async def traced() -> None:
        sys.settrace(tracer)
        sys.setprofile(profiler)
        try:
            await run()
        finally:
            sys.settrace(None)
            sys.setprofile(None)

    asyncio.run(traced())
    n = len(prompt_set.prompts)
    return {
        "answers": n,
        "per_answer": {
            "python_opcodes": round(sum(opcodes.values()) / n, 1),
            "python_calls": round(sum(calls.values()) / n, 1),
            "c_calls": round(sum(c_calls.values()) / n, 1),
        },
        "by_function": [
            {"function": f, "opcodes": round(v / n, 1), "calls": round(calls[f] / n, 2)}
            for f, v in opcodes.most_common()
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="evalkit-ops-") as tmp:
        folder = Path(tmp)
        write_grading_folder(folder, args.n)
        result = count(folder)
    totals = result["per_answer"]
    print(
        f"per answer: {totals['python_opcodes']} Python opcodes, {totals['python_calls']} Python calls, "
        f"{totals['c_calls']} C calls ({result['answers']} answers)"
    )
    print("| opcodes | calls | function |\n|---:|---:|---|")
    for row in result["by_function"][: args.top]:
        print(f"| {row['opcodes']} | {row['calls']} | `{row['function']}` |")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
