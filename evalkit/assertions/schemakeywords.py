"""The Draft 2020-12 keywords that match regexes, with the regex engine evalkit uses.

jsonschema matches ``pattern`` and ``patternProperties`` (also where ``additionalProperties``
and ``unevaluatedProperties`` ask which properties a pattern took) with Python's ``re``, which
refuses ECMA-262's Unicode property escapes (``\\p{Letter}``) and has no time limit. These
keywords do what jsonschema's do (same logic, same messages; ``_evaluated_keys`` follows
``jsonschema._utils.find_evaluated_property_keys_by_schema``) with a ``search`` function given
by the caller. Only ``evalkit.assertions.compiling`` uses them, through ``validators.extend``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

Search = Callable[[str, str], bool]
Keyword = Callable[[Any, Any, Any, Any], Iterator[Any]]


def keywords(search: Search) -> dict[str, Keyword]:
    """The keyword functions for ``jsonschema.validators.extend``."""
    return {
        "pattern": partial(_pattern, search),
        "patternProperties": partial(_pattern_properties, search),
        "additionalProperties": partial(_additional_properties, search),
        "unevaluatedProperties": partial(_unevaluated_properties, search),
    }


def _pattern(search: Search, validator: Any, patrn: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and not search(patrn, instance):
        yield ValidationError(f"{instance!r} does not match {patrn!r}")


def _pattern_properties(search: Search, validator: Any, properties: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for regex, subschema in properties.items():
        for key, value in instance.items():
            if search(regex, key):
                yield from validator.descend(value, subschema, path=key, schema_path=regex)


def _additional_properties(search: Search, validator: Any, extra: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    extras = set(_additional(instance, schema, search))
    if validator.is_type(extra, "object"):
        for key in extras:
            yield from validator.descend(instance[key], extra, path=key)
    elif not extra and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(each) for each in sorted(extras))
            patterns = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {patterns}")
        else:
            yield ValidationError(f"Additional properties are not allowed ({_extras(sorted(extras, key=str))})")


def _unevaluated_properties(
    search: Search, validator: Any, unevaluated: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    evaluated = _evaluated_keys(validator, instance, schema, search)
    invalid = [
        key
        for key in instance
        if key not in evaluated and _has_error(validator.descend(instance[key], unevaluated, path=key, schema_path=key))
    ]
    if invalid and unevaluated is False:
        yield ValidationError(f"Unevaluated properties are not allowed ({_extras(sorted(invalid, key=str))})")
    elif invalid:
        yield ValidationError(
            f"Unevaluated properties are not valid under the given schema ({_extras(invalid)} unevaluated and invalid)"
        )


def _additional(instance: dict[str, Any], schema: dict[str, Any], search: Search) -> Iterator[str]:
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    for key in instance:
        if key not in properties and not any(search(p, key) for p in patterns):
            yield key


def _extras(extras: list[Any]) -> str:
    verb = "was" if len(extras) == 1 else "were"
    return f"{', '.join(repr(extra) for extra in extras)} {verb} unexpected"


def _has_error(errors: Iterator[Any]) -> bool:
    return next(errors, None) is not None


def _evaluated_keys(validator: Any, instance: dict[str, Any], schema: Any, search: Search) -> list[str]:
    """The keys of ``instance`` that some keyword of ``schema`` evaluates, for unevaluatedProperties."""
    if validator.is_type(schema, "boolean"):
        return []
    keys: list[str] = _referenced_keys(validator, instance, schema, search)
    properties = schema.get("properties")
    if validator.is_type(properties, "object"):
        keys += properties.keys() & instance.keys()
    for keyword in ("additionalProperties", "unevaluatedProperties"):
        subschema = schema.get(keyword)
        if subschema is not None:
            keys += [key for key, value in instance.items() if not _has_error(validator.descend(value, subschema))]
    for regex in schema.get("patternProperties", {}):
        keys += [key for key in instance if search(regex, key)]
    return keys + _applied_keys(validator, instance, schema, search)


def _referenced_keys(validator: Any, instance: dict[str, Any], schema: Any, search: Search) -> list[str]:
    """The keys the schemas behind ``$ref`` and ``$dynamicRef`` evaluate."""
    keys: list[str] = []
    for keyword in ("$ref", "$dynamicRef"):
        ref = schema.get(keyword)
        if ref is not None:
            resolved = validator._resolver.lookup(ref)
            target = validator.evolve(schema=resolved.contents, _resolver=resolved.resolver)
            keys += _evaluated_keys(target, instance, resolved.contents, search)
    return keys


def _applied_keys(validator: Any, instance: dict[str, Any], schema: Any, search: Search) -> list[str]:
    """The keys the in-place applicators evaluate: dependentSchemas, the valid branches of
    allOf/oneOf/anyOf, and if/then/else."""
    keys: list[str] = []
    for key, subschema in schema.get("dependentSchemas", {}).items():
        if key in instance:
            keys += _evaluated_keys(validator, instance, subschema, search)
    for keyword in ("allOf", "oneOf", "anyOf"):
        for subschema in schema.get(keyword, []):
            if not _has_error(validator.descend(instance, subschema)):
                keys += _evaluated_keys(validator, instance, subschema, search)
    if "if" in schema:
        if validator.evolve(schema=schema["if"]).is_valid(instance):
            keys += _evaluated_keys(validator, instance, schema["if"], search)
            if "then" in schema:
                keys += _evaluated_keys(validator, instance, schema["then"], search)
        elif "else" in schema:
            keys += _evaluated_keys(validator, instance, schema["else"], search)
    return keys
