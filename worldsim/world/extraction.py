"""Extraction rules (DESIGN §4.6): settled timelines → p_yes, under a named, versioned rule."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from worldsim.domain.contracts import EXPECTED, EXTRACTION_RULES, lineage
from worldsim.domain.errors import ConfigError

if TYPE_CHECKING:
    from worldsim.world.outcome import ExtractionData

__all__ = ["EXTRACTION_RULES", "EXTRACTION_VALUES", "Leaf", "extract"]


@dataclass(frozen=True, slots=True)
class Leaf:
    """A finished timeline as extraction sees it."""

    timeline: str
    mass: float
    settlement: str  # "yes", "no", "expected", "unresolved", or an endpoint id (multiple choice)
    forced_p_yes: float | None = None
    forced_probs: dict[str, float] | None = None


def _path_ledger_value(leaf: Leaf) -> float:
    if leaf.settlement == "yes":
        return 1.0
    if leaf.settlement == "no":
        return 0.0
    return leaf.forced_p_yes if leaf.forced_p_yes is not None else 0.5


def _path_ledger_options(leaf: Leaf, options: Sequence[str]) -> dict[str, float]:
    if leaf.settlement in options:
        return {o: 1.0 if o == leaf.settlement else 0.0 for o in options}
    if leaf.forced_probs is not None and set(leaf.forced_probs) == set(options):
        return {o: float(leaf.forced_probs[o]) for o in options}
    return {o: 1.0 / len(options) for o in options}


def _status_mass_options(leaf: Leaf, options: Sequence[str]) -> dict[str, float]:
    if leaf.settlement == EXPECTED:
        return _path_ledger_options(leaf, options)
    if leaf.settlement in options:
        return {o: 1.0 if o == leaf.settlement else 0.0 for o in options}
    return {o: 1.0 / len(options) for o in options}


def _status_mass_value(leaf: Leaf) -> float:
    if leaf.settlement == EXPECTED:
        return _path_ledger_value(leaf)
    return {"yes": 1.0, "no": 0.0}.get(leaf.settlement, 0.5)


_VALUE: dict[str, Callable[[Leaf], float]] = {
    "path-ledger/1": _path_ledger_value,
    "candidate-status-mass/1": _status_mass_value,
}
_OPTIONS: dict[str, Callable[[Leaf, Sequence[str]], dict[str, float]]] = {
    "path-ledger/1": _path_ledger_options,
    "candidate-status-mass/1": _status_mass_options,
}
EXTRACTION_VALUES: Mapping[str, Callable[[Leaf], float]] = _VALUE
"""Each rule's value of a binary leaf: p_yes is the leaves' mass-weighted mean of it."""


def extract(
    leaves: Sequence[Leaf], rule: str = "path-ledger/1", options: Sequence[str] | None = None
) -> ExtractionData:
    """Apply ``rule`` to the leaves; ``options`` (scored endpoint ids) for multiple choice.

    ``candidate-status-mass/1`` is ``(M_yes + 0.5·M_unres) / (M_yes + M_no + M_unres)``, which is
    the same as valuing unresolved paths at 0.5 and ignoring their forced values. A path settled
    at a value q (``expected``) is not unresolved: it adds ``q·m`` to ``M_yes`` and
    ``(1 − q)·m`` to ``M_no`` and is valued at q under both rules.
    """
    from worldsim.world.outcome import ExtractionData, LeafData

    if rule not in _VALUE:
        raise ConfigError(
            f"unknown extraction rule '{rule}' (known: {', '.join(EXTRACTION_RULES)})",
            field="extraction",
        )
    ordered = sorted(leaves, key=lambda leaf: lineage(leaf.timeline))
    total = 0.0
    for leaf in ordered:
        total += leaf.mass
    yes_mass = no_mass = unresolved_mass = 0.0
    weights = [leaf.mass / total for leaf in ordered] if total > 0 else [0.0] * len(ordered)
    for leaf, w in zip(ordered, weights, strict=True):
        if leaf.settlement == "yes":
            yes_mass += w
        elif leaf.settlement == "no":
            no_mass += w
        elif leaf.settlement == "unresolved":
            unresolved_mass += w
        elif leaf.settlement == EXPECTED and leaf.forced_p_yes is not None:
            yes_mass += w * leaf.forced_p_yes
            no_mass += w * (1.0 - leaf.forced_p_yes)

    p_yes: float | None = None
    p_options: dict[str, float] | None = None
    values: list[float | None] = []
    if options is None:
        value = _VALUE[rule]
        p = 0.0
        for leaf, w in zip(ordered, weights, strict=True):
            v = value(leaf)
            values.append(v)
            p += w * v
        p_yes = min(1.0, max(0.0, p)) if total > 0 else 0.5
    else:
        option_fn = _OPTIONS[rule]
        acc = dict.fromkeys(options, 0.0)
        for leaf, w in zip(ordered, weights, strict=True):
            dist = option_fn(leaf, options)
            values.append(None)
            for o in options:
                acc[o] += w * dist[o]
        p_options = acc

    sq = 0.0
    for w in weights:
        sq += w * w
    # Normalised weights can sum to 1 + 1 ulp; a mass is a probability and is kept in [0, 1].
    return ExtractionData(
        rule=rule,
        p_yes=p_yes,
        p_options=p_options,
        unresolved_mass=min(1.0, unresolved_mass),
        yes_mass=min(1.0, yes_mass),
        no_mass=min(1.0, no_mass),
        max_mass=max(weights, default=0.0),
        effective_paths=1.0 / sq if sq > 0 else 0.0,
        mass_sum=total,
        leaves=[
            LeafData(timeline=leaf.timeline, mass=leaf.mass, settlement=leaf.settlement, value=v)
            for leaf, v in zip(ordered, values, strict=True)
        ],
    )
