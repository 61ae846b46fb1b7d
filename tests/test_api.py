"""The public Python API: ``evalkit.load_set`` and ``evalkit.run_set`` without the CLI, the
grader fallback that never spends judge tokens, and a light ``import evalkit``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import evalkit
from evalkit import api
from evalkit.errors import InputError, SetError, UnknownNameError
from evalkit.records import PromptSet, RunResult, ServingRecord
from tests.fakeserver import FakeServer, last_user_message, openai_reply

REPO = Path(__file__).resolve().parents[1]
REPLAY_CONFIG = "providers: [{id: rec, adapter: replay, path: answers.jsonl}]\n"

FAQ = """
id: api.faq
name: API FAQ
prompts:
  - id: days
    prompt: Which days is the office open?
    assertions: [{contains: Monday}]
  - id: sunday
    prompt: Is the office open on Sundays?
    assertions: [{exact: "no"}, {regex: '/^n/i'}]
"""


def replay_project(write_file: Any, answers: list[dict[str, str]]) -> Path:
    write_file("answers.jsonl", "".join(json.dumps(a) + "\n" for a in answers))
    return write_file("evalkit.yaml", REPLAY_CONFIG)


FAQ_ANSWERS = [
    {"id": "days", "response": "Monday to Friday", "model": "m1"},
    {"id": "sunday", "response": "No", "model": "m1"},
]


def test_load_set_returns_a_prompt_set(write_file: Any) -> None:
    path = write_file("sets/faq.yaml", FAQ)
    for target in (path, str(path)):
        loaded = evalkit.load_set(target)
        assert isinstance(loaded, PromptSet)
        assert (loaded.id, loaded.name, loaded.kind) == ("api.faq", "API FAQ", "prompts")
        assert [p.id for p in loaded.prompts] == ["days", "sunday"]
        assert [a.type for a in loaded.prompts[1].assertions] == ["exact", "regex"]
        assert loaded.prompts[1].assertions[1].compiled is not None


def test_load_set_reports_errors_with_their_position(write_file: Any) -> None:
    path = write_file("sets/bad.yaml", FAQ.replace("name: API FAQ\n", ""))
    with pytest.raises(SetError) as caught:
        evalkit.load_set(path)
    assert str(caught.value).startswith(f"{path}:")
    assert "name" in str(caught.value)
    assert caught.value.exit_code == 2


def test_public_names_are_the_api_functions() -> None:
    assert evalkit.load_set is api.load_set
    assert evalkit.run_set is api.run_set
    with pytest.raises(AttributeError):
        _ = evalkit.no_such_name  # type: ignore[attr-defined]


def test_run_set_with_the_replay_provider(write_file: Any, tmp_path: Path) -> None:
    config = replay_project(write_file, FAQ_ANSWERS)
    path = write_file("sets/faq.yaml", FAQ)
    db = tmp_path / "api.duckdb"
    first = evalkit.run_set(path, provider="rec", config=config, db=db)
    assert isinstance(first, RunResult)
    assert first.set_id == "api.faq"
    assert first.grader == "deterministic"
    assert [(i.id, i.passed, i.score) for i in first.items] == [("days", True, 1.0), ("sunday", False, 0.5)]
    assert (first.pass_rate, first.mean_score) == (0.5, 0.75)
    assert first.generator == ServingRecord("rec", "replay", "m1")
    assert first.comparison is not None
    assert first.comparison.state == "baseline"
    assert db.is_file()

    second = evalkit.run_set(str(path), provider="rec", config=str(config), db=str(db))
    assert second.comparison is not None
    assert second.comparison.state == "compared"
    assert second.comparison.baseline_run_id == first.run_id


def test_run_set_accepts_loaded_records_without_storing(write_file: Any, db_file: Path) -> None:
    config = api.load_config(replay_project(write_file, FAQ_ANSWERS))
    prompt_set = evalkit.load_set(write_file("sets/faq.yaml", FAQ))
    assert isinstance(prompt_set, PromptSet)
    run = evalkit.run_set(prompt_set, provider="rec", config=config, store=False)
    assert run.passed_count == 1
    assert run.comparison is not None
    assert run.comparison.state == "not_compared"
    assert not db_file.exists()


def test_run_set_against_the_fake_server(
    fake_config: Path, fake_llm: FakeServer, write_file: Any, db_file: Path
) -> None:
    fake_llm.handler = lambda req: openai_reply("Monday" if "Which" in last_user_message(req) else "no")
    path = write_file("sets/faq.yaml", FAQ)
    run = evalkit.run_set(path, provider="fake", config=fake_config)
    assert fake_llm.calls == 2
    assert {r.json["model"] for r in fake_llm.requests} == {"fake-alias"}
    assert [i.passed for i in run.items] == [True, True]
    assert run.pass_rate == 1.0
    assert run.generator == ServingRecord("fake", "fake-alias", "fake-model-1")
    assert db_file.is_file()  # EVALKIT_DB is honoured


@pytest.mark.parametrize("grader", ["llm_judge", "LLM_JUDGE", "decisions", "", None])
def test_unknown_grader_falls_back_to_deterministic(fake_llm: FakeServer, write_file: Any, grader: str | None) -> None:
    config = write_file(
        "evalkit.yaml",
        f"""
        default_provider: fake
        decision: {{provider: fake}}
        providers:
          - id: fake
            adapter: openai
            base_url: {fake_llm.url}/v1
            model: fake-alias
            max_retries: 0
        """,
    )
    fake_llm.handler = lambda req: openai_reply("Monday" if "Which" in last_user_message(req) else "no")
    run = evalkit.run_set(write_file("sets/faq.yaml", FAQ), config=config, grader=grader)
    assert run.grader == "deterministic"
    assert [i.passed for i in run.items] == [True, True]
    assert {i.yardstick for i in run.items} == {"deterministic"}
    assert fake_llm.calls == 2  # one per prompt, no judge call
    assert run.grader_usage.total == 0


def test_cli_refuses_an_unknown_grader(cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any) -> None:
    write_file("sets/faq.yaml", FAQ)
    result = cli("run", "sets/faq.yaml", "--grader", "llm_judge")
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: ")
    assert "llm_judge" in result.stderr
    assert fake_llm.calls == 0
    with pytest.raises(UnknownNameError):
        api.resolve_grader_name("llm_judge", strict=True)
    assert api.resolve_grader_name("llm_judge", strict=False) == "deterministic"


@pytest.mark.parametrize("value", ["typo", "1.5", "NAN", True])
def test_run_set_rejects_a_bad_tolerance_before_any_call(
    fake_config: Path, fake_llm: FakeServer, write_file: Any, db_file: Path, value: object
) -> None:
    path = write_file("sets/faq.yaml", FAQ)
    with pytest.raises(InputError, match=r"0\.\.1"):
        evalkit.run_set(path, config=fake_config, tolerances={"max_pass_rate_drop": value})
    assert fake_llm.calls == 0
    assert not db_file.exists()


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("import evalkit", id="import"),
        pytest.param("import evalkit; evalkit.load_set; evalkit.run_set", id="api-attributes"),
    ],
)
def test_import_evalkit_stays_light(code: str) -> None:
    probe = f"{code}; import sys; print([m for m in ('duckdb', 'httpcore', 'httpx', 'jsonschema', 'rich') if m in sys.modules])"
    completed = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True, timeout=60
    )
    assert completed.stdout.strip() == "[]"


def test_replay_answers_each_prompt_by_id_even_with_identical_texts(write_file: Any, db_file: Path) -> None:
    config = replay_project(
        write_file,
        [{"id": "first", "response": "alpha", "model": "m1"}, {"id": "second", "response": "beta", "model": "m1"}],
    )
    path = write_file(
        "sets/twins.yaml",
        """
        id: api.twins
        name: Twins
        prompts:
          - id: first
            prompt: Answer.
            assertions: [{exact: alpha}]
          - id: second
            prompt: Answer.
            assertions: [{exact: beta}]
        """,
    )
    run = evalkit.run_set(path, provider="rec", config=config, concurrency=1)
    assert [(i.id, i.response, i.passed) for i in run.items] == [("first", "alpha", True), ("second", "beta", True)]


def test_lone_surrogate_in_an_answer_does_not_crash_the_run(write_file: Any, db_file: Path) -> None:
    config = replay_project(write_file, [{"id": "odd", "response": "half \ud800 pair", "model": "m1"}])
    path = write_file(
        "sets/odd.yaml",
        """
        id: api.odd
        name: Odd
        prompts:
          - id: odd
            prompt: Say something odd.
            assertions: [{contains: pair}]
        """,
    )
    run = evalkit.run_set(path, provider="rec", config=config)
    assert run.passed_count == 1


@pytest.mark.parametrize("concurrency", [0, -1])
def test_run_set_refuses_a_concurrency_below_1_before_anything_runs(
    write_file: Any, db_file: Path, concurrency: int
) -> None:
    config = replay_project(write_file, FAQ_ANSWERS)
    path = write_file("sets/faq.yaml", FAQ)
    with pytest.raises(InputError, match=f"--concurrency must be at least 1, got {concurrency}"):
        evalkit.run_set(path, provider="rec", config=config, db=db_file, concurrency=concurrency)
    assert not db_file.exists()
