"""Answers, ids, models and error texts are data from users and endpoints: no output reads them as
rich markup (a '[/]' crashed a table after the run was stored), and nothing a terminal would act
on (escape sequences, OSC 8 links, OSC 52 clipboard writes, bidi overrides) reaches it, in tables,
error lines or markdown."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.fakeserver import FakeServer, Reply

# What an answer, id or error text may carry: clear screen + cursor home, an OSC 8 hyperlink,
# an OSC 52 clipboard write, a bidi override and a zero-width space.
HOSTILE = "A\x1b[2J\x1b[H B\x1b]8;;http://evil.example/\x07link\x1b]8;;\x07 C\x1b]52;c;cHduZWQ=\x07 D\u202eE\u200bF"
FORBIDDEN = ("\x1b", "\x07", "\u202e", "\u200b")


def replay_project(
    write_file: Any, answers: list[dict[str, str]], *, privacy: str = "metadata", alias: str = ""
) -> None:
    model = f", model: {json.dumps(alias)}" if alias else ""
    write_file(
        "evalkit.yaml",
        f"privacy: {privacy}\ndefault_provider: rec\nproviders: [{{id: rec, adapter: replay, path: answers.jsonl{model}}}]\n",
    )
    write_file("answers.jsonl", "".join(json.dumps(a) + "\n" for a in answers))


def one_prompt_set(
    write_file: Any, prompt_id: str, assertion: str = "{contains: zzz}", set_id: str = "rev.out"
) -> None:
    write_file(
        "set.yaml",
        f"id: {set_id}\nname: Review\nprompts:\n  - id: {json.dumps(prompt_id)}\n    prompt: hi\n    assertions: [{assertion}]\n",
    )


def latest_run_id(cli: Any) -> str:
    return str(json.loads(cli("report", "--format", "json").stdout)["runs"][0]["run_id"])


def assert_inert(text: str) -> None:
    found = [repr(c) for c in FORBIDDEN if c in text]
    assert not found, f"control/bidi characters reached the output: {found}"


# --- rich markup in data -------------------------------------------------------------------


def test_prompt_id_with_a_closing_tag_does_not_crash_run_or_show(cli: Any, write_file: Any) -> None:
    replay_project(write_file, [{"id": "a[/]", "response": "x", "model": "m1"}])
    one_prompt_set(write_file, "a[/]")
    run = cli("run", "set.yaml")
    assert run.exception is None, repr(run.exception)
    assert run.exit_code == 0
    assert "a[/]" in run.stdout
    show = cli("show", latest_run_id(cli))
    assert show.exception is None, repr(show.exception)
    assert "a[/]" in show.stdout


def test_reported_model_with_a_closing_tag_does_not_crash_report_history(cli: Any, write_file: Any) -> None:
    replay_project(write_file, [{"id": "p", "response": "x", "model": "rep[/]"}])
    one_prompt_set(write_file, "p")
    assert cli("run", "set.yaml", "--format", "json").exit_code == 0
    result = cli("report", "rev.out")
    assert result.exception is None, repr(result.exception)
    assert result.exit_code == 0
    assert "rep[/]" in result.stdout


def test_model_alias_with_a_closing_tag_does_not_crash_report_or_models(cli: Any, write_file: Any) -> None:
    replay_project(write_file, [{"id": "p", "response": "x", "model": "m1"}], alias="alias[/]")
    one_prompt_set(write_file, "p")
    assert cli("run", "set.yaml", "--format", "json").exit_code == 0
    for args in (("report",), ("models",)):
        result = cli(*args)
        assert result.exception is None, f"{args}: {result.exception!r}"
        assert result.exit_code == 0
        assert "alias[/]" in result.stdout


def test_retrieval_ids_with_a_closing_tag_do_not_crash_the_table(cli: Any, write_file: Any) -> None:
    write_file("corpus.jsonl", '{"id": "doc[/]", "text": "the forum is in may"}\n')
    write_file(
        "q.yaml",
        """
        id: rev.retrieval
        name: Review
        corpus: corpus.jsonl
        questions:
          - {id: "q[/]", question: when is the forum, form: match, expected: ["doc[/]"]}
        """,
    )
    result = cli("retrieval", "q.yaml", "--retriever", "lexical")
    assert result.exception is None, repr(result.exception)
    assert result.exit_code == 0
    assert "q[/]" in result.stdout
    assert "doc[/]" in result.stdout


def test_prompt_id_markup_is_shown_literally(cli: Any, write_file: Any) -> None:
    pid = "[link=http://evil.example]x[/link]"
    replay_project(write_file, [{"id": pid, "response": "no", "model": "m1"}])
    one_prompt_set(write_file, pid)
    result = cli("run", "set.yaml")
    assert result.exit_code == 0, result.stderr
    assert pid in result.stdout


# --- escape sequences, bidi and zero-width characters ---------------------------------------


def test_answer_escape_sequences_do_not_reach_the_table(cli: Any, write_file: Any) -> None:
    replay_project(write_file, [{"id": "p", "response": HOSTILE, "model": "m1"}], privacy="full")
    one_prompt_set(write_file, "p")
    run = cli("run", "set.yaml")
    assert run.exit_code == 0, run.stderr
    assert "answer:" in run.stdout
    assert_inert(run.stdout)
    show = cli("show", latest_run_id(cli))
    assert show.exit_code == 0, show.stderr
    assert_inert(show.stdout)


def test_reported_model_and_prompt_id_escape_sequences_do_not_reach_the_table(cli: Any, write_file: Any) -> None:
    replay_project(write_file, [{"id": "p" + HOSTILE, "response": "no", "model": "m" + HOSTILE}])
    one_prompt_set(write_file, "p" + HOSTILE)
    run = cli("run", "set.yaml")
    assert run.exit_code == 0, run.stderr
    assert_inert(run.stdout)
    history = cli("report", "rev.out")
    assert history.exit_code == 0, history.stderr
    assert_inert(history.stdout)


@pytest.mark.parametrize(
    ("status", "stream"),
    [(401, "stderr"), (400, "stdout")],  # a refusal: the error line; an errored item: the run table
)
def test_an_endpoints_error_text_reaches_no_output_raw(
    cli: Any, write_file: Any, fake_config: Any, fake_llm: FakeServer, status: int, stream: str
) -> None:
    fake_llm.handler = lambda request: Reply(status=status, json={"error": {"message": HOSTILE}})
    one_prompt_set(write_file, "p")
    result = cli("run", "set.yaml", "--no-cache")
    assert result.exit_code == 3
    shown = getattr(result, stream)
    assert f"HTTP {status}" in shown
    assert_inert(shown)


def test_set_file_error_line_does_not_echo_escape_sequences(cli: Any, write_file: Any) -> None:
    write_file(
        "set.yaml",
        'id: rev.key\nname: n\nprompts:\n  - id: a\n    prompt: hi\n    assertions: [{contains: x}]\n    "\\e]52;c;cHduZWQ=\\a": 1\n',
    )
    result = cli("validate", "set.yaml")
    assert result.exit_code == 2
    assert "set.yaml:7:5:" in result.stderr
    assert_inert(result.stderr)


# --- markdown -------------------------------------------------------------------------------


def test_markdown_cell_escapes_carriage_return(cli: Any, write_file: Any) -> None:
    replay_project(write_file, [{"id": "a\rb", "response": "no", "model": "m1"}])
    one_prompt_set(write_file, "a\rb")
    assert cli("run", "set.yaml", "--format", "json").exit_code == 0
    result = cli("show", latest_run_id(cli), "--format", "markdown")
    assert result.exit_code == 0, result.stderr
    assert "\r" not in result.stdout


def test_markdown_reported_model_cannot_inject_lines(cli: Any, write_file: Any) -> None:
    replay_project(write_file, [{"id": "p", "response": "no", "model": "m`\n\n## Gate passed"}])
    one_prompt_set(write_file, "p")
    assert cli("run", "set.yaml", "--format", "json").exit_code == 0
    result = cli("show", latest_run_id(cli), "--format", "markdown")
    assert result.exit_code == 0, result.stderr
    assert not any(line.startswith("## Gate passed") for line in result.stdout.splitlines())


# --- set files: YAML 1.2 and loading -------------------------------------------------------
