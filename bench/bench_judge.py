"""How often a rubric judge agrees with a person (issue 29, point 7), on any judge you have.

    python bench/bench_judge.py --provider ID [--config evalkit.yaml]   # a judge of your evalkit.yaml
    python bench/bench_judge.py --provider local                        # the embedded local model

The labelled set tests/data/judged/agreement.yaml (40 answers to refund, support and code
questions, each with a rubric and the verdict a person gives: 20 pass, 20 fail) is run through
``evalkit run`` as it is shipped: the answers replayed (a ``replay`` instance), one ``rubric``
assertion per prompt, the judge the instance ``ID`` (copied from your evalkit.yaml, relative paths
kept pointing where they did; ``local`` without a config entry is the embedded model, asked
one call at a time). It reports
the judge's agreement with the labels, accuracy and Cohen's kappa (a failed judgement counts as a
disagreement, and is listed), its reported model, and what the judgements cost (the run's JSON
``judge`` block). The figure is a measurement of that judge on this set, never a promise of
evalkit's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
LABELLED = REPO / "tests" / "data" / "judged" / "agreement.yaml"
SET_ID = "judge.agreement"
PATH_KEYS = ("model_path", "ca_bundle", "path", "function")  # relative to the config file


def load_labelled(path: Path = LABELLED) -> dict[str, Any]:
    from ruamel.yaml import YAML

    data: dict[str, Any] = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    return data


def agreement(labels: Sequence[bool], verdicts: Sequence[bool | None]) -> dict[str, Any]:
    """Accuracy and Cohen's kappa of ``verdicts`` (None: no verdict, a disagreement) against ``labels``."""
    n = len(labels)
    both = {(a, b): 0 for a in (True, False) for b in (True, False, None)}
    for label, verdict in zip(labels, verdicts, strict=True):
        both[label, verdict] += 1
    observed = (both[True, True] + both[False, False]) / n if n else 0.0
    said_pass = sum(1 for v in verdicts if v is True) / n if n else 0.0
    said_fail = sum(1 for v in verdicts if v is False) / n if n else 0.0
    label_pass = sum(labels) / n if n else 0.0
    expected = label_pass * said_pass + (1 - label_pass) * said_fail
    kappa = (observed - expected) / (1 - expected) if expected < 1 else 1.0
    return {
        "items": n,
        "accuracy": observed,
        "kappa": kappa,
        "confusion": {
            "pass_judged_pass": both[True, True],
            "pass_judged_fail": both[True, False],
            "fail_judged_pass": both[False, True],
            "fail_judged_fail": both[False, False],
            "no_verdict": both[True, None] + both[False, None],
        },
    }


def judge_entry(provider: str, config: Path | None) -> dict[str, Any]:
    """The instance ``provider`` of the config, its relative paths made absolute."""
    if config is not None and config.is_file():
        from ruamel.yaml import YAML

        data = YAML(typ="safe").load(config.read_text(encoding="utf-8")) or {}
        for entry in data.get("providers") or []:
            if entry.get("id") == provider:
                entry = dict(entry)
                for key in PATH_KEYS:
                    if isinstance(entry.get(key), str) and not Path(entry[key]).is_absolute():
                        entry[key] = str((config.parent / entry[key]).resolve())
                return entry
    if provider == "local":  # one call at a time: llama.cpp queues the rest, and they would time out
        return {"id": "local", "adapter": "local", "max_concurrency": 1, "timeout_s": 600}
    raise SystemExit(f"no provider instance '{provider}' in {config or 'evalkit.yaml (none found)'}")


