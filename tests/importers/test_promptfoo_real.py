"""The recorded verdicts of tests/data/promptfoo/*/expected.json, checked against promptfoo itself.

Optional: it runs when promptfoo is installed in bench/node (``npm install --prefix bench/node
promptfoo@0.121.20``) and is skipped otherwise. Each case's config is run by ``promptfoo eval``
with its providers replaced by one OpenAI-compatible provider on a loopback server, which answers
each conversation (as the imported set renders it) with its recorded answer; promptfoo's own
verdict for that test and prompt must be the one written down. Where promptfoo 0.121.20 does not
do what its documentation says, the answer names it (``promptfoo_0121_differs``) and is skipped.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalkit.sets import load_set
from evalkit.sets.yamldoc import load_document
from tests.conftest import REPO
from tests.fakeserver import FakeServer, Recorded, Reply, openai_reply
from tests.importers.test_promptfoo_cases import CASES, expected_of, run_import

PROMPTFOO = REPO / "bench" / "node" / "node_modules" / ".bin" / "promptfoo"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not PROMPTFOO.exists() or shutil.which("node") is None, reason="promptfoo is not installed"),
]
# what the harness cannot route through one provider: promptfoo-only features of the case
_STRIP = ("env", "nunjucksFilters", "derivedMetrics", "scenarios", "evaluateOptions")


def key(messages: list[dict[str, str]]) -> str:
    return json.dumps([[m["role"], m["content"]] for m in messages])


def conversations(sets: Path) -> dict[tuple[str, str], str]:
    """(set id, prompt id) -> the conversation evalkit sends, as a key."""
    out = {}
    for path in sets.glob("*.yaml"):
        prompt_set = load_set(path)
        for prompt in prompt_set.prompts:  # type: ignore[union-attr]
            if prompt.messages:
                turns = [{"role": m.role, "content": m.content} for m in prompt.messages]
            else:
                turns = [{"role": "system", "content": prompt.system}] if prompt.system else []
                turns.append({"role": "user", "content": prompt.prompt})
            out[(prompt_set.id, prompt.id)] = key(turns)
    return out


def rounds(answers: list[dict[str, Any]], sent: dict[tuple[str, str], str]) -> Iterator[list[dict[str, Any]]]:
    """Batches in which no two answers are for the same conversation."""
    batches: list[list[dict[str, Any]]] = []
    for answer in answers:
        for batch in batches:
            if all(sent[(a["set"], a["id"])] != sent[(answer["set"], answer["id"])] for a in batch):
                batch.append(answer)
                break
        else:
            batches.append([answer])
    yield from batches


def slug(text: str) -> str:
    return re.sub(r"[^\w]+", "-", text.lower()).strip("-_")[:80].strip("-_")


def row_for(rows: list[dict[str, Any]], answer: dict[str, Any], conversation: str) -> dict[str, Any]:
    found = []
    for row in rows:
        raw = row["prompt"]["raw"]
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError:
            parsed = None
        turns = parsed if isinstance(parsed, list) else [{"role": "user", "content": raw}]
        if key(turns) == conversation:
            found.append(row)
    if len(found) > 1:  # tests sharing a prompt: told apart by their description
        base = re.sub(r"-\d+$", "", answer["id"])
        found = [r for r in found if slug((r.get("testCase") or {}).get("description") or "") in (answer["id"], base)]
    assert len(found) == 1, (answer, len(found))
    return found[0]


@pytest.mark.parametrize(
    "case", [c for c in CASES if expected_of(c)["answers"] and "promptfoo_runnable" not in expected_of(c)]
)
def test_promptfoo_gives_the_recorded_verdicts(case: str, isolated: Path, cli: Any, fake_llm: FakeServer) -> None:
    assert run_import(case, isolated, cli).exit_code == 0
    sent = conversations(isolated / "sets")
    config = isolated / case / "promptfooconfig.yaml"
    data = dict(load_document(config).data)
    for name in _STRIP:
        data.pop(name, None)
    data["providers"] = [{"id": "openai:chat:fake", "config": {"apiBaseUrl": f"{fake_llm.url}/v1", "apiKey": "x"}}]
    config.with_suffix(".json").write_text(json.dumps(data), encoding="utf-8")
    answers = {}

    def reply(request: Recorded) -> Reply:
        return openai_reply(answers.get(key(request.json["messages"]), "-"), model="fake")

    fake_llm.handler = reply
    env = {**os.environ, "PROMPTFOO_DISABLE_TELEMETRY": "1", "PROMPTFOO_DISABLE_UPDATE": "1",
           "PROMPTFOO_DISABLE_SHARING": "1", "PROMPTFOO_CONFIG_DIR": str(isolated / "pf"), "FORCE_COLOR": "0",
           # model-graded checks ask the default grader: the loopback server, never the network
           "OPENAI_API_KEY": "x", "OPENAI_BASE_URL": f"{fake_llm.url}/v1"}  # fmt: skip
    checked = [a for a in expected_of(case)["answers"] if "promptfoo_0121_differs" not in a]
    for batch in rounds(checked, sent):
        answers.clear()
        answers.update({sent[(a["set"], a["id"])]: a["response"] for a in batch})
        out = isolated / "promptfoo-out.json"
        result = subprocess.run(
            [str(PROMPTFOO), "eval", "-c", str(config.with_suffix(".json")), "--no-cache", "--no-progress-bar",
             "--no-table", "-o", str(out)],
            cwd=config.parent, env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert out.exists(), result.stderr[-2000:]
        rows = json.loads(out.read_text(encoding="utf-8"))["results"]["results"]
        for answer in batch:
            row = row_for(rows, answer, sent[(answer["set"], answer["id"])])
            assert row["success"] is answer["passed"], (answer, row.get("error"))
        out.unlink()
