"""``evalkit init``'s example set (evalkit/sets/scaffold.py) graded on recorded answers: it holds
for a terse model and for the local model's wordier answers (its real run is
tests/e2e/test_local_model.py), and fails wrong ones. The answers come through the replay adapter.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import evalkit_process as local_evalkit

TERSE = {"capital-of-france": "Paris", "two-plus-two": "4", "json-object": '{"ok": true}'}
# what SmolLM2-135M answers at temperature 0: a sentence, an equation, indented JSON
WORDY = {
    "capital-of-france": "The capital of France is Paris.",
    "two-plus-two": "2 + 2 = 4",
    "json-object": '{\n  "ok": true\n}',
}
WRONG = {"capital-of-france": "London, or Paris?", "two-plus-two": "5", "json-object": 'ok: {"ok": false}'}


def run_example(cli: Any, write_file: Any, answers: dict[str, str], set_file: str) -> list[dict[str, Any]]:
    """The items of an init example set graded on ``answers`` (by prompt id) through replay."""
    assert cli("init").exit_code == 0
    write_file("replay.yaml", "providers:\n  - {id: rec, adapter: replay, path: answers.jsonl}\n")
    lines = [json.dumps({"id": k, "response": v, "model": "recorded"}) for k, v in answers.items()]
    write_file("answers.jsonl", "\n".join(lines) + "\n")
    assert cli("validate", set_file).exit_code == 0
    result = cli("run", set_file, "--config", "replay.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    items: list[dict[str, Any]] = json.loads(result.stdout)["items"]
    return items


def graded(cli: Any, write_file: Any, answers: dict[str, str]) -> dict[str, Any]:
    return {i["id"]: (i["passed"], i["score"]) for i in run_example(cli, write_file, answers, "sets/example.yaml")}


@pytest.mark.parametrize("answers", [TERSE, WORDY], ids=["terse", "wordy"])
def test_init_example_holds_for_right_answers(cli: Any, write_file: Any, answers: dict[str, str]) -> None:
    items = graded(cli, write_file, answers)
    assert all(passed for passed, _ in items.values()), items
    # the wordy "2 + 2 = 4" misses levenshtein (weight 1 of 4): 0.75 reaches the threshold
    assert items["two-plus-two"][1] == (1.0 if answers is TERSE else 0.75)


def test_init_example_fails_wrong_answers(cli: Any, write_file: Any) -> None:
    items = graded(cli, write_file, WRONG)
    # "London, or Paris?" names London; "5" is one edit from "4", so only levenshtein (1 of 4) holds
    assert items == {"capital-of-france": (False, 2 / 3), "two-plus-two": (False, 0.25), "json-object": (False, 0.0)}


# the templated example: the rows of capitals.csv and a conversation, as the local model answers
TEMPLATED_RIGHT = {
    "remembers-a-name": "Hello, Ada! Welcome.",
    "capital-of-japan": "The capital of Japan is Tokyo.",
    "capital-of-italy": "Rome",
    "capital-of-germany": "The capital of Germany is Berlin.",
}
TEMPLATED_WRONG = {
    "remembers-a-name": "Hello! What is your name?",
    "capital-of-japan": "Kyoto",
    "capital-of-italy": "Rome is the capital of Italy, a country in southern Europe with a long history.",
    "capital-of-germany": "Berlin",
}


def graded_templated(cli: Any, write_file: Any, answers: dict[str, str]) -> dict[str, Any]:
    items = run_example(cli, write_file, answers, "sets/templated.yaml")
    assert [i["id"] for i in items] == list(TEMPLATED_RIGHT)  # written prompts, then the rows in order
    return {i["id"]: i for i in items}


def test_init_templated_example_renders_its_rows_and_conversation(cli: Any, write_file: Any) -> None:
    items = graded_templated(cli, write_file, TEMPLATED_RIGHT)
    assert all(i["passed"] for i in items.values()), items
    assert items["capital-of-japan"]["prompt"] == "What is the capital of Japan? Answer with the city name only."
    conversation = items["remembers-a-name"]["prompt"]
    assert "Hi, my name is Ada." in conversation
    assert "Nice to meet you, Ada!" in conversation


def test_init_templated_example_fails_wrong_answers(cli: Any, write_file: Any) -> None:
    items = graded_templated(cli, write_file, TEMPLATED_WRONG)
    verdicts = {k: (i["passed"], i["score"]) for k, i in items.items()}
    # a forgotten name; the wrong city; the right city in too many words; the right city
    assert verdicts == {
        "remembers-a-name": (False, 0.0),
        "capital-of-japan": (False, 0.5),
        "capital-of-italy": (False, 0.5),
        "capital-of-germany": (True, 1.0),
    }


def test_a_folder_run_of_the_init_project_runs_both_examples(cli: Any, write_file: Any) -> None:
    """capitals.csv sits beside the sets: a folder run and validate take it as the data file it is."""
    assert cli("init").exit_code == 0
    listed = cli("validate")
    assert listed.exit_code == 0, listed.stderr
    assert "(2 sets)" in listed.stdout


# --- the example set on the local model ------------------------------------------------------------


@pytest.mark.model
@pytest.mark.usefixtures("local_model")
def test_init_example_set_passes_on_the_local_model(isolated: Path) -> None:
    assert local_evalkit("init", cwd=isolated).returncode == 0
    result = local_evalkit("run", "sets/example.yaml", "--format", "json", cwd=isolated)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert (doc["passed_count"], doc["prompt_count"]) == (3, 3), [i["reason"] for i in doc["items"]]


def test_the_init_configs_judge_and_embeddings_examples_hold_once_uncommented(
    cli: Any, write_file: Any, isolated: Path
) -> None:
    """Uncommented, the config's OpenAI instance, ``judge:`` and ``embeddings:`` lines are a valid
    configuration, and the set lines they show validate against it."""
    assert cli("init").exit_code == 0
    config = (isolated / "evalkit.yaml").read_text(encoding="utf-8")
    for commented in ("judge: {provider: openai}", "embeddings: {provider: openai}"):
        assert f"\n# {commented}\n" in config
        config = config.replace(f"\n# {commented}\n", f"\n{commented}\n")
    block = config[config.index("  # - id: openai") : config.index("  # Anthropic:")]
    config = config.replace(block, block.replace("  # - ", "  - ").replace("  #   ", "    "))
    (isolated / "evalkit.yaml").write_text(config, encoding="utf-8")
    shown = [line.split("- ", 1)[1].split("  #")[0] for line in config.splitlines() if line.startswith("#   ")]
    assert len(shown) == 3, shown  # the rubric, factuality and similar lines
    write_file(
        "sets/judged.yaml",
        "id: judged\nname: Judged\nprompts:\n  - id: refund\n    prompt: How long do I have to return an item?\n"
        "    reference: Returns are accepted within 30 days.\n    assertions:\n"
        + "".join(f"      - {line}\n" for line in shown),
    )
    result = cli("validate", "sets/judged.yaml")
    assert result.exit_code == 0, result.stderr + result.stdout
