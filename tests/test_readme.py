"""The README's commands: the set-up's second command's duration and the fast lane beside it; the
database query runs with what pip installs; the API example's set passes on the local model."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from tests.fakeserver import FakeServer, openai_reply

FAST_LANE = 'python -m pytest -m "not model and not slow" -n 2'


def after_the_commands() -> str:
    """The paragraph right after the README's first code block (the two set-up commands)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    rest = text.split("```sh\n", 1)[1].split("```\n", 1)[1]
    return " ".join(rest.strip().split("\n\n", 1)[0].split())


def test_the_whole_suite_says_how_long_it_takes_and_names_the_fast_lane() -> None:
    paragraph = after_the_commands()
    assert re.search(r"The second runs the whole test suite[^.]*: about \d+ minutes", paragraph), paragraph
    assert f"in about 70 s: `{FAST_LANE}`" in paragraph


def test_the_fast_lane_uses_registered_markers_and_an_installed_plugin() -> None:
    with (REPO / "pyproject.toml").open("rb") as fh:
        project = tomllib.load(fh)
    markers = {line.split(":", 1)[0] for line in project["tool"]["pytest"]["ini_options"]["markers"]}
    assert set(re.findall(r"not (\w+)", FAST_LANE)) <= markers
    assert any(dep.startswith("pytest-xdist") for dep in project["project"]["optional-dependencies"]["test"])


# --- the README's database query and API example ---------------------------------------------------

ONE_PROMPT = """
id: hour.one
name: One prompt
prompts:
  - id: greet
    prompt: Say hi
    assertions: [{contains: hi}]
"""


def fake_project(write_file: Any, server: FakeServer, extra: str = "") -> None:
    write_file(
        "evalkit.yaml",
        f"""
        {extra}
        providers:
          - id: fake
            adapter: openai
            base_url: {server.url}/v1
            model: fake-alias
            max_retries: 0
        """,
    )
    write_file("sets/one.yaml", ONE_PROMPT)
    server.handler = lambda request: openai_reply("hi there")


def run_json(cli: Any, *args: str) -> dict[str, Any]:
    result = cli("run", *args, "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def readme() -> str:
    return (REPO / "README.md").read_text(encoding="utf-8")


def test_readme_queries_the_database_with_what_pip_installs(
    cli: Any, write_file: Any, fake_llm: FakeServer, isolated: Path
) -> None:
    assert "duckdb .evalkit" not in readme()  # no DuckDB command line comes with pip install evalkit
    assert importlib.util.find_spec("duckdb.__main__") is None  # and there is no python -m duckdb
    (line,) = [x for x in readme().splitlines() if x.startswith('python -c "import duckdb')]
    fake_project(write_file, fake_llm)
    run_json(cli, "sets/one.yaml", "--db", ".evalkit/evalkit.duckdb")
    assert line.startswith('python -c "')
    assert line.endswith('"')
    code = line.removeprefix('python -c "').removesuffix('"')
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=isolated, capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    assert "hour.one" in out.stdout
    assert "pass_rate" in out.stdout


def local_evalkit(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evalkit", *args], cwd=cwd, capture_output=True, text=True, timeout=600, check=False
    )


@pytest.mark.model
@pytest.mark.usefixtures("local_model")
def test_readme_api_example_set_passes_on_the_local_model(isolated: Path) -> None:
    (named,) = re.findall(r'evalkit\.load_set\("([^"]+)"\)', readme())
    result = local_evalkit("run", str(REPO / named), "--format", "json", cwd=isolated)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["pass_rate"] == 1.0, [i["reason"] for i in doc["items"] if not i["passed"]]
