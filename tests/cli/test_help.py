"""``evalkit --help``: the first day's commands first, and every summary a whole sentence."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import pytest

from evalkit.cli import cli as group


def listed(help_text: str) -> dict[str, str]:
    """The Commands section of a help page: name -> summary, its wrapped lines joined."""
    section = help_text.split("\nCommands:\n", 1)[1]
    rows: dict[str, str] = {}
    name = ""
    for line in section.splitlines():
        match = re.match(r"^  (\S+)\s+(.*)$", line)
        if match:
            name = match.group(1)
            rows[name] = match.group(2)
        elif line.strip():
            rows[name] += " " + line.strip()
    return rows


def test_help_lists_init_run_validate_report_first(cli: Any) -> None:
    result = cli("--help")
    assert result.exit_code == 0
    names = list(listed(result.stdout))
    assert names[:4] == ["init", "run", "validate", "report"]
    assert sorted(names) == sorted(group.commands)
    assert names[4:] == sorted(names[4:])


@pytest.mark.parametrize("words", [(), ("baseline",), ("cache",), ("import",)])
def test_help_says_each_summary_whole(cli: Any, words: tuple[str, ...]) -> None:
    result = cli(*words, "--help")
    assert result.exit_code == 0
    rows = listed(result.stdout)
    assert rows
    here = group
    for word in words:
        here = here.commands[word]  # type: ignore[assignment]
    for name, summary in rows.items():
        first_sentence = (here.commands[name].help or "").split("\n\n")[0]
        assert summary == " ".join(first_sentence.split()), name
        assert summary.endswith("."), name


def test_help_imports_neither_the_pipeline_nor_the_records() -> None:
    # `evalkit --help` answers before any run: the pipeline (asyncio, the sets, the providers) and
    # the records were 0.3 s of its 0.5 s when a command module imported them at its top.
    code = (
        "import sys\n"
        "from evalkit.cli import cli\n"
        "try:\n"
        "    cli.main(['--help'], prog_name='evalkit', standalone_mode=False)\n"
        "finally:\n"
        "    heavy = sorted(m for m in sys.modules if m.startswith(('evalkit.pipeline', 'evalkit.records', 'duckdb', 'httpx', 'jsonschema')))\n"
        "    print('HEAVY', heavy, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "HEAVY []" in done.stderr, done.stderr
