"""Statistics for paired comparisons: exact McNemar, sign-flip permutation and seeded bootstrap.

Pure functions (numpy for the resampling, imported where it is used). Every random procedure
takes an explicit seed, so the same runs always give the same interval and p-value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_SEED = 20261130
DEFAULT_RESAMPLES = 10_000


def binomial_two_sided(k: int, n: int) -> float:
    """P-value of the exact two-sided binomial test of k successes in n at p = 1/2."""
    if n == 0:
        return 1.0
    low = min(k, n - k)
    tail: float = sum(math.comb(n, i) for i in range(low + 1)) / 2**n
    return min(1.0, 2 * tail)


def mcnemar_exact(before: Sequence[bool], after: Sequence[bool]) -> tuple[int, int, float]:
    """(pass->fail, fail->pass, two-sided exact p) for paired pass/fail outcomes."""
    lost = sum(1 for b, a in zip(before, after, strict=True) if b and not a)
    gained = sum(1 for b, a in zip(before, after, strict=True) if a and not b)
    return lost, gained, binomial_two_sided(gained, lost + gained)


def sign_flip_p(differences: Sequence[float], seed: int = DEFAULT_SEED, resamples: int = DEFAULT_RESAMPLES) -> float:
    """Two-sided p of a paired sign-flip permutation test of mean(differences) = 0.

    With differences in {-1, 0, 1} this is exactly McNemar's test, computed exactly.
    """
    nonzero = [d for d in differences if d != 0]
    if not nonzero:
        return 1.0
    if all(d in (-1.0, 1.0) for d in nonzero):
        return binomial_two_sided(sum(1 for d in nonzero if d > 0), len(nonzero))
    import numpy as np

    values = np.asarray(nonzero, dtype=float)
    observed = abs(values.sum())
    rng = np.random.default_rng(seed)
    extreme = 0
    for start in range(0, resamples, 1000):
        size = min(1000, resamples - start)
        signs = rng.choice((-1.0, 1.0), size=(size, len(values)))
        extreme += int((np.abs(signs @ values) >= observed - 1e-12).sum())
    return (extreme + 1) / (resamples + 1)


@dataclass(frozen=True, slots=True)
class Interval:
    low: float
    high: float


def clustered_rate_ci(
    groups: Sequence[Sequence[float]],
    confidence: float = 0.95,
    seed: int = DEFAULT_SEED,
    resamples: int = DEFAULT_RESAMPLES,
) -> Interval:
    """Percentile bootstrap interval of the rate over all samples of all groups (a prompt's
    repeated samples), resampling groups, then samples within each group: a prompt that passed 2
    of 5 samples is uncertain, which resampling whole prompts alone would not show."""
    if not groups or not any(groups):
        return Interval(0.0, 0.0)
    import numpy as np

    rng = np.random.default_rng(seed)
    sizes = np.asarray([len(g) for g in groups])
    width = int(sizes.max())
    table = np.zeros((len(groups), width))
    for row, group in enumerate(groups):
        table[row, : len(group)] = group
    rates = []
    chunk = max(1, min(1000, 2_000_000 // (len(groups) * width)))  # ~16 MB of samples at a time
    for start in range(0, resamples, chunk):
        size = min(chunk, resamples - start)
        picked = rng.integers(0, len(groups), size=(size, len(groups)))  # prompts
        within = (rng.random((size, len(groups), width)) * sizes[picked][..., None]).astype(int)  # their samples
        used = np.arange(width)[None, None, :] < sizes[picked][..., None]
        values = np.take_along_axis(table[picked], within, axis=2) * used
        rates.append(values.sum(axis=(1, 2)) / sizes[picked].sum(axis=1))
    everything = np.concatenate(rates)
    alpha = (1 - confidence) / 2
    return Interval(float(np.quantile(everything, alpha)), float(np.quantile(everything, 1 - alpha)))


def bootstrap_mean_ci(
    values: Sequence[float], confidence: float = 0.95, seed: int = DEFAULT_SEED, resamples: int = DEFAULT_RESAMPLES
) -> Interval:
    """Percentile bootstrap interval of the mean (resampling whole values, e.g. per-prompt rates
    or paired differences)."""
    if not values:
        return Interval(0.0, 0.0)
    import numpy as np

    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = []
    for start in range(0, resamples, 1000):
        size = min(1000, resamples - start)
        picks = rng.integers(0, len(data), size=(size, len(data)))
        means.append(data[picks].mean(axis=1))
    everything = np.concatenate(means)
    alpha = (1 - confidence) / 2
    return Interval(float(np.quantile(everything, alpha)), float(np.quantile(everything, 1 - alpha)))
