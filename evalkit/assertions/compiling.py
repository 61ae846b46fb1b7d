"""Turn an assertion's YAML value into a checked, ready-to-match form.

Compiling happens at load time so an invalid regex or JSON Schema is a load error (exit 2)
rather than a failure discovered after paying for completions. The grader receives the
compiled object on the ``Assertion`` record.

Regexes compile with the ``regex`` engine only once ``regexshape`` has bounded what compiling
them costs. A JSON Schema is checked against the Draft 2020-12 meta-schema (its ``pattern``s
read by the same engine, with the same bounds), then every ``$ref`` / ``$dynamicRef`` at a
schema position is resolved as validation will resolve it, against a registry that retrieves
nothing; the validator gets that registry too, so no schema ever makes evalkit fetch a URL.
"""

from __future__ import annotations

import functools
import json
import re
import time
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from evalkit.assertions.regexshape import REGEX_MAX_DEPTH, REGEX_MAX_SIZE, SIZE_CAP, regex_shape
from evalkit.assertions.registry import AssertionValueError, Context, RegexClock

REGEX_FLAGS = "imsxu"
_DELIMITED = re.compile(r"\A/(.*)/([A-Za-z]*)\Z", re.DOTALL)


@dataclass(frozen=True, slots=True)
class CompiledRegex:
    """A regex assertion as written, with its compiled pattern (the ``regex`` engine)."""

    source: str
    pattern: Any


@functools.lru_cache(maxsize=4096)
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
    return CompiledRegex(source, _compile_bounded(body, bits, source))


def _compile_bounded(body: str, bits: int, written: str) -> Any:
    """Compile with the ``regex`` engine once the pattern is known to compile in bounded memory
    and stack: the engine unrolls each counted repeat's minimum (``a{10000000}`` takes 2.7 GB)
    and parses nested groups recursively."""
    import regex

    shown = _clip(written)
    _refuse_control(body, written, shown)
    size, depth = regex_shape(body, verbose=bool(bits & regex.VERBOSE))
    if depth > REGEX_MAX_DEPTH:
        raise AssertionValueError(
            f"regex '{shown}' nests groups {depth} deep (at most {REGEX_MAX_DEPTH}); flatten the pattern"
        )
    if size > REGEX_MAX_SIZE:
        raise AssertionValueError(
            f"regex too large: '{shown}' expands to {'at least ' if size >= SIZE_CAP else ''}{size:,} items when "
            f"compiled (at most {REGEX_MAX_SIZE:,}); lower the minimum counts of its {{m}} / {{m,n}} repeats, "
            "which multiply when nested"
        )
    try:
        return regex.compile(body, bits)
    except regex.error as exc:
        raise AssertionValueError(f"invalid regex '{shown}': {exc}") from None
    except RecursionError:
        raise AssertionValueError(f"regex '{shown}' is nested too deeply to compile; flatten the pattern") from None
    except OverflowError as exc:
        raise AssertionValueError(f"invalid regex '{shown}': {exc}") from None


# what YAML's double-quoted escapes make of a regex escape ("\bno\b" is a backspace, not a
# word boundary): the escape to write back in a suggestion
_YAML_ESCAPES = {"\x00": "\\0", "\x07": "\\a", "\x08": "\\b", "\x0b": "\\v", "\x0c": "\\f", "\x1b": "\\e"}
_PATTERN_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _refuse_control(body: str, written: str, shown: str) -> None:
    """A control character in a pattern (tabs and line breaks aside) is a regex escape that YAML's
    double quotes turned into that character: refused, with the pattern in single quotes to write."""
    found = _PATTERN_CONTROL.search(body)
    if found is None:
        return
    char = found.group()
    message = f"regex '{shown}' holds the control character U+{ord(char):04X}"
    if all(c in _YAML_ESCAPES for c in _PATTERN_CONTROL.findall(body)):
        escaped = _PATTERN_CONTROL.sub(lambda m: _YAML_ESCAPES[m.group()], written)
        message += (
            f": in YAML double quotes {_YAML_ESCAPES[char]} is that character, not a regex escape; "
            f"write the pattern in single quotes ('{_clip(escaped)}') or double each backslash"
        )
    else:
        message += "; write the pattern in single quotes, with the regex escape (\\xNN) instead of the character"
    raise AssertionValueError(message)


