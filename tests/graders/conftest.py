"""What the model-graded tests share (README "Model-graded assertions"): the scripted judge of
tests/judgeserver.py on a loopback server, the evalkit.yaml of a generator and that judge, and a
set's run read as JSON."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliResult
from tests.fakeserver import FakeServer, serving
from tests.judgeserver import judge_handler


@pytest.fixture
def judge() -> Iterator[FakeServer]:
    """The scripted judge on a loopback server of its own."""
    with serving(judge_handler()) as server:
        yield server


def judged_project(
    folder: Path, gen: FakeServer, judge: FakeServer, *, judge_keys: str = "", settings: str = "", providers: str = ""
) -> Path:
    """``folder/evalkit.yaml``: instance ``gen`` (alias gen-alias) the default provider, instance
    ``judge`` (alias judge-alias, with ``judge_keys``: more keys of its flow mapping) the judge;
    ``settings`` adds top-level keys and ``providers`` instances after those two (YAML written
    at column 0, the providers as list items)."""
    instances = [
        f"- {{id: gen, adapter: openai, base_url: {gen.url}/v1, model: gen-alias, max_retries: 0}}",
        f"- {{id: judge, adapter: openai, base_url: {judge.url}/v1, model: judge-alias, max_retries: 0{judge_keys}}}",
        textwrap.dedent(providers).strip("\n"),
    ]
    text = f"default_provider: gen\njudge: {{provider: judge}}\n{textwrap.dedent(settings).strip()}\nproviders:\n"
    path = folder / "evalkit.yaml"
    path.write_text(text + textwrap.indent("\n".join(i for i in instances if i) + "\n", "  "), encoding="utf-8")
    return path


def json_runner(set_file: str) -> Callable[..., tuple[CliResult, Any]]:
    """``run(cli, *args)``: ``evalkit run set_file --format json *args``, its result (never a
    traceback) and its JSON (None when it printed none)."""

    def run(cli: Any, *args: str) -> tuple[CliResult, Any]:
        result = cli("run", set_file, "--format", "json", *args)
        assert result.exception is None, result.exception
        return result, (json.loads(result.stdout) if result.stdout.strip() else None)

    return run
