"""Validate plain YAML data against the JSON Schemas in ``schemas/``, with readable messages.

jsonschema's own messages speak of instances and schemas; users need ``what is wrong, where,
and what to do``. Each error is rewritten from its keyword, and the schemas carry private
annotations for the cases a keyword cannot explain: ``x-message`` (the sentence to say when a
value fails that subschema), ``x-pattern-hint`` (what a value failing its pattern should be;
with ``x-secret`` the value itself is not echoed) and ``x-names`` (what the keys of an object are, e.g. "assertion
type", so an unknown key reads "unknown assertion type 'containz' (expected one of: ...)").
"""

from __future__ import annotations

import difflib
import functools
import json
import math
import re
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

from evalkit.errors import Issue
from evalkit.sets.yamldoc import Document, PathPart, walk

SCHEMA_FILES = {
    "prompts": "prompt-set.schema.json",
    "questions": "question-set.schema.json",
    "config": "config.schema.json",
    "baseline": "baseline.schema.json",
}
_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "object": "a mapping",
    "array": "a list",
    "null": "null",
}


def schema_dir() -> Path:
    """The schemas folder: inside the installed package, else the repository's top level."""
    packaged = resources.files("evalkit") / "schemas"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "schemas"


@functools.cache
def load_schema(kind: str) -> dict[str, Any]:
    with (schema_dir() / SCHEMA_FILES[kind]).open(encoding="utf-8") as fh:
        schema: dict[str, Any] = json.load(fh)
    return schema


@functools.cache
def _validator(kind: str, plugin_types: tuple[str, ...] = ()) -> Any:
    """The validator of ``kind``; a prompt set's also accepts the plugin assertion types
    registered so far (``plugin_types`` names them: one validator per combination)."""
    from jsonschema import Draft202012Validator

    schema = load_schema(kind)
    if plugin_types:
        from evalkit.assertions import registry
        from evalkit.assertions import schema as assertion_schema

        schema = assertion_schema.with_types(schema, [t for t in registry.types() if t.name in plugin_types])
    # Local $refs are inlined once: resolving a $ref for every prompt dominates validation time.
    return Draft202012Validator(_inline(schema, schema.get("$defs", {})))


class ConfigPlugins(NamedTuple):
    """The installed plugin adapters and retriever kinds a config's validator accepts."""

    adapters: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()


@functools.cache
def _config_validator(accepted: ConfigPlugins) -> Any:
    """The config's validator, accepting the plugin adapters and kinds ``accepted`` names."""
    from jsonschema import Draft202012Validator

    schema = with_config_plugins(load_schema("config"), accepted)
    return Draft202012Validator(_inline(schema, schema.get("$defs", {})))


def with_config_plugins(schema: dict[str, Any], accepted: ConfigPlugins) -> dict[str, Any]:
    """The config schema with plugin adapters and kinds allowed: an entry of a plugin's is checked
    only for the keys evalkit reads itself (``x-plugin-keys``); its other keys are the plugin's."""
    defs = dict(schema["$defs"])
    for name, key, names in (("provider", "adapter", accepted.adapters), ("retriever", "kind", accepted.kinds)):
        if names:
            defs[name] = _accepting(defs[name], key, list(names))
    return {**schema, "$defs": defs}


def _accepting(entry: dict[str, Any], key: str, names: list[str]) -> dict[str, Any]:
    properties = entry["properties"]
    chosen = properties[key]
    built_in = {**entry, "properties": {**properties, key: {**chosen, "enum": [*chosen["enum"], *names]}}}
    own = set(entry.get("x-plugin-keys", ()))
    plugin = {
        "type": "object",
        "required": entry["required"],  # no additionalProperties: every other key is the plugin's
        "properties": {**{k: v for k, v in properties.items() if k in own}, key: {**chosen, "enum": names}},
    }
    return {"if": {"properties": {key: {"enum": names}}, "required": [key]}, "then": plugin, "else": built_in}


