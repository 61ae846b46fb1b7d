"""``similar`` end to end on the real local model (README "Model-graded assertions"): recorded
answers graded by the embeddings of the shipped SmolLM2-135M in llama.cpp's embedding mode,
through ``evalkit run`` in a subprocess. A 135M chat model is no embedding model: the test asks
only that an answer scores higher against its paraphrase than against an unrelated sentence, on
the pairs tests/providers/test_embeddings_local.py measured, never the model's exact numbers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalkit.providers.local import default_model_path, model_id
from tests.conftest import evalkit_process as evalkit
from tests.conftest import write

pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.usefixtures("local_model")]

CASES = [  # (answer, its paraphrase, an unrelated sentence)
    ("A cat was sitting on the mat.", "The cat sat on the mat.", "The train to Paris leaves at nine in the morning."),
    (
        "Items may be returned for a complete refund within fourteen days.",
        "You can return the item within 14 days for a full refund.",
        "It is raining heavily in London today.",
    ),
    (
        "We rescheduled the meeting for Thursday afternoon.",
        "The meeting has been moved to Thursday afternoon.",
        "Please reset your password using the link in the email.",
    ),
]


def test_similar_scores_a_paraphrase_above_an_unrelated_sentence(isolated: Path) -> None:
    write(
        isolated / "evalkit.yaml",
        """
        default_provider: recorded
        embeddings: {provider: local}
        providers:
          - {id: recorded, adapter: replay, path: answers.jsonl}
          - {id: local, adapter: local}
        """,
    )
    prompts = "".join(
        f"""
  - id: p{n}
    prompt: Say it again.
    assertions:
      - similar: {{value: {json.dumps(close)}, min: 0}}
      - similar: {{value: {json.dumps(far)}, min: 0}}"""
        for n, (_, close, far) in enumerate(CASES)
    )
    write(isolated / "sets" / "s.yaml", f"id: similar.local\nname: Similar\nprompts:{prompts}\n")
    with (isolated / "answers.jsonl").open("w", encoding="utf-8") as out:
        for n, (answer, _, _) in enumerate(CASES):
            out.write(json.dumps({"set": "similar.local", "id": f"p{n}", "response": answer, "model": "m"}) + "\n")

    ran = evalkit("run", "sets/s.yaml", "--format", "json", cwd=isolated)
    assert ran.returncode == 0, ran.stderr
    doc = json.loads(ran.stdout)
    path = default_model_path()
    assert path is not None
    assert doc["grader"] == f"judged:local:{model_id(path)}"
    for item in doc["items"]:
        close, far = (a["score"] for a in item["assertions"])
        assert 0.0 <= far < close <= 1.0, item
        assert all(a["yardstick"] == f"evalkit.similar:local:{model_id(path)}:v1" for a in item["assertions"])
    assert doc["judge"]["calls"] > 0
    assert doc["judge"]["input_tokens"] > 0

    again = evalkit("run", "sets/s.yaml", "--format", "json", cwd=isolated)  # every vector from the cache
    assert again.returncode == 0, again.stderr
    judge = json.loads(again.stdout)["judge"]
    assert judge["calls"] == judge["cached"] > 0
    assert judge["input_tokens"] == 0
