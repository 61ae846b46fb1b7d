"""Store benchmark (issue 3): writing one 10,000-item run, and `evalkit report` /
`evalkit report SET` on a database holding 1,000 runs x 1,000 items.

    python bench/bench_store.py [--runs 1000] [--items 1000] [--repeat 7]

Prints a markdown table; the recorded results live in bench/README.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.measure import compile_evalkit  # noqa: E402
from evalkit.store import Store, save_run  # noqa: E402
from tests.factories import run_of  # noqa: E402


def time_write(db: Path, items: int, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        run = run_of(items * 9 // 10, items)
        with Store.open(db) as store:
            started = time.perf_counter()
            save_run(store, run, "metadata", "bench")
            times.append(time.perf_counter() - started)
    return times


def fill_history(db: Path, runs: int, items: int, sets: int = 20) -> None:
    """``runs`` runs of ``items`` items each over ``sets`` sets, generated in SQL."""
    with Store.open(db) as store, store.transaction() as con:
        con.execute(
            """
            insert into runs (run_id, kind, set_id, set_name, grader, provider, model, reported_model,
                              generator_provenance, started_at, finished_at, item_count, passed_count,
                              error_count, pass_rate, mean_score, status, comparison_state, regressed)
            select 'run-' || lpad(i::varchar, 6, '0'), 'prompts', 'bench.set_' || (i % $3), 'Bench',
                   'deterministic', 'fake', 'alias-1', 'model-1',
                   '{"version": 1, "provider": "fake", "model": "alias-1", "reported_model": "model-1"}',
                   timestamp '2026-01-01' + to_seconds(i * 60), timestamp '2026-01-01' + to_seconds(i * 60 + 30),
                   $2, ($2 * 0.9)::int, 0, 0.9, 0.9, 'complete', 'compared', false
            from range($1) t(i)
            """,
            [runs, items, sets],
        )
        con.execute(
            """
            insert into results (run_id, item_index, item_id, passed, score, reason, latency_ms, assertions,
                                 input_tokens, output_tokens, cached, yardstick)
            select 'run-' || lpad(r::varchar, 6, '0'), j, 'item-' || j, j % 10 <> 0, (j % 10 <> 0)::int::double,
                   'assertion holds', 100 + j % 50, '[{"type": "contains", "passed": true}]', 20, 10, false,
                   'deterministic'
            from range($1) a(r), range($2) b(j)
            """,
            [runs, items],
        )


def time_command(args: list[str], db: Path, repeat: int) -> list[float]:
    env = {**os.environ, "EVALKIT_DB": str(db), "NO_COLOR": "1"}
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "evalkit", *args], env=env, check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--write-items", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    compile_evalkit()
    with tempfile.TemporaryDirectory() as tmp:
        write_db = Path(tmp) / "write.duckdb"
        writes = time_write(write_db, args.write_items, args.repeat)
        history_db = Path(tmp) / "history.duckdb"
        started = time.perf_counter()
        fill_history(history_db, args.runs, args.items)
        fill_s = time.perf_counter() - started
        size_mb = history_db.stat().st_size / 1e6
        rows = [
            (f"store one {args.write_items:,}-item run (save_run, in-process)", writes),
            ("`evalkit report` (wall, incl. start-up)", time_command(["report"], history_db, args.repeat)),
            ("`evalkit report --format json`", time_command(["report", "--format", "json"], history_db, args.repeat)),
            ("`evalkit report bench.set_7`", time_command(["report", "bench.set_7"], history_db, args.repeat)),
            ("`evalkit --help` (wall)", time_command(["--help"], history_db, args.repeat)),
        ]
    print(f"history database: {args.runs:,} runs x {args.items:,} items ({size_mb:.0f} MB, filled in {fill_s:.1f} s)\n")
    print("| measurement | median | min | max |")
    print("|---|---:|---:|---:|")
    for name, times in rows:
        print(
            f"| {name} | {statistics.median(times) * 1000:.0f} ms | {min(times) * 1000:.0f} ms | {max(times) * 1000:.0f} ms |"
        )


if __name__ == "__main__":
    main()
