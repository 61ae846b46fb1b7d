"""The release artifacts (.ci/release-check builds and checks them in CI): the wheel carries the
JSON Schemas, the metadata of the wheel and the sdist name the distribution evalkit-cli (README
"Installing") with the `evalkit` command, and an installed evalkit validates, inits and runs
without the repository."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalkit._version import __version__
from tests.conftest import REPO

SCHEMAS = ("prompt-set.schema.json", "question-set.schema.json", "config.schema.json", "baseline.schema.json")
SKIP_DIRS = {".git", ".venv", "node_modules", "build", "dist"}


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and wheel built from the working tree as .ci/release-check builds them (hatchling
    from the venv; no network)."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-d", str(out)], cwd=REPO, check=True, capture_output=True
    )
    return out


@pytest.fixture(scope="module")
def wheel(dist: Path) -> Path:
    (built,) = dist.glob("*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("install") / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
    )
    return site


def install_requirements(text: str) -> list[str]:
    """What each `pip install` in ``text`` installs from an index: its arguments up to the end
    of the command (`&&`, `;`, `#`, a backtick), without options and local paths."""
    found = []
    for command in re.findall(r"pip install ([^`\n&;#]*)", text):
        for word in command.split():
            word = word.strip("'\"")
            if word and not word.startswith(("-", ".", "/")):
                found.append(word)
    return found


def repo_files(suffix: str) -> Iterator[Path]:
    for root, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".")]
        for name in files:
            if name.endswith(suffix):
                yield Path(root) / name


def test_every_install_line_of_the_docs_pins_the_distribution() -> None:
    """`pip install evalkit` installs an unrelated PyPI project: every line that installs evalkit
    from an index names evalkit-cli at this version."""
    pinned = re.compile(rf"evalkit-cli(\[[a-z,]+\])?=={re.escape(__version__)}")
    docs = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    installs = {
        doc.name: [w for w in install_requirements(doc.read_text(encoding="utf-8")) if "evalkit" in w] for doc in docs
    }
    assert installs["README.md"]
    assert installs["ci.md"]
    assert {name: [w for w in words if not pinned.fullmatch(w)] for name, words in installs.items()} == {
        name: [] for name in installs
    }


def test_the_distribution_is_evalkit_cli() -> None:
    with (REPO / "pyproject.toml").open("rb") as fh:
        project = tomllib.load(fh)["project"]
    assert project["name"] == "evalkit-cli"
    assert project["scripts"] == {"evalkit": "evalkit.cli:main"}


@pytest.mark.slow
def test_wheel_carries_the_schemas(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        packaged = {n for n in names if n.startswith("evalkit/schemas/")}
        assert packaged == {f"evalkit/schemas/{name}" for name in SCHEMAS}
        for name in SCHEMAS:
            source = (REPO / "schemas" / name).read_bytes()
            assert archive.read(f"evalkit/schemas/{name}") == source


def test_the_repository_has_one_copy_of_the_schemas() -> None:
    assert sorted(p.name for p in (REPO / "schemas").glob("*.json")) == sorted(SCHEMAS)
    assert not (REPO / "evalkit" / "schemas").exists()
    # evalkit's own schemas, wherever a copy would be (a test fixture's schema of another name is not one)
    copies = sorted(p.relative_to(REPO).as_posix() for p in repo_files(".schema.json") if p.name in SCHEMAS)
    assert copies == sorted(f"schemas/{name}" for name in SCHEMAS)


@pytest.mark.slow
def test_installed_wheel_validates_outside_the_repository(installed: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    (outside / "sets").mkdir(parents=True)
    (outside / "sets" / "ok.yaml").write_text(
        "id: demo.ok\nname: OK\nprompts:\n  - {id: a, prompt: Hi, assertions: [{contains: hi}]}\n", encoding="utf-8"
    )
    (outside / "sets" / "bad.yaml").write_text(
        "id: demo.bad\nname: Bad\nprompts:\n  - {id: a, prompt: Hi, assertions: [{containz: hi}]}\n", encoding="utf-8"
    )
    script = textwrap.dedent(
        """
        import json
        import evalkit
        from evalkit.errors import SetError
        from evalkit.sets import load_set
        from evalkit.sets.validation import schema_dir

        loaded = load_set("sets/ok.yaml")
        try:
            load_set("sets/bad.yaml")
            bad = None
        except SetError as exc:
            bad = str(exc)
        print(json.dumps({"module": evalkit.__file__, "schemas": str(schema_dir()), "id": loaded.id, "bad": bad}))
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(installed), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=outside, env=env, check=True, capture_output=True, text=True
    )
    report = json.loads(done.stdout)
    assert Path(report["module"]).is_relative_to(installed)
    assert Path(report["schemas"]) == installed / "evalkit" / "schemas"
    assert report["id"] == "demo.ok"
    assert report["bad"] == (
        "sets/bad.yaml:4:38: prompts[0].assertions[0]: unknown assertion type 'containz' "
        "(expected one of: contains, contains_all, contains_any, contains_json, context_contains, cost, equals_json, exact, factuality, icontains, icontains_all, icontains_any, json_schema, latency_ms, levenshtein, python, regex, rubric, similar, starts_with, tool_call_f1, tool_called, tool_sequence, valid_tool_calls, word_count; each also as not_<type>); did you mean 'contains'?"
    )


