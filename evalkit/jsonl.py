"""JSON Lines as evalkit reads them (replay answers, corpora): one value per non-blank line, and
for a line that cannot be read, where and why, worded for the user.

Lines end at ``\n`` only (a ``\r`` before it is JSON whitespace). ``str.splitlines`` also breaks
at U+2028, U+2029, U+0085 and other separators, which a JSON string may hold raw (Python's
``json.dumps(..., ensure_ascii=False)`` writes them so): callers split on ``\n``, or iterate a
file opened in text mode, which breaks at ``\n`` and ``\r`` only."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any


def json_lines(lines: Iterable[str]) -> Iterator[tuple[int, Any, tuple[int, str] | None]]:
    """(line number, decoded value, None) per non-blank line, or (line number, None, (column,
    problem)) for a line that is not JSON."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line), None
        except json.JSONDecodeError as exc:
            yield number, None, (exc.colno, f"not a JSON object ({exc.msg})")
        except RecursionError:
            yield number, None, (1, "JSON nested too deeply to read; flatten it")
