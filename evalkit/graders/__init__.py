"""Graders: ``deterministic`` (assertions, no model call), ``decision`` (an LLM judge) and
``judged`` (assertions, the model-graded ones asked of their judge or embeddings instance)."""

from __future__ import annotations

from evalkit.graders.decision import DecisionGrader, probe
from evalkit.graders.deterministic import DeterministicGrader
from evalkit.graders.judged import JudgedGrader
from evalkit.graders.judging import Instance

__all__ = ["DecisionGrader", "DeterministicGrader", "Instance", "JudgedGrader", "probe"]
