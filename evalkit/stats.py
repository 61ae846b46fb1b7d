"""Statistics for paired comparisons and repeated samples: exact McNemar, sign-flip permutation
tests (two-sided for describing a change, one-sided for the regression gate), a seeded paired
bootstrap, and the Clopper-Pearson interval of a pass rate over repeated samples.

Pure functions (numpy for the resampling, imported where it is used). Every random procedure
takes an explicit seed, so the same runs always give the same interval and p-value.

The regression gate asks one question, "did it drop?", so its test is one-sided: under no change
each changed item is as likely to have moved up as down. With few changed items even the most
extreme outcome is not rare (four items all lost: p = 1/16), so a one-sided test also reports its
``floor``, the smallest p-value any outcome of those changed items could give: where the floor
exceeds the significance level the test cannot decide either way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

DEFAULT_SEED = 20261130
DEFAULT_RESAMPLES = 10_000
EXACT_SIGN_FLIPS = 16  # up to 2**16 sign patterns are enumerated; more changed items are sampled


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


def binomial_upper_tail(k: int, n: int) -> float:
    """P(X >= k) for X ~ Binomial(n, 1/2): the exact one-sided p of k losses among n changes."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    tail: float = sum(math.comb(n, i) for i in range(k, n + 1)) / 2**n  # int / int: correctly rounded
    return tail


@dataclass(frozen=True, slots=True)
class DropTest:
    """A one-sided paired test of "the second run is lower"."""

    p_value: float  # P(a result at least this far down | no change)
    floor: float  # the smallest p-value any outcome of the same changed items could give
    changed: int  # items whose value changed


class _SignFlipNull:
    """The null distribution of the sum of paired differences when each changed item's sign is
    a fair coin: binomial when every change has one magnitude, enumerated for up to
    EXACT_SIGN_FLIPS changes, sampled (seeded, add-one corrected) beyond."""

    def __init__(self, magnitudes: Sequence[float], seed: int, resamples: int) -> None:
        self.count = len(magnitudes)
        self.unit = magnitudes[0] if magnitudes else 0.0
        self.eps = 1e-9 * max(1.0, math.fsum(magnitudes))
        self.sums: np.ndarray | None = None
        self.sampled = False
        if all(math.isclose(a, self.unit, rel_tol=1e-9) for a in magnitudes):
            return
        import numpy as np

        values = np.asarray(magnitudes, dtype=float)
        if self.count <= EXACT_SIGN_FLIPS:
            sums = np.zeros(1)
            for value in values:
                sums = np.concatenate((sums - value, sums + value))
        else:
            rng = np.random.default_rng(seed)
            parts = []
            for start in range(0, resamples, 1000):
                size = min(1000, resamples - start)
                parts.append(rng.choice((-1.0, 1.0), size=(size, self.count)) @ values)
            sums, self.sampled = np.concatenate(parts), True
        self.sums = np.sort(sums)

    def _losses_needed(self, total: float) -> int:
        # with one magnitude u, a sum t has (count - t / u) / 2 negative signs
        return math.ceil((self.count - total / self.unit) / 2 - 1e-9)

    def lower_tail(self, total: float) -> float:
        """P(sum <= total) under the null."""
        if self.sums is None:
            return binomial_upper_tail(self._losses_needed(total), self.count)
        import numpy as np

        below = int(np.searchsorted(self.sums, total + self.eps, side="right"))
        if self.sampled:
            return min(1.0, (below + 1) / (len(self.sums) + 1))
        return below / len(self.sums)

    def critical(self, alpha: float) -> float | None:
        """The largest sum the test calls significant at ``alpha`` (None when none is)."""
        if self.sums is None:
            for losses in range(self.count + 1):
                if binomial_upper_tail(losses, self.count) <= alpha:
                    return self.unit * (self.count - 2 * losses)
            return None
        import numpy as np

        allowed = alpha * (len(self.sums) + 1) - 1 if self.sampled else alpha * len(self.sums)
        index = math.floor(allowed + 1e-9) - 1
        while index >= 0:
            candidate = float(self.sums[index])
            if self.lower_tail(candidate) <= alpha:
                return candidate
            index = int(np.searchsorted(self.sums, candidate - self.eps, side="left")) - 1
        return None


