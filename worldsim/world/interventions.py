"""Interventions made to a world before it runs: each becomes a scheduled event at its tick.

An ``event`` intervention is scheduled like one of the card's events (a bare pressure is a
shift toward the yes endpoint of a binary card); a ``hypothesis`` intervention schedules the
hypothesis's impact on its endpoint at its date, titled "<hypothesis> (forced)"; a ``variable``
intervention schedules an event (titled "<variable> set to <value>" unless it has a title) that
sets the world variable as its tick starts (`worldsim.world.state.deliver_events`). What was done
is returned as records for the trace; one that cannot act on this world (its hypothesis is not
in it, a pressure on an endpoint that is not scored, a bare pressure on a multiple-choice
card) is recorded as not applied, with the reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from worldsim.domain.cards import Card, utc_iso
from worldsim.domain.interventions import Intervention
from worldsim.world.build import tick_of
from worldsim.world.state import Scalar, ScheduledEvent, WorldState

__all__ = ["apply_interventions"]


def apply_interventions(
    state: WorldState, interventions: Sequence[Intervention], card: Card, ticks: int
) -> tuple[WorldState, list[dict[str, Any]]]:
    """The world with the interventions scheduled, and one record per intervention."""
    yes = next((ep.id for ep in state.scored if ep.polarity == "yes"), None)
    added: list[ScheduledEvent] = []
    records: list[dict[str, Any]] = []
    for iv in interventions:
        tick = tick_of(card, ticks, iv.at)
        record: dict[str, Any] = {
            "id": iv.id,
            "kind": iv.kind,
            "at": utc_iso(iv.at),
            "tick": tick,
            "applied": False,
            "reason": None,
            "title": iv.title,
            "pressure": [],
            "variable": iv.variable,
            "value": iv.value,
        }
        shift: tuple[tuple[str, float], ...] = ()
        variables: tuple[tuple[str, Scalar], ...] = ()
        title = iv.title or ""
        if iv.kind == "hypothesis":
            hypothesis = state.hypotheses.get(iv.hypothesis or "")
            if hypothesis is None:
                record["reason"] = f"the world has no hypothesis '{iv.hypothesis}'"
            else:
                title = f"{hypothesis.title} (forced)"
                shift = ((hypothesis.endpoint, float(hypothesis.impact)),)
        elif iv.kind == "variable" and iv.variable is not None and iv.value is not None:
            title = iv.title or f"{iv.variable} set to {iv.value}"
            variables = ((iv.variable, iv.value),)
        elif isinstance(iv.pressure, dict):
            unknown = sorted(set(iv.pressure) - {ep.id for ep in state.scored})
            if unknown:
                record["reason"] = f"the world has no scored endpoint '{unknown[0]}'"
            shift = tuple(sorted((k, float(v)) for k, v in iv.pressure.items()))
        elif iv.pressure:
            if yes is None:
                record["reason"] = "a bare pressure needs a binary card"
            else:
                shift = ((yes, float(iv.pressure)),)
        if not 0 <= tick < ticks:
            record["reason"] = "its date falls outside the run's ticks"
        if record["reason"] is None:
            record.update(applied=True, title=title, pressure=[list(p) for p in shift])
            added.append(
                ScheduledEvent(
                    f"intervention:{iv.id}", title, tick, iv.description, shift, variables
                )
            )
        records.append(record)
    if not added:
        return state, records
    return dataclasses.replace(state, events=(*state.events, *added)), records
