"""An answer's tool calls in one short line for tables and reports (README, "Tools and tool
calls"): ``tools: search(query="refunds"), lookup``; arguments kept only as the privacy level
kept them."""

from __future__ import annotations

import json
from collections.abc import Sequence

from evalkit.records import JsonValue, ToolCall
from evalkit.report.text import clip


def calls_line(calls: Sequence[ToolCall], limit: int = 160) -> str:
    """``tools: name(key=value, ...), name`` clipped to ``limit``; "" without calls."""
    if not calls:
        return ""
    return clip("tools: " + ", ".join(_call(c) for c in calls), limit)


def _call(call: ToolCall) -> str:
    arguments = call.arguments
    if arguments is None or arguments == {}:
        return call.name
    if isinstance(arguments, dict):
        return f"{call.name}({', '.join(f'{k}={_value(v)}' for k, v in arguments.items())})"
    return f"{call.name}({_value(arguments)})"


def _value(value: JsonValue) -> str:
    shown = json.dumps(value, ensure_ascii=False)
    return shown if len(shown) <= 40 else shown[:39] + "…"
