"""The wheel carries the JSON Schemas, and an installed evalkit validates without the repository."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

SCHEMAS = ("prompt-set.schema.json", "question-set.schema.json", "config.schema.json", "baseline.schema.json")
SKIP_DIRS = {".git", ".venv", "node_modules", "build", "dist"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from the working tree (hatchling from the venv; no network)."""
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation", "-q", "-w", str(out)],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("evalkit-*.whl")
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


def repo_files(suffix: str) -> Iterator[Path]:
    for root, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".")]
        for name in files:
            if name.endswith(suffix):
                yield Path(root) / name


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
        "(expected one of: contains, contains_all, contains_any, contains_json, context_contains, cost, equals_json, exact, icontains, icontains_all, icontains_any, json_schema, latency_ms, levenshtein, python, regex, starts_with, tool_call_f1, tool_called, tool_sequence, valid_tool_calls, word_count; each also as not_<type>); did you mean 'contains'?"
    )
