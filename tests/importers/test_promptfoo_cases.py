"""``evalkit import promptfoo`` on realistic promptfoo configs (tests/data/promptfoo/<case>/).

Each case folder holds a promptfoo config written from promptfoo's documentation, its data files,
and ``expected.json``: the evalkit sets the import must write (checked as the set loader reads
them), the provider entries it must print, what it must list as not (or partly) converted (by
file:line and what), its summary line, and recorded answers with the verdict promptfoo's
assertions give each one by promptfoo's documented semantics (written down with the reasoning,
not computed with evalkit). The round trip grades those answers with ``evalkit run`` through a
replay provider and compares the verdicts; ``evalkit_passed`` is evalkit's where it differs on
purpose (a test that lost an assertion fails until its stand-in is replaced).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from evalkit.records import PromptSet
from evalkit.sets import load_config, load_set
from evalkit.sets.yamldoc import parse_document
from tests.conftest import REPO
from tests.fakeserver import FakeServer, Recorded, Reply, openai_reply

CASES_DIR = REPO / "tests" / "data" / "promptfoo"
CASES = sorted(p.name for p in CASES_DIR.iterdir() if (p / "expected.json").is_file())


def expected_of(case: str) -> dict[str, Any]:
    return json.loads((CASES_DIR / case / "expected.json").read_text(encoding="utf-8"))


def run_import(case: str, work: Path, cli: Any) -> Any:
    shutil.copytree(CASES_DIR / case, work / case, ignore=shutil.ignore_patterns("expected.json"))
    config = (work / case / "promptfooconfig.yaml").relative_to(work)
    return cli("import", "promptfoo", str(config), "--out", "sets")


def section(stdout: str, title: str) -> list[str]:
    lines = stdout.splitlines()
    if title not in lines:
        return []
    out = []
    for line in lines[lines.index(title) + 1 :]:
        if not line.startswith("  "):
            break
        out.append(line[2:])
    return out


def as_written(assertion: Any) -> tuple[str, Any, float]:
    if "type" in assertion:
        # a model-graded assertion's threshold, min and provider are part of its value, as the loader reads them
        beside = {k: assertion[k] for k in ("threshold", "min", "provider") if k in assertion}
        value = {"value": assertion["value"], **beside} if beside else assertion["value"]
        return assertion["type"], value, float(assertion.get("weight", 1))
    (kind, value), *_ = assertion.items()
    return kind, value, 1.0


def loaded_prompts(path: Path) -> list[dict[str, Any]]:
    """The prompts as evalkit's loader reads the file (templates, if any, rendered)."""
    prompt_set = load_set(path)
    assert isinstance(prompt_set, PromptSet)
    out = []
    for prompt in prompt_set.prompts:
        entry: dict[str, Any] = {"id": prompt.id}
        if prompt.messages:
            entry["messages"] = [{"role": m.role, "content": m.content} for m in prompt.messages]
        else:
            entry["prompt"] = prompt.prompt
            if prompt.system is not None:
                entry["system"] = prompt.system
        entry["assertions"] = [(a.type, a.value, a.weight) for a in prompt.assertions]
        if prompt.threshold is not None:
            entry["threshold"] = prompt.threshold
        out.append(entry)
    return out