def _clip(text: str, limit: int = 80) -> str:
    """``text`` for a one-line message: control characters escaped, cut at ``limit``."""
    text = _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


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
    from jsonschema.exceptions import SchemaError
    from referencing import Registry

    schema = json.loads(canonical)
    validator_class = _validator_class()
    try:
        validator_class.check_schema(schema, format_checker=_format_checker())
        if isinstance(schema, dict):
            _strip_dialects(schema)
            _check_refs(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path)
        reason = str(exc.cause) if isinstance(exc.cause, AssertionValueError) else exc.message
        raise AssertionValueError(f"invalid JSON Schema{' at ' + where if where else ''}: {reason}") from None
    except RecursionError:
        raise AssertionValueError("invalid JSON Schema: nested too deeply to check; flatten it") from None
    # An empty registry retrieves nothing: no schema makes evalkit fetch a URL while grading.
    # ``format`` is asserted, as promptfoo's ajv-formats does (README "Assertions").
    return validator_class(schema, registry=Registry(), format_checker=_format_checker())


SCHEMA_PATTERN_TIMEOUT_S = 1.0


@functools.lru_cache(maxsize=4096)
def schema_pattern(pattern: str) -> Any:
    """A JSON Schema ``pattern`` compiled with the ``regex`` engine, which reads ECMA-262's Unicode
    property escapes (``\\p{Letter}``) that Python's ``re`` refuses; bounded as regex assertions are."""
    import regex

    return _compile_bounded(pattern, regex.UNICODE, pattern)


def _is_pattern(instance: object) -> bool:
    if isinstance(instance, str):
        schema_pattern(instance)  # raises AssertionValueError, which jsonschema keeps as the cause
    return True


# Draft 2020-12's formats (its validation vocabulary, section 7.3)
FORMATS = frozenset(
    {"date-time", "date", "time", "duration", "email", "idn-email", "hostname", "idn-hostname", "ipv4", "ipv6",
     "uri", "uri-reference", "iri", "iri-reference", "uuid", "uri-template", "json-pointer",
     "relative-json-pointer", "regex"}
)  # fmt: skip


def unchecked_formats() -> frozenset[str]:
    """The Draft 2020-12 formats that no installed library checks: they hold for any string
    (README "Assertions" lists them)."""
    return FORMATS - set(_format_checker().checkers)


@functools.cache
def _format_checker() -> Any:
    """Draft 2020-12's format checks (those jsonschema has a library for: pyproject.toml declares
    them), with ``regex`` read by the regex engine; for checking a schema and for grading."""
    from jsonschema import Draft202012Validator, FormatChecker

    checker = FormatChecker(formats=())
    checker.checkers = dict(Draft202012Validator.FORMAT_CHECKER.checkers)
    checker.checks("regex", raises=AssertionValueError)(_is_pattern)
    return checker


@functools.cache
def _validator_class() -> Any:
    """Draft 2020-12 with every keyword that matches a regex reading it with the regex engine."""
    from jsonschema import Draft202012Validator, validators

    from evalkit.assertions import schemakeywords

    extend: Any = validators.extend  # untyped in types-jsonschema
    return extend(Draft202012Validator, schemakeywords.keywords(_search))


MIN_SEARCH_S = 0.01  # a search's time once the prompt's and the run's regex time are spent
# the context of the assertion whose schema is being applied (``jsondoc.validate`` sets it): its
# patterns are searched under the same time limits as regex assertions
SEARCHING: ContextVar[Context | None] = ContextVar("evalkit_schema_searching", default=None)


class SlowRegex(Exception):
    """A regex outlived the grader's in-loop budget: grade again off the event loop."""


