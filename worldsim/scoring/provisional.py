"""Forecasts of questions still open: a provisional label (`worldsim.domain.labels.PROVISIONAL`)
holds a market's value, and scores a binary forecast by Brier only, ``(p − value)²``. They are
kept apart from a method's scored units; every other statistic leaves them out, and says so."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


__all__ = ["NOTE", "Provisional", "print_provisional", "provisional_json"]

NOTE = (
    "units whose label is provisional (a question still open, scored against its market "
    "value) count in brier_with_provisional only; log loss, accuracy, calibration and the "
    "comparisons leave them out"
)


@dataclass(frozen=True, slots=True)
class Provisional:
    """A binary forecast of a question still open, and its provisional label's value."""

    p_yes: float
    value: float

    @property
    def brier(self) -> float:
        return (self.p_yes - self.value) ** 2


def provisional_json(
    provisional: Mapping[str, Mapping[str, Provisional]],
    resolved_briers: Mapping[str, Sequence[float]],
) -> dict[str, Any] | None:
    """Per method: the Brier score over its units with a provisional label (``provisional``,
    by method and unit), and over those and its resolved units (``resolved_briers``, by method)
    together; None when no label is provisional."""
    if not provisional:
        return None
    methods: dict[str, Any] = {}
    for name, by_unit in sorted(provisional.items()):
        open_briers = [p.brier for p in by_unit.values()]
        resolved = list(resolved_briers.get(name, ()))
        methods[name] = {
            "n": len(open_briers),
            "brier": math.fsum(open_briers) / len(open_briers),
            "brier_with_provisional": math.fsum(open_briers + resolved)
            / (len(open_briers) + len(resolved)),
        }
    return {"note": NOTE, "methods": methods}


def print_provisional(doc: Mapping[str, Any], console: Console) -> None:
    """One line: each method's provisional units and Brier, and what the other figures leave."""
    prov = doc.get("provisional")
    if not prov:
        return
    each = "; ".join(
        f"{name} {m['n']} unit(s), Brier {m['brier']:.4f}, Brier with them "
        f"{m['brier_with_provisional']:.4f}"
        for name, m in prov["methods"].items()
    )
    console.print(f"provisional labels: {each} — {prov['note']}", highlight=False, soft_wrap=True)
