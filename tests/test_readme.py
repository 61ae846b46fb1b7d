"""The README's set-up commands: the second one's duration, and the fast lane beside it."""

from __future__ import annotations

import re
import tomllib

from tests.conftest import REPO

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