@pytest.mark.slow
def test_release_artifacts_name_the_distribution_its_command_and_readme(dist: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / ".ci" / "check_dist.py"), str(dist)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert sorted(p.name for p in dist.iterdir()) == [
        f"evalkit_cli-{__version__}-py3-none-any.whl",
        f"evalkit_cli-{__version__}.tar.gz",
    ]


@pytest.mark.slow
def test_the_release_check_refuses_a_wheel_of_another_name(tmp_path: Path, wheel: Path) -> None:
    stray = tmp_path / "dist"
    stray.mkdir()
    (stray / f"evalkit-{__version__}-py3-none-any.whl").write_bytes(wheel.read_bytes())
    done = subprocess.run(
        [sys.executable, str(REPO / ".ci" / "check_dist.py"), str(stray)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert f"expected evalkit_cli-{__version__}-py3-none-any.whl and evalkit_cli-{__version__}.tar.gz" in done.stderr


@pytest.mark.slow
def test_the_installed_wheel_inits_validates_and_runs_outside_the_repository(installed: Path, tmp_path: Path) -> None:
    """.ci/smoke-installed, the first day CI runs on the wheel in a fresh venv, here on the wheel
    installed apart (its dependencies from this venv): an `evalkit` command first on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    command = bin_dir / "evalkit"
    command.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m evalkit "$@"\n', encoding="utf-8")
    command.chmod(0o755)
    project = tmp_path / "project"
    project.mkdir()
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(installed)}
    env.pop("EVALKIT_DB")  # the project's own database, as a user's
    done = subprocess.run(
        [str(REPO / ".ci" / "smoke-installed"), str(project)],
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"smoke: init, validate and a replay run hold in {project}"
    assert json.loads((project / "run.json").read_text(encoding="utf-8"))["passed_count"] == 3
    assert (project / ".gitignore").is_file()


def test_ci_runs_the_release_check_after_the_tests() -> None:
    """.ci/run proves the artifacts: the release check (build, metadata, the wheel alone in a fresh
    venv elsewhere, the first day there) runs after the README's test command."""
    lines = [line.strip() for line in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    assert lines.index(".ci/release-check") > lines.index('bash -c "$test_command"')
    check = (REPO / ".ci" / "release-check").read_text(encoding="utf-8")
    for step in ("hatchling build", ".ci/check_dist.py", 'twine" check --strict', "-m venv", "smoke-installed"):
        assert step in check, step
    assert 'cd "$work/project"' in check  # outside the repository: mktemp -d
