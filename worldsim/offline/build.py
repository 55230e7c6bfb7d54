"""The offline model's answers for the benchmark builder's roles: rules, not reading.

They are honest about what they can do. The hindsight explanation lists the retrieved
documents in date order. The graph builder proposes one event per retrieved document (its
title, date and id as the source), chains them in date order into
the outcome with fixed strength 0.5 and confidence 0.7, and records each event's impact from its
document's ``stance`` (toward yes; none: neutral). Asked again with the quality gates' feedback,
it has nothing more to add: its graph stands or falls on how many dated documents there are.
Every output says it came from these rules.
"""

from __future__ import annotations

import re
from typing import Any

from worldsim.domain.outputs import GraphEdit, GraphEditsOutput, HindsightOutput
from worldsim.world.views import BuildContext, RoleView

__all__ = ["OFFLINE_NOTE", "offline_graph_edits", "offline_hindsight"]

OFFLINE_NOTE = "offline rules: events from dated document titles, chained in date order"
STRENGTH = 0.5
CONFIDENCE = 0.7


def _documents(view: RoleView) -> list[dict[str, Any]]:
    docs = [d for d in view.variables.get("documents", ()) if isinstance(d, dict)]
    return sorted(docs, key=lambda d: (str(d.get("published_at", "")), str(d.get("id", ""))))


async def offline_hindsight(view: RoleView) -> HindsightOutput:
    docs = _documents(view)
    lines = [f"{str(d.get('published_at', ''))[:10]}: {d.get('title', '')}" for d in docs]
    text = "Offline rules, no reading: the retrieved documents in date order. " + "; ".join(lines)
    return HindsightOutput(explanation=text[:4000], sources=[str(d["id"]) for d in docs][:60])


def _event_id(doc_id: str) -> str:
    return "ev_" + re.sub(r"[^A-Za-z0-9_]", "_", doc_id)[:70]


async def offline_graph_edits(view: RoleView) -> GraphEditsOutput:
    ctx = view.context
    assert isinstance(ctx, BuildContext)
    if view.variables.get("graph_events"):  # a later round: the rules have nothing to add
        return GraphEditsOutput(edits=[], note=OFFLINE_NOTE + "; nothing more to add")
    outcome = str(view.variables.get("outcome_event", "outcome"))
    docs = _documents(view)
    edits: list[GraphEdit] = []
    ids: list[str] = []
    for d in docs:
        eid = _event_id(str(d["id"]))
        ids.append(eid)
        edits.append(
            GraphEdit(
                op="propose_event",
                id=eid,
                title=str(d.get("title", ""))[:300] or eid,
                date=str(d.get("published_at", ""))[:40],
                source_ids=[str(d["id"])],
            )
        )
        stance = d.get("stance")
        if isinstance(stance, int | float) and abs(stance) > 0.2:
            direction = "positive" if stance > 0 else "negative"
            magnitude = min(1.0, abs(float(stance)))
        else:
            direction, magnitude = "neutral", 0.2
        edits.append(
            GraphEdit(
                op="record_impact",
                event=eid,
                direction=direction,
                magnitude=magnitude,
                confidence=CONFIDENCE,
            )
        )
    for source, target in zip(ids, [*ids[1:], outcome], strict=True):
        edits.append(
            GraphEdit(
                op="add_edge",
                source=source,
                target=target,
                relation="causes",
                strength=STRENGTH,
                confidence=CONFIDENCE,
            )
        )
    return GraphEditsOutput(edits=edits, note=OFFLINE_NOTE)
