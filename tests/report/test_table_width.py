"""The report tables at 80 columns and wider keep run ids, set ids and verdicts whole."""

from __future__ import annotations

import io
from typing import Any

import pytest

from evalkit import api
from evalkit.report.render import SafeConsole, render_history, render_summaries
from evalkit.rows import RunRow
from tests.cli.test_progress_ci import ONE


@pytest.fixture
def two_sets_history(cli: Any, write_file: Any) -> list[RunRow]:
    """Two runs each of two sets with long ids on a long-named replay instance."""
    write_file("evalkit.yaml", "providers: [{id: recorded-answers-instance, adapter: replay, path: answers.jsonl}]\n")
    write_file("answers.jsonl", '{"id": "greet", "response": "echo", "model": "gpt-4o-mini-2024-07-18"}\n')
    for set_id in ("acme_search.faq_answers_long", "acme_search.second_set"):
        write_file(f"sets/{set_id}.yaml", ONE.replace("first.one", set_id))
        for _ in range(2):
            assert cli("run", f"sets/{set_id}.yaml").exit_code == 0
    return list(api.history(api.load_config(None)))


@pytest.mark.parametrize("width", [80, 100, 160])
def test_report_never_cuts_ids_or_verdicts(two_sets_history: list[RunRow], width: int) -> None:
    cfg = api.load_config(None)
    out = io.StringIO()
    console = SafeConsole(file=out, width=width, color_system=None)
    render_summaries(console, api.set_report(cfg))
    render_history(console, "acme_search.faq_answers_long", api.history(cfg, set_id="acme_search.faq_answers_long"))
    text = out.getvalue()
    assert "…" not in text
    words = set(text.split())
    for row in two_sets_history:
        assert row.run_id in words
        assert row.set_id in words
    assert "baseline" in words
    assert "no regression" in text  # on one line
    assert max(len(line) for line in text.splitlines()) <= width
