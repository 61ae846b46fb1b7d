"""Write plain data (mappings, lists, strings, numbers, booleans, null) as YAML, with comments.

Block style, two-space indentation; short mappings and lists of scalars in flow style. A string
is written plain only when YAML 1.2 and 1.1 both read it back as that string (no indicator first,
nothing that resolves to a number, boolean or null, no ``: `` or `` #``), as a literal block
(``|``, ``|-``, ``|+``) when it spans lines and no line ends in a space or a tab (a literal block
keeps them, but editors trim them), single-quoted when it is one line of printable characters (a
regex keeps its backslashes as written), else double-quoted with escapes. ``Commented`` wraps a mapping value or list item to put comment lines above it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

INDENT = "  "
FLOW_WIDTH = 100
_INDICATORS = set("-?:,[]{}#&*!|>'\"%@`")
_FLOW_UNSAFE = set(",[]{}")
_NOT_STRINGS = re.compile(
    r"(?:y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF|null|Null|NULL|~|<<)\Z"
)
_SHORT_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r", "\0": "\\0"}


@dataclass(frozen=True, slots=True)
class Commented:
    """A mapping value or list item with comment lines written above it."""

    value: Any
    comment: str


def dump(data: Mapping[str, Any], header: Sequence[str] = ()) -> str:
    """``data`` as a YAML document; ``header`` lines become comments at the top."""
    lines = [_comment_line(line) for text in header for line in text.splitlines() or [""]]
    _mapping(data, 0, lines)
    return "\n".join(lines) + "\n"


def _comment_line(text: str, indent: int = 0) -> str:
    shown = "".join(c if _printable(c) else repr(c)[1:-1] for c in text)
    return f"{INDENT * indent}# {shown}".rstrip()


def _unwrap(value: Any, indent: int, lines: list[str]) -> Any:
    while isinstance(value, Commented):
        lines.extend(_comment_line(line, indent) for line in value.comment.splitlines() or [""])
        value = value.value
    return value


def _mapping(data: Mapping[str, Any], indent: int, lines: list[str], first_prefix: str | None = None) -> None:
    """Entries of ``data`` at ``indent``; the first line starts with ``first_prefix`` when given
    (a list item's dash) instead of the indentation."""
    for position, (key, raw) in enumerate(data.items()):
        value = _unwrap(raw, indent, lines)
        lead = first_prefix if position == 0 and first_prefix is not None else INDENT * indent
        _entry(f"{lead}{_scalar(key, flow=False)}:", value, indent, lines)


def _entry(head: str, value: Any, indent: int, lines: list[str]) -> None:
    if isinstance(value, Mapping) and value and not _flowable(value, len(head)):
        lines.append(head)
        _mapping(value, indent + 1, lines)
    elif isinstance(value, list) and value and not _flowable(value, len(head)):
        lines.append(head)
        _sequence(value, indent + 1, lines)
    elif isinstance(value, str) and _literal_ok(value):
        lines.append(f"{head} {_literal_indicator(value)}")
        lines.extend(INDENT * (indent + 1) + line if line else "" for line in _literal_lines(value))
    else:
        lines.append(f"{head} {_flow(value)}")


def _sequence(items: list[Any], indent: int, lines: list[str]) -> None:
    for raw in items:
        item = _unwrap(raw, indent, lines)
        dash = f"{INDENT * indent}- "
        if isinstance(item, Mapping) and item:  # a list of mappings reads best one key a line
            _mapping(item, indent + 1, lines, first_prefix=dash)
        elif isinstance(item, list) and item and not _flowable(item, len(dash)):
            lines.append(dash.rstrip())
            _sequence(item, indent + 1, lines)
        elif isinstance(item, str) and _literal_ok(item):
            lines.append(f"{dash}{_literal_indicator(item)}")
            lines.extend(INDENT * (indent + 1) + line if line else "" for line in _literal_lines(item))
        else:
            lines.append(f"{dash}{_flow(item)}")


def _flowable(value: Any, used: int) -> bool:
    """A short collection of scalars, written on one line."""
    values = list(value.values()) if isinstance(value, Mapping) else value
    if not all(_is_scalar(v) and not (isinstance(v, str) and "\n" in v) for v in values):
        return False
    return used + len(_flow(value)) <= FLOW_WIDTH


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _flow(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_scalar(k, flow=True)}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    return _scalar(value, flow=True)


def _scalar(value: Any, flow: bool) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        return repr(value)
    if not isinstance(value, str):
        raise TypeError(f"cannot write {type(value).__name__} as YAML")
    if _plain_ok(value, flow):
        return value
    if value and all(_printable(c) for c in value):  # single quotes: backslashes stay as written
        return "'" + value.replace("'", "''") + "'"
    return _quoted(value)


def _printable(char: str) -> bool:
    """YAML's c-printable, less the characters some readers take for line breaks or a BOM."""
    return (char.isprintable() or char == " ") and char not in "\u2028\u2029\ufeff"


def _plain_ok(text: str, flow: bool) -> bool:
    if not text or text != text.strip(" ") or text[0] in _INDICATORS or _NOT_STRINGS.match(text):
        return False
    if text[0] in "+.0123456789" or ": " in text or " #" in text or text.endswith(":"):
        return False
    if flow and any(c in _FLOW_UNSAFE for c in text):
        return False
    return all(_printable(c) for c in text)


def _quoted(text: str) -> str:
    out = []
    for char in text:
        if char in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[char])
        elif _printable(char):
            out.append(char)
        else:
            code = ord(char)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return '"' + "".join(out) + '"'


def _literal_ok(text: str) -> bool:
    """A multi-line string a literal block keeps exactly, and an editor's trimming of trailing
    whitespace (or `git diff --check`) leaves alone: no line ends in a space or a tab."""
    if "\n" not in text.rstrip("\n") or text[0] in " \n\t":
        return False
    if any(line.endswith((" ", "\t")) for line in text.split("\n")):
        return False
    return all(_printable(c) or c == "\t" for c in text.replace("\n", ""))


def _literal_indicator(text: str) -> str:
    trailing = len(text) - len(text.rstrip("\n"))
    return "|-" if trailing == 0 else "|" if trailing == 1 else "|+"


def _literal_lines(text: str) -> list[str]:
    body = text.rstrip("\n")
    trailing = len(text) - len(body)
    return body.split("\n") + [""] * max(0, trailing - 1)
