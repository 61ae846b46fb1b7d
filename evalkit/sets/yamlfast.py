"""The YAML fast path: a set file's plain data built straight from the parser's events.

Why: a valid set needs only its plain data; the node graph, which the full path
(``yamldoc._parse_slowly``) composes and then constructs, is needed only to say where an issue
is, and ``Document`` composes it then. Figure (bench/README.md, loading for issue 17): parsing
20,000 prompts took 8.1 s through the node graph and 1.4 s here.

What it takes: plain mappings, lists and scalars, resolved by the same YAML 1.2 core schema
(``yamldoc.CORE_SCHEMA``) as the full path. It declines (``DECLINED``) what needs the full path's
checks or messages: anchors and aliases (the alias bomb check), tags, merge keys, keys that are
not strings or repeat, nesting deeper than ``yamldoc.MAX_DEPTH``, several documents, directives,
surrogate escapes, infinite and NaN numbers (so a document read here holds none, and the schema
step need not look: ``Document.finite``), and any parser error (the full path says what is
wrong, and where). So both
paths give the same data for what this one takes (tests/sets/test_fast_yaml.py holds them to it,
under libyaml's C parser and the pure-Python one). ``ENABLED = False`` restores the plain path.
"""

from __future__ import annotations

import re
from math import isfinite
from typing import Any

from evalkit.sets.yamldoc import CORE_SCHEMA, MAX_DEPTH, SURROGATE, safe_yaml

ENABLED = True  # False: every document takes the full path
DECLINED = object()  # the fast path declines: the document needs the full path


def plain_data(text: str, floats: dict[tuple[str, str], str]) -> Any:
    """The plain data of ``text``, or ``DECLINED``. ``floats`` gets the text of each float two
    levels down, as written (``Document.float_text``)."""
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    if not ENABLED:
        return DECLINED
    try:
        return _events_data(text, floats)
    except (MarkedYAMLError, YAMLError, RecursionError, ValueError):  # int('9' * 5000), float('.nan')
        return DECLINED


_NO_KEY = object()
_PLAIN_TYPES = tuple(
    (name, re.compile(pattern), frozenset(first)) for name, pattern, first in CORE_SCHEMA if name != "merge"
)
_TYPED_STARTS = frozenset().union(*(starts for _, _, starts in _PLAIN_TYPES))


def _events_data(text: str, floats: dict[tuple[str, str], str]) -> Any:
    from ruamel.yaml.docinfo import DocInfo, version

    yaml = safe_yaml()
    if not hasattr(yaml, "get_constructor_parser"):
        return DECLINED
    # what ruamel's own load and compose do first: the pure parser records a directive there
    yaml.doc_infos.append(DocInfo(requested_version=version(yaml.version)))
    _, parser = yaml.get_constructor_parser(text)
    try:
        return _built(parser.get_event, floats)
    finally:
        parser.dispose()


def _built(next_event: Any, floats: dict[tuple[str, str], str]) -> Any:  # noqa: C901, PLR0912  (one loop over the events, kept whole: its speed is this module's reason)
    """``plain_data``'s loop over the parser's events (taken one by one: ruamel's ``parse``
    generator asks check_event before each, which costs as much again)."""
    from ruamel.yaml.events import (
        AliasEvent,
        DocumentStartEvent,
        MappingEndEvent,
        MappingStartEvent,
        ScalarEvent,
        SequenceEndEvent,
        SequenceStartEvent,
        StreamEndEvent,
        StreamStartEvent,
    )

    stack: list[Any] = []  # open containers: lists, and mappings with their pending key
    root: Any = DECLINED
    documents = 0
    while True:
        event = next_event()
        kind = type(event)
        if kind is ScalarEvent:
            if event.anchor is not None or event.tag is not None:
                return DECLINED
            value = event.value
            # a plain scalar is resolved by the core schema, but most start with a letter no
            # typed value starts with: those stay strings without a pattern tried
            # (a plain scalar's style is "" from libyaml's parser and None from the pure one)
            if not event.style and event.implicit[0] and (not value or value[0] in _TYPED_STARTS):
                value = _resolve_plain(value)
                if type(value) is float:
                    if not isfinite(value):  # 1e999 (.inf and .nan decline in _resolve_plain)
                        return DECLINED
                    if len(stack) == 2 and type(stack[0]) is type(stack[1]) is _Mapping:
                        floats[(stack[0].key, stack[1].key)] = event.value
            if type(value) is str and not value.isascii() and SURROGATE.search(value):
                return DECLINED
        elif kind is MappingStartEvent or kind is SequenceStartEvent:
            if event.anchor is not None or event.tag is not None or len(stack) >= MAX_DEPTH:
                return DECLINED
            stack.append(_Mapping() if kind is MappingStartEvent else [])
            continue
        elif kind is MappingEndEvent or kind is SequenceEndEvent:
            top = stack.pop()
            value = top.data if kind is MappingEndEvent else top
        elif kind is DocumentStartEvent:
            documents += 1
            if documents > 1 or getattr(event, "version", None) or getattr(event, "tags", None):
                return DECLINED
            continue
        elif kind is StreamStartEvent:
            continue
        elif kind is StreamEndEvent:
            break
        elif kind is AliasEvent:
            return DECLINED
        else:  # DocumentEndEvent
            continue
        if not stack:
            root = value
            continue
        parent = stack[-1]
        if type(parent) is list:
            parent.append(value)
        elif parent.key is _NO_KEY:
            if type(value) is not str or value in parent.data or (value == "<<" and not event.style):
                return DECLINED
            parent.key = value
        else:
            parent.data[parent.key] = value
            parent.key = _NO_KEY
    return None if root is DECLINED and documents == 0 else root


class _Mapping:
    __slots__ = ("data", "key")

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.key: Any = _NO_KEY


def _resolve_plain(value: str) -> Any:
    """A plain scalar read by YAML 1.2's core schema (``yamldoc.CORE_SCHEMA``), as ruamel constructs it."""
    if not value:
        return None
    first = value[0]
    for name, pattern, starts in _PLAIN_TYPES:
        if first in starts and pattern.match(value):
            if name == "bool":
                return value in ("true", "True", "TRUE")
            if name == "null":
                return None
            if name == "int":
                if value.startswith("0o"):
                    return int(value[2:], 8)
                if value.startswith("0x"):
                    return int(value[2:], 16)
                return int(value, 10)
            return float(value)  # ValueError for .inf and .nan: declined (see plain_data)
    return value