def _plugin_types() -> tuple[str, ...]:
    from evalkit.assertions import registry

    return tuple(t.name for t in registry.types() if t.origin != "evalkit")


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    """``node`` with every ``{"$ref": "#/$defs/name"}`` replaced by that definition (not recursive)."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline(
                {**defs[ref.removeprefix("#/$defs/")], **{k: v for k, v in node.items() if k != "$ref"}}, defs
            )
        return {k: _inline(v, defs) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


def schema_issues(kind: str, doc: Document, *, plugins: ConfigPlugins | None = None) -> list[Issue]:
    """Every schema violation in ``doc``, as located, rewritten issues; a config's ``plugins``
    are the plugin adapters and kinds it may name."""
    issues: list[Issue] = []
    if kind == "config" and plugins is not None:
        validator = _config_validator(plugins)
    else:
        validator = _validator(kind, _plugin_types() if kind == "prompts" else ())
    if kind == "prompts":
        issues = _prompt_set_issues(validator, doc)
    else:
        for error in validator.iter_errors(doc.data):
            issues.extend(_rewrite(error, doc))
    if doc.finite or not _has_non_finite(doc.data):
        return issues
    flagged = {i.path for i in issues}
    for path, value in walk(doc.data):
        # NaN passes minimum/maximum checks; no evalkit number may be infinite or NaN.
        if isinstance(value, float) and not math.isfinite(value) and path[:1] != ("tolerances",):
            issue = doc.issue(path, f"must be a finite number, got {value!r}")
            if issue.path not in flagged:
                issues.append(issue)
    return issues


def _has_non_finite(data: Any) -> bool:
    """Whether any number in ``data`` is infinite or NaN (one pass, no paths: they rarely are)."""
    stack = [data]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, float) and not math.isfinite(node):
            return True
    return False


def _prompt_set_issues(validator: Any, doc: Document) -> list[Issue]:
    """A prompt set's schema issues: a large set's by parts (evalkit/sets/schemaparts.py), a small
    one's whole, as written."""
    from evalkit.sets.schemaparts import large_set_issues

    by_parts = large_set_issues(validator, doc, _rewrite)
    if by_parts is not None:
        return by_parts
    return [i for e in validator.iter_errors(doc.data) for i in _rewrite(e, doc)]


def describe(value: Any) -> str:
    """A short description of a value for messages: its type and a clipped repr."""
    if isinstance(value, bool):
        kind = "a boolean"
    elif value is None:
        return "null"
    elif isinstance(value, int):
        kind = "an integer"
    elif isinstance(value, float):
        kind = "a number"
    elif isinstance(value, str):
        return f"the string {_clip(value)}" if value else "an empty string"
    elif isinstance(value, dict):
        return "a mapping"
    elif isinstance(value, list):
        return "a list"
    else:
        kind = type(value).__name__
    return f"{kind} ({_clip(value)})"


