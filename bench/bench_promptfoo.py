"""evalkit, promptfoo and inspect_ai side by side, in one invocation (issues 8 and 15).

    python bench/bench_promptfoo.py                 # everything; promptfoo from bench/node/,
                                                    # inspect_ai from bench/inspect-venv/
    python bench/bench_promptfoo.py --smoke         # tiny N, no peers, no model (run by CI)

Starts a loopback OpenAI-compatible server (bench/loopback_server.py) at 0 ms and at 200 ms
latency and a real local model server (llama.cpp through xllamacpp, bench/model_server.py),
writes equivalent suites for both tools (N prompts, each with a contains, a regex and a JSON
schema assertion) and runs both with the cache off at the same concurrency, recording wall
time, peak RSS of the whole process tree (sampled from /proc every 10 ms) and per-prompt
overhead:

  (a) N = 2,000 at 0 ms latency, concurrency 16 (harness overhead);
  (b) N = 500 at 200 ms latency, concurrency 32 (efficiency against N x latency / concurrency);
  (c) 50 prompts on the real local model, concurrency 1;
  (d) N = 5,000 at 200 ms latency, concurrency 64 (ideal 15.6 s: does the fixed cost grow with
      the work?), evalkit alone.

(b) and (d) also get three floor rows from bench/floor_client.py: a raw asyncio client with no
HTTP library, bare and after importing the libraries evalkit must load before its first call,
and the same lanes on httpx's public API (one AsyncClient per lane, one shared TLS context).
inspect_ai (bench/peer_inspect.py) runs (a) and (b) when bench/inspect-venv exists.

It also records `evalkit --help` start-up, `evalkit validate` over 100 set files and grading
100,000 pre-generated answers through the replay provider; and, before each of (a), (b) and (d)
and at the end, how fast the shared machine was (bench/measure.py's calibration loop) and its load
average: a loop much slower than the run's others measured a busier machine. promptfoo 0.121.20 is installed with
`npm install --prefix bench/node promptfoo@0.121.20` (bench/node is ignored by git).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from datetime import datetime
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))

from bench import peer_inspect  # noqa: E402
from bench.measure import Measure, Server, calibrate, compile_evalkit, evalkit_env, measure  # noqa: E402

PROMPTFOO = BENCH / "node" / "node_modules" / ".bin" / "promptfoo"
ANSWER_CHECKS = {"contains": "42", "regex": "[Aa]nswer is \\d+", "schema": {"type": "object", "required": ["answer"]}}


def evalkit_suite(folder: Path, set_id: str, n: int, url: str, concurrency: int, prompt: str, max_tokens: int) -> Path:
    lines = [f"id: {set_id}", f"name: {set_id}", f"params: {{temperature: 0, max_tokens: {max_tokens}}}", "prompts:"]
    for i in range(n):
        lines += [
            f"  - id: p{i}",
            f"    prompt: {json.dumps(prompt.format(i=i))}",
            "    assertions:",
            f"      - contains: '{ANSWER_CHECKS['contains']}'",
            f"      - regex: '{ANSWER_CHECKS['regex']}'",
            "      - json_schema: {type: object, required: [answer]}",
        ]
    (folder / "set.yaml").write_text("\n".join(lines) + "\n")
    (folder / "evalkit.yaml").write_text(
        f"providers:\n  - {{id: bench, adapter: openai, base_url: '{url}', model: bench, "
        f"max_concurrency: {concurrency}, timeout_s: 300}}\n"
    )
    return folder / "set.yaml"


def promptfoo_suite(folder: Path, n: int, url: str, prompt: str, max_tokens: int) -> Path:
    tests = [
        {
            "vars": {"q": prompt.format(i=i)},
            "assert": [
                {"type": "contains", "value": ANSWER_CHECKS["contains"]},
                {"type": "regex", "value": ANSWER_CHECKS["regex"]},
                {"type": "is-json", "value": ANSWER_CHECKS["schema"]},
            ],
        }
        for i in range(n)
    ]
    config = {
        "description": "bench",
        "prompts": ["{{q}}"],
        "providers": [
            {
                "id": "openai:chat:bench",
                "config": {"apiBaseUrl": url, "apiKey": "dummy", "temperature": 0, "max_tokens": max_tokens},
            }
        ],
        "tests": tests,
    }
    path = folder / "promptfooconfig.json"
    path.write_text(json.dumps(config))
    return path


def run_evalkit(folder: Path, concurrency: int, checkout: Path | None = None) -> tuple[Measure, dict[str, object]]:
    for stale in folder.glob("evalkit.duckdb*"):
        stale.unlink()
    result = measure(
        [sys.executable, "-m", "evalkit", "run", "set.yaml", "--no-cache", "--concurrency", str(concurrency),
         "--format", "json", "--db", str(folder / "evalkit.duckdb")],
        cwd=folder, env={"NO_COLOR": "1", **evalkit_env(checkout)},
    )  # fmt: skip
    if result.returncode not in (0, 1):
        raise SystemExit(f"evalkit failed: {result.stderr[-2000:]}")
    return result, json.loads(result.stdout)


def run_promptfoo(folder: Path, config: Path, concurrency: int) -> tuple[Measure, dict[str, object]]:
    env = {
        "PROMPTFOO_DISABLE_TELEMETRY": "1",
        "PROMPTFOO_DISABLE_UPDATE": "1",
        "PROMPTFOO_DISABLE_SHARING": "1",
        "PROMPTFOO_CONFIG_DIR": str(folder / "promptfoo-config"),
        "FORCE_COLOR": "0",
    }
    out = folder / "promptfoo-out.json"
    result = measure(
        [str(PROMPTFOO), "eval", "-c", str(config), "--no-cache", "--no-progress-bar", "--no-table",
         "-j", str(concurrency), "-o", str(out)],
        cwd=folder, env=env,
    )  # fmt: skip
    if result.returncode not in (0, 100):  # 100: some tests failed
        raise SystemExit(f"promptfoo failed: {result.stderr[-2000:]}")
    return result, json.loads(out.read_text())["results"]["stats"]


def scenario(
    name: str, *, n: int, url: str, concurrency: int, latency_s: float | None, tools: tuple[str, ...],
    prompt: str = "Question number {i}: what is the answer?", max_tokens: int = 32, before: Path | None = None,
) -> list[dict[str, object]]:  # fmt: skip
    """Run the suite with each of ``tools`` ("evalkit", "promptfoo") against ``url``; with
    ``before`` (another checkout of evalkit), evalkit again from there, right after."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="evalkit-bench-") as tmp:
        folder = Path(tmp)
        if "evalkit" in tools:
            evalkit_suite(folder, f"bench.{name}", n, url, concurrency, prompt, max_tokens)
            for tool, checkout in (("evalkit", None), ("evalkit before", before)):
                if tool == "evalkit before" and before is None:
                    continue
                measured, doc = run_evalkit(folder, concurrency, checkout)
                run_s = (
                    datetime.fromisoformat(str(doc["finished_at"])).timestamp()
                    - datetime.fromisoformat(str(doc["started_at"])).timestamp()
                )
                note = f"pass rate {doc['pass_rate']:.3f}"
                rows.append(_row(name, tool, n, concurrency, latency_s, measured, note, run_s))
        if "promptfoo" in tools:
            config = promptfoo_suite(folder, n, url, prompt, max_tokens)
            measured, pf_stats = run_promptfoo(folder, config, concurrency)
            passed = pf_stats["successes"] / n  # type: ignore[operator]
            rows.append(_row(name, "promptfoo", n, concurrency, latency_s, measured, f"pass rate {passed:.3f}", None))
        if "inspect_ai" in tools:
            task = peer_inspect.inspect_suite(folder, n, prompt, ANSWER_CHECKS)
            measured, rate = peer_inspect.run_inspect(folder, task, url, concurrency, max_tokens)
            rows.append(_row(name, "inspect_ai", n, concurrency, latency_s, measured, f"pass rate {rate:.3f}", None))
    return rows


