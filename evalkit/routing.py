"""Quality-aware ranking of provider instances (docs/contract.md "Model ranking"): pure ordering over measured quality.

Quality is measured by the store (the latest verified deterministic run per set, scoped to the
instance and its alias, averaged over sets); unknown quality stays unknown (None), a measured 0
stays 0. Policies:

- priority: priority, highest first;
- quality: known quality, highest first, unknown after;
- balanced: the mean of quality (unknown counts 0.5) and priority scaled to 0..1 over the instances;
- economy: blended price (input + output per million tokens), cheapest first, priced before unpriced.

Ties are broken by priority (highest first), then by instance id.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evalkit.config import ProviderConfig
from evalkit.errors import InputError, UnknownNameError
from evalkit.rows import RankedModel

POLICIES = ("priority", "quality", "balanced", "economy")
UNKNOWN_FOR_BALANCE = 0.5


@dataclass(frozen=True, slots=True)
class Measured:
    """One instance with what was measured of it."""

    config: ProviderConfig
    alias: str
    quality: float | None
    sets: int


def _price(config: ProviderConfig) -> float | None:
    return None if config.cost is None else config.cost.input_per_mtok + config.cost.output_per_mtok


def order(measured: Sequence[Measured], policy: str) -> list[Measured]:
    """``measured`` in the policy's order."""
    if policy not in POLICIES:
        raise UnknownNameError(f"unknown policy '{policy}' (expected one of: {', '.join(POLICIES)})")
    priorities = [m.config.priority for m in measured]
    low, high = (min(priorities), max(priorities)) if priorities else (0, 0)

    def tie(m: Measured) -> tuple[int, str]:
        return -m.config.priority, m.config.id

    if policy == "priority":
        return sorted(measured, key=tie)
    if policy == "quality":
        return sorted(measured, key=lambda m: (m.quality is None, -round(m.quality or 0.0, 12), *tie(m)))
    if policy == "balanced":

        def balance(m: Measured) -> float:
            scaled = (m.config.priority - low) / (high - low) if high > low else 0.5
            quality = m.quality if m.quality is not None else UNKNOWN_FOR_BALANCE
            return (quality + scaled) / 2

        return sorted(measured, key=lambda m: (-round(balance(m), 12), *tie(m)))
    # Keys are rounded to 12 places, so float noise ((0.1 + 0.5) / 2 vs (0.2 + 0.4) / 2) is a tie.
    return sorted(measured, key=lambda m: (_price(m.config) is None, round(_price(m.config) or 0.0, 12), *tie(m)))


def rank(
    measured: Sequence[Measured], policy: str = "priority", min_quality: float | None = None
) -> list[RankedModel[ProviderConfig]]:
    """The ranking; ``min_quality`` drops instances below it and those without data."""
    if min_quality is not None and not 0 <= min_quality <= 1:  # NaN fails this too
        raise InputError(f"--min-quality: must be a number in 0..1, got {min_quality!r}")
    kept = [m for m in measured if min_quality is None or (m.quality is not None and m.quality >= min_quality)]
    return [
        RankedModel(
            rank=index,
            provider=m.config.id,
            model=m.alias,
            priority=m.config.priority,
            quality=m.quality,
            sets=m.sets,
            cost={"input_per_mtok": m.config.cost.input_per_mtok, "output_per_mtok": m.config.cost.output_per_mtok}
            if m.config.cost
            else None,
            config=m.config,
        )
        for index, m in enumerate(order(kept, policy), start=1)
    ]
