"""The forecast-time causal graph of a run: its simulated events and their causal links, read
from its trace records, in the shape hindsight scoring compares.

A run whose agent condition builds the graph (docs/experiments.md) writes it into its own trace
as a ``forecast_graph`` record, derived by `extract_forecast` from the run's effective records.

A forecast event is something that happened in a simulated timeline:

* ``observation`` — a scheduled event delivered at a tick (``tick_started.data.observations``);
* ``proposal`` — a proposal the reviewer accepted in that tick (title = its summary);
* ``branch`` — the hypothesis a fork made true in the child timeline.

Each carries the tick's simulated date, its timeline and that timeline's final path mass
(``timeline_ended.data.mass``; else its last committed mass; else its starting mass).
Events and links come in simulated order (tick, timeline lineage, kind, id), not in the order
the timelines happened to write the trace, so every score built on them is reproducible.

Causal links the trace records:

* ``cites`` — an accepted proposal → a document id it cites;
* ``informs`` — an observation delivered at tick k → every proposal accepted in the same
  timeline at tick k (the agents acted on a snapshot that already held the observation).
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import Any

from worldsim.domain.jsonbytes import canonical_bytes
from worldsim.trace.forecast_rows import Graph, RecordView
from worldsim.trace.reader import TraceLine
from worldsim.trace.records import (
    ForecastEvent,
    ForecastGraph,
    ForecastGraphData,
    ForecastLink,
)
from worldsim.trace.tickbytes import Kept, KeptAccepted, KeptProposals

__all__ = [
    "FORECAST_TYPES",
    "ForecastEvent",
    "ForecastGraph",
    "ForecastLink",
    "ForecastRecords",
    "RecordView",
    "extract_forecast",
    "forecast_json",
    "record_view",
    "record_views",
]


_READ: dict[str, tuple[str, ...]] = {
    "run_started": ("card",),
    "timeline_started": ("mass",),
    "tick_started": ("date", "observations"),
    "proposals": ("proposals",),
    "review": ("accepted",),
    "fork": ("child", "candidate"),
    "tick_committed": ("mass",),
    "timeline_ended": ("mass",),
}
"""The fields of each record type :func:`extract_forecast` reads."""

FORECAST_TYPES = frozenset(_READ)
"""The record types :func:`extract_forecast` reads."""


def record_views(
    lines: Iterable[TraceLine], types: Collection[str] | None = None
) -> list[RecordView]:
    """The envelope fields and data of trace lines (the effective ones, as the reader gives);
    with ``types``, of the lines of those types only (the others are never parsed)."""
    return [record_view(line) for line in lines if types is None or line.type in types]


def record_view(line: TraceLine) -> RecordView:
    """A trace line's envelope fields and data."""
    return RecordView(type=line.type, tl=line.tl, tick=line.tick, data=line.fields, run=line.run)


class ForecastRecords:
    """The records a run's forecast graph is made from, kept as the writer writes them
    (:data:`FORECAST_TYPES` only, and of each only the fields the graph reads), so the graph
    needs no second reading of the trace.

    ``before`` are the views of a resumed run's effective records up to its resumption;
    ``run`` is the id of the run writing.
    """

    def __init__(self, before: Iterable[RecordView] = (), *, run: str | None = None) -> None:
        self._views = list(before)
        self._run = run

    def keep(self, type_: str, tl: str | None, tick: int | None, data: Mapping[str, Any]) -> None:
        """A writer's tap: keep the record if the graph is made from records of ``type_``
        (``data`` is the record's JSON data as written). A tick's proposals and a review's
        accepted references are kept as columns (a run of 10⁵ actors keeps 10⁶ of each)."""
        fields = _READ.get(type_)
        if fields is None:
            return
        kept: Mapping[str, Any]
        if isinstance(data, Kept):  # written from columns: the graph's part made already
            kept = data.kept
        elif type_ == "proposals":
            kept = KeptProposals.of(data["proposals"])
        elif type_ == "review":
            accepted = data.get("accepted") or ()
            kept = {"accepted": KeptAccepted.of(accepted)}
        else:
            kept = {f: data[f] for f in fields if f in data}
        self._views.append(RecordView(type_, tl, tick, kept, self._run))

    def views(self) -> list[RecordView]:
        """Every kept record, in the order written."""
        return list(self._views)


def extract_forecast(records: list[RecordView]) -> ForecastGraph:
    """The forecast events and causal links of every timeline in a trace."""
    return ForecastGraph.model_validate(forecast_json(records))


def forecast_json(records: list[RecordView]) -> dict[str, Any]:
    """The forecast graph of the records in its JSON form: exactly what
    ``extract_forecast(records).model_dump(mode="json")`` gives, made without the objects (a
    run's end needs only its digest and sizes: :func:`forecast_record`)."""
    graph = Graph(records)
    return {
        "run": graph.run_id,
        "card_id": graph.card_id,
        "as_of": graph.as_of,
        "events": list(graph.events()),
        "links": list(graph.links()),
    }


def forecast_record(records: list[RecordView]) -> ForecastGraphData:
    """The ``forecast_graph`` record of the records' graph: ``ForecastGraphData.of`` of
    :func:`forecast_json`, its canonical JSON hashed as it is made, event by event and link
    by link (the graph of a run of 10⁵ actors is never held whole)."""
    graph = Graph(records)
    digest = hashlib.sha256()
    digest.update(b'{"as_of":' + canonical_bytes(graph.as_of))
    digest.update(b',"card_id":' + canonical_bytes(graph.card_id) + b',"events":[')
    events = _hash_items(digest, graph.event_bytes())
    digest.update(b'],"links":[')
    links = _hash_items(digest, graph.link_bytes())
    digest.update(b'],"run":' + canonical_bytes(graph.run_id) + b"}")
    return ForecastGraphData(
        run=graph.run_id,
        card_id=graph.card_id,
        as_of=graph.as_of,
        digest=digest.hexdigest(),
        event_count=events,
        link_count=links,
    )


def _hash_items(digest: Any, items: Iterator[tuple[bytes, int]]) -> int:
    """Hash ``items`` (each the canonical JSON of some elements, comma-separated, and their
    number: a group's proposals are one item) comma-separated; the number of elements."""
    count = 0
    for line, n in items:
        if count:
            digest.update(b",")
        digest.update(line)
        count += n
    return count
