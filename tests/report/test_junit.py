"""JUnit XML (``run --junit FILE``): one testsuite per set, one testcase per prompt, failures with
their reason, errored items as <error>, and always parseable XML."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from evalkit.records import ItemResult, RunResult
from evalkit.report.junit import junit_xml
from tests.fakeserver import FakeServer, Recorded, Reply, last_user_message, openai_reply

REPLAY_CONFIG = "providers: [{id: rec, adapter: replay, path: answers.jsonl}]\n"
# a prompt with no recorded answer is asked of the fallback (a closed loopback port): an item error
FALLING_BACK = (
    "default_provider: rec\nproviders:\n  - {id: rec, adapter: replay, path: answers.jsonl, fallback: down}\n"
    '  - {id: down, adapter: openai, base_url: "http://127.0.0.1:9/v1", model: m, max_retries: 0}\n'
)


def replay_project(write_file: Any, answers: list[dict[str, str]], config: str = REPLAY_CONFIG) -> None:
    write_file("evalkit.yaml", config)
    write_file("answers.jsonl", "".join(json.dumps(a) + "\n" for a in answers))


def suites(path: str) -> dict[str, ET.Element]:
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    found = root.findall("testsuite")
    return {suite.get("name", ""): suite for suite in found}


def counts(suite: ET.Element) -> tuple[int, int, int]:
    return int(suite.get("tests", "-1")), int(suite.get("failures", "-1")), int(suite.get("errors", "-1"))


def cases(suite: ET.Element) -> dict[str, ET.Element]:
    return {case.get("name", ""): case for case in suite.findall("testcase")}


def outcome(case: ET.Element) -> str:
    kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
    assert len(kinds) <= 1
    return kinds[0] if kinds else "passed"


def test_one_suite_per_set_one_case_per_prompt(cli: Any, write_file: Any) -> None:
    replay_project(
        write_file,
        [
            {"id": "days", "response": "Monday to Friday", "model": "m1"},
            {"id": "hours", "response": "9am to 5pm", "model": "m1"},
            {"id": "sunday", "response": "Yes", "model": "m1"},
            {"set": "junit.b", "id": "days", "response": "Monday", "model": "m1"},
        ],
        FALLING_BACK,
    )
    write_file(
        "sets/a.yaml",
        """
        id: junit.a
        name: Suite A
        prompts:
          - id: days
            prompt: Which days is the office open?
            assertions: [{contains: Monday}]
          - id: hours
            prompt: What are the opening hours?
            assertions: [{contains: Friday}]
          - id: sunday
            prompt: Is it open on Sundays?
            assertions: [{exact: "no"}]
          - id: unrecorded
            prompt: A prompt with no recorded answer.
            assertions: [{contains: x}]
        """,
    )
    write_file(
        "sets/b.yaml",
        """
        id: junit.b
        name: Suite B
        prompts:
          - id: days
            prompt: Name the first working day.
            assertions: [{exact: Monday}]
        """,
    )
    result = cli("run", "sets/a.yaml", "sets/b.yaml", "--junit", "reports/out.xml", "--format", "json")
    assert result.exit_code == 3, result.stderr  # an item errored
    reasons = {(doc["set"], i["id"]): i["reason"] for doc in json.loads(result.stdout) for i in doc["items"]}

    found = suites("reports/out.xml")
    assert list(found) == ["junit.a", "junit.b"]
    assert counts(found["junit.a"]) == (4, 2, 1)
    assert counts(found["junit.b"]) == (1, 0, 0)

    a_cases = cases(found["junit.a"])
    assert list(a_cases) == ["days", "hours", "sunday", "unrecorded"]
    assert {name: outcome(case) for name, case in a_cases.items()} == {
        "days": "passed",
        "hours": "failure",
        "sunday": "failure",
        "unrecorded": "error",
    }
    messages = {}
    for name in ("hours", "sunday"):
        failure = a_cases[name].find("failure")
        assert failure is not None
        messages[name] = failure.get("message") or ""
    assert messages == {name: reasons[("junit.a", name)] for name in ("hours", "sunday")}
    assert "Friday" in messages["hours"]
    assert "no" in messages["sunday"]
    error = a_cases["unrecorded"].find("error")
    assert error is not None
    assert "no recorded answer" in (error.get("message") or "")
    assert [outcome(c) for c in cases(found["junit.b"]).values()] == ["passed"]


def test_provider_failure_is_an_error_element(
    cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    def reply(request: Recorded) -> Reply:
        if "broken" in last_user_message(request):
            return Reply(status=500, json={"error": {"message": "internal"}})
        return openai_reply("fine")

    fake_llm.handler = reply
    write_file(
        "set.yaml",
        """
        id: junit.fake
        name: Fake server
        prompts:
          - id: ok
            prompt: Say fine.
            assertions: [{contains: fine}]
          - id: broken
            prompt: This one is broken.
            assertions: [{contains: fine}]
        """,
    )
    result = cli("run", "set.yaml", "--junit", "out.xml", "--format", "json")
    assert result.exit_code == 3, result.stderr
    suite = suites("out.xml")["junit.fake"]
    assert counts(suite) == (2, 0, 1)
    found = cases(suite)
    assert outcome(found["ok"]) == "passed"
    assert outcome(found["broken"]) == "error"
    error = found["broken"].find("error")
    assert error is not None
    assert "500" in (error.get("message") or "")


def test_control_characters_in_a_response_keep_the_xml_parseable(cli: Any, write_file: Any) -> None:
    replay_project(write_file, [{"id": "noisy", "response": "bad \x00 \x1b[31m red \x08\x0c end", "model": "m1"}])
    write_file(
        "set.yaml",
        """
        id: junit.noisy
        name: Noisy
        prompts:
          - id: noisy
            prompt: Say something.
            assertions: [{contains: zzz}]
        """,
    )
    result = cli("run", "set.yaml", "--junit", "out.xml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    raw = Path("out.xml").read_bytes()
    assert b"\x00" not in raw
    assert b"\x1b" not in raw
    suite = suites("out.xml")["junit.noisy"]
    assert counts(suite) == (1, 1, 0)
    failure = cases(suite)["noisy"].find("failure")
    assert failure is not None
    assert "zzz" in (failure.get("message") or "")
    assert "red" in (failure.text or "")
    assert "end" in (failure.text or "")


def test_passing_run_has_no_failures(cli: Any, write_file: Any) -> None:
    replay_project(write_file, [{"id": "one", "response": "yes", "model": "m1"}])
    write_file(
        "set.yaml",
        """
        id: junit.green
        name: Green
        prompts:
          - id: one
            prompt: Say yes.
            assertions: [{exact: "yes"}]
        """,
    )
    result = cli("run", "set.yaml", "--junit", "out.xml")
    assert result.exit_code == 0, result.stderr
    suite = suites("out.xml")["junit.green"]
    assert counts(suite) == (1, 0, 0)
    assert [outcome(c) for c in cases(suite).values()] == ["passed"]


def test_lone_surrogate_in_a_response_keeps_the_xml_writable(tmp_path: Path) -> None:
    # A replay file or an endpoint can carry "\ud800" in JSON; it must not crash the report.
    run = RunResult.create(
        (ItemResult("odd", False, 0.0, "contains 'x': not found", response="half \ud800 pair"),),
        run_id="20261130-000000-abcdef",
        set_id="junit.odd",
        set_fingerprint="0" * 16,
        provider="rec",
        model="replay",
        grader="deterministic",
        started_at="2026-11-30T00:00:00.000+00:00",
        finished_at="2026-11-30T00:00:00.000+00:00",
    )
    target = tmp_path / "odd.xml"
    target.write_text(junit_xml([run]), encoding="utf-8")
    assert counts(suites(str(target))["junit.odd"]) == (1, 1, 0)


def case_keys(path: str) -> list[tuple[str, str, str]]:
    root = ET.parse(path).getroot()
    return [
        (suite.get("name", ""), case.get("classname", ""), case.get("name", ""))
        for suite in root.findall("testsuite")
        for case in suite.findall("testcase")
    ]


TWO_PROMPTS = "id: j.two\nname: Two\nprompts:\n  - {id: a, prompt: A, assertions: [{contains: x}]}\n  - {id: b, prompt: B, assertions: [{contains: x}]}\n"


def test_repeated_samples_are_distinct_testcases(cli: Any, write_file: Any) -> None:
    # CI systems key results by (classname, name); GitLab keeps only the first of a name
    replay_project(write_file, [{"id": "a", "response": "x", "model": "m"}, {"id": "b", "response": "y", "model": "m"}])
    write_file("sets/two.yaml", TWO_PROMPTS)
    result = cli("run", "sets/two.yaml", "--repeat", "2", "--junit", "out.xml")
    assert result.exit_code == 0, result.stderr
    assert case_keys("out.xml") == [
        ("j.two", "j.two", "a [repeat 1]"),
        ("j.two", "j.two", "a [repeat 2]"),
        ("j.two", "j.two", "b [repeat 1]"),
        ("j.two", "j.two", "b [repeat 2]"),
    ]


def test_a_set_on_several_providers_names_each_suite_after_its_provider(cli: Any, write_file: Any) -> None:
    write_file(
        "evalkit.yaml",
        "providers:\n  - {id: ra, adapter: replay, path: a.jsonl}\n  - {id: rb, adapter: replay, path: b.jsonl}\n",
    )
    write_file("a.jsonl", '{"id": "a", "response": "x", "model": "m"}\n{"id": "b", "response": "x", "model": "m"}\n')
    write_file("b.jsonl", '{"id": "a", "response": "x", "model": "m"}\n{"id": "b", "response": "no", "model": "m"}\n')
    write_file("sets/two.yaml", TWO_PROMPTS)
    result = cli("run", "sets/two.yaml", "--provider", "ra", "--provider", "rb", "--junit", "out.xml")
    assert result.exit_code == 0, result.stderr
    assert case_keys("out.xml") == [
        ("j.two[ra]", "j.two[ra]", "a"),
        ("j.two[ra]", "j.two[ra]", "b"),
        ("j.two[rb]", "j.two[rb]", "a"),
        ("j.two[rb]", "j.two[rb]", "b"),
    ]
    assert counts(suites("out.xml")["j.two[rb]"]) == (2, 1, 0)
