"""The set loader as a Python API: YAML -> records, and SetError issues located by file:line:col."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from evalkit.errors import Issue, SetError
from evalkit.records import (
    Assertion,
    Prompt,
    PromptSet,
    Question,
    QuestionSet,
    RetrievalTolerances,
    Tolerances,
    parse_tolerance,
)
from evalkit.sets import load_set
from tests.conftest import REPO

VALID = REPO / "tests" / "data" / "valid"
INVALID = REPO / "tests" / "data" / "invalid"


def test_full_prompt_set_loads_into_the_expected_record() -> None:
    path = VALID / "full_prompt_set.yaml"
    loaded = load_set(path)
    assert loaded == PromptSet(
        id="valid.full",
        name="Every prompt-set feature",
        description="Checks FAQ answers.",
        system="You are concise.",
        params={"temperature": 0, "max_tokens": 256},
        tolerances=Tolerances(max_pass_rate_drop=Decimal("0.05"), max_mean_score_drop=Decimal("0")),
        path=path,
        prompts=(
            Prompt(
                id="opening-hours",
                prompt="When is the office open? Answer with the days.",
                system="Answer in English.",
                assertions=(Assertion("contains", "Monday"), Assertion("regex", "/9(:00)?\\s*(am|–|-)/i")),
                reference="Monday to Friday, 9am to 5pm.",
            ),
            Prompt(
                id="contact-json",
                prompt='Return the contact as JSON with an "email" field.',
                assertions=(
                    Assertion(
                        "json_schema",
                        {"type": "object", "required": ["email"], "properties": {"email": {"type": "string"}}},
                    ),
                    Assertion("json_schema", '{"type": "object", "maxProperties": 3}'),
                ),
            ),
            Prompt(
                id="sunday",
                prompt="Is the office open on Sundays? Answer yes or no only.",
                system="",
                params={"max_tokens": 5},
                assertions=(Assertion("exact", "no"), Assertion("regex", "^\\s*no\\b")),
            ),
            Prompt(
                id="überblick",
                prompt="Fasse die Öffnungszeiten zusammen. 日本語でも。\n",
                reference="Montag bis Freitag, 9–17 Uhr.",
            ),
        ),
    )
    assert isinstance(loaded, PromptSet)
    opening, contact, sunday, overview = loaded.prompts
    assert loaded.system_for(opening) == "Answer in English."
    assert loaded.system_for(contact) == "You are concise."
    assert loaded.system_for(sunday) is None  # "" means no system prompt at all
    assert loaded.params_for(sunday) == {"temperature": 0, "max_tokens": 5}
    assert loaded.params_for(overview) == {"temperature": 0, "max_tokens": 256}


def test_assertions_are_compiled_at_load_time() -> None:
    loaded = load_set(VALID / "full_prompt_set.yaml")
    assert isinstance(loaded, PromptSet)
    regex = loaded.prompts[0].assertions[1].compiled
    assert regex.pattern.search("open 9 AM to 5") is not None  # the /i flag took effect
    assert regex.pattern.search("open 10am") is None
    schema, as_string = (a.compiled for a in loaded.prompts[1].assertions)
    assert schema.is_valid({"email": "a@b.c"})
    assert not schema.is_valid({"mail": "a@b.c"})
    assert as_string.is_valid({"a": 1})
    assert not as_string.is_valid({"a": 1, "b": 2, "c": 3, "d": 4})
    bare = loaded.prompts[2].assertions[1].compiled
    assert bare.pattern.search("  no.") is not None
    assert bare.pattern.search("No") is None  # no flags: case-sensitive


def test_question_set_loads_with_corpus_relative_to_the_file() -> None:
    path = VALID / "question_set.yaml"
    assert load_set(path) == QuestionSet(
        id="valid.docs",
        name="Docs retrieval",
        description="Labelled questions over the docs corpus.",
        path=path,
        corpus=VALID / "../corpus/docs.jsonl",
        corpus_line=5,
        tolerances=RetrievalTolerances(max_top1_drop=Decimal("0.2"), max_top3_drop=Decimal("1")),
        questions=(
            Question(
                id="dialogforum-termin",
                question="Wann findet das Dialogforum statt?",
                form="match",
                expected=("234_0", "309_0"),
                hard_class="near-duplicate",
                answer_gist="The forum is on 12 May.",
            ),
            Question(id="nothing-answers", question="Who won the 1930 world cup?", form="gap", expected=()),
        ),
    )


def test_tolerances_default_to_one_tenth(write_file) -> None:
    path = write_file(
        "plain.yaml",
        """
        id: plain
        name: Plain
        prompts: [{id: a, prompt: Hi, assertions: [{contains: hi}]}]
        """,
    )
    loaded = load_set(path)
    assert isinstance(loaded, PromptSet)
    assert loaded.tolerances == Tolerances(Decimal("0.1"), Decimal("0.1"))


@pytest.mark.parametrize(
    ("written", "expected"),
    [("0", Decimal(0)), ("-0.0", Decimal(0)), ("0.5", Decimal("0.5")), ("5e-1", Decimal("0.5")), ("1", Decimal(1))],
)
def test_tolerance_edge_values_are_accepted(write_file, written: str, expected: Decimal) -> None:
    path = write_file(
        "tol.yaml",
        f"""
        id: tol
        name: Tolerances
        tolerances: {{max_pass_rate_drop: {written}, max_mean_score_drop: {written}}}
        prompts: [{{id: a, prompt: Hi, assertions: [{{contains: hi}}]}}]
        """,
    )
    loaded = load_set(path)
    assert isinstance(loaded, PromptSet)
    assert loaded.tolerances.max_pass_rate_drop == expected
    assert loaded.tolerances.max_mean_score_drop == expected
    assert not loaded.tolerances.max_pass_rate_drop.is_signed()


LONG = "0.09999999999999999999"  # 20 significant digits: a binary float reads it as 0.1


@pytest.mark.parametrize("anchored", [False, True], ids=["fast path", "node graph"])
def test_tolerances_and_minimums_are_read_as_the_decimals_written(write_file, anchored: bool) -> None:
    """As the command line reads ``--max-pass-rate-drop 0.09999999999999999999``: not rounded
    through a float to 0.1 (which would accept a drop of exactly 1/10 that the option fails)."""
    path = write_file(
        "long.yaml",
        f"""
        id: long
        name: Long tolerances
        tolerances: {{max_pass_rate_drop: {LONG}, max_mean_score_drop: 1.00000000000000000000}}
        gate: {{min_pass_rate: {LONG}, min_mean_score: 0.5}}
        prompts: [{{id: a, prompt: {"&p " if anchored else ""}Hi, assertions: [{{contains: hi}}]}}]
        """,
    )
    loaded = load_set(path)
    assert isinstance(loaded, PromptSet)
    assert loaded.tolerances == Tolerances(Decimal(LONG), Decimal(1))
    assert loaded.tolerances.max_pass_rate_drop == parse_tolerance(LONG)
    assert (loaded.gate.min_pass_rate, loaded.gate.min_mean_score) == (Decimal(LONG), Decimal("0.5"))


def test_question_set_tolerances_are_read_as_the_decimals_written(write_file) -> None:
    path = write_file(
        "questions.yaml",
        f"""
        id: q
        name: Questions
        corpus: docs.jsonl
        tolerances: {{max_top1_drop: {LONG}}}
        questions: [{{id: a, question: Where?, form: match, expected: [d1]}}]
        """,
    )
    write_file("docs.jsonl", '{"id": "d1", "text": "here"}\n')
    loaded = load_set(path)
    assert isinstance(loaded, QuestionSet)
    assert loaded.tolerances == RetrievalTolerances(Decimal(LONG), Decimal("0.1"))


def test_set_error_carries_located_issues() -> None:
    with pytest.raises(SetError) as caught:
        load_set(INVALID / "unknown_assertion_type.yaml")
    assert caught.value.issues == [
        Issue(
            str(INVALID / "unknown_assertion_type.yaml"),
            7,
            9,
            "prompts[0].assertions[0]",
            "unknown assertion type 'containz' (expected one of: contains, contains_all, contains_any, contains_json, context_contains, cost, equals_json, exact, factuality, icontains, icontains_all, icontains_any, json_schema, latency_ms, levenshtein, python, regex, rubric, similar, starts_with, tool_call_f1, tool_called, tool_sequence, valid_tool_calls, word_count; each also as not_<type>); "
            "did you mean 'contains'?",
        )
    ]
    assert caught.value.exit_code == 2


def test_set_error_message_counts_the_other_issues(write_file) -> None:
    path = write_file(
        "two.yaml",
        """
        id: two
        name: ""
        prompts: []
        """,
    )
    with pytest.raises(SetError) as caught:
        load_set(path)
    assert [(i.line, i.col, i.path, i.message) for i in caught.value.issues] == [
        (2, 7, "name", "must not be empty"),
        (3, 10, "prompts", "must have at least 1 item"),
    ]
    assert str(caught.value) == (
        f"{path}:2:7: name: must not be empty (and 1 more; run `evalkit validate {path}` to list them)"
    )


def test_a_json_schema_string_nested_too_deeply_is_a_set_error(tmp_path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    path = tmp_path / "deep.yaml"
    path.write_text(
        f"id: deep\nname: Deep\nprompts:\n  - id: p\n    prompt: q\n    assertions:\n      - json_schema: '{deep}'\n"
    )
    with pytest.raises(SetError) as caught:
        load_set(path)
    assert [(i.line, i.path, i.message) for i in caught.value.issues] == [
        (7, "prompts[0].assertions[0].json_schema", "json_schema string is nested too deeply to read; flatten it")
    ]


def test_missing_file_is_a_set_error() -> None:
    with pytest.raises(SetError) as caught:
        load_set("nope.yaml")
    assert str(caught.value) == "nope.yaml: file not found; check the path"


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"id: x.y\r\nname: n\r\nprompts:\r\n  - id: a\r\n    prompt: p\r\n    assertions:\r\n", id="crlf"),
        pytest.param(b"\xef\xbb\xbfid: x.y\nname: n\nprompts:\n  - id: a\n    prompt: p\n    assertions:\n", id="bom"),
    ],
)
def test_positions_survive_crlf_and_bom(isolated: Path, content: bytes) -> None:
    path = isolated / "set.yaml"
    path.write_bytes(content + b"      - containz: x\n")
    with pytest.raises(SetError) as caught:
        load_set(path)
    assert [(i.line, i.col, i.path) for i in caught.value.issues] == [(7, 9, "prompts[0].assertions[0]")]


def test_anchors_and_merge_keys_share_assertions(write_file) -> None:
    path = write_file(
        "shared.yml",
        """
        id: shared
        name: Shared assertions
        prompts:
          - id: a
            prompt: First
            assertions: &common
              - contains: x
              - regex: /y/i
          - id: b
            <<: {prompt: Merged}
            assertions: *common
        """,
    )
    loaded = load_set(path)
    assert isinstance(loaded, PromptSet)
    first, second = loaded.prompts
    assert second.prompt == "Merged"
    assert first.assertions == second.assertions == (Assertion("contains", "x"), Assertion("regex", "/y/i"))
    assert second.assertions[1].compiled.pattern.search("Y") is not None


@pytest.mark.parametrize(
    "value",
    ['!!python/object/apply:os.system ["touch pwned"]', "!!python/object/apply:os.system touch pwned"],
    ids=["sequence", "scalar"],
)
def test_python_tags_are_never_executed(isolated: Path, write_file, value: str) -> None:
    path = write_file(
        "evil.yaml",
        f"""
        id: evil
        name: Evil
        prompts:
          - id: a
            prompt: {value}
            assertions: [{{contains: x}}]
        """,
    )
    with pytest.raises(SetError) as caught:
        load_set(path)
    assert [(i.line, i.col, i.path) for i in caught.value.issues] == [(5, 13, "prompts[0].prompt")]
    assert not (isolated / "pwned").exists()


def test_tags_on_collections_are_rejected(write_file) -> None:
    path = write_file(
        "tagged.yaml",
        """
        id: tagged
        name: Tagged collection
        params: !env {temperature: 0}
        prompts:
          - {id: a, prompt: Hi, assertions: [{contains: hi}]}
        """,
    )
    with pytest.raises(SetError) as caught:
        load_set(path)
    assert [(i.line, i.col, i.path) for i in caught.value.issues] == [(3, 9, "params")]
    assert caught.value.issues[0].message == "unsupported YAML tag !env on a mapping; remove the tag"


def test_empty_reference_is_fine_next_to_assertions(write_file) -> None:
    path = write_file(
        "ref.yaml",
        """
        id: ref
        name: Ref
        prompts:
          - {id: a, prompt: Hi, reference: "", assertions: [{exact: ""}]}
        """,
    )
    loaded = load_set(path)
    assert isinstance(loaded, PromptSet)
    assert loaded.prompts[0] == Prompt(id="a", prompt="Hi", reference="", assertions=(Assertion("exact", ""),))


def test_yaml_version_directive_is_accepted(write_file) -> None:
    path = write_file(
        "directive.yaml",
        """
        %YAML 1.2
        ---
        id: directive
        name: With a directive
        prompts: [{id: a, prompt: Hi, assertions: [{contains: hi}]}]
        """,
    )
    assert load_set(path).id == "directive"


def test_str_tag_forces_a_string(write_file) -> None:
    path = write_file(
        "str.yaml",
        """
        id: strtag
        name: A number that must stay a string
        prompts:
          - id: a
            prompt: What is 6 times 7?
            assertions: [{exact: !!str 42}]
        """,
    )
    loaded = load_set(path)
    assert isinstance(loaded, PromptSet)
    assert loaded.prompts[0].assertions == (Assertion("exact", "42"),)


def test_prompt_without_id_is_not_called_none(write_file) -> None:
    path = write_file(
        "noid.yaml",
        """
        id: noid
        name: No id
        prompts:
          - prompt: Hi
        """,
    )
    with pytest.raises(SetError) as caught:
        load_set(path)
    messages = [issue.message for issue in caught.value.issues]
    assert "missing required key 'id'" in messages
    assert all("'None'" not in message for message in messages)


TYPES = (
    "contains, contains_all, contains_any, contains_json, context_contains, cost, equals_json, exact, factuality, icontains, "
    "icontains_all, icontains_any, json_schema, latency_ms, levenshtein, python, regex, rubric, similar, starts_with, tool_call_f1, "
    "tool_called, tool_sequence, valid_tool_calls, word_count; each also as not_<type>"
)
PROMPT_KEYS = (
    "assertions, critical, id, messages, params, prompt, reference, system, threshold, tool_choice, tools, vars"
)


@pytest.mark.parametrize(
    ("body", "lines"),
    [
        (  # a misspelt assertions: is the issue, not its consequence (no assertion, no reference)
            "prompts:\n  - id: p\n    prompt: hi\n    asertions:\n      - contains: x\n",
            [
                f"s.yaml:6:5: prompts[0].asertions: unknown key 'asertions' (expected one of: {PROMPT_KEYS}); "
                "did you mean 'assertions'?"
            ],
        ),
        (
            "prompts:\n  - id: p\n    prompt: hi\n    refrence: Monday\n",
            [
                f"s.yaml:6:5: prompts[0].refrence: unknown key 'refrence' (expected one of: {PROMPT_KEYS}); "
                "did you mean 'reference'?"
            ],
        ),
        (  # the same in a template: said once, at the template, not for every row
            'template:\n  prompt: "{{ q }}"\n  asertions: [{contains: x}]\ncases: c.csv\n',
            [
                "s.yaml:5:3: template.asertions: unknown key 'asertions' (expected one of: "
                f"{PROMPT_KEYS.replace('id, ', '')}); did you mean 'assertions'?"
            ],
        ),
        (  # weight: under the type's key, in the same list item: how to write it, and no unknown type 'weight'
            "prompts:\n  - id: p\n    prompt: hi\n    assertions:\n      - contains: x\n        weight: 2\n",
            [
                "s.yaml:7:9: prompts[0].assertions[0]: must have exactly one key, got 2 (contains, weight); "
                "a weight needs the long form: {type: contains, value: ..., weight: 2}"
            ],
        ),
        (
            "prompts:\n  - id: p\n    prompt: hi\n    assertions:\n      - contains: x\n      - weight: 2\n",
            [
                "s.yaml:8:9: prompts[0].assertions[1]: 'weight' is not an assertion type: a weight goes inside its "
                "assertion, in the long form {type: T, value: V, weight: W}"
            ],
        ),
        (  # a key that is not a misspelling leaves the missing assertions an issue of their own
            "prompts:\n  - id: p\n    prompt: hi\n    foo: 1\n",
            [
                "s.yaml:4:5: prompts[0]: prompt 'p' has neither an assertion nor a reference; add assertions: or "
                "reference:",
                f"s.yaml:6:5: prompts[0].foo: unknown key 'foo' (expected one of: {PROMPT_KEYS})",
            ],
        ),
        (
            "prompts:\n  - id: p\n    prompt: hi\n    assertions:\n      - containz: x\n        weight: 2\n",
            [
                "s.yaml:7:9: prompts[0].assertions[0]: must have exactly one key, got 2 (containz, weight); "
                "a weight needs the long form: {type: containz, value: ..., weight: 2}",
                f"s.yaml:7:9: prompts[0].assertions[0]: unknown assertion type 'containz' (expected one of: {TYPES}); "
                "did you mean 'contains'?",
            ],
        ),
    ],
)
def test_the_root_cause_is_said_and_not_its_consequences(cli, write_file, body: str, lines: list[str]) -> None:
    write_file("c.csv", "id,q\nr1,hi\nr2,ho\n")
    write_file("s.yaml", f"id: root.cause\nname: n\n{body}")
    result = cli("validate", "s.yaml")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[:-1] == lines
    run = cli("run", "s.yaml")
    assert run.exit_code == 2
    assert run.stderr.splitlines()[0].startswith(f"Error: {lines[0]}")
    if len(lines) == 1:  # the root cause alone, not behind "(and 1 more)"
        assert run.stderr.splitlines() == [f"Error: {lines[0]}"]
