"""A run's forecast-time causal graph for scoring, from its trace, or forecast events from a
graph file or a plain list.

The graph and its extraction live with the trace (`worldsim.trace.forecast`): a run whose agent
condition builds the graph records it in its trace as a ``forecast_graph`` record holding the
graph's digest. `forecast_graph_of` derives the graph from the run's records and checks it
against that digest; a trace without the record (a direct forecast) under a graph-building
condition gets the graph derived; a run whose condition builds none (``vanilla``, ``search``)
has none, so KER is not defined for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from worldsim.domain.config import GRAPH_CONDITIONS
from worldsim.domain.errors import CardError, ConfigError
from worldsim.domain.files import first_error, load_document
from worldsim.trace.forecast import (
    FORECAST_TYPES,
    ForecastEvent,
    ForecastGraph,
    ForecastLink,
    RecordView,
    extract_forecast,
    forecast_json,
    record_views,
)
from worldsim.trace.records import ForecastGraphData, forecast_digest
from worldsim.trace.verify import stream_records, trace_records

__all__ = [
    "FORECAST_TYPES",
    "GRAPH_TYPES",
    "ForecastEvent",
    "ForecastGraph",
    "ForecastLink",
    "RecordView",
    "card_id_of",
    "extract_forecast",
    "forecast_graph_json_of",
    "forecast_graph_of",
    "load_forecast",
    "load_forecast_events",
    "record_views",
    "stream_records",
    "trace_records",
]


GRAPH_TYPES = FORECAST_TYPES | {"forecast_graph"}
"""The record types :func:`forecast_graph_of` reads (pass them to ``trace_records``)."""


def card_id_of(records: Iterable[RecordView]) -> str | None:
    """The id of the card a run simulated: its ``run_started`` record's (None without one)."""
    for record in records:
        if record.type == "run_started":
            card = record.data.get("card")
            found = card.get("id") if isinstance(card, dict) else None
            return found if isinstance(found, str) else None
    return None


def forecast_graph_of(
    records: Sequence[RecordView], *, file: str | Path | None = None
) -> ForecastGraph | None:
    """The run's forecast graph, derived from ``records`` (a trace's effective records, read
    from ``file``) and checked against the digest its ``forecast_graph`` record holds; ``None``
    when the run's condition builds no graph.

    A graph that derives otherwise than the run recorded is a ConfigError naming the file: its
    KER would not be the run's."""
    graph = forecast_graph_json_of(records, file=file)
    return None if graph is None else ForecastGraph.model_validate(graph)


def forecast_graph_json_of(
    records: Sequence[RecordView], *, file: str | Path | None = None
) -> dict[str, Any] | None:
    """:func:`forecast_graph_of` in the graph's JSON form (``ForecastGraph.model_dump(mode=
    "json")``): where the run recorded the graph's digest, derived and checked without making
    its events and links as objects (what a page listing them needs)."""
    recorded = next((r for r in records if r.type == "forecast_graph"), None)
    data: ForecastGraphData | None = None
    if recorded is not None:
        try:
            data = ForecastGraphData.model_validate(recorded.data)
        except ValidationError as exc:
            field, message = first_error(exc)
            raise ConfigError(message, file=file, field=f"forecast_graph.{field}") from None
    else:
        started = next((r for r in records if r.type == "run_started"), None)
        condition = started.data.get("condition") if started is not None else None
        if condition is not None and condition not in GRAPH_CONDITIONS:
            return None
    graph = forecast_json(list(records))
    if data is not None and forecast_digest(graph) != data.digest:
        raise ConfigError(
            f"the run's records give a forecast graph of {len(graph['events'])} events and "
            f"{len(graph['links'])} links whose digest is not the one the run recorded "
            f"({data.event_count} events, {data.link_count} links): the graph's extraction "
            "differs from the run's",
            file=file,
            field="forecast_graph.digest",
        )
    return graph


def load_forecast_events(path: str | Path) -> list[ForecastEvent]:
    """The events of :func:`load_forecast`."""
    return list(load_forecast(path).events)


def load_forecast(path: str | Path) -> ForecastGraph:
    """A forecast graph from a trace (``.jsonl``), a forecast graph file, or a JSON list of
    events (a graph of those events that names no card).

    A trace whose run builds no graph — a direct forecast, or a condition without one — is a
    CardError naming it: KER is not defined for it."""
    p = Path(path)
    if p.suffix.lower() == ".jsonl":
        records = trace_records(p, GRAPH_TYPES)
        started = next((r for r in records if r.type == "run_started"), None)
        if started is not None and started.data.get("kind") == "direct":
            raise CardError(
                "this run is a direct forecast (one model call): it simulates no events, so KER "
                "is not defined",
                file=p,
            )
        graph = forecast_graph_of(records, file=p)
        if graph is None:
            raise CardError(
                "this run's agent condition builds no forecast graph, so KER is not defined",
                file=p,
            )
        return graph
    data = load_document(p, what="forecast file")
    items = data.get("events") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise CardError("expected a JSON list of events or an object with 'events'", file=p)
    card_id = data.get("card_id") if isinstance(data, dict) else None
    if card_id is not None and not isinstance(card_id, str):
        raise CardError("expected a card id (text)", file=p, field="card_id")
    events: list[ForecastEvent] = []
    for i, item in enumerate(items):
        try:
            events.append(ForecastEvent.model_validate(item))
        except ValidationError as exc:
            field, message = first_error(exc)
            raise CardError(message, file=p, field=f"events.{i}.{field}") from None
    return ForecastGraph(card_id=card_id, events=tuple(events))
