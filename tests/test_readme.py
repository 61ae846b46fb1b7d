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
