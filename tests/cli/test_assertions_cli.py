"""The assertion vocabulary through the CLI (README "Assertions", README "Commands", README "JSON output").

Load-time errors are exit 2 with file:line:col from both ``evalkit validate`` and ``evalkit run``,
before any call (the loopback server counts none) and before anything is stored (no database
file). A run's JSON carries each assertion's type, verdict, score and weight, and its aggregates
agree with its items; ``latency_ms`` is checked against a real server's injected delay (and a
cached answer keeps it), ``cost`` against a priced instance and the server's token counts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakeserver import FakeServer, Recorded, Reply, last_user_message, openai_reply

CHECKS = "def seven_tenths(response, context):\n    return 0.7\n\ndef nope(response, context):\n    return False\n"
BROKEN = "def check(response, context):\n    return True\n\nraise RuntimeError('checks are broken')\n"


def set_text(*assertion_lines: str, extra: str = "") -> str:
    """A one-prompt set whose assertions start on line 7."""
    lines = ["id: cli.vocabulary", "name: Vocabulary", "prompts:", "  - id: only", "    prompt: Say yes.", extra]
    lines.append("    assertions:")
    lines += [f"      - {line}" for line in assertion_lines]
    return "\n".join(line for line in lines if line) + "\n"


def threshold_set(threshold: str) -> str:
    return set_text("contains: echo", extra=f"    threshold: {threshold}")


# (set file text, the one error line both commands give)
LOAD_ERRORS = [
    pytest.param(
        set_text("python: missing.py:check"),
        "set.yaml:7:17: prompts[0].assertions[0].python: no file 'missing.py' (relative to the set file); "
        "create it or fix the path",
        id="python-file-missing",
    ),
    pytest.param(
        set_text("python: checks.py:absent"),
        "set.yaml:7:17: prompts[0].assertions[0].python: 'checks.py' has no function 'absent'",
        id="python-function-missing",
    ),
    pytest.param(
        set_text("python: broken.py:check"),
        "set.yaml:7:17: prompts[0].assertions[0].python: importing 'broken.py' failed: RuntimeError: checks are broken",
        id="python-file-raises-on-import",
    ),
    pytest.param(
        set_text("{type: not_python, value: missing.py:check}"),
        "set.yaml:7:35: prompts[0].assertions[0].value: python: no file 'missing.py' (relative to the set file); "
        "create it or fix the path",
        id="not-python-long-form-file-missing",
    ),
    pytest.param(
        set_text("levenshtein: {value: Yes}"),
        "set.yaml:7:22: prompts[0].assertions[0].levenshtein: missing required key 'max'",
        id="levenshtein-without-max",
    ),
    pytest.param(
        set_text("{type: levenshtein, value: {value: Yes}}"),
        "set.yaml:7:36: prompts[0].assertions[0].value: missing required key 'max'",
        id="levenshtein-long-form-without-max",
    ),
    pytest.param(
        set_text("word_count: {min: 5, max: 2}"),
        "set.yaml:7:21: prompts[0].assertions[0].word_count: min 5 is above max 2; no answer could hold",
        id="word-count-min-above-max",
    ),
    pytest.param(
        set_text("{type: contains, value: echo, weight: -1}"),
        "set.yaml:7:47: prompts[0].assertions[0].weight: must be at least 0, got -1",
        id="negative-weight",
    ),
    pytest.param(
        threshold_set("1.5"),
        "set.yaml:6:16: prompts[0].threshold: must be a finite number in 0..1, got a number (1.5)",
        id="threshold-above-one",
    ),
    pytest.param(
        threshold_set("-0.1"),
        "set.yaml:6:16: prompts[0].threshold: must be a finite number in 0..1, got a number (-0.1)",
        id="threshold-below-zero",
    ),
    pytest.param(
        threshold_set(".nan"),
        "set.yaml:6:16: prompts[0].threshold: must be a finite number, got nan",
        id="threshold-nan",
    ),
]

TYPES = (
    "contains, contains_all, contains_any, contains_json, context_contains, cost, equals_json, exact, factuality, icontains, icontains_all, "
    "icontains_any, json_schema, latency_ms, levenshtein, python, regex, rubric, similar, starts_with, tool_call_f1, tool_called, tool_sequence, valid_tool_calls, word_count; "
    "each also as not_<type>"
)
UNKNOWN_TYPES = [
    pytest.param(
        "containz: echo",
        f"set.yaml:7:9: prompts[0].assertions[0]: unknown assertion type 'containz' (expected one of: {TYPES}); "
        "did you mean 'contains'?",
        id="containz",
    ),
    pytest.param(
        "not_containz: echo",
        f"set.yaml:7:9: prompts[0].assertions[0]: unknown assertion type 'not_containz' (expected one of: {TYPES}); "
        "did you mean 'not_contains'?",
        id="not-containz",
    ),
    pytest.param(
        "{type: containz, value: echo}",
        f"set.yaml:7:16: prompts[0].assertions[0].type: 'containz' is not one of: {TYPES}; did you mean 'contains'?",
        id="long-form-containz",
    ),
    pytest.param(
        "{type: not_containz, value: echo}",
        f"set.yaml:7:16: prompts[0].assertions[0].type: 'not_containz' is not one of: {TYPES}; "
        "did you mean 'not_contains'?",
        id="long-form-not-containz",
    ),
    pytest.param(
        "icontains_al: [echo]",
        f"set.yaml:7:9: prompts[0].assertions[0]: unknown assertion type 'icontains_al' (expected one of: {TYPES}); "
        "did you mean 'icontains_all'?",
        id="icontains-al",
    ),
    pytest.param(
        "not_startswith: echo",
        f"set.yaml:7:9: prompts[0].assertions[0]: unknown assertion type 'not_startswith' (expected one of: {TYPES}); "
        "did you mean 'not_starts_with'?",
        id="not-startswith",
    ),
    pytest.param(
        "not_regx: echo",
        f"set.yaml:7:9: prompts[0].assertions[0]: unknown assertion type 'not_regx' (expected one of: {TYPES}); "
        "did you mean 'not_regex'?",
        id="not-regx",
    ),
]


@pytest.fixture
def folder(isolated: Path) -> Path:
    (isolated / "checks.py").write_text(CHECKS, encoding="utf-8")
    (isolated / "broken.py").write_text(BROKEN, encoding="utf-8")
    return isolated


def refused_before_anything(cli: Any, fake_llm: FakeServer, db_file: Path, line: str) -> None:
    """``validate`` and ``run`` both refuse the set with exactly ``line``, calling and storing nothing."""
    validated = cli("validate", "set.yaml")
    assert validated.exit_code == 2, validated.stderr
    assert validated.stderr.splitlines() == [line, "1 error in 1 file"]
    ran = cli("run", "set.yaml", "--format", "json")
    assert ran.exit_code == 2, ran.stderr
    assert ran.stdout == ""
    assert ran.stderr.splitlines() == [f"Error: {line}"]
    assert fake_llm.calls == 0
    assert not db_file.exists()


@pytest.mark.parametrize(("text", "line"), [*LOAD_ERRORS, *UNKNOWN_TYPES])
def test_a_load_error_is_exit_2_with_its_place_before_any_call(
    cli: Any, fake_config: Path, fake_llm: FakeServer, db_file: Path, folder: Path, text: str, line: str
) -> None:
    if not text.startswith("id:"):  # an unknown type: the assertion line alone
        text = set_text(text)
    (folder / "set.yaml").write_text(text, encoding="utf-8")
    refused_before_anything(cli, fake_llm, db_file, line)


@pytest.mark.parametrize("typo", ["notcontains", "not-contains"])
def test_a_negation_spelt_without_its_underscore_is_never_offered_the_positive(
    cli: Any, isolated: Path, typo: str
) -> None:
    (isolated / "set.yaml").write_text(set_text(f"{typo}: echo"), encoding="utf-8")
    result = cli("validate", "set.yaml")
    assert result.exit_code == 2
    assert "did you mean 'contains'?" not in result.stderr
    assert result.stderr.splitlines()[0].endswith("did you mean 'not_contains'?")


@pytest.mark.parametrize(
    ("typo", "meant"),
    [("contans", "contains"), ("regx", "regex"), ("json_shema", "json_schema"), ("pyhton", "python")],
)
def test_a_misspelt_positive_is_offered_the_positive(cli: Any, isolated: Path, typo: str, meant: str) -> None:
    (isolated / "set.yaml").write_text(set_text(f"{typo}: echo"), encoding="utf-8")
    result = cli("validate", "set.yaml")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0].endswith(f"did you mean '{meant}'?")


# --- cost on an unpriced instance: refused when the run is planned ---------------------------------

COST_SET = set_text("contains: echo", "cost: 0.01")


def test_cost_on_an_unpriced_instance_is_refused_at_plan_time(
    cli: Any, fake_config: Path, fake_llm: FakeServer, db_file: Path, isolated: Path
) -> None:
    (isolated / "set.yaml").write_text(COST_SET, encoding="utf-8")
    ran = cli("run", "set.yaml")
    assert ran.exit_code == 2
    assert ran.stderr.splitlines() == [
        "Error: set.yaml:8:9: a cost assertion needs a priced instance, and provider 'fake' has no cost: in "
        "evalkit.yaml; add cost: {input_per_mtok: ..., output_per_mtok: ...} to it or remove the assertion"
    ]
    assert fake_llm.calls == 0
    assert not db_file.exists()


def test_not_cost_needs_a_priced_fallback_too(
    cli: Any, fake_llm: FakeServer, db_file: Path, isolated: Path, write_file: Any
) -> None:
    write_file(
        "evalkit.yaml",
        f"""
        default_provider: priced
        providers:
          - id: priced
            adapter: openai
            base_url: {fake_llm.url}/v1
            model: a
            cost: {{input_per_mtok: 1, output_per_mtok: 2}}
            fallback: spare
          - id: spare
            adapter: openai
            base_url: {fake_llm.url}/v1
            model: b
        """,
    )
    (isolated / "set.yaml").write_text(set_text("not_cost: 0.01"), encoding="utf-8")
    ran = cli("run", "set.yaml")
    assert ran.exit_code == 2
    assert ran.stderr.splitlines()[0].startswith(
        "Error: set.yaml:7:9: a cost assertion needs a priced instance, and provider 'spare' has no cost:"
    )
    assert fake_llm.calls == 0
    assert not db_file.exists()


# --- the JSON of a run: assertions with type, passed, score, weight; aggregates -----------------

REPLAY_SET = """
id: cli.weights
name: Weights and thresholds
prompts:
  - id: weighted
    prompt: Which days?
    assertions:
      - {type: contains, value: Monday, weight: 3}
      - {type: contains, value: Sunday, weight: 1}
      - {type: not_contains, value: closed, weight: 0}
  - id: reaches
    prompt: Which days?
    threshold: 0.75
    assertions:
      - {type: contains, value: Monday, weight: 3}
      - {type: contains, value: Sunday}
  - id: below
    prompt: Which days?
    threshold: 0.8
    assertions:
      - {type: contains, value: Monday, weight: 3}
      - {type: contains, value: Sunday}
  - id: scored
    prompt: Score it.
    assertions:
      - python: checks.py:seven_tenths
      - {type: icontains_all, value: [MONDAY, friday], weight: 2}
  - id: everything
    prompt: JSON please.
    assertions:
      - equals_json: {days: [Mon, Fri], open: true}
      - not_json_schema: {type: array}
      - word_count: {max: 10}
      - {type: python, value: "checks.py:nope", weight: 0}
