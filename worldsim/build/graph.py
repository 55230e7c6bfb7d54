"""A hindsight graph under construction: the builder's edits applied one by one, and the
quality gates checked on the result.

The outcome event (``outcome``, ``is_outcome``) is placed first and cannot be deleted. An edit
that cannot apply — an unknown event, an edge that would close a cycle, a source the builder
was never shown — is refused with the reason and changes nothing; the reasons go back to the
builder with the gates it failed. On a model route the builder may also make the same edits as
tool calls (`GRAPH_TOOLS`), each applied at once and answered with whether it was. When the graph
is written, edges weaker than the gates'
``min_edge_confidence`` or ``min_edge_strength`` are not included (they are named in the build
log), so every included edge meets them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from worldsim.build.policy import GraphGates
from worldsim.domain.contracts import ToolHandler
from worldsim.domain.files import first_error
from worldsim.domain.outputs import GraphEdit
from worldsim.gateway.tools import ToolSpec
from worldsim.scoring.hindsight.graph import (
    Direction,
    HindsightEdge,
    HindsightEvent,
    HindsightGraph,
    HindsightImpact,
    Relation,
    graph_size,
    size_shortfalls,
)

__all__ = [
    "GRAPH_TOOLS",
    "OUTCOME_ID",
    "WorkingGraph",
    "gate_failures",
    "tool_handler",
]

OUTCOME_ID = "outcome"


def _date(text: str) -> datetime | None:
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@dataclass
class WorkingGraph:
    """The graph so far, keyed for editing."""

    outcome: HindsightEvent
    sources: frozenset[str]
    """The ids of the documents the builder was shown: the only sources an event may cite."""
    events: dict[str, HindsightEvent] = field(default_factory=dict)
    edges: dict[tuple[str, str], HindsightEdge] = field(default_factory=dict)
    impacts: dict[str, HindsightImpact] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.events = {OUTCOME_ID: self.outcome, **self.events}

    def apply_all(self, edits: Iterable[GraphEdit]) -> list[str]:
        """Apply the edits in order; the reasons of those refused."""
        return [
            f"edit {i} ({edit.op}): {problem}"
            for i, edit in enumerate(edits)
            if (problem := self.apply(edit)) is not None
        ]

    def apply(self, edit: GraphEdit) -> str | None:
        """Apply one edit, or say why not (and change nothing)."""
        if edit.op == "propose_event":
            return self._propose(edit)
        if edit.op == "add_edge":
            return self._add_edge(edit)
        if edit.op == "record_impact":
            if edit.event not in self.events or edit.event == OUTCOME_ID:
                return f"no event '{edit.event}' to record an impact for"
            self.impacts[edit.event] = HindsightImpact(
                event=edit.event,
                direction=edit.direction,
                magnitude=edit.magnitude,
                confidence=edit.confidence,
            )
            return None
        if edit.op == "delete_event":
            if edit.id == OUTCOME_ID:
                return "the outcome event stays"
            if self.events.pop(edit.id, None) is None:
                return f"no event '{edit.id}'"
            self.impacts.pop(edit.id, None)
            self.edges = {k: e for k, e in self.edges.items() if edit.id not in k}
            return None
        if self.edges.pop((edit.source, edit.target), None) is None:  # delete_edge
            return f"no edge {edit.source} -> {edit.target}"
        return None

    def _propose(self, edit: GraphEdit) -> str | None:
        if not edit.id or edit.id == OUTCOME_ID:
            return f"an event needs an id other than '{OUTCOME_ID}'"
        if not edit.title:
            return f"event '{edit.id}' needs a title"
        unknown = [s for s in edit.source_ids if s not in self.sources]
        if unknown:
            return f"event '{edit.id}' cites documents it was not shown: {', '.join(unknown)}"
        self.events[edit.id] = HindsightEvent(
            id=edit.id,
            title=edit.title,
            description=edit.description,
            date=_date(edit.date),
            source_ids=tuple(dict.fromkeys(edit.source_ids)),
        )
        return None

    def _add_edge(self, edit: GraphEdit) -> str | None:
        for end in (edit.source, edit.target):
            if end not in self.events:
                return f"no event '{end}'"
        if edit.source == edit.target:
            return "an event cannot cause itself"
        if edit.source == OUTCOME_ID:
            return "the outcome causes nothing in its own graph"
        if self._reaches(edit.target, edit.source):
            return f"{edit.source} -> {edit.target} would close a cycle"
        self.edges[(edit.source, edit.target)] = HindsightEdge(
            source=edit.source,
            target=edit.target,
            relation=edit.relation,
            strength=edit.strength,
            confidence=edit.confidence,
        )
        return None

    def _reaches(self, start: str, goal: str) -> bool:
        children: dict[str, list[str]] = {}
        for source, target in self.edges:
            children.setdefault(source, []).append(target)
        stack, seen = [start], {start}
        while stack:
            node = stack.pop()
            if node == goal:
                return True
            for kid in children.get(node, ()):
                if kid not in seen:
                    seen.add(kid)
                    stack.append(kid)
        return False

    def graph(
        self, gates: GraphGates, *, card_id: str, question: str, **extra: Any
    ) -> tuple[HindsightGraph, list[str]]:
        """The graph as written, and the edges left out for being weaker than the gates."""
        kept: list[HindsightEdge] = []
        weak: list[str] = []
        for (source, target), edge in self.edges.items():
            if (
                edge.confidence < gates.min_edge_confidence
                or edge.strength < gates.min_edge_strength
            ):
                weak.append(
                    f"{source} -> {target} (confidence {edge.confidence}, strength {edge.strength})"
                )
            else:
                kept.append(edge)
        graph = HindsightGraph(
            card_id=card_id,
            question=question,
            events=tuple(self.events.values()),
            edges=tuple(kept),
            impacts=tuple(self.impacts.values()),
            **extra,
        )
        return graph, weak

    def summary(self) -> Mapping[str, Any]:
        """What the builder is shown of the graph so far."""
        return {
            "graph_events": [
                {"id": e.id, "title": e.title, "date": e.date.isoformat() if e.date else None}
                for e in self.events.values()
            ],
            "graph_edges": [f"{s} -> {t}" for s, t in self.edges],
        }


def gate_failures(graph: HindsightGraph, gates: GraphGates) -> list[str]:
    """Each gate the graph fails, said so that a builder can act on it; its events and depth
    are counted as `hindsight validate` counts them (`size_shortfalls`)."""
    failed = size_shortfalls(
        graph_size(graph), min_events=gates.min_events, min_depth=gates.min_hops_to_outcome
    )
    sources = len(graph.sources)
    if sources < gates.min_sources:
        failed.append(
            f"sources: {sources} distinct supporting document(s); at least {gates.min_sources}"
        )
    if len(graph.edges) < gates.min_edges:
        failed.append(
            f"edges: {len(graph.edges)} edge(s) meeting confidence ≥ "
            f"{gates.min_edge_confidence} and strength ≥ {gates.min_edge_strength}; at least "
            f"{gates.min_edges}"
        )
    return failed


# -- the builder's tools: the same edits, one call each, answered at once


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProposeEventArgs(_Args):
    id: str = Field(min_length=1, max_length=80)
    title: str = Field(min_length=1, max_length=300)
    date: str = Field("", max_length=40, description="ISO date of the event")
    description: str = Field("", max_length=1000)
    source_ids: list[str] = Field(min_length=1, max_length=20, description="supporting documents")


class AddEdgeArgs(_Args):
    source: str = Field(min_length=1, max_length=80)
    target: str = Field(min_length=1, max_length=80)
    relation: Relation = "causes"
    strength: float = Field(ge=0.0, le=1.0)
    confidence: float = Field(ge=0.0, le=1.0)


class RecordImpactArgs(_Args):
    event: str = Field(min_length=1, max_length=80)
    direction: Direction
    magnitude: float = Field(ge=0.0, le=1.0)
    confidence: float = Field(ge=0.0, le=1.0)


class DeleteEventArgs(_Args):
    id: str = Field(min_length=1, max_length=80)


class DeleteEdgeArgs(_Args):
    source: str = Field(min_length=1, max_length=80)
    target: str = Field(min_length=1, max_length=80)


GRAPH_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "propose_event", "Add (or replace) a dated event, citing its documents.", ProposeEventArgs
    ),
    ToolSpec(
        "add_edge", "Add a causal edge between two events (or into the outcome).", AddEdgeArgs
    ),
    ToolSpec(
        "record_impact", "Record how an event moved the question toward yes.", RecordImpactArgs
    ),
    ToolSpec("delete_event", "Delete an event with its edges and impact.", DeleteEventArgs),
    ToolSpec("delete_edge", "Delete the edge from source to target.", DeleteEdgeArgs),
)
"""The graph builder's tools (OpenAI function format via `ToolSpec.openai`)."""


def tool_handler(graph: WorkingGraph, calls: list[dict[str, Any]]) -> ToolHandler:
    """A handler that applies each tool call to ``graph`` at once and answers whether it was
    applied or why not; every call is appended to ``calls``."""
    specs = {spec.name: spec for spec in GRAPH_TOOLS}

    async def handle(name: str, arguments: str) -> str:
        answer: dict[str, Any]
        spec = specs.get(name)
        if spec is None:
            answer = {"refused": f"no tool '{name}' (known: {', '.join(specs)})"}
        else:
            try:
                args = spec.arguments.model_validate_json(arguments or "{}")
            except ValidationError as exc:
                field_name, message = first_error(exc)
                answer = {"refused": f"{field_name}: {message}"}
            else:
                edit = GraphEdit.model_validate({"op": name, **args.model_dump()})
                problem = graph.apply(edit)
                answer = {"applied": True} if problem is None else {"refused": problem}
        calls.append({"tool": name, "arguments": arguments[:2000], **answer})
        return json.dumps(answer)

    return handle