def wanted_prompts(prompts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for prompt in prompts:
        entry = {k: v for k, v in prompt.items() if k not in ("assertions", "vars")}
        entry["assertions"] = [as_written(a) for a in prompt["assertions"]]
        out.append(entry)
    return out


@pytest.mark.parametrize("case", CASES)
def test_import_writes_the_expected_sets(case: str, isolated: Path, cli: Any) -> None:
    expected = expected_of(case)
    result = run_import(case, isolated, cli)
    assert result.exit_code == 0, result.stderr + result.stdout
    written = sorted(p.stem for p in (isolated / "sets").glob("*.yaml"))
    assert written == sorted(expected["sets"])
    for set_id, spec in expected["sets"].items():
        path = isolated / "sets" / f"{set_id}.yaml"
        data = parse_document(path.read_text(encoding="utf-8"), str(path)).data
        assert data["id"] == set_id
        assert data.get("params") == spec.get("params")
        assert loaded_prompts(path) == wanted_prompts(spec["prompts"]), set_id
        for prompt, wanted in zip(data["prompts"], spec["prompts"], strict=True):
            assert prompt.get("vars") == wanted.get("vars"), prompt["id"]
    assert result.stdout.splitlines()[-1] == expected["summary"]


@pytest.mark.parametrize("case", CASES)
def test_import_lists_what_it_did_not_convert(case: str, isolated: Path, cli: Any) -> None:
    expected = expected_of(case)
    result = run_import(case, isolated, cli)
    for title, key in (("Not converted:", "not_converted"), ("Partly converted:", "partly")):
        listed = section(result.stdout, title)
        wanted = [f"{case}/{item}" for item in expected[key]]
        assert len(listed) == len(wanted), (title, listed)
        for line, item in zip(listed, wanted, strict=True):
            assert line.startswith(item + ": "), (line, item)


@pytest.mark.parametrize("case", CASES)
def test_import_prints_the_provider_entries(case: str, isolated: Path, cli: Any) -> None:
    expected = expected_of(case)
    result = run_import(case, isolated, cli)
    block = section(result.stdout, "Add to evalkit.yaml (API keys stay in the environment variables named):")
    if not expected["providers"]:
        assert block == []
        return
    entries = parse_document("\n".join(block), "snippet").data
    assert entries["providers"] == expected["providers"]
    assert entries["default_provider"] == expected["providers"][0]["id"]
    (isolated / "evalkit.yaml").write_text("\n".join(block) + "\n", encoding="utf-8")
    config = load_config(str(isolated / "evalkit.yaml"))  # what is printed is a valid evalkit.yaml
    assert [p.id for p in config.providers] == [e["id"] for e in expected["providers"]]


def answer_rounds(answers: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The recorded answers split into rounds holding at most one answer per prompt."""
    rounds: list[list[dict[str, Any]]] = []
    for answer in answers:
        for batch in rounds:
            if all((a["set"], a["id"]) != (answer["set"], answer["id"]) for a in batch):
                batch.append(answer)
                break
        else:
            rounds.append([answer])
    return rounds


def failing_grader(request: Recorded) -> Reply:
    """A judge that rates every answer level 0, and embeddings under which no two texts are similar
    (each text its own axis): the recorded verdicts hold whatever the model-graded assertions say,
    so they never pass one."""
    if request.path.endswith("/embeddings"):
        axes = [int(hashlib.sha256(text.encode()).hexdigest(), 16) % 4096 for text in request.json["input"]]
        vectors = [[1.0 if i == axis else 0.0 for i in range(4096)] for axis in axes]
        return Reply(json={"data": [{"index": n, "embedding": v} for n, v in enumerate(vectors)], "model": "emb"})
    return openai_reply('{"level": 0, "reason": "the test does not depend on it"}', model="judge")


# the judge and embeddings of the run, and the instances the imported model_graded set names on its assertions
GRADERS = """
  - {{id: judge, adapter: openai, base_url: '{url}/v1', model: judge, max_retries: 0}}
  - {{id: emb, adapter: openai, base_url: '{url}/v1', model: emb, max_retries: 0}}
  - {{id: grader, adapter: openai, base_url: '{url}/v1', model: grader, max_retries: 0}}
  - {{id: gpt-4o-mini, adapter: openai, base_url: '{url}/v1', model: gpt-4o-mini, max_retries: 0}}
decision: {{provider: judge}}
embeddings: {{provider: emb}}
"""


@pytest.mark.parametrize("case", [c for c in CASES if expected_of(c)["answers"]])
def test_round_trip_verdicts_are_promptfoos(case: str, isolated: Path, cli: Any, fake_llm: FakeServer) -> None:
    expected = expected_of(case)
    assert run_import(case, isolated, cli).exit_code == 0
    fake_llm.handler = failing_grader
    (isolated / "evalkit.yaml").write_text(
        "providers:\n  - id: recorded\n    adapter: replay\n    path: answers.jsonl" + GRADERS.format(url=fake_llm.url),
        encoding="utf-8",
    )
    for batch in answer_rounds(expected["answers"]):
        sets = sorted({a["set"] for a in batch})
        records = []
        for set_id in sets:
            given = {a["id"]: a["response"] for a in batch if a["set"] == set_id}
            for prompt in load_set(isolated / "sets" / f"{set_id}.yaml").prompts:  # type: ignore[union-attr]
                records.append({"set": set_id, "id": prompt.id, "response": given.get(prompt.id, "-"), "model": "m"})
        with (isolated / "answers.jsonl").open("w", encoding="utf-8") as out:
            out.writelines(json.dumps(r) + "\n" for r in records)
        paths = [f"sets/{s}.yaml" for s in sets]
        result = cli("run", *paths, "--provider", "recorded", "--format", "json")
        assert result.exit_code in (0, 1), result.stderr
        runs = json.loads(result.stdout)
        verdicts = defaultdict(dict)
        for run in runs if isinstance(runs, list) else [runs]:
            for item in run["items"]:
                verdicts[run["set"]][item["id"]] = item["passed"]
        for answer in batch:
            wanted = answer.get("evalkit_passed", answer["passed"])
            assert verdicts[answer["set"]][answer["id"]] == wanted, (answer, verdicts[answer["set"]])