class RegexGaveUp(Exception):
    """A search outlived its time limit; ``why`` says which, for a reason."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def search_slowly(pattern: Any, text: str, clock: RegexClock | None, timeout_s: float) -> bool:
    """Whether ``pattern`` matches in ``text``, searched for what ``clock`` allows (at least
    MIN_SEARCH_S), or for ``timeout_s`` without one; RegexGaveUp past it."""
    spent = None if clock is None else clock.spent()
    timeout = timeout_s if clock is None else max(clock.allowance(), MIN_SEARCH_S)
    started = time.perf_counter()
    try:
        return pattern.search(text, timeout=timeout, concurrent=True) is not None
    except TimeoutError:
        raise RegexGaveUp(f"gave up after {timeout:g} s" if spent is None else f"gave up: {spent}") from None
    finally:
        if clock is not None:
            clock.spend(time.perf_counter() - started)


def _search(pattern: str, text: str) -> bool:
    """Whether a schema's ``pattern`` matches somewhere in ``text``, under the time limits of the
    assertion's context (SEARCHING): SlowRegex past the in-loop budget, RegexGaveUp past a limit."""
    compiled = schema_pattern(pattern)
    context = SEARCHING.get()
    if context is not None and context.regex_budget_s is not None:
        try:
            return compiled.search(text, timeout=context.regex_budget_s) is not None
        except TimeoutError:
            raise SlowRegex from None
    return search_slowly(compiled, text, None if context is None else context.regex_clock, SCHEMA_PATTERN_TIMEOUT_S)


def _schema_resources(schema: dict[str, Any]) -> list[Any]:
    """Every subschema of ``schema`` at a schema position (data under enum, const, default or
    examples is not one), as ``referencing`` resources of Draft 2020-12."""
    import referencing.jsonschema

    found = []
    stack = [referencing.jsonschema.DRAFT202012.create_resource(schema)]
    while stack:
        resource = stack.pop()
        found.append(resource)
        stack.extend(resource.subresources())
    return found


def _strip_dialects(schema: dict[str, Any]) -> None:
    """Remove every ``$schema`` from this private copy: evalkit evaluates Draft 2020-12 (the
    meta-schema check has held the schema to it), and jsonschema would switch to another
    validator class, without evalkit's keywords, wherever a subschema names a dialect."""
    stripped = True
    while stripped:  # $schema decides how a subresource is read: walk again once it is gone
        stripped = False
        for resource in _schema_resources(schema):
            if isinstance(resource.contents, dict) and "$schema" in resource.contents:
                del resource.contents["$schema"]
                stripped = True


def _check_refs(schema: dict[str, Any]) -> None:
    """Every $ref and $dynamicRef at a schema position resolves within the schema (or to a
    meta-schema) exactly as validation will resolve it, with a registry that retrieves nothing."""
    import referencing.jsonschema
    from jsonschema_specifications import REGISTRY  # type: ignore[import-untyped]
    from referencing.exceptions import Unresolvable

    in_document = {id(node) for node in _nodes(schema)}
    root = referencing.jsonschema.DRAFT202012.create_resource(schema)
    # (resource, its resolver, whether the resource's own $id still applies): as jsonschema
    # descends, a subschema is resolved in its own base URI, the root and a $ref's target in theirs
    stack = [(root, REGISTRY.resolver_with_root(root), False)]
    seen: set[int] = set()
    while stack:
        resource, resolver, rebase = stack.pop()
        if id(resource.contents) in seen:
            continue
        seen.add(id(resource.contents))
        resolver = resolver.in_subresource(resource) if rebase else resolver
        contents = resource.contents
        for keyword in ("$ref", "$dynamicRef"):
            ref = contents.get(keyword) if isinstance(contents, dict) else None
            if not isinstance(ref, str):
                continue
            try:
                resolved = resolver.lookup(ref)
            except (Unresolvable, ValueError):
                raise AssertionValueError(
                    f"invalid JSON Schema: {keyword} '{_clip(ref)}' does not resolve within the schema "
                    "(nothing is fetched)"
                ) from None
            if id(resolved.contents) in in_document:  # a target outside a schema position is read as one
                target = referencing.jsonschema.DRAFT202012.create_resource(resolved.contents)
                stack.append((target, resolved.resolver, False))
        stack.extend((sub, resolver, True) for sub in resource.subresources())


def _nodes(value: Any) -> list[Any]:
    found, stack = [], [value]
    while stack:
        node = stack.pop()
        found.append(node)
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found
