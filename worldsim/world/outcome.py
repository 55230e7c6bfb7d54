"""What an extraction produces: the ``extraction`` record's content, and the direct rule.

Kept apart from the rules (:mod:`worldsim.world.extraction`) so that reading the rule names
does not load pydantic: the command line lists them in its help.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["DIRECT_RULE", "ExtractionData", "LeafData", "direct_extraction"]


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LeafData(_Data):
    """One leaf timeline as the extraction saw it (the ``extraction`` record's ``leaves``)."""

    timeline: str
    mass: float
    settlement: str
    value: float | None


class ExtractionData(_Data):
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


def direct_extraction(p_yes: float) -> ExtractionData:
    """The ``direct/1`` extraction of a reply's p_yes: one path of mass 1, nothing unresolved."""
    return ExtractionData(
        rule=DIRECT_RULE,
        p_yes=p_yes,
        p_options=None,
        unresolved_mass=0.0,
        yes_mass=0.0,
        no_mass=0.0,
        max_mass=1.0,
        effective_paths=1.0,
        mass_sum=1.0,
        leaves=[],
    )
