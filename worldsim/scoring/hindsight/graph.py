"""Hindsight graphs: what actually happened around a card, written after resolution.

One JSON file per card holds dated events, causal edges between them and the impact of each
event on the question. Structural problems (duplicate ids, edges or impacts naming unknown
events, self-loops, cycles) are errors; quality thresholds are warnings unless ``strict``.

The size of a graph is counted one way everywhere (`graph_size`, `size_shortfalls`): by
`validate_graph` and by the quality gates of ``worldsim build hindsight``. Its events are those
besides the outcome; its depth is the number of *edges* (hops) on the longest causal path ending
at the outcome event (at any event when none is marked ``is_outcome``): A → B → outcome has
depth 2.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

from worldsim.domain.cards import UtcDatetime
from worldsim.domain.errors import CardError
from worldsim.domain.files import load_document, validated
from worldsim.domain.outputs import Direction, Relation
from worldsim.domain.values import FrozenModel

__all__ = [
    "Annotation",
    "Direction",
    "GraphSize",
    "HindsightEdge",
    "HindsightEvent",
    "HindsightGraph",
    "HindsightImpact",
    "RejectedEvent",
    "Relation",
    "Thresholds",
    "ValidationReport",
    "check_graph",
    "check_graph_built",
    "check_graph_card",
    "graph_json",
    "graph_size",
    "load_hindsight",
    "longest_hops",
    "not_built",
    "size_shortfalls",
    "validate_graph",
]


class HindsightEvent(FrozenModel):
    """A real event; ``is_outcome`` marks the resolution itself (never a key event)."""

    id: str = Field(min_length=1)
    title: str = Field(min_length=1)
    description: str = ""
    date: UtcDatetime | None = None
    type: str = "event"
    is_outcome: bool = False
    source_ids: tuple[str, ...] = ()


class HindsightEdge(FrozenModel):
    source: str
    target: str
    relation: Relation
    strength: float = Field(ge=0.0, le=1.0)
    confidence: float = Field(ge=0.0, le=1.0)


class HindsightImpact(FrozenModel):
    """How an event moved the question: a direction toward yes, with magnitude and confidence."""

    event: str
    direction: Direction
    magnitude: float = Field(ge=0.0, le=1.0)
    confidence: float = Field(ge=0.0, le=1.0)


class RejectedEvent(FrozenModel):
    """An event people rejected on the annotation sheet, and which checks it failed."""

    event: str
    title: str
    failed: tuple[str, ...]
    notes: str = ""


class Annotation(FrozenModel):
    """The annotation sheet applied to a graph: its hash, how many events it listed and how
    many were checked on all five points, and the events dropped."""

    sheet_sha256: str
    events: int
    checked: int
    rejected: tuple[RejectedEvent, ...] = ()


class HindsightGraph(FrozenModel):
    card_id: str | None = None
    question: str | None = None
    events: tuple[HindsightEvent, ...]
    edges: tuple[HindsightEdge, ...] = ()
    impacts: tuple[HindsightImpact, ...] = ()
    graph_built: bool = True
    """False when its builder could not meet the quality gates (``worldsim build hindsight``):
    the graph is kept for reading and left out of scoring."""
    failed_gates: tuple[str, ...] = ()
    construction: dict[str, Any] | None = None
    """How it was built: roles and their prompt versions, route, rounds, whether by the
    offline rules (``worldsim build hindsight``); absent for a hand-written graph."""
    annotation: Annotation | None = None
    """What people checked on the graph's annotation sheet (``worldsim build
    apply-annotations``): how many events were checked, and those rejected, with why."""

    @property
    def sources(self) -> frozenset[str]:
        """Every source id any event cites."""
        return frozenset(s for ev in self.events for s in ev.source_ids)

    def key_score(self, event_id: str) -> float:
        """The largest magnitude × confidence over the event's impacts (0 without impacts)."""
        return max(
            (im.magnitude * im.confidence for im in self.impacts if im.event == event_id),
            default=0.0,
        )


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Quality thresholds; each failure is a warning, or an error when validating strictly."""

    min_events: int = 10
    """Events besides the outcome."""
    min_edges: int = 1
    min_depth: int = 3
    """Hops on the longest causal path to the outcome (`graph_size`)."""
    min_edge_confidence: float = 0.6
    min_edge_strength: float = 0.3
    max_neutral_magnitude: float = 0.3


@dataclass(frozen=True, slots=True)
class ValidationReport:
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    events: int = 0
    """Events besides the outcome."""
    depth: int = 0
    """Hops on the longest causal path to the outcome."""

    @property
    def ok(self) -> bool:
        return not self.errors


@dataclass(frozen=True, slots=True)
class GraphSize:
    """What the size thresholds count (see the module's doc)."""

    events: int
    """Events besides the outcome."""
    depth: int
    """Edges on the longest causal path ending at the outcome (0 when the edges hold a cycle)."""
    has_outcome: bool
    """Whether an event is marked ``is_outcome``; without one, the depth ends at any event."""
    cyclic: bool


def longest_hops(event_ids: list[str], edges: list[tuple[str, str]]) -> dict[str, int] | None:
    """For each event, the edges on the longest directed path ending at it; ``None`` when the
    edges contain a cycle.

    Kahn's topological order: a node's hops are one more than its deepest predecessor's. If
    some node is never released, the edges hold a cycle.
    """
    nodes = list(dict.fromkeys([*event_ids, *(n for edge in edges for n in edge)]))
    children: dict[str, list[str]] = {n: [] for n in nodes}
    indegree: dict[str, int] = dict.fromkeys(nodes, 0)
    for source, target in edges:
        children[source].append(target)
        indegree[target] += 1
    hops: dict[str, int] = dict.fromkeys(nodes, 0)
    ready = deque(n for n in nodes if indegree[n] == 0)
    released = 0
    while ready:
        node = ready.popleft()
        released += 1
        for kid in children[node]:
            hops[kid] = max(hops[kid], hops[node] + 1)
            indegree[kid] -= 1
            if indegree[kid] == 0:
                ready.append(kid)
    return None if released < len(nodes) else hops


def graph_size(graph: HindsightGraph) -> GraphSize:
    """The graph's events besides the outcome and its depth in hops to the outcome; edges
    naming an unknown event, or an event itself, are not followed."""
    ids = list(dict.fromkeys(ev.id for ev in graph.events))
    known = set(ids)
    edges = [
        (e.source, e.target)
        for e in graph.edges
        if e.source in known and e.target in known and e.source != e.target
    ]
    hops = longest_hops(ids, edges)
    outcomes = [ev.id for ev in graph.events if ev.is_outcome]
    depth = 0 if hops is None else max((hops[n] for n in (outcomes or ids)), default=0)
    return GraphSize(
        events=sum(not ev.is_outcome for ev in graph.events),
        depth=depth,
        has_outcome=bool(outcomes),
        cyclic=hops is None,
    )


def size_shortfalls(size: GraphSize, *, min_events: int, min_depth: int) -> list[str]:
    """The size thresholds a graph fails, worded so that its builder can act on them: the one
    rule of `validate_graph` and of the build's quality gates. A cyclic graph's depth is not
    judged (the cycle is the error)."""
    failed: list[str] = []
    if not size.cyclic and size.depth < min_depth:
        path = (
            "the longest causal path to the outcome"
            if size.has_outcome
            else ("the longest causal path (no event is marked is_outcome)")
        )
        failed.append(
            f"depth: {path} has {size.depth} hop(s); at least {min_depth} are needed "
            "(add causes of the causes)"
        )
    if size.events < min_events:
        besides = " besides the outcome" if size.has_outcome else ""
        failed.append(f"events: {size.events} event(s){besides}; at least {min_events}")
    return failed


def validate_graph(
    graph: HindsightGraph, thresholds: Thresholds | None = None, *, strict: bool = False
) -> ValidationReport:
    """Check structure (errors) and quality thresholds (warnings, errors when ``strict``)."""
    t = thresholds or Thresholds()
    errors: list[str] = []
    ids = [ev.id for ev in graph.events]
    known = set(ids)
    seen: set[str] = set()
    for ev in graph.events:
        if ev.id in seen:
            errors.append(f"events: duplicate event id '{ev.id}'")
        seen.add(ev.id)
    for i, edge in enumerate(graph.edges):
        for end in ("source", "target"):
            name = getattr(edge, end)
            if name not in known:
                errors.append(f"edges.{i}.{end}: unknown event '{name}'")
        if edge.source == edge.target:
            errors.append(f"edges.{i}: an event cannot cause itself ('{edge.source}')")
    for i, impact in enumerate(graph.impacts):
        if impact.event not in known:
            errors.append(f"impacts.{i}.event: unknown event '{impact.event}'")
    size = graph_size(graph)
    if size.cyclic:
        errors.append("edges: the causal graph contains a cycle")

    quality: list[str] = []
    if (reason := not_built(graph)) is not None:
        quality.append(reason)
    quality += size_shortfalls(size, min_events=t.min_events, min_depth=t.min_depth)
    if len(graph.edges) < t.min_edges:
        quality.append(f"edges: {len(graph.edges)} edge(s), fewer than {t.min_edges}")
    for i, edge in enumerate(graph.edges):
        if edge.confidence < t.min_edge_confidence:
            quality.append(
                f"edges.{i}.confidence: {edge.confidence} is below {t.min_edge_confidence}"
            )
        if edge.strength < t.min_edge_strength:
            quality.append(f"edges.{i}.strength: {edge.strength} is below {t.min_edge_strength}")
    for i, impact in enumerate(graph.impacts):
        if impact.direction == "neutral" and impact.magnitude > t.max_neutral_magnitude:
            quality.append(
                f"impacts.{i}.magnitude: neutral impact {impact.magnitude} exceeds "
                f"{t.max_neutral_magnitude}"
            )
    if strict:
        return ValidationReport(errors=(*errors, *quality), events=size.events, depth=size.depth)
    return ValidationReport(
        errors=tuple(errors), warnings=tuple(quality), events=size.events, depth=size.depth
    )


def not_built(graph: HindsightGraph) -> str | None:
    """Why scoring leaves the graph out (it says ``graph_built: false``), or ``None``."""
    if graph.graph_built:
        return None
    gates = "; ".join(graph.failed_gates) or "none recorded"
    return f"graph_built: false, so scoring leaves it out (failed gate: {gates})"


def check_graph_built(graph: HindsightGraph, *, file: str | Path) -> None:
    """Refuse to score the graph in ``file`` when it says ``graph_built: false``: its builder
    could not meet the quality gates, and ``worldsim score --hindsight`` leaves it out."""
    if (reason := not_built(graph)) is not None:
        raise CardError(reason, file=file, field="graph_built")


def check_graph(
    graph: HindsightGraph, *, file: str | Path, card_id: str | None = None
) -> ValidationReport:
    """The graph in ``file`` as what is scored or charted against it takes it: refused on its
    first structural error, or when written for another card than ``card_id``
    (:func:`check_graph_card`); its quality findings are the report's warnings."""
    report = validate_graph(graph)
    if report.errors:
        raise CardError(report.errors[0], file=file)
    check_graph_card(graph, card_id, file=file)
    return report


def check_graph_card(graph: HindsightGraph, card_id: str | None, *, file: str | Path) -> None:
    """Refuse the graph in ``file`` when it is written for another card than ``card_id``
    (what is scored against it): its events and sources are not that card's. A graph or a
    forecast that names no card is not checked."""
    if card_id is not None and graph.card_id is not None and graph.card_id != card_id:
        raise CardError(
            f"graph is for card '{graph.card_id}', not '{card_id}'", file=file, field="card_id"
        )


def graph_json(graph: HindsightGraph) -> bytes:
    """The graph as the JSON file `load_hindsight` reads (unset fields left out)."""
    return (json.dumps(graph.model_dump(mode="json", exclude_none=True), indent=2) + "\n").encode()


def load_hindsight(path: str | Path) -> HindsightGraph:
    """Read a hindsight graph JSON file; bad input raises :class:`CardError` naming file/field.

    Only the schema is checked here; call :func:`validate_graph` for structure and quality.
    """
    p = Path(path)
    data = load_document(p, what="hindsight graph")
    if not isinstance(data, dict):
        raise CardError("a hindsight graph must be a JSON object", file=p)
    return validated(HindsightGraph, data, file=p)