def drop_test(differences: Sequence[float], seed: int = DEFAULT_SEED, resamples: int = DEFAULT_RESAMPLES) -> DropTest:
    """One-sided paired sign-flip test that mean(differences) < 0 (second minus first).

    With differences in {-1, 0, 1} this is the exact one-sided McNemar test.
    """
    nonzero = [d for d in differences if d != 0]
    if not nonzero:
        return DropTest(1.0, 1.0, 0)
    null = _SignFlipNull([abs(d) for d in nonzero], seed, resamples)
    observed = math.fsum(nonzero)
    floor = null.lower_tail(-math.fsum(abs(d) for d in nonzero))
    return DropTest(min(1.0, null.lower_tail(observed)), floor, len(nonzero))


def detectable_drop(
    differences: Sequence[float], alpha: float, seed: int = DEFAULT_SEED, resamples: int = DEFAULT_RESAMPLES
) -> float | None:
    """The smallest drop of mean(differences) the one-sided test would call significant at
    ``alpha``, had the same items changed by the same amounts; None when no outcome would."""
    nonzero = [d for d in differences if d != 0]
    if not nonzero:
        return None
    critical = _SignFlipNull([abs(d) for d in nonzero], seed, resamples).critical(alpha)
    return None if critical is None else -critical / len(differences)


def clopper_pearson(successes: int, trials: int, confidence: float = 0.95) -> Interval:
    """The exact (Clopper-Pearson) interval of a binomial proportion.

    Its coverage is at least ``confidence`` for every true proportion, also for a sum of
    independent trials with different probabilities (a Poisson binomial is less spread than
    the binomial of the same mean, Hoeffding 1956); it has positive width for every finite
    number of trials, [0.0, 1.0] for none.
    """
    if trials <= 0:
        return Interval(0.0, 1.0)
    if not 0 <= successes <= trials:
        raise ValueError(f"successes must be in 0..{trials}, got {successes}")
    alpha = 1 - confidence
    low = 0.0 if successes == 0 else _beta_quantile(alpha / 2, successes, trials - successes + 1)
    high = 1.0 if successes == trials else _beta_quantile(1 - alpha / 2, successes + 1, trials - successes)
    return Interval(low, high)


def _beta_quantile(q: float, a: float, b: float) -> float:
    """x with I_x(a, b) = q, by bisection (I_x is increasing in x)."""
    low, high = 0.0, 1.0
    for _ in range(200):
        mid = (low + high) / 2
        if mid in (low, high):
            break
        if _regularized_beta(mid, a, b) < q:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def _regularized_beta(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta function I_x(a, b) (a continued fraction, Lentz's method)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _beta_fraction(x, a, b) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(1 - x, b, a) / b


def _beta_fraction(x: float, a: float, b: float) -> float:
    tiny, c = 1e-300, 1.0
    d = 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 100_000):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= d * c
        if abs(d * c - 1.0) < 1e-16:
            break
    return result


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


def prompts_needed(drop: float, pass_rate: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """How many prompts a set needs for a true pass-rate drop of ``drop`` to be found with
    ``power`` by a one-sided test at ``alpha``: the normal approximation for two proportions,
    n = (z[1-alpha] + z[power])² · 2p(1-p) / drop², each answer taken as a fresh coin flip at the
    pass rate p (the worst case: answers that repeat themselves need fewer). p is kept within
    0.1..0.9, since a set that all passes now can still vary (README, "Choosing a gate")."""
    from statistics import NormalDist

    if drop <= 0:
        raise ValueError("drop must be above 0")
    p = min(max(pass_rate, 0.1), 0.9)
    z = NormalDist().inv_cdf(1 - alpha) + NormalDist().inv_cdf(power)
    return math.ceil(z * z * 2 * p * (1 - p) / (drop * drop))
