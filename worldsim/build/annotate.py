"""The annotation sheet: one CSV row per event of a hindsight graph, with the five checks of
the WorldReasoner protocol for a person to fill in, and applying the filled sheet.

Columns: ``event_id, title, date, sources`` (for reading), then the checks ``factual`` (it
happened), ``date_ok`` (on that date), ``source_support`` (its documents say so),
``causal_relevance`` (it bears on the outcome), ``not_duplicate`` — each ``yes``, ``no`` or
empty (not checked) — and ``notes``. Applying the sheet drops every event with a ``no`` (and
its edges and impact), records why in the graph's ``annotation``, counts the events checked on
all five points, and, for a graph `worldsim build hindsight` built, checks the quality gates
again once events are dropped: a graph that no longer meets them becomes ``graph_built: false``.
"""

from __future__ import annotations

import csv
import hashlib
import io
from pathlib import Path

from worldsim.build.graph import gate_failures
from worldsim.build.policy import GraphGates
from worldsim.domain.errors import CardError
from worldsim.scoring.hindsight.graph import Annotation, HindsightGraph, RejectedEvent
from worldsim.scoring.inputs import read_csv

__all__ = ["CHECKS", "annotation_sheet", "apply_annotations"]

CHECKS = ("factual", "date_ok", "source_support", "causal_relevance", "not_duplicate")
COLUMNS = ("event_id", "title", "date", "sources", *CHECKS, "notes")


def annotation_sheet(graph: HindsightGraph) -> str:
    """The sheet's CSV text: the graph's events (not the outcome), checks left empty."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for event in graph.events:
        if event.is_outcome:
            continue
        date = event.date.date().isoformat() if event.date else ""
        writer.writerow(
            [event.id, event.title, date, " ".join(event.source_ids), *([""] * len(CHECKS)), ""]
        )
    return out.getvalue()


def apply_annotations(graph: HindsightGraph, sheet: Path, gates: GraphGates) -> HindsightGraph:
    """``graph`` without the events the filled ``sheet`` rejects; see the module's doc. A value
    other than yes/no/empty, or a row naming an event the graph lacks or one an earlier row
    named, is a `CardError` naming the sheet, its line and column."""
    _, rows = read_csv(sheet, ("event_id", *CHECKS), what="annotation sheet")
    known = {e.id: e for e in graph.events if not e.is_outcome}
    rejected: list[RejectedEvent] = []
    checked = 0
    seen: dict[str, int] = {}
    for line, row in rows:
        event_id = row.get("event_id", "")
        if event_id not in known:
            raise CardError(
                f"no event '{event_id}' in the graph", file=sheet, line=line, field="event_id"
            )
        if event_id in seen:
            raise CardError(
                f"event '{event_id}' is on line {seen[event_id]} already",
                file=sheet,
                line=line,
                field="event_id",
            )
        seen[event_id] = line
        values: dict[str, str] = {}
        for check in CHECKS:
            value = row.get(check, "").strip().lower()
            if value not in ("yes", "no", ""):
                raise CardError(
                    f"'{row.get(check)}' is not yes, no or empty",
                    file=sheet,
                    line=line,
                    field=check,
                )
            values[check] = value
        if all(values.values()):
            checked += 1
        failed = tuple(check for check in CHECKS if values[check] == "no")
        if failed:
            event = known[event_id]
            rejected.append(
                RejectedEvent(
                    event=event_id, title=event.title, failed=failed, notes=row.get("notes", "")
                )
            )
    dropped = {r.event for r in rejected}
    kept = graph.model_copy(
        update={
            "events": tuple(e for e in graph.events if e.id not in dropped),
            "edges": tuple(
                e for e in graph.edges if e.source not in dropped and e.target not in dropped
            ),
            "impacts": tuple(i for i in graph.impacts if i.event not in dropped),
        }
    )
    # a graph built under the gates must still meet them without the dropped events
    recheck = graph.construction is not None and bool(dropped)
    failed_gates = tuple(gate_failures(kept, gates)) if recheck else ()
    annotation = Annotation(
        sheet_sha256=hashlib.sha256(sheet.read_bytes()).hexdigest(),
        events=len(known),
        checked=checked,
        rejected=tuple(rejected),
    )
    return kept.model_copy(
        update={
            "annotation": annotation,
            "graph_built": graph.graph_built and not failed_gates,
            "failed_gates": failed_gates if failed_gates else graph.failed_gates,
        }
    )