def floor_rows(name: str, *, n: int, url: str, concurrency: int, latency_s: float) -> list[dict[str, object]]:
    """The same load from bench/floor_client.py, bare and after importing evalkit's stack: the
    least any Python client, then any client on evalkit's stack, can take."""
    rows = []
    for tool, extra in (
        ("floor: raw asyncio client", []),
        ("floor: raw client + stack imports", ["--import-stack"]),
        ("floor: httpx client per lane + stack imports", ["--import-stack", "--httpx"]),
    ):
        m = measure([sys.executable, str(BENCH / "floor_client.py"), url, str(n), str(concurrency), *extra])
        if m.returncode != 0 or m.stdout.strip() != str(n):
            raise SystemExit(f"floor client failed: {m.stderr[-2000:]}")
        rows.append(_row(name, tool, n, concurrency, latency_s, m, "no grading or storing", None))
    return rows


def _row(
    name: str, tool: str, n: int, concurrency: int, latency_s: float | None, m: Measure, note: str, run_s: float | None
) -> dict[str, object]:
    ideal = n * latency_s / concurrency if latency_s is not None else None
    overhead_ms = (m.wall_s - (ideal or 0.0)) / n * 1000
    return {
        "scenario": name, "tool": tool, "prompts": n, "concurrency": concurrency, "wall_s": round(m.wall_s, 3),
        "peak_rss_mb": round(m.peak_rss_mb, 1), "overhead_ms_per_prompt": round(overhead_ms, 3),
        "ideal_s": round(ideal, 3) if ideal is not None else None,
        "vs_ideal": round(m.wall_s / ideal, 3) if ideal else None, "run_phase_s": round(run_s, 3) if run_s else None,
        "note": note,
    }  # fmt: skip


