"""The assertion registry is the single source of the type names: the prompt-set schema's
assertion definitions are exactly what evalkit.assertions.schema generates from it."""

from __future__ import annotations

import json

import pytest

from evalkit.assertions import registry
from evalkit.assertions import schema as assertion_schema
from evalkit.sets.validation import load_schema, schema_dir

DESIGN_41 = {
    "exact", "contains", "regex", "json_schema", "icontains", "contains_any", "contains_all", "icontains_any",
    "icontains_all", "starts_with", "equals_json", "contains_json", "levenshtein", "word_count", "latency_ms",
    "cost", "python", "tool_called", "tool_sequence", "valid_tool_calls", "tool_call_f1", "context_contains",
}  # fmt: skip
MODEL_GRADED = {"rubric", "factuality", "similar"}  # README "Model-graded assertions"
VOCABULARY = DESIGN_41 | MODEL_GRADED


def test_the_registry_holds_the_vocabulary_of_design_4_1() -> None:
    assert set(registry.positive_names()) == VOCABULARY


def test_every_type_has_its_negation() -> None:
    names = set(registry.names())
    assert names == VOCABULARY | {f"not_{n}" for n in VOCABULARY}
    for name in VOCABULARY:
        negated = registry.get(f"not_{name}")
        positive = registry.get(name)
        assert negated is not None
        assert positive is not None
        assert negated.negated
        assert negated.schema == positive.schema


def test_the_schema_file_is_generated_from_the_registry() -> None:
    on_disk = json.loads((schema_dir() / "prompt-set.schema.json").read_text(encoding="utf-8"))["$defs"]
    generated = assertion_schema.definitions()
    for key, value in generated.items():
        assert on_disk[key] == value, f"run python -m evalkit.assertions.schema: $defs.{key} is stale"


def test_schema_enums_equal_the_registry() -> None:
    defs = load_schema("prompts")["$defs"]
    assert defs["assertion_short"]["propertyNames"]["enum"] == registry.names()
    assert defs["assertion_long"]["properties"]["type"]["enum"] == registry.names()
    assert sorted(defs["assertion_short"]["properties"]) == registry.names()


def test_a_name_is_registered_once_and_never_as_a_negation() -> None:
    kind = registry.get("contains")
    assert kind is not None
    with pytest.raises(ValueError, match="registered twice"):
        registry.register("contains", check=kind.check, evaluate=kind.evaluate, schema={}, description="")
    with pytest.raises(ValueError, match="negation is derived"):
        registry.register("not_mine", check=kind.check, evaluate=kind.evaluate, schema={}, description="")


def test_unknown_names_are_none() -> None:
    assert registry.get("containz") is None
    assert registry.get("not_containz") is None
    assert registry.get("not_not_contains") is None