"""
ANSWERS = [
    {"id": "weighted", "response": "Monday to Friday, closed at weekends", "model": "m-1"},
    {"id": "reaches", "response": "Monday to Friday", "model": "m-1"},
    {"id": "below", "response": "Monday to Friday", "model": "m-1"},
    {"id": "scored", "response": "monday to FRIDAY", "model": "m-1"},
    {"id": "everything", "response": '{"open": true, "days": ["Mon", "Fri"]}', "model": "m-1"},
]


def replay_run(cli: Any, write_file: Any) -> dict[str, Any]:
    write_file("answers.jsonl", "".join(json.dumps(a) + "\n" for a in ANSWERS))
    write_file(
        "evalkit.yaml", "default_provider: rec\nproviders:\n  - {id: rec, adapter: replay, path: answers.jsonl}\n"
    )
    write_file("sets/checks.py", CHECKS)
    write_file("sets/weights.yaml", REPLAY_SET)
    result = cli("run", "sets/weights.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def entry(kind: str, passed: bool, score: float, weight: float) -> dict[str, Any]:
    return {"type": kind, "passed": passed, "score": score, "weight": weight}


def test_the_json_assertions_carry_type_passed_score_and_weight(cli: Any, write_file: Any) -> None:
    items = {item["id"]: item for item in replay_run(cli, write_file)["items"]}
    assert items["weighted"]["assertions"] == [
        entry("contains", True, 1.0, 3.0),
        entry("contains", False, 0.0, 1.0),
        entry("not_contains", False, 0.0, 0.0),  # weight 0: recorded, not counted
    ]
    assert items["scored"]["assertions"] == [entry("python", True, 0.7, 1.0), entry("icontains_all", True, 1.0, 2.0)]
    assert items["everything"]["assertions"] == [
        entry("equals_json", True, 1.0, 1.0),
        entry("not_json_schema", True, 1.0, 1.0),
        entry("word_count", True, 1.0, 1.0),
        entry("python", False, 0.0, 0.0),
    ]


def test_the_json_scores_are_weighted_and_thresholds_decide(cli: Any, write_file: Any) -> None:
    items = {item["id"]: item for item in replay_run(cli, write_file)["items"]}
    verdicts = {key: (item["passed"], item["score"]) for key, item in items.items()}
    assert verdicts == {
        "weighted": (False, 0.75),
        "reaches": (True, 0.75),
        "below": (False, 0.75),
        "scored": (True, pytest.approx((0.7 + 2) / 3)),
        "everything": (True, 1.0),
    }
    assert items["weighted"]["reason"] == "1 of 2 assertions failed: contains 'Sunday': not found"
    assert items["reaches"]["reason"] == (
        "score 0.75 reaches the threshold 0.75; 1 of 2 assertions failed: contains 'Sunday': not found"
    )
    assert items["below"]["reason"] == (
        "score 0.75 is below the threshold 0.8; 1 of 2 assertions failed: contains 'Sunday': not found"
    )


def test_show_gives_the_reason_of_run_in_its_words_and_counts(cli: Any, write_file: Any) -> None:
    """At privacy metadata the store keeps no text: each failed assertion is named by its type,
    and the count is the one run gave (weight 0 is not counted)."""
    document = replay_run(cli, write_file)
    shown = json.loads(cli("show", document["run_id"], "--format", "json").stdout)
    reasons = {item["id"]: item["reason"] for item in shown["items"]}
    assert reasons == {
        "weighted": "1 of 2 assertions failed: contains",
        "reaches": "score 0.75 reaches the threshold 0.75; 1 of 2 assertions failed: contains",
        "below": "score 0.75 is below the threshold 0.8; 1 of 2 assertions failed: contains",
        "scored": "all 2 assertions hold",
        "everything": "all 3 assertions hold",
    }
    printed = {item["id"]: item["reason"] for item in document["items"]}
    assert printed["reaches"].removesuffix(" 'Sunday': not found") == reasons["reaches"]
    assert printed["scored"] == reasons["scored"]


def test_the_json_aggregates_agree_with_the_items(cli: Any, write_file: Any) -> None:
    document = replay_run(cli, write_file)
    items = document["items"]
    assert document["prompt_count"] == len(items) == 5
    assert document["passed_count"] == sum(item["passed"] for item in items) == 3
    assert document["error_count"] == 0
    assert document["pass_rate"] == pytest.approx(3 / 5)
    assert document["mean_score"] == pytest.approx(sum(item["score"] for item in items) / len(items))
    assert document["mean_score"] == pytest.approx((0.75 + 0.75 + 0.75 + 2.7 / 3 + 1.0) / 5)


def test_show_prints_the_stored_assertions_as_run_printed_them(cli: Any, write_file: Any) -> None:
    document = replay_run(cli, write_file)
    shown = cli("show", document["run_id"], "--format", "json")
    assert shown.exit_code == 0, shown.stderr
    stored = {item["id"]: item["assertions"] for item in json.loads(shown.stdout)["items"]}
    assert stored == {item["id"]: item["assertions"] for item in document["items"]}


def test_latency_ms_on_a_replayed_answer_has_no_verdict(cli: Any, write_file: Any) -> None:
    write_file("answers.jsonl", json.dumps({"id": "only", "response": "yes", "model": "m"}) + "\n")
    write_file(
        "evalkit.yaml", "default_provider: rec\nproviders:\n  - {id: rec, adapter: replay, path: answers.jsonl}\n"
    )
    write_file("set.yaml", set_text("latency_ms: 1000", "not_latency_ms: 1000"))
    result = cli("run", "set.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    item = json.loads(result.stdout)["items"][0]
    assert item["assertions"] == [entry("latency_ms", False, 0.0, 1.0), entry("not_latency_ms", False, 0.0, 1.0)]
    assert item["reason"] == (
        "2 of 2 assertions failed: latency_ms: the answer has no recorded latency; "
        "not_latency_ms: latency_ms: the answer has no recorded latency"
    )


# --- latency_ms and cost against a real loopback server ---------------------------------------------

DELAY_S = 0.3
LATENCY_SET = """
id: cli.latency
name: Latency
prompts:
  - id: slow
    prompt: Take your time.
    assertions:
      - contains: echo
      - latency_ms: 100
  - id: patient
    prompt: No hurry.
    assertions:
      - not_latency_ms: 100
      - latency_ms: 600000
