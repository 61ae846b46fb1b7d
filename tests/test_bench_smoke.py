"""The benchmark scripts run (tiny sizes, no promptfoo, no model), so they cannot rot."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.timeout(600)


def run(*args: str) -> str:
    env = {**os.environ, "NO_COLOR": "1"}
    env.pop("EVALKIT_DB", None)
    result = subprocess.run(
        [sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.mark.slow
def test_promptfoo_bench_smoke() -> None:
    out = run("bench/bench_promptfoo.py", "--smoke")
    assert "| a | evalkit | 20 | 16 |" in out
    assert "| b | evalkit | 10 | 32 |" in out
    assert "| b | floor: raw client + stack imports | 10 | 32 |" in out
    assert "assertions_per_s" in out


@pytest.mark.slow
def test_store_bench_smoke() -> None:
    out = run("bench/bench_store.py", "--runs", "20", "--items", "20", "--write-items", "200", "--repeat", "1")
    assert "`evalkit report`" in out


@pytest.mark.slow
def test_retrieval_bench_smoke() -> None:
    out = run("bench/bench_retrieval.py", "--docs", "300", "--questions", "30", "--rank-bm25-questions", "5")
    assert "| evalkit lexical (bm25s) |" in out
    assert "| rank-bm25 BM25Okapi |" in out


@pytest.mark.slow
def test_team_bench_smoke() -> None:
    out = run("bench/bench_team.py", "--dbs", "3", "--runs", "2", "--items", "20")
    assert '"result_rows": 120' in out
    assert '"merge_again"' in out


@pytest.mark.slow
def test_scale_bench_smoke() -> None:
    out = run("bench/bench_scale.py", "--n", "200", "--runs", "1")
    assert "ruamel C events only (floor)" in out
    assert "assertions_per_s_median" in out


@pytest.mark.slow
def test_html_bench_smoke() -> None:
    from pathlib import Path

    if not Path("/usr/bin/chromium").exists() and not os.environ.get("CI"):
        pytest.skip("headless Chromium is not installed: apt-get install chromium chromium-driver")
    out = run("bench/bench_html.py", "--runs", "2", "--prompts", "20")
    assert '"file_mb"' in out
    assert '"load_event_ms_median"' in out


@pytest.mark.slow
def test_grading_ops_bench_smoke() -> None:
    out = run("bench/bench_grading_ops.py", "--n", "48", "--top", "5")
    assert "Python opcodes" in out
    assert "`grade_assertions (deterministic.py)`" in out


@pytest.mark.slow
def test_gate_power_bench_smoke() -> None:
    out = run("bench/bench_gate_power.py", "--sizes", "20", "--drops", "0,0.5", "--trials", "4")
    assert "| prompts | gate | no drop (false alarms) | 50 pp drop |" in out
    assert "| 20 | tolerance 0 + --significance 0.05 |" in out
    assert '"trials": 4' in out


@pytest.mark.slow
def test_apps_bench_smoke() -> None:
    out = run("bench/bench_apps.py", "--n", "10", "--runs", "1", "--calls", "200")
    assert "(b) 10 prompts x 200 ms, c32, median of 1: openai" in out
    assert '"http_vs_openai"' in out
    assert "python adapter, sync function:" in out
    assert "python adapter, async function:" in out


@pytest.mark.slow
def test_shards_bench_smoke() -> None:
    out = run("bench/bench_shards.py", "--prompts", "60", "--shards", "3", "--no-whole")
    assert '"merge_plus_gate_s"' in out
    assert '"prompt_count": 60' in out


def test_batch_bench_smoke() -> None:
    out = run("bench/bench_batch.py", "--n", "30")
    assert '"submit_plus_collect_s"' in out
    assert '"passed": 30' in out


def test_judged_speed_bench_smoke() -> None:
    out = run("bench/bench_judged_speed.py", "--n", "8", "--runs", "1")
    assert "with one rubric per prompt" in out
    assert '"grader": "judged:judge:bench-model"' in out
