"""What a run record keeps at each privacy level (README "Privacy").

- none: the run row only (aggregates, generator record, fingerprints, provenance);
- metadata: plus one row per item with verdicts, scores, latencies, ids and text-free reasons;
- redacted: plus prompt, system prompt, response and full reasons with e-mail addresses, phone
  numbers and key-like secrets replaced by ``***``;
- full: texts verbatim plus each item's serving record and adapter.

Tool calls and an application's reported context are answer content (README, "Tools and tool
calls"): at metadata only the calls' names are kept, at redacted their arguments and the context
with every string redacted like text, at full verbatim.
"""

from __future__ import annotations

import re
from typing import Any

from evalkit.records import JsonValue, ToolCall

MASK = "***"

_PATTERNS = [
    # key-like secrets first, so a token is not half-eaten by the phone pattern
    re.compile(r"\b(?:sk|pk|rk)-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_-]{12,}"),
    re.compile(r"\b(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{8,}"),  # Stripe
    re.compile(r"\bsk-ant-[A-Za-z0-9_-]{8,}"),
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"(?i)\bauthorization\s*:\s*basic\s+[A-Za-z0-9+/=]{8,}"),
    re.compile(r"\b(?:hf|npm)_[A-Za-z0-9]{20,}"),  # Hugging Face, npm
    re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}"),  # GitLab
    re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{16,}"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"\bAIza[0-9A-Za-z_-]{30,}"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),  # JWT
    re.compile(r"(?i)\b(api[_-]?key|secret|token|password)(\s*[:=]\s*)[\"']?[^\s\"',;]{6,}"),
    re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"),
    # phone numbers: an optional +, then 9+ digits with common separators
    re.compile(r"(?<![\w.])\+?\(?\d(?:[\s().-]{0,2}\d){8,14}(?![\w.])"),
]


def redact(text: str | None) -> str | None:
    """``text`` with e-mail addresses, phone numbers and key-like secrets replaced by ***."""
    if not text:
        return text
    for pattern in _PATTERNS:
        if pattern.groups >= 2:
            text = pattern.sub(lambda m: m.group(1) + m.group(2) + MASK, text)
        else:
            text = pattern.sub(MASK, text)
    return text


def keeps_items(level: str) -> bool:
    return level != "none"


def text_for(level: str, text: str | None) -> str | None:
    if level == "full":
        return text
    if level == "redacted":
        return redact(text)
    return None


def redact_json(value: JsonValue) -> JsonValue:
    """``value`` with every string in it (keys too) redacted like text."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redact_json(v) for v in value]
    if isinstance(value, dict):
        return {str(redact(str(k))): redact_json(v) for k, v in value.items()}
    return value


def details_for(level: str, calls: tuple[ToolCall, ...], context: JsonValue) -> dict[str, Any] | None:
    """An item's tool calls and reported context as kept at ``level`` (None: nothing to keep)."""
    details: dict[str, Any] = {}
    if calls:
        if level == "full":
            details["tool_calls"] = [c.as_dict() for c in calls]
        elif level == "redacted":
            details["tool_calls"] = [{"name": c.name, "arguments": redact_json(c.arguments)} for c in calls]
        elif level == "metadata":
            details["tool_calls"] = [{"name": c.name} for c in calls]
    if context is not None and level in ("redacted", "full"):
        details["context"] = context if level == "full" else redact_json(context)
    return details or None
