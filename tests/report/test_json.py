"""``evalkit run --format json`` (README "JSON output"): the envelope, full-precision rates, stdout carrying
only JSON, an array for several sets, ``--output FILE``, and JSON whatever the exit code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import pytest

REPLAY_CONFIG = "providers: [{id: rec, adapter: replay, path: answers.jsonl}]\n"

TOP_KEYS = {
    "run_id",
    "set",
    "kind",
    "grader",
    "generator",
    "prompt_count",
    "passed_count",
    "error_count",
    "pass_rate",
    "mean_score",
    "items",
    "comparison",
    "gate",
}
ITEM_KEYS = {"id", "passed", "score", "reason", "latency_ms", "error", "assertions"}
COMPARISON_KEYS = {"state", "regressed", "baseline_run_id", "pass_rate_delta", "mean_score_delta", "reason"}

FAQ = """
id: json.faq
name: FAQ
prompts:
  - id: days
    prompt: Which days is the office open?
    assertions: [{contains: Monday}, {regex: '/friday/i'}]
  - id: contact
    prompt: Return the contact as JSON.
    assertions:
      - json_schema: {type: object, required: [email], properties: {email: {type: string}}}
  - id: sunday
    prompt: Is the office open on Sundays?
    assertions: [{exact: "no"}, {contains: "n"}, {regex: '^no'}]