def machine_speed(when: str, smoke: bool) -> list[dict[str, object]]:
    """How fast the shared machine was just then: the calibration loop and the load average
    (nothing in the CI smoke: the loop alone takes longer than its scenarios)."""
    if smoke:
        return []
    return [{"when": when, "calibration_loop_s": round(calibrate(), 2), "load_average_1m": os.getloadavg()[0]}]


def help_startup(repeat: int) -> dict[str, object]:
    times = [measure([sys.executable, "-m", "evalkit", "--help"]).wall_s for _ in range(repeat)]
    entry = BENCH.parent / ".venv" / "bin" / "evalkit"
    script = [measure([str(entry), "--help"]).wall_s for _ in range(repeat)] if entry.exists() else []
    return {
        "python -m evalkit --help (median ms)": round(statistics.median(times) * 1000, 1),
        "evalkit --help, console script (median ms)": round(statistics.median(script) * 1000, 1) if script else None,
    }


def validate_many(files: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="evalkit-bench-") as tmp:
        folder = Path(tmp) / "sets"
        folder.mkdir()
        for index in range(files):
            prompts = "\n".join(
                f"  - {{id: p{j}, prompt: 'Question {j}?', assertions: [{{contains: x}}, {{regex: '/x+/i'}}, "
                f"{{json_schema: {{type: object}}}}]}}"
                for j in range(20)
            )
            (folder / f"set_{index:03d}.yaml").write_text(
                f"id: bench.set_{index:03d}\nname: Set {index}\nprompts:\n{prompts}\n"
            )
        m = measure([sys.executable, "-m", "evalkit", "validate", str(folder)], cwd=Path(tmp))
        if m.returncode != 0:
            raise SystemExit(f"validate failed: {m.stderr}")
    return {
        "files": files,
        "prompts_per_file": 20,
        "wall_s": round(m.wall_s, 3),
        "peak_rss_mb": round(m.peak_rss_mb, 1),
    }


ANSWER = {"answer": 42, "text": "The answer is 42."}
# issue 16's mix: every deterministic type but python and latency_ms (a recorded answer took no
# call, so it has no latency to check), three per prompt in rotation; the answer holds them all:
# a pass rate of 1.0 shows each was graded as meant
GRADING_MIX: list[dict[str, object]] = [
    {"contains": "42"},
    {"icontains": "ANSWER"},
    {"not_contains": "error"},
    {"contains_any": ["41", "42"]},
    {"contains_all": ["answer", "42"]},
    {"icontains_any": ["THE", "nothing"]},
    {"icontains_all": ["ANSWER", "TEXT"]},
    {"starts_with": "{"},
    {"regex": "/answer is \\d+/i"},
    {"not_regex": "/error/i"},
    {"json_schema": {"type": "object", "required": ["answer"]}},
    {"equals_json": ANSWER},
    {"contains_json": {"type": "object", "required": ["text"]}},
    {"levenshtein": {"value": json.dumps({"answer": 42, "text": "The answer is 41."}), "max": 2}},
    {"word_count": {"min": 3, "max": 10}},
    {"cost": 0.01},
]


