"""Merging CI databases and exporting the history (issue 19, point 4).

    python bench/bench_team.py                      # 100 databases of 10 runs x 1,000 items
    python bench/bench_team.py --dbs 5 --runs 2 --items 100

One database of ``--runs`` runs of a ``--items``-prompt set is made through the Python API
(replay answers, privacy ``full``: every answer is stored), then copied ``--dbs`` times with its
run ids renamed per copy (as ``--dbs`` CI runners would have made them). Then, each a whole
command in a fresh process, wall time and the peak RSS of its process tree:
- ``evalkit merge`` of every copy into an empty database;
- ``evalkit merge`` of the same copies again (every run already there: compared, skipped);
- ``evalkit export --parquet`` of the merged history (``--dbs x --runs x --items`` result rows).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))

from bench.measure import measure  # noqa: E402


def make_source(folder: Path, runs: int, items: int) -> Path:
    from evalkit import api

    (folder / "evalkit.yaml").write_text(
        "privacy: full\ndefault_provider: rec\nproviders:\n  - {id: rec, adapter: replay, path: answers.jsonl}\n",
        encoding="utf-8",
    )
    lines = ["id: bench.team", "name: Team benchmark", "prompts:"]
    lines += [f"  - {{id: p{i:04d}, prompt: 'Question {i}?', assertions: [{{contains: yes}}]}}" for i in range(items)]
    (folder / "set.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with (folder / "answers.jsonl").open("w", encoding="utf-8") as fh:
        for i in range(items):
            fh.write(json.dumps({"id": f"p{i:04d}", "response": f"yes, answer {i}", "model": "rec-1"}) + "\n")
    config = api.load_config(folder / "evalkit.yaml")
    sets = api.load_prompt_sets([str(folder / "set.yaml")], config)
    for _ in range(runs):
        api.execute_plan(api.plan_run(sets, config, use_cache=False))
    return folder / ".evalkit" / "evalkit.duckdb"


def copies(source: Path, folder: Path, count: int) -> list[Path]:
    import duckdb

    made = []
    for n in range(count):
        path = folder / f"runner{n:03d}.duckdb"
        shutil.copyfile(source, path)
        con = duckdb.connect(str(path))
        for table in ("results", "runs"):
            con.execute(f"update {table} set run_id = run_id || '-r{n:03d}'")
        con.execute("update runs set baseline_run_id = baseline_run_id || $1 where baseline_run_id is not null",
                    [f"-r{n:03d}"])  # fmt: skip
        con.close()
        made.append(path)
    return made


def timed(args: list[str], cwd: Path) -> dict[str, float]:
    m = measure([sys.executable, "-m", "evalkit", *args], cwd=cwd)
    if m.returncode != 0:
        raise SystemExit(f"{' '.join(args[:2])} failed: {m.stderr[-2000:]}")
    return {"wall_s": round(m.wall_s, 2), "peak_rss_mb": round(m.peak_rss_mb, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dbs", type=int, default=100)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="evalkit-team-") as tmp:
        root = Path(tmp)
        (root / "source").mkdir()
        (root / "artifacts").mkdir()
        (root / "team").mkdir()
        source = make_source(root / "source", args.runs, args.items)
        artifacts = [str(p) for p in copies(source, root / "artifacts", args.dbs)]
        (root / "team" / "evalkit.yaml").write_text("privacy: full\nproviders: []\n", encoding="utf-8")
        results = {
            "databases": args.dbs, "runs_each": args.runs, "items_each_run": args.items,
            "result_rows": args.dbs * args.runs * args.items,
            "merge": timed(["merge", *artifacts], root / "team"),
            "merge_again": timed(["merge", *artifacts], root / "team"),
            "export": timed(["export", "--parquet", "export"], root / "team"),
        }  # fmt: skip
        results["export_mb"] = round(
            sum(f.stat().st_size for f in (root / "team" / "export").rglob("*.parquet")) / 1e6, 1
        )
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
