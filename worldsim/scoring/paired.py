"""Paired comparisons of a method against a baseline over their common cards (DESIGN §4.7).

Per card ``d_i = loss_baseline,i − loss_method,i`` (positive favours the method). Reported: the
mean of d, a paired percentile bootstrap interval over cards, and for each tie threshold ε an
exact two-sided sign test on wins ``#{d_i > ε}`` and losses ``#{d_i < −ε}``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import numpy as np
import numpy.typing as npt

from worldsim.domain.errors import ConfigError
from worldsim.scoring.table import MatchedTable

__all__ = [
    "DEFAULT_RESAMPLES",
    "BootstrapInterval",
    "Comparison",
    "SignTest",
    "bootstrap_mean",
    "compare",
    "parse_pair",
    "sign_test",
    "sign_test_p",
]

Metric = Literal["brier", "log"]

DEFAULT_RESAMPLES = 10_000
"""The bootstrap's resamples unless told (`score --bootstrap`): comparisons and effects alike."""

#: Resamples drawn per block, to bound memory on large card sets.
_BLOCK = 2048


@dataclass(frozen=True, slots=True)
class SignTest:
    eps: float
    wins: int
    losses: int
    ties: int
    p_value: float


@dataclass(frozen=True, slots=True)
class BootstrapInterval:
    n_resamples: int
    seed: int
    level: float
    lo: float
    hi: float


@dataclass(frozen=True, slots=True)
class Comparison:
    """A paired comparison; ``deltas`` are per unit (card at a date), in ``units`` order."""

    baseline: str
    method: str
    metric: Metric
    units: tuple[str, ...]
    deltas: tuple[float, ...]
    deltas_brier: tuple[float, ...]
    deltas_log: tuple[float, ...]
    bootstrap: BootstrapInterval
    sign_tests: tuple[SignTest, ...]

    @property
    def n(self) -> int:
        return len(self.units)

    @property
    def mean_delta(self) -> float:
        return math.fsum(self.deltas) / self.n

    @property
    def mean_delta_brier(self) -> float:
        return math.fsum(self.deltas_brier) / self.n

    @property
    def mean_delta_log(self) -> float:
        return math.fsum(self.deltas_log) / self.n


def parse_pair(text: str) -> tuple[str, str]:
    """Read ``BASELINE:METHOD``."""
    baseline, sep, method = text.partition(":")
    if not sep or not baseline.strip() or not method.strip() or ":" in method:
        raise ConfigError(f"comparison {text!r} is not BASELINE:METHOD", field="--compare")
    if baseline.strip() == method.strip():
        raise ConfigError(f"comparison {text!r} compares a method with itself", field="--compare")
    return baseline.strip(), method.strip()


def sign_test_p(wins: int, losses: int) -> float:
    """Exact two-sided sign test: ``min(1, 2·P[X ≥ max(w, l)])``, X ~ Binomial(w + l, 1/2)."""
    n = wins + losses
    if n == 0:
        return 1.0
    k = max(wins, losses)
    tail = Fraction(sum(math.comb(n, i) for i in range(k, n + 1)), 2**n)
    return float(min(Fraction(1), 2 * tail))


def sign_test(deltas: Sequence[float], eps: float) -> SignTest:
    """Wins, losses and ties at threshold ``eps`` and the exact sign-test p-value."""
    wins = sum(1 for d in deltas if d > eps)
    losses = sum(1 for d in deltas if d < -eps)
    ties = len(deltas) - wins - losses
    return SignTest(eps=eps, wins=wins, losses=losses, ties=ties, p_value=sign_test_p(wins, losses))


def bootstrap_mean(
    deltas: Sequence[float], *, n_resamples: int, seed: int, level: float
) -> BootstrapInterval:
    """Percentile interval of the mean of ``deltas`` over resamples with replacement: the one
    bootstrap of worldsim (paired comparisons over cards, a study's effects over pairs).

    ``n_resamples`` resamples of ``len(deltas)`` indices each are drawn from
    ``numpy.random.default_rng(seed)``, fresh for each call (so an interval does not depend on
    which others were asked for); the interval is the ``(1 − level)/2`` and ``(1 + level)/2``
    quantiles of the resampled means, interpolated linearly between order statistics (numpy's
    default ``linear`` method, Hyndman and Fan's type 7).
    """
    d = np.asarray(deltas, dtype=float)
    n = d.size
    if n == 0:
        raise ValueError("bootstrap of zero cards")
    rng = np.random.default_rng(seed)
    means: list[npt.NDArray[np.float64]] = []
    remaining = n_resamples
    while remaining > 0:
        block = min(_BLOCK, remaining)
        idx = rng.integers(0, n, size=(block, n))
        means.append(d[idx].mean(axis=1))
        remaining -= block
    all_means = np.concatenate(means)
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(all_means, [alpha, 1.0 - alpha])
    return BootstrapInterval(
        n_resamples=n_resamples, seed=seed, level=level, lo=float(lo), hi=float(hi)
    )


def compare(
    table: MatchedTable,
    baseline: str,
    method: str,
    *,
    tie_eps: Sequence[float],
    n_resamples: int,
    seed: int,
    level: float,
    metric: Metric = "brier",
) -> Comparison:
    """Compare ``method`` against ``baseline`` over the units both forecast."""
    for name in (baseline, method):
        if name not in table.methods:
            known = ", ".join(sorted(table.methods))
            raise ConfigError(f"unknown method '{name}' (known: {known})", field="--compare")
    a, b = table.methods[baseline], table.methods[method]
    units = tuple(sorted(set(a) & set(b)))
    if not units:
        raise ConfigError(f"'{baseline}' and '{method}' share no scored cards", field="--compare")
    d_brier = tuple(a[u].score.brier - b[u].score.brier for u in units)
    d_log = tuple(a[u].score.log - b[u].score.log for u in units)
    deltas = d_brier if metric == "brier" else d_log
    return Comparison(
        baseline=baseline,
        method=method,
        metric=metric,
        units=units,
        deltas=deltas,
        deltas_brier=d_brier,
        deltas_log=d_log,
        bootstrap=bootstrap_mean(deltas, n_resamples=n_resamples, seed=seed, level=level),
        sign_tests=tuple(sign_test(deltas, eps) for eps in tie_eps),
    )
