"""``json_schema`` against the official JSON-Schema-Test-Suite, Draft 2020-12 (README "Assertions").

The suite's every draft2020-12 group (and its optional ECMA-262 groups whose patterns use Unicode
property escapes) is vendored, compacted, in tests/data/jsonschema_suite/draft2020-12.json; its
vendor.py regenerates it and says where it comes from. A group whose schema needs a document of
the suite's remotes/ folder (decided by jsonschema when vendoring, not by evalkit) must be a load
error, since evalkit fetches nothing; every other group must load, and every case must get the
suite's verdict (but a string that is not of its format, which evalkit asserts).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from evalkit.assertions.compiling import AssertionValueError, compile_json_schema, unchecked_formats
from evalkit.assertions.jsondoc import json_schema
from evalkit.assertions.registry import Context

SUITE = Path(__file__).resolve().parents[1] / "data" / "jsonschema_suite" / "draft2020-12.json"
GROUPS: list[dict[str, Any]] = json.loads(SUITE.read_text(encoding="utf-8"))["groups"]

# Its dialect's meta-schema is a remote document: evalkit evaluates the schema as Draft 2020-12.
DIALECT_NOT_FETCHED = {("vocabulary.json", "schema that uses custom metaschema with with no validation vocabulary")}


def test_the_vendored_suite_is_whole() -> None:
    assert len(GROUPS) > 350
    assert sum(len(g["tests"]) for g in GROUPS) > 1200
    assert {g["file"] for g in GROUPS} >= {"ref.json", "refRemote.json", "dynamicRef.json", "pattern.json"}
    assert SUITE.stat().st_size < 1_000_000


@pytest.mark.parametrize("group", GROUPS, ids=[f"{g['file']}: {g['description']}" for g in GROUPS])
def test_draft2020_12(group: dict[str, Any]) -> None:
    if group["needs_remote"]:
        with pytest.raises(AssertionValueError, match=r"does not resolve within the schema \(nothing is fetched\)"):
            compile_json_schema(group["schema"])
        return
    validator = compile_json_schema(group["schema"])
    got = [(t["description"], json_schema(validator, json.dumps(t["data"]), Context()).passed) for t in group["tests"]]
    if (group["file"], group["description"]) in DIALECT_NOT_FETCHED:
        schema = {k: v for k, v in group["schema"].items() if k != "$schema"}
        expected = [(t["description"], Draft202012Validator(schema).is_valid(t["data"])) for t in group["tests"]]
    else:
        expected = [(t["description"], t["valid"] and not _asserted_format(group, t)) for t in group["tests"]]
    assert got == expected


def _asserted_format(group: dict[str, Any], test: dict[str, Any]) -> bool:
    """Whether the case is a string that is not of its format, which the suite only annotates by
    default and evalkit asserts, as promptfoo does (README "Set files"; its formats no library
    checks hold for any string)."""
    name = group["schema"].get("format") if group["file"] == "format.json" else None
    return name is not None and name not in unchecked_formats() and test["description"].startswith("invalid ")
