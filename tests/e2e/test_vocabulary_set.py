"""sets/vocabulary.yaml on the real local model (SmolLM2-135M via llama.cpp): the assertion
vocabulary of README "Assertions" passes on answers it really gives. Never asserts the model's text.

In CI (CI=true) a missing model fails this test instead of skipping it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.model, pytest.mark.usefixtures("local_model")]
VOCABULARY = REPO / "sets" / "vocabulary.yaml"
# what the set is there to show: every type of README "Assertions" that reads the answer, and negation
SHOWN = {
    "icontains", "contains_any", "contains_all", "icontains_any", "icontains_all", "starts_with",
    "equals_json", "contains_json", "levenshtein", "word_count", "latency_ms",
}  # fmt: skip


def test_vocabulary_set_passes_on_the_local_model(isolated: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "evalkit", "run", str(VOCABULARY), "--provider", "local", "--format", "json"],
        cwd=isolated,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert (doc["set"], doc["error_count"]) == ("evalkit.vocabulary", 0)
    assert doc["generator"]["provider"] == "local"
    failing = {i["id"]: i["reason"] for i in doc["items"] if not i["passed"]}
    assert (doc["passed_count"], doc["prompt_count"], failing) == (11, 11, {})

    used = {a["type"] for item in doc["items"] for a in item["assertions"]}
    assert not SHOWN - used, SHOWN - used
    assert any(t.startswith("not_") for t in used)
    for item in doc["items"]:  # the score is the weighted mean of the counted assertions
        counted = [a for a in item["assertions"] if a["weight"] > 0]
        weighted = sum(a["weight"] * a["score"] for a in counted) / sum(a["weight"] for a in counted)
        assert item["score"] == pytest.approx(weighted), item["id"]

    by_id = {i["id"]: i for i in doc["items"]}
    thresholded = by_id["opposite-of-hot"]  # threshold 0.75 over weights 3, 1 and 0
    assert [a["weight"] for a in thresholded["assertions"]] == [3.0, 1.0, 0.0]
    assert thresholded["score"] >= 0.75
