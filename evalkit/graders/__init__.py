"""Graders: ``deterministic`` (assertions, no model call) and ``decision`` (an LLM judge)."""

from __future__ import annotations

from evalkit.errors import UnknownNameError
from evalkit.graders.deterministic import DeterministicGrader
from evalkit.protocols import Grader


def make_grader(name: str) -> Grader:
    if name == "deterministic":
        return DeterministicGrader()
    raise UnknownNameError(f"unknown grader '{name}'")
