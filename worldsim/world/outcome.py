"""What an extraction produces: the ``extraction`` record's content, and the direct rule.

Kept apart from the rules (:mod:`worldsim.world.extraction`) so that reading the rule names
does not load pydantic: the command line lists them in its help.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from worldsim.domain.values import FrozenModel

__all__ = ["DIRECT_RULE", "ExtractionData", "LeafData", "direct_extraction", "direct_options"]


class LeafData(FrozenModel):
    """One leaf timeline as the extraction saw it (the ``extraction`` record's ``leaves``)."""

    timeline: str
    mass: float
    settlement: str
    value: float | None


class ExtractionData(FrozenModel):
    """An extraction's result: the ``extraction`` record of a trace."""

    rule: str
    p_yes: float | None
    p_options: dict[str, float] | None
    unresolved_mass: float
    yes_mass: float
    no_mass: float
    max_mass: float
    effective_paths: float
    mass_sum: float
    leaves: list[LeafData]


DIRECT_RULE = "direct/1"
"""The extraction rule of direct traces: p_yes is the reply's p_yes, unchanged."""


def direct_extraction(
    p_yes: float | None, p_options: dict[str, float] | None = None
) -> ExtractionData:
    """The ``direct/1`` extraction of a reply's p_yes (or, for a multiple-choice card, its
    option distribution): one path of mass 1, nothing unresolved."""
    return ExtractionData(
        rule=DIRECT_RULE,
        p_yes=p_yes,
        p_options=p_options,
        unresolved_mass=0.0,
        yes_mass=0.0,
        no_mass=0.0,
        max_mass=1.0,
        effective_paths=1.0,
        mass_sum=1.0,
        leaves=[],
    )


def direct_options(scored: Sequence[str], given: Iterable[tuple[str, float]]) -> dict[str, float]:
    """A multiple-choice reply's (outcome, probability) pairs as a distribution over the
    ``scored`` outcomes, normalised to sum to 1 and sorted by outcome. An unknown, repeated or
    missing outcome, or an all-zero reply, is a ``ValueError``."""
    probs: dict[str, float] = {}
    for outcome, p in given:
        if outcome not in scored:
            raise ValueError(f"the reply names unknown outcome '{outcome}'")
        if outcome in probs:
            raise ValueError(f"the reply names outcome '{outcome}' twice")
        probs[outcome] = p
    missing = [ep for ep in scored if ep not in probs]
    if missing:
        raise ValueError(f"the reply gives no probability for outcome '{missing[0]}'")
    total = sum(probs.values())
    if total <= 0:
        raise ValueError("the reply's probabilities are all zero")
    return {ep: probs[ep] / total for ep in sorted(scored)}
