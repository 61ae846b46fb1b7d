"""Model-graded assertions refused before anything is called (README "Model-graded assertions"):
exit 2 naming the assertion's file:line:col, from ``run`` (nothing called, nothing stored) and
from ``validate`` alike; and the value checks of rubric, factuality and similar."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evalkit.assertions import registry
from evalkit.assertions.judged import JudgedValue, check_factuality, check_rubric, check_similar
from evalkit.assertions.registry import AssertionValueError
from evalkit.graders.deterministic import check
from evalkit.records import Assertion
from tests.conftest import write
from tests.fakeserver import FakeServer

HERE = registry.Where(Path("."))


@pytest.fixture
def servers(isolated: Path, fake_llm: FakeServer) -> FakeServer:
    write(
        isolated / "evalkit.yaml",
        f"""
        default_provider: gen
        providers:
          - {{id: gen, adapter: openai, base_url: {fake_llm.url}/v1, model: gen-alias, max_retries: 0}}
          - {{id: judge, adapter: openai, base_url: {fake_llm.url}/v1, model: judge-alias, max_retries: 0}}
          - {{id: emb, adapter: openai, base_url: {fake_llm.url}/v1, model: text-embedding-3-small}}
        """,
    )
    return fake_llm


def set_with(assertion: str, reference: str = "") -> Path:
    return write(
        Path("sets/s.yaml"),
        f"""
        id: judged.checks
        name: Checks
        prompts:
          - id: p
            prompt: What is the refund window?{reference}
            assertions:
              - contains: days
              {assertion}
        """,
    )


def refused(cli: Any, fake: FakeServer, *args: str) -> tuple[str, str]:
    """``run`` and ``validate`` both exit 2; their error lines (nothing was called)."""
    ran = cli("run", "sets/s.yaml", *args)
    assert ran.exit_code == 2, (ran.stdout, ran.stderr)
    assert fake.calls == 0
    assert not Path.cwd().parent.joinpath("evalkit.duckdb").exists()
    checked = cli("validate")
    assert checked.exit_code == 2, (checked.stdout, checked.stderr)
    return ran.stderr.strip(), checked.stderr.strip()


def test_a_rubric_with_no_judge_is_exit_2_with_its_line(cli: Any, servers: FakeServer) -> None:
    set_with("- rubric: Polite and names the window")
    run_error, validated = refused(cli, servers)
    hint = "rubric needs a judge: set judge: {provider: ID} (or decision: {provider: ID}) in evalkit.yaml"
    assert ":8:9: " + hint in run_error
    assert ":8:9: " + hint in validated


def test_the_decision_judge_serves_rubrics_when_no_judge_is_named(cli: Any, servers: FakeServer) -> None:
    config = Path("evalkit.yaml")
    config.write_text(config.read_text() + "decision: {provider: judge}\n")
    set_with("- rubric: Polite")
    assert cli("validate").exit_code == 0


def test_an_unknown_judge_on_an_assertion_is_exit_2(cli: Any, servers: FakeServer) -> None:
    set_with("- {type: rubric, value: Polite, provider: nosuch}")
    run_error, validated = refused(cli, servers)
    assert ":8:9: rubric: unknown provider instance 'nosuch' (known: emb, gen, judge)" in run_error
    assert ":8:9: rubric: unknown provider instance 'nosuch'" in validated


def test_factuality_true_needs_a_reference(cli: Any, servers: FakeServer) -> None:
    set_with("- factuality: true")
    run_error, validated = refused_with_judge(cli, servers)
    said = "factuality: true compares with the prompt's reference, and prompt 'p' has none"
    assert said in run_error
    assert said in validated
    set_with("- factuality: true", reference="\n            reference: Thirty days.")
    assert cli("validate").exit_code == 0


def refused_with_judge(cli: Any, servers: FakeServer) -> tuple[str, str]:
    config = Path("evalkit.yaml")
    if "judge: {provider: judge}" not in config.read_text():
        config.write_text(config.read_text() + "judge: {provider: judge}\n")
    return refused(cli, servers)


@pytest.mark.parametrize(
    ("assertion", "said"),
    [
        ("- rubric: '  '", "rubric: the rubric is empty"),
        ('- rubric: ""', "rubric: the rubric is empty"),
        ("- {type: rubric, value: Polite, threshold: 1.5}", "rubric: threshold must be a number in 0..1, got 1.5"),
        ("- similar: {value: thirty days, min: 1.2}", "similar: min must be a number in 0..1, got 1.2"),
        ("- {type: similar, value: thirty days, min: -0.1}", "similar: min must be a number in 0..1, got -0.1"),
        ("- {type: contains, value: days, threshold: 0.5}", "belongs only to the model-graded assertions"),
    ],
)
def test_bad_values_are_exit_2_at_load(cli: Any, servers: FakeServer, assertion: str, said: str) -> None:
    set_with(assertion)
    run_error, validated = refused_with_judge(cli, servers)
    assert "s.yaml:8:" in run_error, run_error
    assert said in run_error, run_error
    assert said in validated


def test_similar_needs_an_embeddings_instance(cli: Any, servers: FakeServer) -> None:
    set_with("- similar: {value: Refunds within thirty days}")
    run_error, validated = refused_with_judge(cli, servers)
    said = ":8:9: similar needs an embeddings instance: set embeddings: {provider: ID} in evalkit.yaml"
    assert said in run_error
    assert said in validated


def test_similar_with_an_embeddings_instance_is_valid(cli: Any, servers: FakeServer) -> None:
    config = Path("evalkit.yaml")
    config.write_text(config.read_text() + "embeddings: {provider: emb}\n")
    set_with("- similar: {value: Refunds within thirty days, min: 0.7}")
    assert cli("validate").exit_code == 0
    assert servers.calls == 0


def test_similar_on_an_instance_that_cannot_embed_is_refused_at_plan(cli: Any, servers: FakeServer) -> None:
    config = Path("evalkit.yaml")
    config.write_text(
        config.read_text().replace("providers:", "embeddings: {provider: emb}\nproviders:")
        + "  - {id: claude, adapter: anthropic, model: claude-x}\n"
    )
    set_with("- {type: similar, value: Refunds within thirty days, provider: claude}")
    ran = cli("run", "sets/s.yaml")
    assert ran.exit_code == 2, (ran.stdout, ran.stderr)
    assert "provider 'claude' (adapter anthropic) cannot embed texts" in ran.stderr
    assert servers.calls == 0


def test_grader_decision_needs_no_judge_for_the_assertions_it_replaces(cli: Any, servers: FakeServer) -> None:
    config = Path("evalkit.yaml")
    config.write_text(config.read_text() + "decision: {provider: judge}\n")
    set_with("- similar: {value: Refunds within thirty days}")  # no embeddings instance: replaced anyway
    ran = cli("run", "sets/s.yaml", "--grader", "decision", "--format", "json")
    assert ran.exit_code == 0, ran.stderr


def test_the_value_checks() -> None:
    assert check_rubric("Polite", HERE) == JudgedValue("rubric", "Polite", 0.6)
    assert check_rubric({"value": "Polite", "threshold": 1, "provider": "j"}, HERE) == JudgedValue(
        "rubric", "Polite", 1.0, "j"
    )
    assert check_factuality(True, HERE) == JudgedValue("factuality", None, 0.6)
    assert check_similar("thirty days", HERE) == JudgedValue("similar", "thirty days", 0.8)
    assert check_similar({"value": "x", "min": 0}, HERE).threshold == 0.0
    for bad, kind in (
        (" ", check_rubric),
        ({"value": "x", "min": 0.5}, check_rubric),
        (False, check_factuality),
        ({"value": "x", "threshold": float("nan")}, check_factuality),
        ({"min": 0.5}, check_similar),
        ({"value": "x", "provider": ""}, check_similar),
    ):
        with pytest.raises(AssertionValueError):
            kind(bad, HERE)


def test_without_a_judgement_a_model_graded_assertion_is_undecided_never_held() -> None:
    for kind in ("rubric", "not_rubric", "factuality", "similar"):
        result = check(Assertion(kind, "Polite" if kind != "similar" else {"value": "x"}), "anything")
        assert result.passed is False
        assert "not judged" in result.reason


def test_the_judges_answer_is_read_defensively() -> None:
    from evalkit.graders.rubric import parse_level

    assert parse_level('{"level": 3, "reason": "Close."}') == (3, "Close.")
    assert parse_level('Sure! ```json\n{"level": "4", "reason": "All there."}\n```') == (4, "All there.")
    assert parse_level('{"level": 2.0, "justification": "Half."}') == (2, "Half.")
    # cut off at max_tokens: the level stated first still counts
    assert parse_level('{ "level": 1, "reason": "You can return them within 14 da') == (
        1,
        "You can return them within 14 da",
    )
    for unreadable in ("Level four.", '{"level": 7, "reason": "x"}', '{"level": 3.5}', '{"level": true}', ""):
        with pytest.raises(ValueError, match="no JSON object with a level 0-4"):
            parse_level(unreadable)