def write_project(folder: Path, labelled: dict[str, Any], judge: dict[str, Any]) -> None:
    """set.yaml (a rubric per answer), answers.jsonl (the answers, replayed) and evalkit.yaml."""
    prompts = [
        {"id": item["id"], "prompt": item["prompt"], "assertions": [{"rubric": item["rubric"]}]}
        for item in labelled["items"]
    ]
    document = {"id": SET_ID, "name": "Rubric agreement", "system": labelled.get("system", ""), "prompts": prompts}
    (folder / "set.yaml").write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    answers = [
        json.dumps({"id": item["id"], "response": item["answer"], "model": "labelled-answers", "set": SET_ID})
        for item in labelled["items"]
    ]
    (folder / "answers.jsonl").write_text("\n".join(answers) + "\n", encoding="utf-8")
    config = {
        "default_provider": "answers",
        "judge": {"provider": judge["id"]},
        "providers": [{"id": "answers", "adapter": "replay", "path": "answers.jsonl"}, judge],
    }
    (folder / "evalkit.yaml").write_text(json.dumps(config, indent=1) + "\n", encoding="utf-8")


def run(labelled: dict[str, Any], judge: dict[str, Any], use_cache: bool = False) -> dict[str, Any]:
    """The labelled set through ``evalkit run``; the run's JSON document and its wall time."""
    with tempfile.TemporaryDirectory(prefix="evalkit-judge-") as tmp:
        folder = Path(tmp)
        write_project(folder, labelled, judge)
        command = [sys.executable, "-m", "evalkit", "run", "set.yaml", "--format", "json",
                   "--config", str(folder / "evalkit.yaml"), "--db", str(folder / "evalkit.duckdb")]  # fmt: skip
        if not use_cache:
            command.append("--no-cache")
        env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(REPO)}
        started = time.perf_counter()
        done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
    if done.returncode not in (0, 1, 3) or not done.stdout.strip():
        raise SystemExit(f"evalkit run failed ({done.returncode}): {done.stderr[-2000:]}")
    return {"doc": json.loads(done.stdout), "wall_s": wall}


def measure(provider: str, config: Path | None) -> dict[str, Any]:
    labelled = load_labelled()
    ran = run(labelled, judge_entry(provider, config))
    doc = ran["doc"]
    by_id = {item["id"]: item for item in doc["items"]}
    labels = [item["label"] == "pass" for item in labelled["items"]]
    verdicts: list[bool | None] = []
    for item in labelled["items"]:
        got = by_id[item["id"]]
        verdicts.append(None if got["error"] else bool(got["passed"]))
    marks = {a.get("yardstick") for i in doc["items"] for a in i["assertions"] if a.get("yardstick")}
    return {
        "provider": provider,
        "grader": doc["grader"],
        "yardsticks": sorted(marks),
        **agreement(labels, verdicts),
        "failed_judgements": [i["id"] for i in doc["items"] if i["error"]],
        "disagreements": [
            {"id": item["id"], "label": item["label"], "reason": by_id[item["id"]]["reason"][:200]}
            for item, verdict in zip(labelled["items"], verdicts, strict=True)
            if verdict is not (item["label"] == "pass")
        ],
        "judge": doc.get("judge"),
        "wall_s": round(ran["wall_s"], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--provider", required=True, help="the judge: a provider instance id (local: the embedded model)"
    )
    parser.add_argument("--config", type=Path, default=Path("evalkit.yaml"), help="the evalkit.yaml that defines it")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    args = parser.parse_args()
    result = measure(args.provider, args.config)
    judge = result["judge"] or {}
    cost = judge.get("cost")
    print(
        f"judge {args.provider} ({', '.join(result['yardsticks']) or 'no verdict'}): accuracy {result['accuracy']:.3f}, "
        f"Cohen's kappa {result['kappa']:.3f} on {result['items']} labelled answers; "
        f"{len(result['failed_judgements'])} failed judgements; {judge.get('calls', 0)} judge calls, "
        f"{judge.get('input_tokens', 0):,} tokens in / {judge.get('output_tokens', 0):,} out, "
        f"cost {'unpriced' if cost is None else f'${cost:.4f}'}; {result['wall_s']} s"
    )
    print(json.dumps(result, indent=2, ensure_ascii=False))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
