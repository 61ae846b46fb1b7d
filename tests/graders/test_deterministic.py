"""The deterministic grader: the four assertions of README "Assertions" at their edges, the grade, the regex
time limit, and regex / JSON Schema values that are load errors.

Sets are written as JSON (which is YAML) so that control characters reach the loader exactly,
then loaded with ``evalkit.load_set`` and graded with ``grade_assertions``: the test covers the
path from the file to the verdict.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from evalkit import load_set
from evalkit.assertions import patterns
from evalkit.errors import SetError
from evalkit.graders.deterministic import grade_assertions
from evalkit.records import Grade, Prompt, PromptSet
from tests.fakeserver import FakeServer

CATASTROPHIC = "(a|aa)+$"
NEAR_MISS = "a" * 40 + "!"


def write_set(path: Path, assertions: list[dict[str, Any]] | None, reference: str | None = None) -> Path:
    prompt: dict[str, Any] = {"id": "only", "prompt": "Answer the question."}
    if assertions is not None:
        prompt["assertions"] = assertions
    if reference is not None:
        prompt["reference"] = reference
    document = {"id": "graders.edge", "name": "Edge cases", "prompts": [prompt]}
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def load_prompt(assertions: list[dict[str, Any]] | None, reference: str | None = None) -> Prompt:
    prompt_set = load_set(write_set(Path("set.yaml"), assertions, reference))
    assert isinstance(prompt_set, PromptSet)
    return prompt_set.prompts[0]


def grade(assertions: list[dict[str, Any]], response: str) -> Grade:
    return grade_assertions(load_prompt(assertions), response)


def holds(kind: str, value: Any, response: str) -> bool:
    result = grade([{kind: value}], response)
    assert len(result.assertions) == 1
    assert result.assertions[0].type == kind
    assert result.passed == result.assertions[0].passed
    return result.passed


# --- exact ---------------------------------------------------------------------------------

STRIPPED = " \t\n\r\0\x0b"


@pytest.mark.parametrize(
    ("expected", "response", "passed"),
    [
        pytest.param("no", "no", True, id="equal"),
        pytest.param("no", STRIPPED + "no" + STRIPPED, True, id="response-stripped-of-each-char"),
        pytest.param(STRIPPED + "no" + STRIPPED, "no", True, id="expected-stripped-of-each-char"),
        pytest.param("\n no\t", "\r\nno \x0b", True, id="both-stripped"),
        pytest.param("a  b", " a  b\n", True, id="inner-whitespace-kept"),
        pytest.param("", " \n\t", True, id="empty-expected-vs-whitespace"),
        pytest.param("no", "n o", False, id="inner-space-differs"),
        pytest.param("no", "\u00a0no", False, id="nbsp-not-stripped-leading"),
        pytest.param("no", "no\u00a0", False, id="nbsp-not-stripped-trailing"),
        pytest.param("no", "no\x0c", False, id="form-feed-not-stripped"),
        pytest.param("no", "\u2028no", False, id="line-separator-not-stripped"),
        pytest.param("no", "no\x85", False, id="next-line-not-stripped"),
        pytest.param("no", "\u3000no", False, id="ideographic-space-not-stripped"),
        pytest.param("no", "\x1cno", False, id="file-separator-not-stripped"),
        pytest.param("no\u00a0", "no", False, id="nbsp-in-expected-not-stripped"),
        pytest.param("no", "No", False, id="case-sensitive"),
        pytest.param("No", "no", False, id="case-sensitive-expected"),
        pytest.param("no", "no.", False, id="trailing-punctuation"),
        pytest.param("no", "nono", False, id="not-a-substring-match"),
    ],
)
def test_exact(expected: str, response: str, passed: bool) -> None:
    assert holds("exact", expected, response) is passed


def test_exact_failure_reason_shows_both_values() -> None:
    result = grade([{"exact": "no"}], "Yes\n")
    assert not result.passed
    assert "'no'" in result.reason
    assert "'Yes'" in result.reason


# --- contains ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("needle", "response", "passed"),
    [
        pytest.param("Monday", "Open Monday to Friday", True, id="substring"),
        pytest.param("Monday", "Monday", True, id="whole-response"),
        pytest.param("monday", "Open Monday to Friday", False, id="case-sensitive"),
        pytest.param("MONDAY", "Open Monday to Friday", False, id="case-sensitive-upper"),
        pytest.param(" hi ", "say hi!", False, id="needle-spaces-kept"),
        pytest.param(" hi ", "say hi there", True, id="needle-spaces-match"),
        pytest.param("end\n", "the end\n", True, id="response-not-trimmed-trailing"),
        pytest.param("\tx", "a\tx", True, id="response-not-trimmed-tab"),
        pytest.param("x\n", "x", False, id="newline-needed"),
        pytest.param("é", "café", True, id="non-ascii"),
        pytest.param("É", "café", False, id="non-ascii-case-sensitive"),
        pytest.param("Friday", "", False, id="empty-response"),
    ],
)
def test_contains(needle: str, response: str, passed: bool) -> None:
    assert holds("contains", needle, response) is passed


def test_contains_failure_reason_names_the_needle() -> None:
    result = grade([{"contains": "Friday"}], "Monday")
    assert not result.passed
    assert "Friday" in result.reason


# --- regex ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "response", "passed"),
    [
        # bare patterns search anywhere; anchors only where written
        pytest.param("b", "abc", True, id="bare-searches-anywhere"),
        pytest.param("bc$", "abc", True, id="bare-end-anchor"),
        pytest.param("^b", "abc", False, id="bare-start-anchor"),
        pytest.param("/b/", "abc", True, id="delimited-searches-anywhere"),
        pytest.param("x", "abc", False, id="bare-no-match"),
        # i
        pytest.param("hello", "Say HELLO", False, id="case-sensitive-by-default"),
        pytest.param("/hello/i", "Say HELLO", True, id="flag-i"),
        # m
        pytest.param("^b$", "a\nb\nc", False, id="anchors-whole-text-by-default"),
        pytest.param("/^b$/m", "a\nb\nc", True, id="flag-m"),
        # s
        pytest.param("a.b", "a\nb", False, id="dot-excludes-newline-by-default"),
        pytest.param("/a.b/s", "a\nb", True, id="flag-s"),
        # x
        pytest.param("a b c", "abc", False, id="spaces-literal-by-default"),
        pytest.param("/a b c/x", "abc", True, id="flag-x"),
        pytest.param("/a b c # the letters/x", "xabcx", True, id="flag-x-comment"),
        # u (Unicode is always on; the flag is accepted)
        pytest.param("/^\\w$/u", "é", True, id="flag-u"),
        # flags combined
        pytest.param("/^B.C$/ims", "x\nb\nc\ny", True, id="flags-ims"),
        pytest.param("/^B.C$/im", "x\nb\nc\ny", False, id="flags-im-without-s"),
        pytest.param("/^B.C$/ms", "x\nb\nc\ny", False, id="flags-ms-without-i"),
        pytest.param("/ b . c /xsi", "A\nB\nC", True, id="flags-xsi"),
        pytest.param("/ok/imsxu", "OK", True, id="all-flags"),
        # slashes
        pytest.param("a/b", "see a/b here", True, id="bare-with-slash"),
        pytest.param("1/2/3", "date 1/2/3", True, id="bare-with-slashes"),
        pytest.param("/https?:\\/\\/example\\.com\\//", "at https://example.com/x", True, id="escaped-slashes"),
        pytest.param("/a/b/", "xa/by", True, id="delimited-with-inner-slash"),
        pytest.param("/a/b/", "ab", False, id="inner-slash-is-literal"),
        # Unicode semantics
        pytest.param("^\\w+$", "café", True, id="word-matches-accented"),
        pytest.param("\\w", "é", True, id="word-matches-e-acute"),
        pytest.param("\\bcafé\\b", "un café noir", True, id="word-boundary-unicode"),
        pytest.param("/ÉCOLE/i", "école", True, id="ignorecase-non-ascii"),
        pytest.param("/ω/i", "ΩMEGA", True, id="ignorecase-greek"),
        pytest.param("ÉCOLE", "école", False, id="non-ascii-case-sensitive-without-i"),
        pytest.param("^\\d$", "٣", True, id="digit-matches-arabic-indic"),
    ],
)
def test_regex(pattern: str, response: str, passed: bool) -> None:
    assert holds("regex", pattern, response) is passed


@pytest.mark.parametrize(
    "pattern",
    [
        pytest.param("/a/g", id="flag-g"),
        pytest.param("/a/I", id="flag-upper-i"),
        pytest.param("/a/q", id="flag-q"),
        pytest.param("/a/imsxug", id="known-flags-plus-g"),
        pytest.param("(a", id="unbalanced-bare"),
        pytest.param("/(a/i", id="unbalanced-delimited"),
        pytest.param("[z-a]", id="bad-range"),
        pytest.param("a{2,1}", id="bad-repeat"),
    ],
)
def test_invalid_regex_is_a_load_error(pattern: str) -> None:
    with pytest.raises(SetError) as caught:
        load_prompt([{"regex": pattern}])
    message = str(caught.value)
    assert message.startswith("set.yaml:")
    assert "prompts[0].assertions[0].regex" in message


# --- json_schema ---------------------------------------------------------------------------

EMAIL = {"type": "object", "required": ["email"], "properties": {"email": {"type": "string"}}}
NESTED = {
    "type": "object",
    "required": ["contact"],
    "properties": {
        "contact": {
            "type": "object",
            "required": ["email", "phone"],
            "properties": {"email": {"type": "string"}, "phone": {"type": "string"}},
        }
    },
}
PAIR = {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": False}


@pytest.mark.parametrize(
    ("schema", "response", "passed"),
    [
        pytest.param(EMAIL, '{"email": "a@b.c"}', True, id="valid-object"),
        pytest.param(EMAIL, ' \n{"email": "a@b.c"}\n\t', True, id="whitespace-trimmed"),
        pytest.param(EMAIL, '```json\n{"email": "a@b.c"}\n```', False, id="code-fence-not-stripped"),
        pytest.param(EMAIL, '```\n{"email": "a@b.c"}\n```', False, id="bare-code-fence-not-stripped"),
        pytest.param(EMAIL, 'Here you go: {"email": "a@b.c"}', False, id="prose-around-json"),
        pytest.param(EMAIL, '{"email": "a@b.c"} thanks', False, id="trailing-prose"),
        pytest.param(EMAIL, "{'email': 'a@b.c'}", False, id="single-quotes"),
        pytest.param(EMAIL, '{"email": 5}', False, id="wrong-property-type"),
        pytest.param(EMAIL, "{}", False, id="missing-required"),
        pytest.param(EMAIL, "", False, id="empty-response"),
        pytest.param(EMAIL, " \n ", False, id="whitespace-response"),
        pytest.param({}, "NaN", False, id="nan-not-json"),
        pytest.param({}, "Infinity", False, id="infinity-not-json"),
        pytest.param({}, "-Infinity", False, id="minus-infinity-not-json"),
        pytest.param({}, '{"x": NaN}', False, id="nested-nan-not-json"),
        pytest.param({}, "[1, Infinity]", False, id="nested-infinity-not-json"),
        pytest.param({}, "null", True, id="null-is-json"),
        pytest.param({"type": "integer"}, "3", True, id="integer-3"),
        pytest.param({"type": "integer"}, "1.0", True, id="integer-1.0"),
        pytest.param({"type": "integer"}, "1e2", True, id="integer-1e2"),
        pytest.param({"type": "integer"}, "-0", True, id="integer-minus-zero"),
        pytest.param({"type": "integer"}, "1.5", False, id="integer-1.5"),
        pytest.param({"type": "integer"}, '"3"', False, id="integer-string"),
        pytest.param({"type": "integer"}, "true", False, id="integer-boolean"),
        pytest.param({"type": "number"}, "1.5", True, id="number-1.5"),
        pytest.param({"type": "number"}, "3", True, id="number-integer"),
        pytest.param({"type": "number"}, "true", False, id="number-true"),
        pytest.param({"type": "number"}, "false", False, id="number-false"),
        pytest.param({"type": "number"}, "null", False, id="number-null"),
        pytest.param({"type": "boolean"}, "true", True, id="boolean-true"),
        pytest.param({"type": "boolean"}, "1", False, id="boolean-one"),
        pytest.param(NESTED, '{"contact": {"email": "a", "phone": "1"}}', True, id="nested-valid"),
        pytest.param(NESTED, '{"contact": {"email": "a"}}', False, id="nested-missing-required"),
        pytest.param(NESTED, '{"contact": {}}', False, id="nested-empty"),
        pytest.param(NESTED, '{"email": "a", "phone": "1"}', False, id="nested-not-nested"),
        pytest.param(NESTED, '{"contact": {"email": "a", "phone": 1}}', False, id="nested-wrong-type"),
        pytest.param(PAIR, '[1, "a"]', True, id="draft-2020-12-prefixItems"),
        pytest.param(PAIR, "[1, 2]", False, id="draft-2020-12-prefixItems-type"),
        pytest.param(PAIR, '[1, "a", 3]', False, id="draft-2020-12-items-false"),
        pytest.param(True, '"anything"', True, id="schema-true"),
        pytest.param(True, "not json", False, id="schema-true-still-needs-json"),
        pytest.param(False, "{}", False, id="schema-false"),
    ],
)
def test_json_schema(schema: Any, response: str, passed: bool) -> None:
    assert holds("json_schema", schema, response) is passed


def test_json_schema_failure_reasons() -> None:
    not_json = grade([{"json_schema": EMAIL}], "```json\n{}\n```")
    assert "not JSON" in not_json.reason
    invalid = grade([{"json_schema": NESTED}], '{"contact": {"email": "a"}}')
    assert "phone" in invalid.reason
    assert "contact" in invalid.reason


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(
            """
            id: graders.schema
            name: Schema as YAML
            prompts:
              - id: only
                prompt: Return the contact.
                assertions:
                  - json_schema:
                      type: object
                      required: [email]
                      properties:
                        email: {type: string}
            """,
            id="yaml-mapping",
        ),
        pytest.param(
            """
            id: graders.schema
            name: Schema as a JSON string
            prompts:
              - id: only
                prompt: Return the contact.
                assertions:
                  - json_schema: '{"type": "object", "required": ["email"], "properties": {"email": {"type": "string"}}}'
            """,
            id="json-string",
        ),
    ],
)
@pytest.mark.parametrize(
    ("response", "passed"),
    [('{"email": "a@b.c"}', True), ('{"email": 1}', False), ('{"mail": "a@b.c"}', False), ("a@b.c", False)],
)
def test_json_schema_given_as_yaml_or_json_string(write_file: Any, text: str, response: str, passed: bool) -> None:
    prompt_set = load_set(write_file("set.yaml", text))
    assert isinstance(prompt_set, PromptSet)
    assert grade_assertions(prompt_set.prompts[0], response).passed is passed


@pytest.mark.parametrize(
    "schema",
    [
        pytest.param({"type": "bogus"}, id="unknown-type"),
        pytest.param({"required": 3}, id="required-not-array"),
        pytest.param({"minLength": -1}, id="negative-minLength"),
        pytest.param({"properties": {"a": {"type": 5}}}, id="nested-invalid"),
        pytest.param('{"type": 5}', id="json-string-invalid-schema"),
        pytest.param("not json", id="string-not-json"),
        pytest.param('{"type": "object",}', id="string-trailing-comma"),
        pytest.param(5, id="number"),
        pytest.param(["object"], id="list"),
    ],
)
def test_invalid_json_schema_is_a_load_error(schema: Any) -> None:
    with pytest.raises(SetError) as caught:
        load_prompt([{"json_schema": schema}])
    assert "prompts[0].assertions[0]" in str(caught.value)


@pytest.mark.parametrize(
    "assertion",
    [
        pytest.param({"regex": "/a/g"}, id="regex-flag"),
        pytest.param({"regex": "(a"}, id="regex-pattern"),
        pytest.param({"json_schema": {"type": "bogus"}}, id="schema-mapping"),
        pytest.param({"json_schema": '{"required": 3}'}, id="schema-string"),
    ],
)
def test_load_errors_exit_2_before_any_call(
    cli: Any, fake_config: Path, fake_llm: FakeServer, db_file: Path, assertion: dict[str, Any]
) -> None:
    write_set(Path("set.yaml"), [assertion])
    result = cli("run", "set.yaml")
    assert result.exit_code == 2, result.stderr
    assert result.exception is None
    assert result.stderr.startswith("Error: set.yaml:")
    assert "prompts[0].assertions[0]" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert fake_llm.calls == 0
    assert not db_file.exists()


def test_deeply_nested_response_fails_the_assertion_instead_of_crashing() -> None:
    prompt = load_prompt([{"json_schema": {"type": "object"}}])
    result = grade_assertions(prompt, "[" * 100_000)
    assert not result.passed
    assert "json_schema" in result.reason


# --- the grade -----------------------------------------------------------------------------


def test_all_assertions_hold() -> None:
    result = grade(
        [{"contains": "Monday"}, {"regex": "/friday/i"}, {"exact": "Monday to Friday"}], "Monday to Friday\n"
    )
    assert result.passed
    assert result.score == 1.0
    assert [(a.type, a.passed) for a in result.assertions] == [("contains", True), ("regex", True), ("exact", True)]
    assert result.yardstick == "deterministic"


@pytest.mark.parametrize(
    ("response", "score", "verdicts"),
    [
        pytest.param("Monday to Friday.", 2 / 3, [True, True, False], id="two-of-three"),
        pytest.param("monday to friday", 1 / 3, [False, True, False], id="one-of-three"),
        pytest.param("Sunday", 0.0, [False, False, False], id="none"),
    ],
)
def test_score_is_the_fraction_that_hold_and_any_miss_fails(response: str, score: float, verdicts: list[bool]) -> None:
    result = grade([{"contains": "Monday"}, {"regex": "/friday/i"}, {"exact": "Monday to Friday"}], response)
    assert not result.passed
    assert result.score == score
    assert [a.passed for a in result.assertions] == verdicts


def test_two_of_three_rounds_to_0_6667() -> None:
    result = grade([{"contains": "a"}, {"contains": "b"}, {"contains": "z"}], "ab")
    assert round(result.score, 4) == 0.6667
    assert not result.passed
    assert "'z'" in result.reason


def test_reference_only_prompt_scores_zero_and_says_why() -> None:
    prompt = load_prompt(None, reference="Monday to Friday, 9am to 5pm.")
    result = grade_assertions(prompt, "Monday to Friday, 9am to 5pm.")
    assert not result.passed
    assert result.score == 0.0
    assert result.assertions == ()
    assert "reference" in result.reason


def test_reference_is_ignored_when_assertions_exist() -> None:
    prompt = load_prompt([{"contains": "Monday"}], reference="Something else entirely.")
    result = grade_assertions(prompt, "Monday")
    assert result.passed
    assert result.score == 1.0


@pytest.mark.parametrize(
    ("assertions", "reference"),
    [pytest.param(None, None, id="nothing"), pytest.param([], "   ", id="blank-reference")],
)
def test_prompt_with_nothing_to_grade_is_a_load_error(assertions: list[Any] | None, reference: str | None) -> None:
    with pytest.raises(SetError, match="neither an assertion nor a reference"):
        load_prompt(assertions, reference)


# --- the regex time limit ------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_catastrophic_regex_gives_up_with_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(patterns, "REGEX_TIMEOUT_S", 0.2)
    result = grade([{"regex": CATASTROPHIC}, {"contains": "a"}], NEAR_MISS)
    assert not result.passed
    assert result.score == 0.5
    assert [a.passed for a in result.assertions] == [False, True]
    reason = result.assertions[0].reason
    assert CATASTROPHIC in reason
    assert "gave up" in reason


@pytest.mark.slow
@pytest.mark.timeout(30)
def test_a_slow_regex_is_matched_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    # Other calls in flight keep running while a catastrophic regex uses up its time limit.
    import asyncio

    from evalkit.graders.deterministic import DeterministicGrader

    monkeypatch.setattr(patterns, "REGEX_TIMEOUT_S", 1.0)
    prompt = load_prompt([{"regex": CATASTROPHIC}, {"contains": "a"}])

    async def main() -> tuple[bool, Grade]:
        grading = asyncio.create_task(DeterministicGrader().grade(None, prompt, NEAR_MISS, None))  # type: ignore[arg-type]
        await asyncio.sleep(0.05)  # resumes at once unless the grading holds the event loop
        still_grading = not grading.done()
        return still_grading, await grading

    still_grading, result = asyncio.run(main())
    assert still_grading
    assert [a.passed for a in result.assertions] == [False, True]
    assert "gave up after 1 s" in result.assertions[0].reason


@pytest.mark.timeout(30)
def test_slow_regexes_take_turns_so_each_gets_its_whole_time_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    # The regex engine's limit counts the process's CPU time: two searches side by side would
    # each give up after about half of it.
    import asyncio
    import time

    from evalkit.graders.deterministic import DeterministicGrader

    monkeypatch.setattr(patterns, "REGEX_TIMEOUT_S", 0.2)
    prompt = load_prompt([{"regex": CATASTROPHIC}])
    grader = DeterministicGrader()

    async def main() -> list[Grade]:
        return list(await asyncio.gather(*(grader.grade(None, prompt, NEAR_MISS, None) for _ in range(2))))  # type: ignore[arg-type]

    started = time.monotonic()
    results = asyncio.run(main())
    assert time.monotonic() - started >= 0.35  # two whole 0.2 s limits, one after the other
    assert all("gave up after 0.2 s" in r.assertions[0].reason for r in results)


def gave_up(pattern: str, why: str) -> str:
    return f"regex {pattern}: gave up{why} (catastrophic backtracking?)"


@pytest.mark.timeout(30)
def test_a_prompts_slow_regexes_share_its_time_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    # three catastrophic regexes in one prompt take one limit, not three
    import asyncio

    from evalkit.graders.deterministic import DeterministicGrader

    monkeypatch.setattr(patterns, "REGEX_TIMEOUT_S", 0.2)
    hostile = [CATASTROPHIC, "(aa|a)+$", "(a|aaa)+$"]
    prompt = load_prompt([*({"regex": r} for r in hostile), {"regex": "^a+"}])
    result = asyncio.run(DeterministicGrader().grade(None, prompt, NEAR_MISS, None))  # type: ignore[arg-type]
    assert [a.reason for a in result.assertions[:3]] == [
        gave_up(CATASTROPHIC, " after 0.2 s"),
        gave_up("(aa|a)+$", ": this prompt's 0.2 s of regex time is spent"),
        gave_up("(a|aaa)+$", ": this prompt's 0.2 s of regex time is spent"),
    ]
    assert result.assertions[3].passed  # a quick search still gets its verdict


@pytest.mark.timeout(30)
def test_a_runs_slow_regexes_share_its_time_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    # each hostile prompt took its whole limit, one after another: a run's grading time grew by
    # a second per hostile prompt without bound
    import asyncio

    from evalkit.graders.deterministic import DeterministicGrader

    monkeypatch.setattr(patterns, "REGEX_TIMEOUT_S", 0.2)
    monkeypatch.setattr(patterns, "RUN_REGEX_S", 0.5)
    prompt = load_prompt([{"regex": CATASTROPHIC}, {"regex": "^a+"}])
    grader = DeterministicGrader()

    async def main() -> list[Grade]:
        return [await grader.grade(None, prompt, NEAR_MISS, None) for _ in range(8)]  # type: ignore[arg-type]

    results = asyncio.run(main())
    whole, spent = (
        gave_up(CATASTROPHIC, " after 0.2 s"),
        gave_up(CATASTROPHIC, ": the run's 0.5 s of regex time is spent"),
    )
    reasons = [r.assertions[0].reason for r in results]
    # a search that gives up has taken its whole limit: two of 0.2 s leave less than one
    assert reasons[0] == whole
    assert reasons[1] in (whole, spent)
    assert reasons[2:] == [spent] * 6
    assert all(r.assertions[1].passed for r in results)  # quick searches still get their verdicts


@pytest.mark.timeout(30)
def test_nested_quantifier_without_match_fails() -> None:
    result = grade([{"regex": "(a+)+$"}], NEAR_MISS)
    assert not result.passed
    assert result.assertions[0].reason


@pytest.mark.slow
@pytest.mark.timeout(30)
def test_run_with_a_catastrophic_regex_grades_the_other_prompts(cli: Any, write_file: Any) -> None:
    write_file("evalkit.yaml", "providers: [{id: rec, adapter: replay, path: answers.jsonl}]\n")
    answers = [
        {"id": "slow", "response": NEAR_MISS, "model": "m1"},
        {"id": "days", "response": "Monday to Friday", "model": "m1"},
        {"id": "answer", "response": " no\n", "model": "m1"},
    ]
    write_file("answers.jsonl", "".join(json.dumps(a) + "\n" for a in answers))
    write_file(
        "set.yaml",
        f"""
        id: graders.backtracking
        name: Backtracking
        prompts:
          - id: slow
            prompt: Say a lot of a.
            assertions: [{{regex: '{CATASTROPHIC}'}}, {{contains: a}}]
          - id: days
            prompt: When is the office open?
            assertions: [{{contains: Monday}}]
          - id: answer
            prompt: Is it open on Sundays?
            assertions: [{{exact: "no"}}]
        """,
    )
    result = cli("run", "set.yaml", "--format", "json", "--concurrency", "1")
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    items = {item["id"]: item for item in document["items"]}
    assert items["slow"]["passed"] is False
    assert items["slow"]["score"] == 0.5
    assert items["slow"]["error"] is None
    assert CATASTROPHIC in items["slow"]["reason"]
    assert [a["passed"] for a in items["slow"]["assertions"]] == [False, True]
    assert items["days"]["passed"] is True
    assert items["answer"]["passed"] is True
    assert (document["prompt_count"], document["passed_count"], document["error_count"]) == (3, 2, 0)


@pytest.mark.timeout(60)
@pytest.mark.slow
def test_a_run_of_many_hostile_prompts_spends_its_regex_time_once_and_stores_every_verdict(
    cli: Any, write_file: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(patterns, "REGEX_TIMEOUT_S", 0.2)
    monkeypatch.setattr(patterns, "RUN_REGEX_S", 0.5)
    ids = [f"hostile{n:02}" for n in range(12)]
    write_file("evalkit.yaml", "providers: [{id: rec, adapter: replay, path: answers.jsonl}]\n")
    write_file(
        "answers.jsonl", "".join(json.dumps({"id": i, "response": NEAR_MISS, "model": "m1"}) + "\n" for i in ids)
    )
    prompts = "".join(
        f"  - {{id: {i}, prompt: Say a lot of a., assertions: [{{regex: '{CATASTROPHIC}'}}]}}\n" for i in ids
    )
    write_file("set.yaml", f"id: graders.hostile\nname: Hostile\nprompts:\n{prompts}")
    result = cli("run", "set.yaml", "--format", "json", "--concurrency", "4")
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    items = document["items"]
    spent = "assertion failed: " + gave_up(CATASTROPHIC, ": the run's 0.5 s of regex time is spent")
    assert sorted(item["id"] for item in items) == ids
    # two searches of 0.2 s leave the run less than one: every later prompt is cut short
    assert sum(item["reason"] != spent for item in items) <= 2
    assert all(not item["passed"] and item["error"] is None for item in items)
    shown = cli("show", document["run_id"], "--format", "json")
    assert shown.exit_code == 0, shown.stderr
    stored = json.loads(shown.stdout)["items"]
    assert sorted(item["id"] for item in stored if not item["passed"]) == ids


@pytest.mark.parametrize("threshold", [None, 0.5])
def test_a_prompt_whose_weights_are_all_0_passes_with_score_1(isolated: Path, threshold: float | None) -> None:
    """Weight 0 never fails a prompt (README "Score and pass"), so a prompt whose assertions all
    have weight 0 passes with score 1, each verdict recorded (as promptfoo passes such a test)."""
    assertions = [{"type": "contains", "value": "Paris", "weight": 0}, {"type": "icontains", "value": "x", "weight": 0}]
    prompt = load_prompt(assertions)
    if threshold is not None:
        prompt = replace(prompt, threshold=threshold)
    result = grade_assertions(prompt, "Rome")
    assert (result.passed, result.score) == (True, 1.0)
    assert [(a.passed, a.weight) for a in result.assertions] == [(False, 0.0), (False, 0.0)]


def test_deep_response_against_a_recursive_schema_fails_the_assertion(write_file: Any) -> None:
    path = write_file(
        "r.yaml",
        """
        id: edge.recursive
        name: Recursive
        prompts:
          - id: tree
            prompt: Give a tree.
            assertions:
              - json_schema: {$defs: {node: {type: array, items: {$ref: '#/$defs/node'}}}, $ref: '#/$defs/node'}
        """,
    )
    prompt = load_set(path).prompts[0]
    result = grade_assertions(prompt, "[" * 900 + "]" * 900)
    assert not result.passed
    assert "nested too deeply" in result.reason
