"""Proper scoring rules per card and their means per method (DESIGN §4.7).

Binary: Brier ``(p − y)²``, log loss ``−[y ln p̃ + (1 − y) ln(1 − p̃)]`` with
``p̃ = clip(p, 0.01, 0.99)``, accuracy with ``ŷ = [p ≥ 0.5]``. Multiple choice: Brier
``Σ_k (p_k − y_k)²``, log loss ``−ln p̃_true``, accuracy when the most probable option (ties
broken by option id) is the true one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "CLIP",
    "CardScore",
    "MethodSummary",
    "binary_scores",
    "clip",
    "multiclass_scores",
    "summarise",
]

#: The clip applied to probabilities before the log loss.
CLIP: tuple[float, float] = (0.01, 0.99)


@dataclass(frozen=True, slots=True)
class CardScore:
    """The losses of one forecast against its label."""

    brier: float
    log: float
    correct: bool


@dataclass(frozen=True, slots=True)
class MethodSummary:
    """Mean losses of one method over its scored cards."""

    n: int
    brier: float
    log: float
    accuracy: float
    mean_unresolved_mass: float | None


def clip(p: float) -> float:
    """Clip a probability to :data:`CLIP`."""
    lo, hi = CLIP
    return min(hi, max(lo, p))


def binary_scores(p_yes: float, y: int) -> CardScore:
    """Brier, clipped log loss and correctness of ``p_yes`` against outcome ``y`` (0 or 1)."""
    pc = clip(p_yes)
    log = -math.log(pc) if y == 1 else -math.log(1.0 - pc)
    return CardScore(brier=(p_yes - y) ** 2, log=log, correct=(p_yes >= 0.5) == (y == 1))


def multiclass_scores(p_options: Sequence[tuple[str, float]], outcome: str) -> CardScore:
    """Multiclass Brier, clipped ``−ln p_true`` and top-option correctness."""
    brier = sum((p - (1.0 if k == outcome else 0.0)) ** 2 for k, p in p_options)
    p_true = next((p for k, p in p_options if k == outcome), 0.0)
    top = min(p_options, key=lambda kp: (-kp[1], kp[0]))[0]
    return CardScore(brier=brier, log=-math.log(clip(p_true)), correct=top == outcome)


def summarise(scores: Sequence[CardScore], unresolved: Sequence[float | None]) -> MethodSummary:
    """Means over cards; the unresolved mass is averaged over the forecasts that report one."""
    n = len(scores)
    if n == 0:
        raise ValueError("cannot summarise zero cards")
    known = [u for u in unresolved if u is not None]
    return MethodSummary(
        n=n,
        brier=math.fsum(s.brier for s in scores) / n,
        log=math.fsum(s.log for s in scores) / n,
        accuracy=sum(1 for s in scores if s.correct) / n,
        mean_unresolved_mass=math.fsum(known) / len(known) if known else None,
    )