def _clip(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "...'"


def _expected_types(schema_type: Any) -> str:
    types = schema_type if isinstance(schema_type, list) else [schema_type]
    return " or ".join(_TYPE_NAMES.get(str(t), str(t)) for t in types)


def _rewrite(error: Any, doc: Document) -> list[Issue]:
    path: tuple[PathPart, ...] = tuple(error.absolute_path)
    schema = error.schema if isinstance(error.schema, dict) else {}
    keyword = error.validator
    if "propertyNames" in error.relative_schema_path and keyword in ("pattern", "not"):  # a key refused
        key = str(error.instance)
        hint = schema.get("x-pattern-hint" if keyword == "pattern" else "x-message") or "is not allowed here"
        return [doc.issue((*path, key), f"{_clip(key)} {hint}", key=True)]
    if "propertyNames" in error.relative_schema_path:
        names = schema.get("x-names", "key")
        allowed = [str(v) for v in schema.get("enum", [])]
        if names == "assertion type" and error.instance == "weight":  # a weight, not a type: the root cause
            return _misplaced_weight(doc, path)
        return [_unknown_key_issue(doc, path, str(error.instance), names, allowed)]
    if keyword == "additionalProperties" and isinstance(error.instance, dict):
        known = schema.get("properties", {})
        allowed = sorted(known)
        return [_unknown_key_issue(doc, path, k, "key", allowed) for k in error.instance if k not in known]
    custom = schema.get("x-message")
    if custom and keyword != "required":
        got = "" if keyword == "not" else f", got {describe(error.instance)}"  # never echo a secret
        return [doc.issue(path, f"{custom}{got}")]
    message = _message(keyword, error, schema)
    return [doc.issue(path, message)]


def _message(keyword: str, error: Any, schema: dict[str, Any]) -> str:
    value = error.instance
    if keyword == "required":
        missing = next((k for k in error.validator_value if k not in value), "?")
        return f"missing required key '{missing}'"
    if keyword == "type":
        return f"expected {_expected_types(error.validator_value)}, got {describe(value)}"
    if keyword in ("minLength", "pattern") and isinstance(value, str) and not value.strip():
        return "must not be empty"
    if keyword == "pattern":
        hint = schema.get("x-pattern-hint", f"must match {error.validator_value}")
        return hint if schema.get("x-secret") else f"{_clip(value)} {hint}"
    if keyword == "enum":
        options = _options([str(v) for v in error.validator_value])
        return f"{_clip(value)} is not one of: {options}{_did_you_mean(value, error.validator_value)}"
    if keyword == "minItems":
        return f"must have at least {error.validator_value} item{'s' if error.validator_value != 1 else ''}"
    if keyword == "minimum":
        return f"must be at least {error.validator_value}, got {_clip(value)}"
    if keyword == "exclusiveMinimum":
        return f"must be greater than {error.validator_value}, got {_clip(value)}"
    if keyword == "maximum":
        return f"must be at most {error.validator_value}, got {_clip(value)}"
    if keyword == "minProperties":
        return "must not be empty"
    if keyword == "maxProperties":
        return _one_key_message(value)
    if keyword == "not":
        return "is not allowed here"
    return str(error.message)


def _one_key_message(value: dict[str, Any]) -> str:
    """A mapping that must have one key (an assertion's short form) has more."""
    keys = ", ".join(str(k) for k in value)
    others = [str(k) for k in value if k != "weight"]
    if "weight" in value and len(others) == 1:  # ``- contains: x`` with ``weight: 2`` under it
        return (
            f"must have exactly one key, got {len(value)} ({keys}); a weight needs the long form: "
            f"{{type: {others[0]}, value: ..., weight: {_clip(value['weight'])}}}"
        )
    return f"must have exactly one key, got {len(value)} ({keys}); put each in its own list item"


SUGGEST_CUTOFF = 0.75  # difflib's ratio; at its default 0.6 'vars' suggested 'params'


def suggest(word: str, candidates: Sequence[str]) -> str | None:
    """The candidate ``word`` is most likely a misspelling of, or None. Never one that differs from
    it by a leading word (a prefix stripped or added: 'not_contains' is the opposite of 'contains',
    not a typo of it), nor one merely as close as two different short words are."""
    fitting = [c for c in candidates if not _other_name(word, c)]
    close = difflib.get_close_matches(word, fitting, n=1, cutoff=SUGGEST_CUTOFF)
    if close:
        return close[0]
    negated = _NEGATED.fullmatch(word)
    if negated and not word.casefold().startswith("not_"):  # 'notcontains' means 'not_contains'
        spelt = "not_" + negated.group(1).lstrip("_- ")
        close = difflib.get_close_matches(
            spelt, [c for c in candidates if c.startswith("not_")], n=1, cutoff=SUGGEST_CUTOFF
        )
        return close[0] if close else None
    return None


def _other_name(word: str, candidate: str) -> bool:
    """``word`` and ``candidate`` are different names, not one misspelt: one is negated and the
    other not, or one is the other with leading words added (``not_contains``, ``strict_exact``)."""
    a, b = word.casefold(), candidate.casefold()
    if a.startswith("not_") != b.startswith("not_"):
        return True
    if not b.startswith("not_") and _negation_of_a_name(a, candidate):
        return True
    short, long = sorted((a.split("_"), b.split("_")), key=len)
    return len(short) < len(long) and long[-len(short) :] == short


_NEGATED = re.compile(r"(?:not|no)[\s_-]?(.+)", re.IGNORECASE)


def _negation_of_a_name(word: str, candidate: str) -> bool:
    """``word`` reads as a negation of ``candidate`` spelt another way ('notcontains', 'no-contains',
    'nopython'): offering ``candidate`` would answer it with its opposite."""
    found = _NEGATED.fullmatch(word)
    if found is None:
        return False
    rest = found.group(1).lstrip("_- ")
    close = difflib.SequenceMatcher(None, rest, candidate.casefold()).ratio()
    return rest == candidate.casefold() or close >= SUGGEST_CUTOFF


def _did_you_mean(word: Any, candidates: Sequence[Any]) -> str:
    found = suggest(word, [str(c) for c in candidates]) if isinstance(word, str) else None
    return f"; did you mean '{found}'?" if found else ""


def _options(allowed: list[str]) -> str:
    """The allowed names for a message; names that come with their not_ form listed once."""
    present = set(allowed)
    negated = [a for a in allowed if a.startswith("not_") and a[4:] in present]
    if not negated:
        return ", ".join(allowed)
    shown = [a for a in allowed if a not in set(negated)]
    each = "each" if len(negated) == len(shown) else "most"
    return f"{', '.join(shown)}; {each} also as not_<type>"


def _misplaced_weight(doc: Document, path: tuple[PathPart, ...]) -> list[Issue]:
    """``weight:`` where an assertion type goes: beside a type in one item (that item's "exactly
    one key" issue says how to write it), or alone in an item of its own."""
    item: Any = doc.data
    for part in path:
        if isinstance(item, dict):
            item = item.get(part)
        elif isinstance(item, list) and isinstance(part, int) and part < len(item):
            item = item[part]
        else:
            item = None
    if isinstance(item, dict) and len(item) > 1:
        return []
    message = (
        "'weight' is not an assertion type: a weight goes inside its assertion, in the long form "
        "{type: T, value: V, weight: W}"
    )
    return [doc.issue(path, message)]


def _unknown_key_issue(doc: Document, path: tuple[PathPart, ...], key: str, names: str, allowed: list[str]) -> Issue:
    hint = _did_you_mean(key, allowed)
    message = f"unknown {names} '{key}' (expected one of: {_options(allowed)}){hint}"
    if names != "key":  # a typed key (an assertion type): point at the list item, not the key
        return doc.issue(path, message)
    return doc.issue((*path, key), message, key=True)
