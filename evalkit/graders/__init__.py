"""Graders: ``deterministic`` (assertions, no model call) and ``decision`` (an LLM judge)."""

from __future__ import annotations

from evalkit.graders.decision import DecisionGrader, probe
from evalkit.graders.deterministic import DeterministicGrader

__all__ = ["DecisionGrader", "DeterministicGrader", "probe"]
