"""Tool calls shown and stored (README, "Tools and tool calls"): ``items[].tool_calls`` in the JSON
of ``run`` and ``show``, a short ``tools:`` line in the table, the markdown and the HTML report,
and the ``details`` column of ``results`` keeping them as the privacy level says (names at
metadata, arguments and context redacted at redacted, verbatim at full)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

APP = """\
def answer(request):
    return {
        "output": None,
        "model": "fn-model",
        "tool_calls": [
            {"name": "email", "arguments": {"to": "jane.doe@example.com", "n": 2}},
            {"name": "lookup", "arguments": "{not json"},
        ],
        "context": ["Write to jane.doe@example.com", {"doc": 7}],
    }
"""

SET = """\
id: tools.shown
name: Tools shown
tools:
  - {name: email, parameters: {type: object}}
  - {name: lookup}
prompts:
  - id: acts
    prompt: Mail Jane
    assertions: [{tool_sequence: [email, fetch]}]
"""


def project(write_file: Any, privacy: str) -> None:
    write_file("app.py", APP)
    write_file("set.yaml", SET)
    write_file(
        "evalkit.yaml",
        f"privacy: {privacy}\ndefault_provider: fn\nproviders:\n  - {{id: fn, adapter: python, function: 'app.py:answer'}}\n",
    )


def run_json(cli: Any, *args: str) -> dict[str, Any]:
    result = cli("run", "set.yaml", "--format", "json", *args)
    assert result.exit_code == 0, result.stderr  # the item fails (no call of fetch): no gate asked
    document: dict[str, Any] = json.loads(result.stdout)
    return document


CALLS = [
    {"name": "email", "arguments": {"to": "jane.doe@example.com", "n": 2}},
    {"name": "lookup", "arguments": "{not json"},
]
CONTEXT = ["Write to jane.doe@example.com", {"doc": 7}]
LINE = 'tools: email(to="jane.doe@example.com", n=2), lookup("{not json")'


def test_the_json_of_run_and_show_carries_the_calls(cli: Any, write_file: Any) -> None:
    project(write_file, "full")
    (item,) = run_json(cli)["items"]
    assert item["response"] == ""
    assert item["tool_calls"] == CALLS
    assert item["context"] == CONTEXT
    shown = cli("show", run_json(cli)["run_id"], "--format", "json")
    assert shown.exit_code == 0, shown.stderr
    (again,) = json.loads(shown.stdout)["items"]
    assert (again["tool_calls"], again["context"]) == (CALLS, CONTEXT)


def test_the_table_the_markdown_and_the_html_show_a_tools_line(cli: Any, write_file: Any, isolated: Path) -> None:
    project(write_file, "full")
    result = cli("run", "set.yaml", "--markdown", "pr.md", "--html", "run.html")
    assert result.exit_code == 0, result.stderr
    assert "tools: email(to=" in " ".join(result.stdout.split())  # the table (folded to its width)
    markdown = (isolated / "pr.md").read_text(encoding="utf-8")
    assert (  # an @ inside a word mentions nobody: kept whole
        "| acts | fail | 0.00 | assertion failed: tool\\_sequence: expected in order email -> fetch; got email -> "
        f"lookup · {LINE} |" in markdown
    )
    page = (isolated / "run.html").read_text(encoding="utf-8")
    assert "tools: email(to=&#34;jane.doe@example.com&#34;, n=2), lookup(&#34;{not json&#34;)" in page


def stored(db: Path) -> Any:
    con = duckdb.connect(str(db), read_only=True)
    try:
        row = con.execute("select details from results").fetchone()
    finally:
        con.close()
    return json.loads(row[0]) if row and row[0] else None


@pytest.mark.parametrize(
    ("privacy", "details"),
    [
        ("full", {"tool_calls": CALLS, "context": CONTEXT}),
        (
            "redacted",
            {
                "tool_calls": [{"name": "email", "arguments": {"to": "***", "n": 2}}, CALLS[1]],
                "context": ["Write to ***", {"doc": 7}],
            },
        ),
        ("metadata", {"tool_calls": [{"name": "email"}, {"name": "lookup"}]}),
    ],
)
def test_the_details_column_keeps_what_the_privacy_level_allows(
    cli: Any, write_file: Any, db_file: Path, privacy: str, details: dict[str, Any]
) -> None:
    project(write_file, privacy)
    run_id = run_json(cli)["run_id"]
    assert stored(db_file) == details
    (item,) = json.loads(cli("show", run_id, "--format", "json").stdout)["items"]
    kept = [{"name": c["name"], "arguments": c.get("arguments")} for c in details["tool_calls"]]
    assert item["tool_calls"] == kept
    assert item.get("context") == details.get("context")
