"""The prompt-set schema's assertion definitions, generated from the registry.

    python -m evalkit.assertions.schema        # rewrite schemas/prompt-set.schema.json's
                                               # assertion definitions from the registry

tests/assertions/test_registry.py checks that the file holds exactly what this generates from the
built-in types; plugin types are added to the validator at load time (``with_types``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from evalkit.assertions.registry import NEGATION, AssertionType, types

SHORT = "assertion_short"
LONG = "assertion_long"


def _entries(kinds: Iterable[AssertionType]) -> dict[str, dict[str, Any]]:
    entries: dict[str, dict[str, Any]] = {}
    for kind in kinds:
        entries[kind.name] = {"description": kind.description, **kind.schema}
        entries[NEGATION + kind.name] = {"description": f"Holds exactly when {kind.name} does not.", **kind.schema}
    return dict(sorted(entries.items()))


MODEL_GRADED_KEYS = {
    "threshold": "Where a rubric or factuality assertion holds (a score in 0..1; default 0.6).",
    "min": "Where a similar assertion holds (a cosine similarity in 0..1; default 0.8).",
    "provider": "The instance that grades it (a judge, or for similar an embeddings instance).",
}


def _model_graded_keys(graded: list[str]) -> dict[str, Any]:
    """The long form's keys beside the value, for the model-graded types only (README
    "Model-graded assertions")."""
    refused = {"not": {}, "x-message": "belongs only to the model-graded assertions (rubric, factuality, similar)"}
    return {
        "if": {"properties": {"type": {"not": {"enum": graded}}}},
        "then": {"properties": dict.fromkeys(MODEL_GRADED_KEYS, refused)},
    }


def definitions(kinds: Iterable[AssertionType] | None = None) -> dict[str, Any]:
    """``$defs`` entries: ``assertion`` (either form), its short and long forms."""
    listed = list(types() if kinds is None else kinds)
    entries = _entries(listed)
    names = list(entries)
    graded = sorted(n for k in listed if k.needs & {"judge", "embeddings"} for n in (k.name, NEGATION + k.name))
    return {
        "assertion": {
            "description": "A one-key mapping (type: value), or the long form {type, value, weight}.",
            "if": {"type": "object", "required": ["type"]},
            "then": {"$ref": f"#/$defs/{LONG}"},
            "else": {"$ref": f"#/$defs/{SHORT}"},
        },
        SHORT: {
            "type": "object",
            "minProperties": 1,
            "maxProperties": 1,
            "propertyNames": {"enum": names, "x-names": "assertion type"},
            "properties": entries,
        },
        LONG: {
            "type": "object",
            "required": ["type", "value"],
            "additionalProperties": False,
            "properties": {
                "type": {"description": "The assertion type.", "enum": names},
                "value": {"description": "What the type checks against (as in the one-key form)."},
                "weight": {
                    "description": "Its share of the prompt's score (default 1; 0: recorded, not counted).",
                    "type": "number",
                    "minimum": 0,
                },
                **{key: {"description": text} for key, text in MODEL_GRADED_KEYS.items()},
            },
            "allOf": [
                _model_graded_keys(graded),
                *(
                    {"if": {"properties": {"type": {"const": name}}}, "then": {"properties": {"value": schema}}}
                    for name, schema in entries.items()
                    if set(schema) - {"description"}
                ),
            ],
        },
    }


def with_types(schema: dict[str, Any], extra: Iterable[AssertionType]) -> dict[str, Any]:
    """``schema`` (a prompt-set schema) whose assertion definitions also accept ``extra``."""
    extra = [t for t in extra if t.origin != "evalkit"]
    if not extra:
        return schema
    builtin = [t for t in types() if t.origin == "evalkit"]
    return {**schema, "$defs": {**schema["$defs"], **definitions([*builtin, *extra])}}


def main() -> None:
    path = Path(__file__).resolve().parents[2] / "schemas" / "prompt-set.schema.json"
    schema = json.loads(path.read_text(encoding="utf-8"))
    schema["$defs"] = {k: v for k, v in schema["$defs"].items() if k not in ("assertion", SHORT, LONG)}
    schema["$defs"].update(definitions())
    path.write_text(json.dumps(schema, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
