"""A large prompt set validated through jsonschema part by part, each part once where it repeats.

Why: jsonschema walks a document by descending into each value with a new validator (a new
resource and an evolved validator per level); for 100,000 prompts that walk, not the checks it
makes, was most of loading a set (bench/README.md, session 10). The verdict is the same when
the parts are validated apart, because of what the prompt schema says: a prompt is valid when
its keys are allowed together (``type``, ``required``, ``additionalProperties``, an ``if`` on
which keys are there: nothing that reads a value) and each value is valid against its
property's subschema; an assertion list is valid when each item is. So:

- the document is validated whole with its first prompt only (what ``prompts`` itself must be:
  a list, not empty; nothing else in the schema reads the list);
- each other prompt's keys once per key set, by validating the first prompt with those keys
  whole: when it is valid, every prompt with the same keys needs only its values checked, each
  against its property's validator, built once (a mapping or list value once per distinct value);
- each distinct assertion once against the assertion schema (sets repeat their checks).

A prompt or an assertion that fails any part is validated again whole where it stands, so its
issues are the ones a whole validation gives, with their own path. ``separable`` checks that the
schema says no more than this (else the set is validated whole, as a small set is); the parts
use jsonschema's own validators for every check. tests/sets/test_schema_parts.py holds the two
ways to the same issues.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evalkit.errors import Issue
from evalkit.sets.yamldoc import Document

MIN_PROMPTS = 64  # below this a set is validated whole, as written

# What a prompt's schema may say about the prompt itself, beside ``properties``, for its verdict
# to depend on which keys it has and on nothing else (with the words that only explain).
_KEY_WORDS = frozenset({"type", "required", "additionalProperties", "if", "then", "else", "not"})
_PROSE = frozenset({"description", "title", "x-message", "x-names", "$comment"})

Rewrite = Callable[[Any, Document], list[Issue]]


class Parts:
    """The validators of a prompt set's parts, built once per set validator."""

    __slots__ = ("assertion", "prompt", "values")

    def __init__(self, prompt: Any, values: dict[str, Any], assertion: Any) -> None:
        self.prompt, self.values, self.assertion = prompt, values, assertion


def large_set_issues(validator: Any, doc: Document, rewrite: Rewrite) -> list[Issue] | None:
    """The schema issues of a prompt set of ``MIN_PROMPTS`` prompts or more, validated by parts;
    None for a smaller set, or a schema the parts cannot stand for (validate it whole)."""
    data = doc.data
    prompts = data.get("prompts") if isinstance(data, dict) else None
    if not isinstance(prompts, list) or len(prompts) < MIN_PROMPTS:
        return None
    parts = _parts(validator)
    if parts is None:
        return None
    held: list[tuple[int, list[Any]]] = []  # each prompt's assertion list, checked item by item
    first = _without_assertions(prompts[0], 0, held)
    issues = [i for e in validator.iter_errors({**data, "prompts": [first]}) for i in rewrite(e, doc)]
    shapes: dict[tuple[str, ...], bool] = {}
    seen: dict[tuple[str, str], bool] = {}
    for index in range(1, len(prompts)):
        prompt = _without_assertions(prompts[index], index, held)
        if not _holds(parts, prompt, shapes, seen):
            issues.extend(_located(parts.prompt, prompt, ("prompts", index), doc, rewrite))
    issues.extend(_assertion_issues(parts.assertion, held, doc, rewrite))
    return issues


def _without_assertions(prompt: Any, index: int, held: list[tuple[int, list[Any]]]) -> Any:
    """``prompt`` with an empty assertion list when it lists some (kept in ``held``)."""
    items = prompt.get("assertions") if type(prompt) is dict else None
    if type(items) is not list or not items:
        return prompt
    held.append((index, items))
    return {**prompt, "assertions": []}


def _holds(parts: Parts, prompt: Any, shapes: dict[tuple[str, ...], bool], seen: dict[tuple[str, str], bool]) -> bool:
    """Whether ``prompt`` (its assertions taken out) is valid: its key set once, its values each."""
    if type(prompt) is not dict:
        return False
    shape = tuple(prompt)
    if not shapes.get(shape, False):
        valid = parts.prompt.is_valid(prompt)
        if valid:  # a key set is known good only from a prompt that was valid whole
            shapes[shape] = True
        return bool(valid)
    values = parts.values
    for key, value in prompt.items():
        check = values.get(key)
        if check is None:  # a key the schema says nothing about (it let the key set through)
            continue
        if type(value) is dict or type(value) is list:
            memo = (key, repr(value))  # equal repr, equal plain value
            valid = seen.get(memo)
            if valid is None:
                valid = seen[memo] = check.is_valid(value)
        else:
            valid = check.is_valid(value)
        if not valid:
            return False
    return True


