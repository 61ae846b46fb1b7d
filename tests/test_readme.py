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
from tests.conftest import evalkit_process as local_evalkit
from tests.factories import fake_project, run_json
from tests.fakeserver import FakeServer

FAST_LANE = 'python -m pytest -m "not model and not slow" -n 2'


def after_the_commands() -> str:
    """The paragraph right after the README's first code block (the two set-up commands)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    rest = text.split("```sh\n", 1)[1].split("```\n", 1)[1]
    return " ".join(rest.strip().split("\n\n", 1)[0].split())


def test_the_whole_suite_says_how_long_it_takes_and_names_the_fast_lane() -> None:
    paragraph = after_the_commands()
    assert re.search(r"The second runs the whole test suite[^.]*: about \d+ minutes", paragraph), paragraph
    assert re.search(rf"in about \d+ s: `{re.escape(FAST_LANE)}`", paragraph), paragraph


def test_the_fast_lane_uses_registered_markers_and_an_installed_plugin() -> None:
    with (REPO / "pyproject.toml").open("rb") as fh:
        project = tomllib.load(fh)
    markers = {line.split(":", 1)[0] for line in project["tool"]["pytest"]["ini_options"]["markers"]}
    assert set(re.findall(r"not (\w+)", FAST_LANE)) <= markers
    assert any(dep.startswith("pytest-xdist") for dep in project["project"]["optional-dependencies"]["test"])


def reliability_table() -> dict[str, str]:
    """The README's "Reliability: what is bounded" table: what -> bound."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Reliability: what is bounded\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    return {row[0].removeprefix("| "): row[1] for row in rows[1:]}


def figure(value: float) -> str:
    """A number as the README writes it (1,000,000; 0.5; 10)."""
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def test_the_reliability_table_states_the_bounds_the_code_holds() -> None:
    from evalkit.assertions import patterns, text
    from evalkit.graders import deterministic
    from evalkit.procs import REAP_S
    from evalkit.providers import decoding
    from evalkit.report import cells
    from evalkit.sets import sandbox, yamldoc
    from evalkit.store import merge, store

    table = reliability_table()
    limits = sandbox.LIMITS
    expected = {
        "YAML and JSON files": [
            f"nesting {yamldoc.MAX_DEPTH} levels",
            f"past {figure(yamldoc.MAX_ALIAS_EXPANSION)} nodes",
        ],
        "templates": [
            f"{figure(limits.template_s)} s per template and {figure(limits.set_s)} s per set",
            f"at most {figure(limits.text)} characters",
            f"at most {figure(limits.int_bits)} bits",
            f"{figure(limits.set_text)} characters rendered per set",
        ],
        "regexes": [
            f"{figure(deterministic.IN_LOOP_REGEX_S * 1000)} ms on the event loop",
            f"{figure(patterns.REGEX_TIMEOUT_S)} s per prompt and {figure(patterns.RUN_REGEX_S)} s per run",
        ],
        "`levenshtein`": ["past 10^9 steps" if text.MAX_LEVENSHTEIN_STEPS == 10**9 else "?"],
        "HTTP answers": [
            f"{decoding.STEP // 1024} KB at a time",
            f"at most {decoding.MAX_LAYERS} `Content-Encoding` layers",
        ],
        "programs": [f"waited for {figure(REAP_S)} s at most"],
        "`evalkit merge`": [f"with {merge.COPY_HEADROOM_BYTES // (1024 * 1024)} MB to spare"],
        "the HTML report": [f"at most {figure(cells.CELL_CHARS)} characters", f"{figure(cells.PAGE_CHARS)} in all"],
        "the database": [f"waits up to {figure(store.DEFAULT_WAIT_S)} s"],
    }
    for what, bounds in expected.items():
        (row,) = [bound for name, bound in table.items() if name.startswith(what)]
        for bound in bounds:
            assert bound in row, (what, bound)


# --- the README's database query and API example ---------------------------------------------------


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


@pytest.mark.model
@pytest.mark.usefixtures("local_model")
def test_readme_api_example_set_passes_on_the_local_model(isolated: Path) -> None:
    (named,) = re.findall(r'evalkit\.load_set\("([^"]+)"\)', readme())
    result = local_evalkit("run", str(REPO / named), "--format", "json", cwd=isolated)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["pass_rate"] == 1.0, [i["reason"] for i in doc["items"] if not i["passed"]]