"""


def test_latency_ms_measures_the_call_and_a_cached_answer_keeps_its_latency(
    cli: Any, fake_config: Path, fake_llm: FakeServer, write_file: Any
) -> None:
    def delayed(request: Recorded) -> Reply:
        reply = openai_reply(f"echo: {last_user_message(request)}")
        reply.delay_s = DELAY_S
        return reply

    fake_llm.handler = delayed
    write_file("sets/latency.yaml", LATENCY_SET)
    first = cli("run", "sets/latency.yaml", "--format", "json")
    assert first.exit_code == 0, first.stderr
    fresh = {item["id"]: item for item in json.loads(first.stdout)["items"]}
    assert fake_llm.calls == 2
    for item in fresh.values():
        assert item["latency_ms"] >= DELAY_S * 1000
        assert "cached" not in item
    assert fresh["slow"]["passed"] is False
    assert fresh["slow"]["reason"].startswith("1 of 2 assertions failed: latency_ms: took ")
    assert fresh["slow"]["reason"].endswith(" ms, more than 100 ms")
    assert fresh["patient"]["passed"] is True

    fake_llm.handler = None  # the answer would now be instant: only the cache can give the old latency
    second = cli("run", "sets/latency.yaml", "--format", "json")
    assert second.exit_code == 0, second.stderr
    cached = {item["id"]: item for item in json.loads(second.stdout)["items"]}
    assert fake_llm.calls == 2
    for key, item in cached.items():
        assert item["cached"] is True
        assert item["latency_ms"] == fresh[key]["latency_ms"]
        assert (item["passed"], item["assertions"]) == (fresh[key]["passed"], fresh[key]["assertions"])


PRICED_SET = """
id: cli.cost
name: Cost
prompts:
  - id: cheap-enough
    prompt: Be brief.
    assertions:
      - cost: 0.25
  - id: too-dear
    prompt: Be brief.
    assertions:
      - cost: 0.15
  - id: not-cheap
    prompt: Be brief.
    assertions:
      - not_cost: 0.15
