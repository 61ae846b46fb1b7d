"""What the loader suggests and says: "did you mean" only for a typo (never the opposite or a
stripped form), and a wrong indent called inconsistent indentation."""

from __future__ import annotations

from typing import Any


def one_assertion(kind: str, prompt_key: str = "") -> str:
    return f"""
    id: t.a
    name: A
    prompts:
      - id: p
        prompt: hi{prompt_key}
        assertions:
          - {kind}: x
    """


def test_unknown_names_get_a_suggestion_only_when_it_is_a_typo(cli: Any, write_file: Any) -> None:
    write_file("negated.yaml", one_assertion("not_containz"))
    write_file("valid_negation.yaml", one_assertion("not_contains"))
    write_file("vars.yaml", one_assertion("contains", "\n        inputs: {a: 1}"))
    write_file("typo.yaml", one_assertion("containz"))
    write_file("cfg/evalkit.yaml", "providers: [{id: x, adapter: openia, base_url: 'http://127.0.0.1:9/v1'}]\n")
    expected = "(expected one of: contains, contains_all, contains_any, contains_json, context_contains, cost, equals_json, exact, factuality, icontains, icontains_all, icontains_any, json_schema, latency_ms, levenshtein, python, regex, rubric, similar, starts_with, tool_call_f1, tool_called, tool_sequence, valid_tool_calls, word_count; each also as not_<type>)"
    assert cli("validate", "valid_negation.yaml").exit_code == 0  # not_contains exists (README "Negation")
    assert cli("validate", "negated.yaml").stderr.splitlines()[0] == (
        f"negated.yaml:7:9: prompts[0].assertions[0]: unknown assertion type 'not_containz' {expected}; "
        "did you mean 'not_contains'?"
    )
    assert cli("validate", "vars.yaml").stderr.splitlines()[0] == (
        "vars.yaml:6:5: prompts[0].inputs: unknown key 'inputs' "
        "(expected one of: assertions, critical, id, messages, params, prompt, reference, system, threshold, tool_choice, tools, vars)"
    )
    assert cli("validate", "typo.yaml").stderr.splitlines()[0] == (
        f"typo.yaml:7:9: prompts[0].assertions[0]: unknown assertion type 'containz' {expected}; "
        "did you mean 'contains'?"
    )
    assert cli("validate", "cfg/evalkit.yaml").stderr.splitlines()[0] == (
        "cfg/evalkit.yaml:1:30: providers[0].adapter: 'openia' is not one of: openai, anthropic, replay, local, http, python, command; "
        "did you mean 'openai'?"
    )


def test_suggestions_never_name_the_opposite_or_a_stripped_form() -> None:
    from evalkit.sets.validation import suggest

    assert suggest("not_contains", ["contains", "exact"]) is None
    assert suggest("contains", ["not_contains"]) is None
    assert suggest("vars", ["params", "prompt"]) is None
    assert suggest("strict_exact", ["exact"]) is None
    assert suggest("regx", ["regex"]) == "regex"
    assert suggest("metdata", ["none", "metadata", "redacted", "full"]) == "metadata"
    assert suggest("api_key", ["api_key_env", "base_url"]) == "api_key_env"


def test_a_wrong_indent_is_called_inconsistent_indentation(cli: Any, write_file: Any) -> None:
    write_file(
        "indent.yaml",
        """
        id: t.i
        name: I
        prompts:
          - id: p
            prompt: hi
          assertions:
              - contains: x
        """,
    )
    result = cli("validate", "indent.yaml")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == (
        "indent.yaml:6:3: YAML error: the indentation is inconsistent at line 6: indent it like the other keys "
        "(or list items) of the block it belongs to"
    )
    assert "'?'" not in result.stderr