def _assertion_issues(
    assertion: Any, held: list[tuple[int, list[Any]]], doc: Document, rewrite: Rewrite
) -> list[Issue]:
    """Each distinct assertion checked once; one that fails, again where it stands."""
    issues: list[Issue] = []
    verdicts: dict[str, bool] = {}
    for index, items in held:
        for a_index, item in enumerate(items):
            key = repr(item)  # equal repr, equal plain value
            valid = verdicts.get(key)
            if valid is None:
                valid = verdicts[key] = assertion.is_valid(item)
            if not valid:
                issues.extend(_located(assertion, item, ("prompts", index, "assertions", a_index), doc, rewrite))
    return issues


def _located(validator: Any, value: Any, path: tuple[str | int, ...], doc: Document, rewrite: Rewrite) -> list[Issue]:
    """The issues of ``value`` validated whole, at ``path`` in the document."""
    issues = []
    for error in validator.iter_errors(value):
        error.path.extendleft(reversed(path))
        issues.extend(rewrite(error, doc))
    return issues


def _parts(validator: Any) -> Parts | None:
    """The part validators of the set validator ``validator`` (built once), or None when its
    schema says more than ``separable`` lets the parts stand for."""
    found = _PARTS.get(id(validator))
    if found is None or found[0] is not validator:
        found = _PARTS[id(validator)] = (validator, _built_parts(validator.schema))
    return found[1]


def _built_parts(schema: dict[str, Any]) -> Parts | None:
    from jsonschema import Draft202012Validator

    if not separable(schema):
        return None
    prompt = schema["properties"]["prompts"]["items"]
    properties = prompt["properties"]
    values = {key: Draft202012Validator(sub) for key, sub in properties.items() if key != "assertions"}
    values["assertions"] = Draft202012Validator({k: v for k, v in properties["assertions"].items() if k != "items"})
    return Parts(Draft202012Validator(prompt), values, Draft202012Validator(properties["assertions"]["items"]))


def separable(schema: dict[str, Any]) -> bool:
    """Whether a set schema (its ``$ref``s inlined) says no more than the parts check: nothing but
    its ``properties`` reads the prompts list; that is a list of at least one prompt (a longer set
    keeps that with its first prompt alone); a prompt's own words read which keys it has, the rest
    is said by its properties; an assertion list is a list of items each checked alone."""
    listed = schema.get("properties", {}).get("prompts")
    prompt = listed.get("items") if isinstance(listed, dict) else None
    if not isinstance(listed, dict) or not isinstance(prompt, dict) or not _leaves_prompts(schema):
        return False
    if set(listed) - _PROSE - {"type", "minItems", "items"} or listed.get("type") != "array":
        return False
    properties = prompt.get("properties")
    if listed.get("minItems", 0) > 1 or not isinstance(properties, dict):
        return False
    if not _keys_only({k: v for k, v in prompt.items() if k != "properties"}):
        return False
    if not isinstance(prompt.get("additionalProperties", True), bool):
        return False
    assertions = properties.get("assertions")
    return isinstance(assertions, dict) and not set(assertions) - _PROSE - {"type", "items"}


def _leaves_prompts(schema: Any, top: bool = True) -> bool:
    """Whether no word of a set's schema reads the ``prompts`` list but the top ``properties``
    (the parts validate the document with its first prompt only)."""
    if not isinstance(schema, dict):
        return True
    if any(word in schema for word in ("patternProperties", "dependentSchemas", "unevaluatedProperties")):
        return False
    properties = schema.get("properties", {})
    if "prompts" in properties and not top:
        return False
    if not isinstance(schema.get("additionalProperties", True), bool) and "prompts" not in properties:
        return False
    nested = [schema[word] for word in ("if", "then", "else", "not") if word in schema]
    nested += [sub for word in ("allOf", "anyOf", "oneOf") for sub in schema.get(word, ())]
    return all(_leaves_prompts(sub, top=False) for sub in nested)


def _keys_only(schema: Any) -> bool:
    """Whether ``schema`` reads no more of an object than which keys it has (``properties`` aside
    at the top, which the parts check value by value)."""
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict) or set(schema) - _KEY_WORDS - _PROSE:
        return False
    return all(_keys_only(schema[word]) for word in ("if", "then", "else", "not") if word in schema)


_PARTS: dict[int, tuple[Any, Parts | None]] = {}
