"""The HTML report's size and speed (issue 18, point 5): 100 runs of 1,000 prompts.

    python bench/bench_html.py                 # 100 runs x 1,000 prompts
    python bench/bench_html.py --runs 5 --prompts 50 --json out.json

A project is written (a set of ``--prompts`` prompts, recorded answers whose passing share
changes from run to run, privacy ``full`` so every answer is in the file), and ``--runs`` runs
are made through the Python API in one process (a baseline accepted after the first). Then:
- ``evalkit report --html report.html``, the whole command in a fresh process (wall, peak RSS);
- the file's size;
- headless Chromium (Debian's, through ChromeDriver) opening the file from disk: the time from
  navigation start to the end of the page's script (every chart drawn, tables filterable), the
  load event, and the wall time of ``driver.get``, median of 5 fresh loads.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))

from bench.measure import measure  # noqa: E402


def make_history(folder: Path, runs: int, prompts: int) -> None:
    from evalkit import api

    (folder / "evalkit.yaml").write_text(
        "privacy: full\ndefault_provider: rec\nbaselines: baselines\n"
        "providers:\n  - {id: rec, adapter: replay, path: answers.jsonl}\n",
        encoding="utf-8",
    )
    lines = ["id: bench.html", "name: HTML report benchmark", "prompts:"]
    lines += [f"  - {{id: p{i:04d}, prompt: 'Question {i}?', assertions: [{{contains: yes}}]}}" for i in range(prompts)]
    (folder / "set.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for r in range(runs):
        failing = {(r * 7 + k * 13) % prompts for k in range(prompts // 10 + r % 5)}
        with (folder / "answers.jsonl").open("w", encoding="utf-8") as fh:
            for i in range(prompts):
                answer = "no, not this time" if i in failing else f"yes: answer {i} of run {r}"
                fh.write(json.dumps({"id": f"p{i:04d}", "response": answer, "model": "rec-1"}) + "\n")
        os.utime(folder / "answers.jsonl", ns=(r * 10**9, r * 10**9))  # read again: another mtime
        config = api.load_config(folder / "evalkit.yaml")
        sets = api.load_prompt_sets([str(folder / "set.yaml")], config)
        api.execute_plan(api.plan_run(sets, config))
        if r == 0:
            api.accept_baselines(config, [])


def browser_load(path: Path, loads: int = 5) -> dict[str, float]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver", log_output=os.devnull), options=options)
    import time

    ready, loaded, walls = [], [], []
    try:
        for _ in range(loads):
            driver.get("about:blank")
            start = time.perf_counter()
            driver.get(path.as_uri())
            walls.append(time.perf_counter() - start)
            ready.append(float(driver.execute_script("return Number(document.body.dataset.readyMs)")))
            loaded.append(
                float(driver.execute_script("return performance.getEntriesByType('navigation')[0].loadEventEnd"))
            )
    finally:
        driver.quit()
    return {
        "script_done_ms_median": round(statistics.median(ready)),
        "load_event_ms_median": round(statistics.median(loaded)),
        "driver_get_s_median": round(statistics.median(walls), 3),
        "script_done_ms_all": [round(r) for r in ready],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--prompts", type=int, default=1000)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--folder", type=Path, help="keep the project here; a history already there is reused")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="evalkit-html-") as tmp:
        folder = args.folder or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / ".evalkit" / "evalkit.duckdb").exists():
            make_history(folder, args.runs, args.prompts)
        m = measure([sys.executable, "-m", "evalkit", "report", "--html", "report.html"], cwd=folder)
        if m.returncode != 0:
            raise SystemExit(m.stderr[-2000:])
        size = (folder / "report.html").stat().st_size
        results = {
            "runs": args.runs, "prompts": args.prompts, "file_mb": round(size / 1e6, 3),
            "generate_whole_command_s": round(m.wall_s, 3), "generate_peak_rss_mb": round(m.peak_rss_mb, 1),
            "chromium": browser_load(folder / "report.html"),
        }  # fmt: skip
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
