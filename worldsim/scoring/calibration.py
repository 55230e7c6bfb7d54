"""Calibration of binary forecasts: reliability table with Wilson intervals, and ECE.

Bins are equal-width on ``p_yes``: bin i covers ``[i/B, (i+1)/B)``, the last bin includes 1.
ECE is ``Σ_b (n_b / N)·|mean p_b − observed frequency_b|`` over non-empty bins. Multiple-choice
cards are not part of the table (their calibration would need a choice of reduction).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy.stats import norm

__all__ = ["Bin", "Calibration", "calibrate", "wilson_interval"]


@dataclass(frozen=True, slots=True)
class Bin:
    lo: float
    hi: float
    count: int
    mean_p: float | None
    frequency: float | None
    wilson_lo: float | None
    wilson_hi: float | None


@dataclass(frozen=True, slots=True)
class Calibration:
    """The reliability table of one method; ``ece`` is None when it has no binary cards."""

    bins: tuple[Bin, ...]
    n: int
    ece: float | None
    level: float


def wilson_interval(successes: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion."""
    if n <= 0:
        raise ValueError("Wilson interval of zero trials")
    z = float(norm.ppf(0.5 + level / 2.0))
    phat = successes / n
    denom = 1.0 + z * z / n
    centre = (phat + z * z / (2 * n)) / denom
    half = z * math.sqrt(phat * (1.0 - phat) / n + z * z / (4 * n * n)) / denom
    # Rounding can leave the bounds a hair past the observed proportion at 0 or n successes.
    return max(0.0, min(phat, centre - half)), min(1.0, max(phat, centre + half))


def _bin_of(p: float, n_bins: int) -> int:
    """The bin ``i`` with ``i/B <= p < (i+1)/B`` as the bounds are computed (``p·B`` alone can
    round below a bound: 0.57·100 is 56.99999…); 1 joins the last bin."""
    i = min(n_bins - 1, int(p * n_bins))
    if i + 1 < n_bins and (i + 1) / n_bins <= p:
        return i + 1
    if i > 0 and p < i / n_bins:
        return i - 1
    return i


def calibrate(
    pairs: Sequence[tuple[float, int]], *, n_bins: int = 10, level: float = 0.95
) -> Calibration:
    """Reliability table and ECE of ``(p_yes, y)`` pairs."""
    if n_bins < 1:
        raise ValueError("n_bins must be positive")
    members: list[list[tuple[float, int]]] = [[] for _ in range(n_bins)]
    for p, y in pairs:
        members[_bin_of(p, n_bins)].append((p, y))
    bins: list[Bin] = []
    total = len(pairs)
    ece = 0.0
    for i, inside in enumerate(members):
        lo, hi = i / n_bins, (i + 1) / n_bins
        if not inside:
            bins.append(Bin(lo, hi, 0, None, None, None, None))
            continue
        k = len(inside)
        hits = sum(y for _, y in inside)
        mean_p = math.fsum(p for p, _ in inside) / k
        freq = hits / k
        w_lo, w_hi = wilson_interval(hits, k, level)
        bins.append(Bin(lo, hi, k, mean_p, freq, w_lo, w_hi))
        ece += k / total * abs(mean_p - freq)
    return Calibration(bins=tuple(bins), n=total, ece=ece if total else None, level=level)
