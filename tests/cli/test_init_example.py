"""``evalkit init``'s example set (evalkit/sets/scaffold.py) graded on recorded answers: it holds
for a terse model and for the local model's wordier answers (its real run is
tests/e2e/test_local_model.py), and fails wrong ones. The answers come through the replay adapter.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

TERSE = {"capital-of-france": "Paris", "two-plus-two": "4", "json-object": '{"ok": true}'}
# what SmolLM2-135M answers at temperature 0: a sentence, an equation, indented JSON
WORDY = {
    "capital-of-france": "The capital of France is Paris.",
    "two-plus-two": "2 + 2 = 4",
    "json-object": '{\n  "ok": true\n}',
}
WRONG = {"capital-of-france": "London, or Paris?", "two-plus-two": "5", "json-object": 'ok: {"ok": false}'}


def graded(cli: Any, write_file: Any, answers: dict[str, str]) -> dict[str, Any]:
    assert cli("init").exit_code == 0
    write_file("replay.yaml", "providers:\n  - {id: rec, adapter: replay, path: answers.jsonl}\n")
    lines = [json.dumps({"id": k, "response": v, "model": "recorded"}) for k, v in answers.items()]
    write_file("answers.jsonl", "\n".join(lines) + "\n")
    assert cli("validate", "sets/example.yaml").exit_code == 0
    result = cli("run", "sets/example.yaml", "--config", "replay.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return {i["id"]: (i["passed"], i["score"]) for i in doc["items"]}


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