"""


def test_cost_prices_the_servers_token_counts(cli: Any, fake_llm: FakeServer, write_file: Any) -> None:
    write_file(
        "evalkit.yaml",
        f"""
        default_provider: priced
        providers:
          - id: priced
            adapter: openai
            base_url: {fake_llm.url}/v1
            model: alias
            max_retries: 0
            cost: {{input_per_mtok: 1000, output_per_mtok: 2000}}
        """,
    )
    # 100 tokens in at $1000/Mtok and 50 out at $2000/Mtok: $0.20 a call
    fake_llm.handler = lambda request: openai_reply("fine", prompt_tokens=100, completion_tokens=50)
    write_file("sets/cost.yaml", PRICED_SET)
    result = cli("run", "sets/cost.yaml", "--format", "json")
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    items = {item["id"]: item for item in document["items"]}
    assert (items["cheap-enough"]["passed"], items["cheap-enough"]["reason"]) == (True, "assertion holds")
    assert (items["too-dear"]["passed"], items["too-dear"]["reason"]) == (
        False,
        "assertion failed: cost: $0.200000, more than $0.15",
    )
    assert (items["not-cheap"]["passed"], items["not-cheap"]["reason"]) == (True, "assertion holds")
    assert document["cost"] == pytest.approx(0.6)
    assert fake_llm.calls == 3
