"""Re-weighting particles by the likelihood of news: the arithmetic of a continued run.

Each particle (a timeline of the parent run as it stood before the news) has a prior mass m
and a likelihood L of the news; its new mass is w = m·L / Σ m·L. A particle whose w falls
below ``prune_below`` is pruned: it keeps mass 0 as a leaf, and the others share its mass in
proportion, so the masses still sum to one. The run and ``verify`` compute the same numbers
with this one function.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "NoSurvivors",
    "Reweighting",
    "likelihood_product",
    "reweigh",
    "reweighted_value",
    "subtree_values",
]


class NoSurvivors(ValueError):
    """The news leaves no particle standing: Σ m·L is 0, or every particle is pruned."""


@dataclass(frozen=True, slots=True)
class Reweighting:
    prior: tuple[float, ...]
    likelihood: tuple[float, ...]
    posterior: tuple[float, ...]
    pruned: tuple[bool, ...]
    evidence: float
    effective_paths: float


def likelihood_product(used: Sequence[float]) -> float:
    """A particle's likelihood: the product of its documents' likelihoods, in news order."""
    product = 1.0
    for value in used:
        product *= value
    return product


def reweigh(prior: Sequence[float], likelihood: Sequence[float], prune_below: float) -> Reweighting:
    """The particles' new masses (see the module's doc). Raises :class:`NoSurvivors` when the
    news leaves none."""
    weighted = [m * lik for m, lik in zip(prior, likelihood, strict=True)]
    evidence = math.fsum(weighted)
    if not evidence > 0.0:
        raise NoSurvivors("the news has likelihood 0 under every particle")
    w = [x / evidence for x in weighted]
    pruned = tuple(x < prune_below for x in w)
    kept = math.fsum(x for x, cut in zip(w, pruned, strict=True) if not cut)
    if all(pruned) or not kept > 0.0:
        raise NoSurvivors(f"every particle falls below prune_below {prune_below}")
    posterior = tuple(0.0 if cut else x / kept for x, cut in zip(w, pruned, strict=True))
    return Reweighting(
        prior=tuple(prior),
        likelihood=tuple(likelihood),
        posterior=posterior,
        pruned=pruned,
        evidence=evidence,
        effective_paths=1.0 / math.fsum(x * x for x in posterior),
    )


def subtree_values(
    leaves: Mapping[str, tuple[float, float]], particles: Sequence[str]
) -> dict[str, float]:
    """Each particle's outcome value in the parent: the mass-weighted value of the parent's
    leaves (id → (mass, value)) that descend from it, nearer particles apart (a leaf belongs to
    its nearest ancestor-or-self among the particles). A particle whose leaves hold no mass
    takes their plain mean (0.5 when it has none)."""
    found = set(particles)
    groups: dict[str, list[tuple[float, float]]] = {p: [] for p in particles}
    for tl, pair in leaves.items():
        parts = tl.split(".")
        owner = next(
            (a for a in (".".join(parts[:n]) for n in range(len(parts), 0, -1)) if a in found),
            None,
        )
        if owner is not None:
            groups[owner].append(pair)
    values: dict[str, float] = {}
    for p, pairs in groups.items():
        total = math.fsum(m for m, _ in pairs)
        if total > 0:
            values[p] = math.fsum(m * v for m, v in pairs) / total
        else:
            values[p] = math.fsum(v for _, v in pairs) / len(pairs) if pairs else 0.5
    return values


def reweighted_value(posterior: Sequence[float], values: Sequence[float]) -> float:
    """Σ w·v: the parent's futures re-weighted by the news, without new simulation."""
    return math.fsum(w * v for w, v in zip(posterior, values, strict=True))
