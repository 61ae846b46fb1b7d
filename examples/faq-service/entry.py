"""The FAQ feature as a function (``adapter: python``): given evalkit's request, its answer."""

from __future__ import annotations

from typing import Any

from feature import Feature

_FEATURE: Feature | None = None


def answer(request: dict[str, Any]) -> dict[str, Any]:
    global _FEATURE
    if _FEATURE is None:  # the model starts once, on the first question
        _FEATURE = Feature()
    return _FEATURE.answer(request["prompt"])
