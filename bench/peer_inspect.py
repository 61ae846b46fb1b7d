"""inspect_ai as a second peer of bench/bench_promptfoo.py (issue 15, point 5e).

inspect-ai from PyPI lives in its own venv, bench/inspect-venv (ignored by git):

    python3 -m venv bench/inspect-venv && bench/inspect-venv/bin/pip install inspect-ai openai

The suite is the one evalkit and promptfoo get: the same prompts as a JSONL dataset, target "42"
checked with inspect's own ``includes()``, and two small custom scorers for the regex and the JSON
Schema checks (inspect has neither built in). The model is ``openai-api/loop/bench`` (inspect's
OpenAI-compatible provider, reading ``LOOP_BASE_URL`` and ``LOOP_API_KEY``), run with the same
``--max-connections`` as the others' concurrency, temperature 0 and the same max tokens. Its
default logging is kept (an ``.eval`` log under the suite's folder); only the live display is off
(``--display none``), as the other tools run without a terminal too.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from bench.measure import Measure, measure

VENV = Path(__file__).resolve().parent / "inspect-venv"
INSPECT = VENV / "bin" / "inspect"
PYTHON = VENV / "bin" / "python"

TASK = """\
import json
import re

import jsonschema
from inspect_ai import Task, task
from inspect_ai.dataset import json_dataset
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, includes, scorer
from inspect_ai.solver import TaskState, generate

PATTERN = re.compile({regex!r})
SCHEMA = {schema!r}


@scorer(metrics=[accuracy()])
def regex_matches():
    async def score(state: TaskState, target: Target) -> Score:
        found = PATTERN.search(state.output.completion) is not None
        return Score(value=CORRECT if found else INCORRECT)

    return score


@scorer(metrics=[accuracy()])
def json_schema_valid():
    async def score(state: TaskState, target: Target) -> Score:
        try:
            jsonschema.validate(json.loads(state.output.completion), SCHEMA)
        except (ValueError, jsonschema.ValidationError):
            return Score(value=INCORRECT)
        return Score(value=CORRECT)

    return score


@task
def bench():
    return Task(
        dataset=json_dataset("dataset.jsonl"),
        solver=[generate()],
        scorer=[includes(), regex_matches(), json_schema_valid()],
    )
"""

PASS_RATE = """\
import sys
from inspect_ai.log import list_eval_logs, read_eval_log

log = read_eval_log(list_eval_logs(sys.argv[1])[0])
samples = log.samples or []
passed = sum(all(s.value == "C" for s in sample.scores.values()) for sample in samples)
print(passed / len(samples) if samples else 0.0)
"""


def available() -> bool:
    return INSPECT.exists()


def inspect_suite(folder: Path, n: int, prompt: str, checks: dict[str, object]) -> Path:
    """The dataset and the task file in ``folder``; returns the task file."""
    with (folder / "dataset.jsonl").open("w") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"p{i}", "input": prompt.format(i=i), "target": checks["contains"]}) + "\n")
    task = folder / "bench_task.py"
    task.write_text(TASK.format(regex=checks["regex"], schema=checks["schema"]))
    return task


def run_inspect(folder: Path, task: Path, url: str, concurrency: int, max_tokens: int) -> tuple[Measure, float]:
    """One ``inspect eval`` of ``task`` against ``url``; its measure and the pass rate it logged."""
    logs = folder / "inspect-logs"
    env = {"LOOP_BASE_URL": url, "LOOP_API_KEY": "dummy", "INSPECT_LOG_DIR": str(logs)}
    result = measure(
        [str(INSPECT), "eval", task.name, "--model", "openai-api/loop/bench", "--max-connections", str(concurrency),
         "--temperature", "0", "--max-tokens", str(max_tokens), "--display", "none", "--log-dir", str(logs)],
        cwd=folder, env=env,
    )  # fmt: skip
    if result.returncode != 0:
        raise SystemExit(f"inspect failed: {result.stderr[-2000:]}")
    rate = subprocess.run(
        [str(PYTHON), "-c", PASS_RATE, str(logs)], capture_output=True, text=True, check=True,
        env={**os.environ, **env},
    )  # fmt: skip
    return result, float(rate.stdout.strip())


def version_startup() -> float:
    """Wall seconds of ``inspect --version`` (the peer's own start-up)."""
    return measure([str(INSPECT), "--version"]).wall_s
