"""Turn an assertion's YAML value into a checked, ready-to-match form.

Compiling happens at load time so an invalid regex or JSON Schema is a load error (exit 2)
rather than a failure discovered after paying for completions. The grader receives the
compiled object on the ``Assertion`` record.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any

REGEX_FLAGS = "imsxu"
_DELIMITED = re.compile(r"\A/(.*)/([A-Za-z]*)\Z", re.DOTALL)


class AssertionValueError(ValueError):
    """The value of an assertion cannot be used; the message says why."""


@dataclass(frozen=True, slots=True)
class CompiledRegex:
    """A regex assertion as written, with its compiled pattern (the ``regex`` engine)."""

    source: str
    pattern: Any


def compile_regex(source: str) -> CompiledRegex:
    """``/pattern/flags`` (flags from imsxu) or a bare pattern, compiled with Unicode semantics."""
    import regex

    match = _DELIMITED.match(source)
    body, flags = (match.group(1), match.group(2)) if match else (source, "")
    unknown = sorted({f for f in flags if f not in REGEX_FLAGS})
    if unknown:
        raise AssertionValueError(
            f"unknown regex flag{'s' if len(unknown) > 1 else ''} {', '.join(repr(f) for f in unknown)} "
            f"in '{source}' (flags are any of {REGEX_FLAGS}); escape a literal slash as \\/"
        )
    if not body:
        raise AssertionValueError("empty regex pattern; it would match every response")
    bits = regex.UNICODE
    for flag, value in (("i", regex.IGNORECASE), ("m", regex.MULTILINE), ("s", regex.DOTALL), ("x", regex.VERBOSE)):
        if flag in flags:
            bits |= value
    try:
        pattern = regex.compile(body, bits)
    except regex.error as exc:
        raise AssertionValueError(f"invalid regex '{source}': {exc}") from None
    return CompiledRegex(source, pattern)


def compile_json_schema(value: Any) -> Any:
    """A Draft 2020-12 validator for a schema given as a mapping, a boolean or a JSON string."""
    schema = value
    if isinstance(value, str):
        try:
            schema = json.loads(value)
        except json.JSONDecodeError as exc:
            raise AssertionValueError(f"json_schema string is not valid JSON: {exc.msg} (char {exc.pos})") from None
        except RecursionError:
            raise AssertionValueError("json_schema string is nested too deeply to read; flatten it") from None
    if not isinstance(schema, dict | bool):
        raise AssertionValueError("json_schema must be a JSON Schema: a mapping or true/false")
    return _compiled_schema(json.dumps(schema, sort_keys=True))


@functools.lru_cache(maxsize=1024)
def _compiled_schema(canonical: str) -> Any:
    """Check and compile a schema once per distinct schema (sets often repeat one)."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    schema = json.loads(canonical)
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path)
        raise AssertionValueError(f"invalid JSON Schema{' at ' + where if where else ''}: {exc.message}") from None
    if isinstance(schema, dict):
        _check_refs(schema)
    return Draft202012Validator(schema)


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for value in node.values() for r in _refs(value)]
    if isinstance(node, list):
        return [r for value in node for r in _refs(value)]
    return []


def _nested_ids(node: Any, top: bool = True) -> bool:
    if isinstance(node, dict):
        return (not top and "$id" in node) or any(_nested_ids(v, False) for v in node.values())
    return isinstance(node, list) and any(_nested_ids(v, False) for v in node)


def _check_refs(schema: dict[str, Any]) -> None:
    """Every $ref must resolve inside the schema: nothing is fetched over the network."""
    if _nested_ids(schema):  # nested base URIs: resolution is left to validation time
        return
    import referencing
    import referencing.jsonschema
    from referencing.exceptions import Unresolvable

    base = schema["$id"] if isinstance(schema.get("$id"), str) else "urn:evalkit:assertion-schema"
    resource = referencing.jsonschema.DRAFT202012.create_resource(schema)
    resolver = referencing.Registry().with_resource(base, resource).resolver(base_uri=base)
    for ref in _refs(schema):
        try:
            resolver.lookup(ref)
        except Unresolvable:
            raise AssertionValueError(
                f"invalid JSON Schema: $ref {ref!r} does not resolve within the schema (nothing is fetched)"
            ) from None
