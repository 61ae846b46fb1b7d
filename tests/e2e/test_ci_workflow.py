"""The CI workflow of docs/ci.md end to end, with real processes and real git (README "Baselines kept in the repository", README "Absolute gates").

A bare repository is "origin"; a developer clone commits the sets and the config. Every CI job
is a fresh clone (a new runner with its own HOME and an empty database) that runs the gate
against a loopback model server. The server answers from the request alone, like a
deterministic model, so only what the repository holds can change a verdict, and nothing but
what git carries passes from one clone to the next.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write
from tests.fakeserver import FakeServer, Recorded, Reply, openai_reply, serving

pytestmark = pytest.mark.slow

GOOD_SYSTEM = "Answer with the city name."
WORSE_SYSTEM = "Answer in French."
REPORTED_MODEL = "tiny-2025-01"

# prompt id -> (question, the answer in English, the answer in French)
CAPITALS = {
    "france": ("What is the capital of France?", "Paris", "Paris"),
    "germany": ("What is the capital of Germany?", "Berlin", "Berlin"),
    "spain": ("What is the capital of Spain?", "Madrid", "Madrid"),
    "uk": ("What is the capital of the United Kingdom?", "London", "Londres"),
    "austria": ("What is the capital of Austria?", "Vienna", "Vienne"),
    "norway": ("What is the capital of Norway?", "Oslo", "Oslo"),
    "greece": ("What is the capital of Greece?", "Athens", "Athènes"),
}
WRONG_IN_FRENCH = sorted(pid for pid, (_, english, french) in CAPITALS.items() if english != french)


def answer(request: Recorded) -> Reply:
    """A deterministic "model": the capital asked for, in French when the system prompt says so."""
    messages = request.json["messages"]
    system = " ".join(m["content"] for m in messages if m["role"] == "system")
    question = messages[-1]["content"]
    for q, english, french in CAPITALS.values():
        if q == question:
            return openai_reply(french if system == WORSE_SYSTEM else english, model=REPORTED_MODEL)
    return openai_reply("I do not know.", model=REPORTED_MODEL)


def capitals_set(system: str) -> str:
    prompts = "".join(
        f"  - id: {pid}\n    prompt: {q}\n    assertions:\n      - contains: {english}\n"
        for pid, (q, english, _) in CAPITALS.items()
    )
    return f"id: capitals\nname: European capitals\nsystem: {system}\nprompts:\n{prompts}"


def git(*args: str, cwd: Path, home: Path) -> str:
    result = subprocess.run(
        ["git", "-c", "user.name=CI Test", "-c", "user.email=ci@example.invalid", *args],
        cwd=cwd,
        env={"PATH": os.environ["PATH"], "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, f"git {' '.join(args)}: {result.stderr}"
    return result.stdout


def evalkit(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    """One evalkit process as a CI job runs it: a clean environment, no EVALKIT_DB or
    EVALKIT_CONFIG, so the database is the clone's own ``.evalkit/evalkit.duckdb``."""
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "EVALKIT_TEST_KEY": "sk-test", "CI": "true"}
    return subprocess.run(
        [sys.executable, "-m", "evalkit", *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


class Repo:
    """Origin (a bare repository) and fresh clones of it, each a new runner with its own HOME."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir()
        self.origin = root / "origin.git"
        self.clones = 0
        self.home = self.new_home()
        git("init", "--bare", "-b", "main", str(self.origin), cwd=root, home=self.home)

    def new_home(self) -> Path:
        self.clones += 1
        home = self.root / f"home{self.clones}"
        home.mkdir()
        return home

    def clone(self, branch: str = "main") -> tuple[Path, Path]:
        """A fresh runner: (its checkout of ``branch``, its HOME)."""
        home = self.new_home()
        path = self.root / f"runner{self.clones}"
        git("clone", "-q", "-b", branch, str(self.origin), str(path), cwd=self.root, home=home)
        return path, home

    def commit_and_push(self, clone: Path, home: Path, message: str, *paths: str) -> None:
        git("add", *paths, cwd=clone, home=home)
        git("commit", "-q", "-m", message, cwd=clone, home=home)
        git("push", "-q", "origin", "HEAD", cwd=clone, home=home)


def gate(clone: Path, home: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    """The gate command of docs/ci.md with JSON on stdout: (exit code, the run's JSON, stderr)."""
    result = evalkit(
        "run", "sets/", "--format", "json", "--markdown", "pr.md", "--junit", "junit.xml", *extra, cwd=clone, home=home
    )
    assert result.stdout.strip(), f"exit {result.returncode}, no JSON; stderr:\n{result.stderr}"
    doc = json.loads(result.stdout)
    return result.returncode, (doc[0] if isinstance(doc, list) else doc), result.stderr


def accepted_run_id(clone: Path) -> str:
    data = json.loads((clone / "baselines" / "capitals.json").read_text(encoding="utf-8"))
    (entry,) = data["baselines"]
    assert (entry["provider"], entry["model"], entry["reported_model"]) == ("prod", "tiny", REPORTED_MODEL)
    return str(entry["run_id"])


def junit_failures(clone: Path) -> dict[str, str]:
    """testcase name -> failure type, for the failing testcases of the JUnit file."""
    root = ET.parse(clone / "junit.xml").getroot()
    return {
        case.get("name", ""): failure.get("type", "")
        for case in root.iter("testcase")
        for failure in case.findall("failure")
    }


def assert_compared_with(doc: dict[str, Any], clone: Path, run_id: str) -> None:
    comparison = doc["comparison"]
    assert (comparison["state"], comparison["baseline_source"]) == ("compared", "file"), comparison
    assert comparison["baseline_run_id"] == run_id
    assert (clone / comparison["baseline_file"]).resolve() == (clone / "baselines" / "capitals.json").resolve()
    assert doc["cached_count"] == 0  # every answer came from the endpoint, not from a restored cache


def capitals_origin(root: Path, model_server: FakeServer, ignored: str) -> tuple[Repo, Path]:
    """Origin with main holding evalkit.yaml, sets/capitals.yaml and a .gitignore of ``ignored``
    (no baselines yet); and ``dev``, the checkout that pushed them."""
    repo = Repo(root)
    dev = root / "dev"
    git("init", "-q", "-b", "main", str(dev), cwd=repo.root, home=repo.home)
    git("remote", "add", "origin", str(repo.origin), cwd=dev, home=repo.home)
    write(
        dev / "evalkit.yaml",
        f"""
        default_provider: prod
        sets: [sets]
        baselines: baselines
        providers:
          - id: prod
            adapter: openai
            base_url: {model_server.url}/v1
            model: tiny
            api_key_env: EVALKIT_TEST_KEY
            max_retries: 0
        """,
    )
    write(dev / "sets" / "capitals.yaml", capitals_set(GOOD_SYSTEM))
    write(dev / ".gitignore", ignored)
    repo.commit_and_push(dev, repo.home, "Add the capitals set", ".")
    return repo, dev


@pytest.fixture
def model_server() -> Iterator[FakeServer]:
    with serving(answer) as server:
        yield server


@pytest.fixture
def repo(tmp_path: Path, model_server: FakeServer) -> Repo:
    """Origin with main holding evalkit.yaml, sets/capitals.yaml and .gitignore (no baselines yet)."""
    return capitals_origin(tmp_path / "git", model_server, ".evalkit/\n")[0]


def test_the_ci_gate_across_fresh_clones(repo: Repo, model_server: FakeServer) -> None:
    # (1) A first runner on main records a baseline, accepts it and commits baselines/.
    first, home = repo.clone()
    code, doc, err = gate(first, home, "--fail-on-regression")
    assert (code, doc["comparison"]["state"], doc["pass_rate"]) == (0, "baseline", 1.0), err
    assert doc["generator"] == {"provider": "prod", "model": "tiny", "reported_model": REPORTED_MODEL}
    accept = evalkit("baseline", "accept", cwd=first, home=home)
    assert accept.returncode == 0, accept.stderr
    main_baseline = accepted_run_id(first)
    assert main_baseline == doc["run_id"]
    # Besides the reports, only the baseline file is new to git: the database stays out of it.
    status = git("status", "--porcelain", "--untracked-files=all", cwd=first, home=home).splitlines()
    assert sorted(status) == ["?? baselines/capitals.json", "?? junit.xml", "?? pr.md"]
    repo.commit_and_push(first, home, "Accept the evalkit baseline", "baselines")

    # (2) A fresh runner on main starts empty and passes against the committed file.
    runner, home = repo.clone()
    assert not (runner / ".evalkit").exists()
    code, doc, err = gate(runner, home, "--fail-on-regression")
    assert code == 0, err
    assert_compared_with(doc, runner, main_baseline)
    assert (doc["comparison"]["regressed"], doc["comparison"]["flips"]["regressed"]) == (False, [])
    assert doc["gate"] == {"fail_on_regression": True, "passed": True, "failures": []}
    assert "gate passed" in (runner / "pr.md").read_text(encoding="utf-8")
    assert junit_failures(runner) == {}

    # (3) A branch asks for French: some answers no longer contain the English name.
    dev = repo.root / "dev"
    git("pull", "-q", "origin", "main", cwd=dev, home=repo.home)
    git("checkout", "-q", "-b", "worse", cwd=dev, home=repo.home)
    write(dev / "sets" / "capitals.yaml", capitals_set(WORSE_SYSTEM))
    repo.commit_and_push(dev, repo.home, "Ask for the answers in French", "sets")

    runner, home = repo.clone("worse")
    assert not (runner / ".evalkit").exists()
    code, doc, err = gate(runner, home, "--fail-on-regression")
    assert code == 1, err
    assert_compared_with(doc, runner, main_baseline)
    assert doc["comparison"]["regressed"] is True
    assert sorted(doc["comparison"]["flips"]["regressed"]) == WRONG_IN_FRENCH
    assert sorted(i["id"] for i in doc["items"] if not i["passed"]) == WRONG_IN_FRENCH
    assert doc["gate"]["passed"] is False
    markdown = (runner / "pr.md").read_text(encoding="utf-8")
    assert "gate failed" in markdown
    (flipped,) = [line for line in markdown.splitlines() if line.startswith("- **Regressed")]
    assert sorted(pid for pid in CAPITALS if f"`{pid}`" in flipped) == WRONG_IN_FRENCH
    failures = junit_failures(runner)
    assert {pid: failures.get(pid) for pid in WRONG_IN_FRENCH} == dict.fromkeys(WRONG_IN_FRENCH, "Regressed")
    assert failures.get("gate") == "GateFailed"

    # Without a baseline file (and an empty database), an absolute gate still fails the run.
    runner, home = repo.clone("worse")
    (runner / "no-baselines").mkdir()
    code, doc, err = gate(runner, home, "--baselines", "no-baselines", "--min-pass-rate", "1")
    assert (code, doc["comparison"]["state"]) == (1, "baseline"), err
    assert doc["gate"]["passed"] is False
    assert doc["gate"]["failures"] == ["pass rate 0.57 (4/7) is below the minimum 1"]

    # (4) On the branch, the drop is deliberate: run, accept the regressed run, commit, push.
    runner, home = repo.clone("worse")
    result = evalkit("run", "sets/", "--format", "json", cwd=runner, home=home)
    assert result.returncode == 0, result.stderr  # a regression without --fail-on-regression exits 0
    worse_run = json.loads(result.stdout)
    assert worse_run["comparison"]["regressed"] is True
    accept = evalkit("baseline", "accept", cwd=runner, home=home)
    assert accept.returncode == 0, accept.stderr
    worse_baseline = accepted_run_id(runner)
    assert worse_baseline == worse_run["run_id"] != main_baseline
    repo.commit_and_push(runner, home, "Accept the evalkit baseline for French answers", "baselines")

    # (5) The next fresh runner on the branch passes against the new file.
    runner, home = repo.clone("worse")
    assert not (runner / ".evalkit").exists()
    code, doc, err = gate(runner, home, "--fail-on-regression")
    assert code == 0, err
    assert_compared_with(doc, runner, worse_baseline)
    assert (doc["comparison"]["regressed"], doc["comparison"]["flips"]["regressed"]) == (False, [])
    assert "gate passed" in (runner / "pr.md").read_text(encoding="utf-8")

    # (6) Main is untouched by the branch: a fresh runner on main still gates on main's baseline.
    runner, home = repo.clone()
    code, doc, err = gate(runner, home, "--fail-on-regression")
    assert code == 0, err
    assert_compared_with(doc, runner, main_baseline)
    assert doc["pass_rate"] == 1.0

    # Every request carried the key from the runner's environment, and only the repository's
    # content decided the answers: 7 runs of 7 prompts, none answered from a cache.
    assert {r.headers.get("authorization") for r in model_server.requests} == {"Bearer sk-test"}
    assert model_server.calls == 7 * len(CAPITALS)