def write_grading_folder(folder: Path, n: int) -> None:
    """The replay benchmark's project: ``n`` recorded answers, a set of ``n`` prompts with three
    assertions of GRADING_MIX each (in rotation), and a priced replay instance."""
    answer = json.dumps(ANSWER)
    with (folder / "answers.jsonl").open("w") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"p{i}", "response": answer, "model": "recorded-1"}) + "\n")
    lines = ["id: bench.grading", "name: Grading throughput", "prompts:"]
    for i in range(n):
        mix = [json.dumps(GRADING_MIX[(3 * i + k) % len(GRADING_MIX)]) for k in range(3)]
        lines.append(f"  - {{id: p{i}, prompt: 'Q{i}', assertions: [{', '.join(mix)}]}}")
    (folder / "set.yaml").write_text("\n".join(lines) + "\n")
    (folder / "evalkit.yaml").write_text(
        "providers:\n  - {id: rec, adapter: replay, path: answers.jsonl, "
        "cost: {input_per_mtok: 1, output_per_mtok: 2}}\n"
    )


def grading_throughput(n: int, folder: Path | None = None, checkout: Path | None = None) -> dict[str, object]:
    """The replay command over a folder written by ``write_grading_folder`` (a fresh one, or
    ``folder`` as it is: its database is removed first); ``checkout``: evalkit from there."""
    with tempfile.TemporaryDirectory(prefix="evalkit-bench-") as tmp:
        if folder is None:
            folder = Path(tmp)
            write_grading_folder(folder, n)
        for stale in folder.glob("evalkit.duckdb*"):
            stale.unlink()
        m = measure(
            [sys.executable, "-m", "evalkit", "run", "set.yaml", "--format", "json", "--output", "out.json",
             "--db", str(folder / "evalkit.duckdb")],
            cwd=folder, env=evalkit_env(checkout),
        )  # fmt: skip
        if m.returncode != 0:
            raise SystemExit(f"grading run failed: {m.stderr[-2000:]}")
        doc = json.loads((folder / "out.json").read_text())
    run_s = (
        datetime.fromisoformat(doc["finished_at"]).timestamp() - datetime.fromisoformat(doc["started_at"]).timestamp()
    )
    return {
        "answers": n, "assertions": 3 * n, "types": len(GRADING_MIX), "grading_phase_s": round(run_s, 3),
        "assertions_per_s": round(3 * n / run_s), "whole_command_s": round(m.wall_s, 3),
        "peak_rss_mb": round(m.peak_rss_mb, 1), "pass_rate": doc["pass_rate"],
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny N, no promptfoo, no model (the CI smoke)")
    parser.add_argument("--no-promptfoo", action="store_true")
    parser.add_argument("--no-inspect", action="store_true")
    parser.add_argument("--no-model", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    parser.add_argument(
        "--before", type=Path, metavar="CHECKOUT",
        help="another checkout of evalkit (git worktree add --detach DIR REV): its rows next to this one's",
    )  # fmt: skip
    args = parser.parse_args()
    compile_evalkit()
    before = args.before.resolve() if args.before else None
    if before is not None:
        compile_evalkit(before)
    smoke = args.smoke
    with_promptfoo = not (smoke or args.no_promptfoo)
    with_inspect = not (smoke or args.no_inspect)
    tools = ("evalkit",) + (("promptfoo",) if with_promptfoo else ()) + (("inspect_ai",) if with_inspect else ())
    if with_promptfoo and not PROMPTFOO.exists():
        raise SystemExit("promptfoo is not installed: npm install --prefix bench/node promptfoo@0.121.20")
    if with_inspect and not peer_inspect.available():
        raise SystemExit("inspect_ai is not installed: see bench/peer_inspect.py (or pass --no-inspect)")
    sizes = {"a": 20, "b": 10, "c": 2, "d": 20, "grading": 200, "validate": 3, "help": 2} if smoke else {
        "a": 2000, "b": 500, "c": 50, "d": 5000, "grading": 100_000, "validate": 100, "help": 15}  # fmt: skip
    results: dict[str, object] = {"machine": f"{os.cpu_count()} cores", "smoke": smoke, "rows": [], "calibration": []}
    rows: list[dict[str, object]] = results["rows"]  # type: ignore[assignment]
    calibration: list[dict[str, object]] = results["calibration"]  # type: ignore[assignment]
    fast = Server(str(BENCH / "loopback_server.py"), "--latency-ms", "0")
    slow = Server(str(BENCH / "loopback_server.py"), "--latency-ms", "200")
    try:
        calibration += machine_speed("before (a)", smoke)
        rows += scenario("a", n=sizes["a"], url=fast.url, concurrency=16, latency_s=None, tools=tools, before=before)
        calibration += machine_speed("before (b)", smoke)
        rows += scenario("b", n=sizes["b"], url=slow.url, concurrency=32, latency_s=0.2, tools=tools, before=before)
        rows += floor_rows("b", n=sizes["b"], url=slow.url, concurrency=32, latency_s=0.2)
        calibration += machine_speed("before (d)", smoke)
        rows += scenario(
            "d", n=sizes["d"], url=slow.url, concurrency=64, latency_s=0.2, tools=("evalkit",), before=before
        )
        rows += floor_rows("d", n=sizes["d"], url=slow.url, concurrency=64, latency_s=0.2)
        calibration += machine_speed("after (d)", smoke)
    finally:
        fast.stop()
        slow.stop()
    if not (smoke or args.no_model):
        # A fresh model server per tool: llama.cpp keeps a prompt cache, so a second tool asking
        # the same prompts of the same server would skip their prompt processing.
        for tool in (t for t in tools if t != "inspect_ai"):  # inspect_ai is compared on (a) and (b)
            model = Server(str(BENCH / "model_server.py"))
            try:
                rows += scenario(
                    "c", n=sizes["c"], url=model.url, concurrency=1, latency_s=None, tools=(tool,),
                    prompt="Question {i}: what is 6 times 7? Answer in one short sentence.", max_tokens=24,
                )  # fmt: skip
            finally:
                model.stop()
    results["startup"] = help_startup(sizes["help"])
    if with_inspect:
        results["startup"]["inspect --version (s)"] = round(peer_inspect.version_startup(), 3)  # type: ignore[index]
    results["validate"] = validate_many(sizes["validate"])
    results["grading"] = grading_throughput(sizes["grading"])
    if before is not None:
        results["grading before"] = grading_throughput(sizes["grading"], checkout=before)
    print(render(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


def render(results: dict[str, object]) -> str:
    rows: list[dict[str, object]] = results["rows"]  # type: ignore[assignment]
    lines = [
        "| scenario | tool | prompts | concurrency | wall s | peak RSS MB | overhead ms/prompt | ideal s | x ideal | note |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['scenario']} | {r['tool']} | {r['prompts']} | {r['concurrency']} | {r['wall_s']} | {r['peak_rss_mb']} "
            f"| {r['overhead_ms_per_prompt']} | {r['ideal_s'] or '—'} | {r['vs_ideal'] or '—'} | {r['note']} |"
        )
    for name in ("a", "b", "c", "d"):
        by_tool = {r["tool"]: r for r in rows if r["scenario"] == name}
        e = by_tool.get("evalkit")
        if e is None:
            continue
        for peer in ("promptfoo", "inspect_ai"):
            if peer in by_tool:
                p = by_tool[peer]
                lines.append(
                    f"\n({name}) evalkit is {float(p['wall_s']) / float(e['wall_s']):.1f}x faster than {peer} "  # type: ignore[arg-type]
                    f"at {float(e['peak_rss_mb']) / float(p['peak_rss_mb']):.2f}x its peak memory"  # type: ignore[arg-type]
                )
        if "evalkit before" in by_tool:
            lines.append(
                f"\n({name}) evalkit is {float(e['wall_s']) / float(by_tool['evalkit before']['wall_s']):.3f}x "  # type: ignore[arg-type]
                "evalkit before"
            )
        for floor in ("floor: raw client + stack imports", "floor: httpx client per lane + stack imports"):
            for tool in ("evalkit", "evalkit before"):
                if floor in by_tool and tool in by_tool:
                    ratio = float(by_tool[tool]["wall_s"]) / float(by_tool[floor]["wall_s"])  # type: ignore[arg-type]
                    lines.append(f"\n({name}) {tool} is {ratio:.3f}x {floor}")
    lines += [
        "",
        "machine: "
        + "; ".join(
            f"{c['when']}: loop {c['calibration_loop_s']} s, load {c['load_average_1m']:.1f}"
            for c in results.get("calibration", [])  # type: ignore[union-attr]
        ),
        f"start-up: {results['startup']}",
        f"validate: {results['validate']}",
        f"grading: {results['grading']}",
    ]
    if "grading before" in results:
        lines.append(f"grading before: {results['grading before']}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