"""

# days passes, contact passes, sunday holds 2 of 3 assertions.
FAQ_ANSWERS = [
    {"id": "days", "response": "Monday to Friday", "model": "m1"},
    {"id": "contact", "response": '{"email": "office@example.com"}', "model": "m1"},
    {"id": "sunday", "response": "no.", "model": "m1"},
]


def answers_text(answers: list[dict[str, str]]) -> str:
    return "".join(json.dumps(a) + "\n" for a in answers)


def replay_project(write_file: Any, answers: list[dict[str, str]], config: str = REPLAY_CONFIG) -> None:
    write_file("evalkit.yaml", config)
    write_file("answers.jsonl", answers_text(answers))


def run_json(cli: Any, *args: str) -> tuple[Any, Any]:
    result = cli("run", *args, "--format", "json")
    assert result.exception is None, result.stderr
    return result, json.loads(result.stdout)


def test_envelope_has_the_design_keys(cli: Any, write_file: Any) -> None:
    replay_project(write_file, FAQ_ANSWERS)
    write_file("sets/faq.yaml", FAQ)
    result, doc = run_json(cli, "sets/faq.yaml")
    assert result.exit_code == 0, result.stderr
    assert isinstance(doc, dict)
    assert doc.keys() >= TOP_KEYS
    assert doc["set"] == "json.faq"
    assert doc["kind"] == "prompts"
    assert doc["grader"] == "deterministic"
    assert isinstance(doc["run_id"], str)
    assert doc["run_id"]
    assert doc["generator"] == {"provider": "rec", "model": "replay", "reported_model": "m1"}
    assert (doc["prompt_count"], doc["passed_count"], doc["error_count"]) == (3, 2, 0)

    assert [item["id"] for item in doc["items"]] == ["days", "contact", "sunday"]
    for item in doc["items"]:
        assert item.keys() >= ITEM_KEYS
        assert item["error"] is None
        assert isinstance(item["reason"], str)
        for assertion in item["assertions"]:
            assert {"type", "passed"} <= assertion.keys()
    days, contact, sunday = doc["items"]
    assert (days["passed"], days["score"]) == (True, 1.0)
    assert [(a["type"], a["passed"]) for a in days["assertions"]] == [("contains", True), ("regex", True)]
    assert [(a["type"], a["passed"]) for a in contact["assertions"]] == [("json_schema", True)]
    assert (sunday["passed"], sunday["score"]) == (False, 2 / 3)
    assert [(a["type"], a["passed"]) for a in sunday["assertions"]] == [
        ("exact", False),
        ("contains", True),
        ("regex", True),
    ]

    assert doc["comparison"].keys() >= COMPARISON_KEYS
    assert doc["comparison"]["state"] == "baseline"
    assert doc["comparison"]["regressed"] is False
    assert doc["gate"] == {"fail_on_regression": False, "passed": True, "failures": []}


def test_rates_are_full_precision(cli: Any, write_file: Any) -> None:
    replay_project(write_file, FAQ_ANSWERS)
    write_file("sets/faq.yaml", FAQ)
    result, doc = run_json(cli, "sets/faq.yaml")
    assert doc["pass_rate"] == 0.6666666666666666
    assert doc["mean_score"] == (1.0 + 1.0 + 2 / 3) / 3
    assert doc["items"][2]["score"] == 0.6666666666666666
    assert "0.6666666666666666" in result.stdout
    assert '"pass_rate": 0.6667' not in result.stdout


def test_stdout_carries_only_json(cli: Any, write_file: Any) -> None:
    replay_project(write_file, FAQ_ANSWERS)
    write_file("sets/faq.yaml", FAQ)
    result, _ = run_json(cli, "sets/faq.yaml")
    text = result.stdout.strip()
    assert text.startswith("{")
    assert text.endswith("}")
    assert "Running" not in result.stdout
    assert "json.faq" in result.stderr  # progress goes to stderr


def test_several_sets_print_one_array(cli: Any, write_file: Any) -> None:
    replay_project(write_file, [*FAQ_ANSWERS, {"id": "extra", "response": "ok", "model": "m1"}])
    write_file("sets/faq.yaml", FAQ)
    write_file(
        "sets/extra.yaml",
        """
        id: json.extra
        name: Extra
        prompts:
          - id: extra
            prompt: Say ok.
            assertions: [{exact: ok}]
        """,
    )
    result, doc = run_json(cli, "sets/extra.yaml", "sets/faq.yaml")
    assert result.exit_code == 0, result.stderr
    assert isinstance(doc, list)
    assert [d["set"] for d in doc] == ["json.extra", "json.faq"]
    for envelope in doc:
        assert envelope.keys() >= TOP_KEYS
    assert doc[0]["pass_rate"] == 1.0
    assert len({d["run_id"] for d in doc}) == 2


def test_output_file_holds_the_same_json(cli: Any, write_file: Any) -> None:
    replay_project(write_file, FAQ_ANSWERS)
    write_file("sets/faq.yaml", FAQ)
    result, doc = run_json(cli, "sets/faq.yaml", "--output", "reports/run.json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(Path("reports/run.json").read_text(encoding="utf-8")) == doc


def test_output_file_is_json_with_the_table_format(cli: Any, write_file: Any) -> None:
    replay_project(write_file, FAQ_ANSWERS)
    write_file("sets/faq.yaml", FAQ)
    result = cli("run", "sets/faq.yaml", "--format", "table", "--output", "run.json")
    assert result.exit_code == 0, result.stderr
    written = json.loads(Path("run.json").read_text(encoding="utf-8"))
    assert written["set"] == "json.faq"
    assert written["pass_rate"] == 0.6666666666666666
    with pytest.raises(json.JSONDecodeError):
        json.loads(result.stdout)


# a replay with a fallback that calls a model: a prompt with no recorded answer is asked of it (a
# closed loopback port here), so it errors as an item; without a fallback it is refused at exit 2
FALLING_BACK = (
    "default_provider: rec\nproviders:\n  - {id: rec, adapter: replay, path: answers.jsonl, fallback: down}\n"
    '  - {id: down, adapter: openai, base_url: "http://127.0.0.1:9/v1", model: m, max_retries: 0}\n'
)


def test_json_is_printed_when_items_errored(cli: Any, write_file: Any) -> None:
    replay_project(write_file, FAQ_ANSWERS[:2], FALLING_BACK)  # no answer recorded for "sunday"
    write_file("sets/faq.yaml", FAQ)
    result, doc = run_json(cli, "sets/faq.yaml")
    assert result.exit_code == 3
    assert (doc["prompt_count"], doc["passed_count"], doc["error_count"]) == (3, 2, 1)
    sunday = doc["items"][2]
    assert sunday["passed"] is False
    assert "sunday" in sunday["error"]
    assert doc["comparison"]["state"] == "not_compared"
    assert doc["comparison"]["reason"]


def test_unverified_generator_is_null_and_fails_the_gate(cli: Any, write_file: Any) -> None:
    replay_project(write_file, [{k: v for k, v in a.items() if k != "model"} for a in FAQ_ANSWERS])
    write_file("sets/faq.yaml", FAQ)
    result, doc = run_json(cli, "sets/faq.yaml", "--fail-on-regression")
    assert result.exit_code == 1
    assert doc["generator"] is None
    assert doc["comparison"]["state"] == "not_compared"
    assert doc["gate"] == {"fail_on_regression": True, "passed": False, "failures": [ANY]}
    assert doc["gate"]["failures"][0].startswith("not compared with a baseline (no single verified serving generator")
    assert doc["pass_rate"] == 0.6666666666666666  # the grades are kept


def test_second_run_is_compared_with_the_first(cli: Any, write_file: Any) -> None:
    replay_project(write_file, FAQ_ANSWERS)
    write_file("sets/faq.yaml", FAQ)
    _, first = run_json(cli, "sets/faq.yaml")
    result, second = run_json(cli, "sets/faq.yaml", "--fail-on-regression")
    assert result.exit_code == 0, result.stderr
    comparison = second["comparison"]
    assert comparison["state"] == "compared"
    assert comparison["baseline_run_id"] == first["run_id"]
    assert comparison["regressed"] is False
    assert (comparison["pass_rate_delta"], comparison["mean_score_delta"]) == (0.0, 0.0)
    assert second["gate"] == {"fail_on_regression": True, "passed": True, "failures": []}


def test_regression_is_reported_and_gated(cli: Any, write_file: Any) -> None:
    replay_project(write_file, FAQ_ANSWERS)
    write_file("sets/faq.yaml", FAQ)
    _, first = run_json(cli, "sets/faq.yaml")
    worse = [{**a, "response": "I do not know."} for a in FAQ_ANSWERS]
    write_file("answers.jsonl", answers_text(worse))
    result, doc = run_json(cli, "sets/faq.yaml", "--no-cache", "--fail-on-regression")
    assert result.exit_code == 1
    assert doc["pass_rate"] == 0.0
    comparison = doc["comparison"]
    assert comparison["state"] == "compared"
    assert comparison["regressed"] is True
    assert comparison["baseline_run_id"] == first["run_id"]
    assert comparison["pass_rate_delta"] == pytest.approx(-2 / 3)
    assert doc["gate"]["failures"] == [f"regression against the baseline (run {first['run_id']})"]
    assert doc["gate"]["passed"] is False


def test_lone_surrogate_in_a_response_still_prints_json(cli: Any, write_file: Any) -> None:
    replay_project(
        write_file,
        [{"id": "odd", "response": "half \ud800 pair", "model": "m1"}],
        config="cache: false\n" + REPLAY_CONFIG,
    )
    write_file(
        "set.yaml",
        """
        id: json.odd
        name: Odd
        prompts:
          - id: odd
            prompt: Say something odd.
            assertions: [{contains: pair}]
        """,
    )
    result, doc = run_json(cli, "set.yaml")
    assert result.exit_code == 0
    assert doc["items"][0]["passed"] is True


def test_documents_put_each_item_on_one_line_and_read_back_whole() -> None:
    from evalkit.report.jsonout import documents

    tricky = 'evalkit-items-\u0000 "quoted"\nline two </script>'
    envelope = {"run_id": "r", "model": tricky, "items": [{"id": "a", "reason": tricky}, {"id": "b"}], "gate": {}}
    empty = {"run_id": "e", "items": []}
    one = documents([envelope])
    assert json.loads(one) == envelope
    lines = one.splitlines()
    assert lines[lines.index('  "items": [') + 1].startswith('    {"id": "a"')
    several = documents([envelope, empty, envelope])
    assert json.loads(several) == [envelope, empty, envelope]
