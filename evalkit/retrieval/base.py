"""What every retriever returns for one question."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Ranking:
    ids: tuple[str, ...]
    provenance: Mapping[str, object] = field(default_factory=dict)
    latency_ms: float = 0.0
