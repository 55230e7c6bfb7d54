"""Source precision: how much of what the agents actually looked at was on the causal path.

Accessed documents are taken from logged access only — the ids in the trace's ``retrievals``
records (what the gateway returned or opened) plus the
``cites`` of every proposal — never from what an agent claims in free text. Hindsight sources
are the union of the hindsight events' ``source_ids``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from worldsim.scoring.hindsight.forecast import RecordView, card_id_of, stream_records
from worldsim.scoring.hindsight.graph import HindsightGraph, check_graph_card
from worldsim.trace.records import accesses_of, proposals_of

__all__ = [
    "ACCESS_TYPES",
    "SourcePrecision",
    "accessed_documents",
    "source_precision",
    "trace_source_precision",
]

ACCESS_TYPES = frozenset({"retrievals", "proposals"})
"""The record types :func:`accessed_documents` reads."""


class SourcePrecision(BaseModel):
    """|accessed ∩ sources| / |accessed|; ``precision`` is null when nothing was accessed."""

    model_config = ConfigDict(frozen=True)

    precision: float | None
    accessed: list[str]
    relevant: list[str]
    hindsight_sources: int


def _ids(value: object) -> list[str]:
    if not isinstance(value, list | tuple):
        return []
    return [str(v) for v in value if isinstance(v, str | int) and not isinstance(v, bool)]


def accessed_documents(records: Iterable[RecordView]) -> frozenset[str]:
    """Documents retrieved through the gateway or cited by a proposal, across all timelines."""
    found: set[str] = set()
    for record in records:
        for access in accesses_of(record.type, record.data, record.tl, record.tick):
            if not access.get("refused", False):
                found.update(_ids(access.get("doc_ids")))
        for proposal in proposals_of(record.type, record.data):
            found.update(_ids(proposal.get("cites")))
    return frozenset(found)


def source_precision(records: Iterable[RecordView], graph: HindsightGraph) -> SourcePrecision:
    """Source precision of a run's logged accesses against a hindsight graph."""
    accessed = accessed_documents(records)
    sources = graph.sources
    relevant = accessed & sources
    return SourcePrecision(
        precision=None if not accessed else len(relevant) / len(accessed),
        accessed=sorted(accessed),
        relevant=sorted(relevant),
        hindsight_sources=len(sources),
    )


def trace_source_precision(
    trace: str | Path, graph: HindsightGraph, *, graph_file: str | Path
) -> SourcePrecision:
    """Source precision of the run in ``trace`` (read through the one gate, streamed) against
    ``graph``, read from ``graph_file``: refused when the graph is written for another card
    than the run's."""
    started: list[RecordView] = []

    def records() -> Iterator[RecordView]:
        for record in stream_records(trace, ACCESS_TYPES | {"run_started"}):
            if record.type == "run_started":
                started.append(record)
            yield record

    result = source_precision(records(), graph)
    check_graph_card(graph, card_id_of(started), file=graph_file)
    return result
