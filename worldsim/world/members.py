"""A cohort's members as arrays: attention, trust, sentiment and exposure per member.

A cohort seed with ``members: N`` carries N simulated members. Each is four numbers held in
read-only numpy arrays, replaced (never written) when the cohort updates, so forks share them as
they share the rest of the state. A cohort's agent decides for its archetype (a distribution
over actions, plus the attention and trust it settles toward); :func:`update` applies that
decision to every member at once (docs/offline-model.md, "Cohort members"):

* member m picks action a_m from the distribution with one uniform from a generator seeded by
  the decision's ``draw`` (inverse CDF, so the pick is the same on every machine);
* ``attention_m += R·(attention − attention_m)``, ``trust_m += R·(trust − trust_m)``;
* ``exposure_m ← (1 − R)·exposure_m + R·attention_m·magnitude[a_m]``;
* ``sentiment_m ← clip(sentiment_m + ½·attention_m·trust_m·(direction[a_m] − sentiment_m))``;

with ``R = 0.5``. Only element-wise IEEE arithmetic is used (no vector ``exp``, no float
reductions), so the arrays are bit-identical on every CPU; the cohort's row takes the members'
means, summed exactly as integers of 2⁻²⁴. A trace records the decision, not the arrays: replay
applies it again, and the state digest covers the arrays' bytes.
"""

from __future__ import annotations

import hashlib
import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["RATE", "Members", "initial", "mean", "update"]

DTYPE = np.float32
"""Members' numbers are single precision: half the memory and half the memory traffic."""
MemberArray = npt.NDArray[np.float32]

RATE = 0.5
"""How far a member moves toward its archetype's attention and trust in one update."""
SPREAD = 0.1
"""Half-width of the members' initial spread around the cohort's values."""
_SCALE = float(2**24)  # means sum integers of 2⁻²⁴: exact in float64 for up to 2²⁹ members


@dataclass(frozen=True, slots=True, eq=False)
class Members:
    """One cohort's members; the arrays are read-only and never change."""

    attention: MemberArray
    trust: MemberArray
    sentiment: MemberArray
    exposure: MemberArray

    def __len__(self) -> int:
        return len(self.sentiment)

    def digest(self) -> str:
        """SHA-256 of the four arrays' little-endian float32 bytes, in the order above."""
        h = hashlib.sha256()
        for column in (self.attention, self.trust, self.sentiment, self.exposure):
            h.update(column.astype("<f4", copy=False).data)
        return h.hexdigest()


def _frozen(values: MemberArray) -> MemberArray:
    values.setflags(write=False)
    return values


def initial(cohort_id: str, n: int, attention: float, trust: float, sentiment: float) -> Members:
    """``n`` members spread uniformly within ±``SPREAD`` of the cohort's values (clipped to their
    ranges), from a generator keyed by the cohort's id alone: the same card gives the same
    members on every run, so a trace need not hold them."""
    rng = np.random.default_rng(zlib.crc32(cohort_id.encode()))
    spread = rng.random((3, n), dtype=DTYPE)
    spread *= DTYPE(2 * SPREAD)
    spread -= DTYPE(SPREAD)
    att, tru, sen = (
        _frozen(np.clip(row + DTYPE(value), DTYPE(low), DTYPE(1.0)))
        for row, value, low in zip(
            spread, (attention, trust, sentiment), (0.0, 0.0, -1.0), strict=True
        )
    )
    return Members(att, tru, sen, exposure=_frozen(np.zeros(n, dtype=DTYPE)))


def update(
    members: Members,
    *,
    directions: Sequence[float],
    magnitudes: Sequence[float],
    probabilities: Sequence[float],
    attention: float,
    trust: float,
    draw: int,
) -> Members:
    """Every member after one archetype decision (the module's rule)."""
    total = math.fsum(probabilities)
    if total > 0:
        cdf = [math.fsum(probabilities[: k + 1]) / total for k in range(len(probabilities))]
    else:
        cdf = [(k + 1) / len(probabilities) for k in range(len(probabilities))]
    u = np.random.default_rng(draw).random(len(members), dtype=DTYPE)
    picks = np.searchsorted(np.array(cdf, dtype=DTYPE), u, side="right")
    np.minimum(picks, len(cdf) - 1, out=picks)
    direction = np.take(np.array(directions, dtype=DTYPE), picks)
    magnitude = np.take(np.array(magnitudes, dtype=DTYPE), picks)
    att = _toward(members.attention, attention)
    tru = _toward(members.trust, trust)
    magnitude *= att
    magnitude *= DTYPE(RATE)
    exposure = np.multiply(members.exposure, DTYPE(1 - RATE))
    exposure += magnitude
    pull = np.multiply(att, tru)
    pull *= DTYPE(0.5)
    direction -= members.sentiment
    direction *= pull
    direction += members.sentiment
    zero, one = DTYPE(0.0), DTYPE(1.0)
    return Members(
        attention=_frozen(np.clip(att, zero, one, out=att)),
        trust=_frozen(np.clip(tru, zero, one, out=tru)),
        sentiment=_frozen(np.clip(direction, -one, one, out=direction)),
        exposure=_frozen(np.clip(exposure, zero, one, out=exposure)),
    )


def _toward(values: MemberArray, target: float) -> MemberArray:
    """``values + RATE·(target − values)``, in a new array."""
    moved = np.subtract(DTYPE(target), values)
    moved *= DTYPE(RATE)
    moved += values
    return moved


def mean(values: MemberArray) -> float:
    """The mean, summed exactly (integers of 2⁻²⁴, whose float64 sum has no rounding in any
    order): the same on every CPU."""
    if len(values) == 0:
        return 0.0
    scaled = values.astype(np.float64)
    scaled *= _SCALE
    np.rint(scaled, out=scaled)
    return float(scaled.sum()) / _SCALE / len(values)
