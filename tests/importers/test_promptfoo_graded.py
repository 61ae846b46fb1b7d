"""``evalkit import promptfoo`` of model-graded assertions: what converts to rubric, factuality and
similar, with which threshold, weight and provider, and what is listed with a hint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evalkit.sets.yamldoc import parse_document

CONFIG = """
prompts: ['Answer briefly: {{{{question}}}}']
providers: [openai:chat:gpt-4o-mini, {{id: 'openai:chat:gpt-4o', label: judge}}]
tests:
  - vars: {{question: Do you ship abroad?}}
    assert:
      - {{type: contains, value: ship}}
{asserts}
"""


def imported(write_file: Any, cli: Any, asserts: str, *, grader: str = "") -> tuple[Any, list[Any]]:
    """The import's result and the first prompt's assertions as written."""
    text = CONFIG.format(asserts=asserts)
    if grader:
        text += f"defaultTest:\n  options:\n    provider: {grader}\n"
    write_file("promptfooconfig.yaml", text)
    result = cli("import", "promptfoo", "promptfooconfig.yaml", "--out", "sets")
    assert result.exit_code == 0, result.stderr
    written = Path("sets/promptfooconfig.yaml")
    path = written if written.exists() else next(Path("sets").glob("*.yaml"))
    data = parse_document(path.read_text(encoding="utf-8"), str(path)).data
    return result, list(data["prompts"][0]["assertions"])[1:]


@pytest.mark.parametrize(
    ("written", "converted"),
    [
        ("- {type: llm-rubric, value: Is polite}", {"rubric": "Is polite"}),
        ("- {type: model-graded-closedqa, value: Says yes or no}", {"rubric": "Says yes or no"}),
        ("- {type: factuality, value: We ship to 40 countries.}", {"factuality": "We ship to 40 countries."}),
        ("- {type: model-graded-factuality, value: We ship.}", {"factuality": "We ship."}),
        (
            "- {type: llm-rubric, value: Is polite, threshold: 0.9, weight: 0}",
            {"type": "rubric", "value": "Is polite", "threshold": 0.9, "weight": 0},
        ),
        ("- {type: not-llm-rubric, value: Is rude}", {"not_rubric": "Is rude"}),
        ("- {type: similar, value: We ship abroad.}", {"type": "similar", "value": "We ship abroad.", "min": 0.75}),
        (
            "- {type: similar:cosine, value: [We ship abroad.], threshold: 0.9, weight: 2}",
            {"type": "similar", "value": "We ship abroad.", "min": 0.9, "weight": 2},
        ),
        (
            "- {type: llm-rubric, value: Is polite, provider: 'openai:gpt-4o-mini'}",
            {"type": "rubric", "value": "Is polite", "provider": "gpt-4o-mini"},
        ),
        (
            "- {type: factuality, value: We ship., provider: {id: 'openai:chat:gpt-4o', config: {temperature: 0}}}",
            {"type": "factuality", "value": "We ship.", "provider": "judge"},
        ),
    ],
)
def test_model_graded_assertions_convert(
    written: str, converted: dict[str, Any], isolated: Path, cli: Any, write_file: Any
) -> None:
    result, assertions = imported(write_file, cli, "      " + written)
    assert assertions == [converted]
    assert result.stdout.splitlines()[-1].endswith("2 of 2 assertions converted.")


def test_the_tests_grading_provider_is_every_judged_assertions_unless_it_names_its_own(
    isolated: Path, cli: Any, write_file: Any
) -> None:
    asserts = """      - {type: llm-rubric, value: Is polite}
      - {type: llm-rubric, value: Is short, provider: 'openai:chat:gpt-4o-mini'}
      - {type: similar, value: We ship abroad.}"""
    _, assertions = imported(
        write_file, cli, asserts, grader="{text: 'openai:gpt-4o', embedding: 'openai:embedding:e3'}"
    )
    assert assertions == [
        {"type": "rubric", "value": "Is polite", "provider": "judge"},
        {"type": "rubric", "value": "Is short", "provider": "gpt-4o-mini"},
        {"type": "similar", "value": "We ship abroad.", "min": 0.75},  # embeddings come from embeddings:
    ]


def test_a_grading_provider_that_is_not_the_configs_is_listed(isolated: Path, cli: Any, write_file: Any) -> None:
    asserts = "      - {type: llm-rubric, value: Is polite, provider: 'vertex:gemini-1.5-pro'}"
    result, assertions = imported(write_file, cli, asserts)
    assert assertions == [{"rubric": "Is polite"}]  # asks evalkit.yaml's judge instead
    assert (
        "  promptfooconfig.yaml:7: rubric: grading provider vertex:gemini-1.5-pro is not one of the config's "
        "providers: add an evalkit.yaml instance for it and name it with provider: on the assertion, or as "
        "judge: {provider: ID}"
    ) in result.stdout.splitlines()


@pytest.mark.parametrize(
    ("written", "listed"),
    [
        ("- {type: llm-rubric, value: '  '}", "llm-rubric: llm-rubric needs the rubric as its value (a non-empty string)"),
        ("- {type: factuality}", "factuality: factuality needs the facts as its value (a non-empty string)"),
        ("- {type: llm-rubric, value: Is polite, threshold: 2}", "llm-rubric: llm-rubric threshold 2: evalkit's is a number in 0..1"),
        ("- {type: similar, value: [a, b]}", "similar: promptfoo passes when any of several expected texts is similar"),
        ("- {type: similar:euclidean, value: a}", "similar:euclidean: evalkit's similar is the cosine similarity"),
        ("- {type: llm-rubric, value: x, transform: output.trim()}", "llm-rubric with transform: evalkit grades the raw"),
        ("- {type: g-eval, value: Coherent}", "g-eval: G-Eval's criteria and its step-by-step scoring"),
        ("- {type: answer-relevance}", "answer-relevance: it embeds questions generated from the answer"),
        ("- {type: context-recall, value: x}", "context-recall: RAG context check"),
    ],
)  # fmt: skip
def test_what_does_not_convert_is_listed_with_a_hint(
    written: str, listed: str, isolated: Path, cli: Any, write_file: Any
) -> None:
    result, assertions = imported(write_file, cli, "      " + written)
    assert [next(iter(a)) for a in assertions] == ["regex"]  # the marker that fails until replaced
    assert any(line.startswith(f"  promptfooconfig.yaml:7: {listed}") for line in result.stdout.splitlines()), (
        result.stdout
    )


def test_a_rubric_is_rendered_with_the_tests_vars_and_keeps_its_metric(
    isolated: Path, cli: Any, write_file: Any
) -> None:
    asserts = "      - {type: llm-rubric, value: 'Answers: {{question}}', metric: tone}"
    result, assertions = imported(write_file, cli, asserts)
    assert assertions == [{"rubric": "Answers: Do you ship abroad?"}]
    assert "  promptfooconfig.yaml:7: rubric: metric 'tone' kept as a comment: evalkit reports no named metrics" in (
        result.stdout.splitlines()
    )


def test_a_csv_similar_shorthand_keeps_its_threshold(isolated: Path, cli: Any, write_file: Any) -> None:
    write_file("tests.csv", "question,__expected1\nDo you ship abroad?,similar(0.8): We ship abroad.\n")
    write_file("promptfooconfig.yaml", "prompts: ['Answer: {{question}}']\ntests: file://tests.csv\n")
    result = cli("import", "promptfoo", "promptfooconfig.yaml", "--out", "sets")
    assert result.exit_code == 0, result.stderr
    (path,) = Path("sets").glob("*.yaml")
    data = parse_document(path.read_text(encoding="utf-8"), str(path)).data
    assert list(data["prompts"][0]["assertions"]) == [{"type": "similar", "value": "We ship abroad.", "min": 0.8}]


def test_a_grading_prompt_override_is_listed(isolated: Path, cli: Any, write_file: Any) -> None:
    write_file("promptfooconfig.yaml", CONFIG.format(asserts="      - {type: llm-rubric, value: Is polite}")
               + "    options: {rubricPrompt: 'Grade this: {{output}}'}\n")  # fmt: skip
    result = cli("import", "promptfoo", "promptfooconfig.yaml", "--out", "sets")
    assert result.exit_code == 0, result.stderr
    assert (
        "  promptfooconfig.yaml:8: options.rubricPrompt: grading prompt override: evalkit's judges ask with their "
        "own fixed, versioned profiles"
    ) in result.stdout.splitlines()
