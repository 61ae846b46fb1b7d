"""A team's one history, end to end: three fresh clones of a project (three CI
runners) each run the same sets into their own database, in real processes; a fourth machine
merges the three artifacts, and `report` shows one history with every run in order and the
baseline one database would have had. A fifth clone, running the same sequence into one
database, is that one database."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_ci_workflow import Repo, evalkit, git

pytestmark = pytest.mark.slow

SET = "id: team.capitals\nname: Capitals\nprompts:\n" + "".join(
    f"  - {{id: {k}, prompt: 'Capital of {k}?', assertions: [{{contains: {v}}}]}}\n"
    for k, v in (("france", "Paris"), ("italy", "Rome"), ("spain", "Madrid"))
)


def answers(wrong: tuple[str, ...] = ()) -> str:
    right = {"france": "Paris", "italy": "Rome", "spain": "Madrid"}
    rows = [{"id": k, "response": "no idea" if k in wrong else v, "model": "rec-2025"} for k, v in right.items()]
    return "".join(json.dumps(r) + "\n" for r in rows)


def run(clone: Path, home: Path) -> dict[str, Any]:
    result = evalkit("run", "sets/", "--format", "json", cwd=clone, home=home)
    assert result.returncode == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def history(clone: Path, home: Path) -> list[dict[str, Any]]:
    result = evalkit("report", "--format", "json", cwd=clone, home=home)
    assert result.returncode == 0, result.stderr
    rows: list[dict[str, Any]] = json.loads(result.stdout)["runs"]
    return rows


def test_three_runners_merged_are_one_history(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "team")
    dev, dev_home = repo.root / "dev", repo.home
    git("init", "-q", "-b", "main", str(dev), cwd=repo.root, home=dev_home)
    git("remote", "add", "origin", str(repo.origin), cwd=dev, home=dev_home)
    (dev / "sets").mkdir()
    (dev / "sets" / "capitals.yaml").write_text(SET, encoding="utf-8")
    (dev / "answers.jsonl").write_text(answers(), encoding="utf-8")
    (dev / "evalkit.yaml").write_text(
        "privacy: full\ndefault_provider: rec\nsets: [sets]\nproviders:\n  - {id: rec, adapter: replay, path: answers.jsonl}\n",
        encoding="utf-8",
    )
    (dev / ".gitignore").write_text(".evalkit/\n", encoding="utf-8")
    repo.commit_and_push(dev, dev_home, "the team's sets", ".")
    # three runners, one after the other; the second meets a worse answer file (a regression)
    runners = [repo.clone() for _ in range(3)]
    artifacts, made = [], []
    for index, (clone, home) in enumerate(runners):
        if index == 1:
            (clone / "answers.jsonl").write_text(answers(wrong=("spain",)), encoding="utf-8")
        made.append(run(clone, home))
        artifact = tmp_path / "artifacts" / f"runner{index}.duckdb"
        artifact.parent.mkdir(exist_ok=True)
        shutil.copyfile(clone / ".evalkit" / "evalkit.duckdb", artifact)  # what CI uploads
        artifacts.append(artifact)
    # each runner alone knew nothing of the others: its run was never compared
    assert [m["comparison"]["state"] for m in made] == ["baseline", "baseline", "baseline"]
    merger, merger_home = repo.clone()
    merged = evalkit("merge", *map(str, artifacts), "--format", "json", cwd=merger, home=merger_home)
    assert merged.returncode == 0, merged.stderr
    assert [m["added"] for m in json.loads(merged.stdout)["merged"]] == [1, 1, 1]
    rows = history(merger, merger_home)
    assert [r["run_id"] for r in rows] == [m["run_id"] for m in reversed(made)]  # newest first, all of them
    assert [r["pass_rate"] for r in reversed(rows)] == [1.0, 2 / 3, 1.0]
    # one database, the same runs in the same order: what the merged history must behave like
    single, single_home = repo.clone()
    for index in range(3):
        (single / "answers.jsonl").write_text(answers(wrong=("spain",) if index == 1 else ()), encoding="utf-8")
        run(single, single_home)
    (single / "answers.jsonl").write_text(answers(), encoding="utf-8")
    one = run(single, single_home)
    after_merge = run(merger, merger_home)
    one_history = history(single, single_home)
    # the next run compares with the same run of the sequence: the third (the newest good one)
    assert after_merge["comparison"]["baseline_run_id"] == made[2]["run_id"]
    assert one["comparison"]["baseline_run_id"] == one_history[1]["run_id"]
    assert (after_merge["comparison"]["state"], after_merge["comparison"]["regressed"]) == (
        one["comparison"]["state"],
        one["comparison"]["regressed"],
    )
    assert after_merge["comparison"]["pass_rate_delta"] == one["comparison"]["pass_rate_delta"]
    # merging the artifacts again changes nothing
    again = evalkit("merge", *map(str, artifacts), "--format", "json", cwd=merger, home=merger_home)
    assert [m["skipped"] for m in json.loads(again.stdout)["merged"]] == [1, 1, 1]
    assert len(history(merger, merger_home)) == 4
