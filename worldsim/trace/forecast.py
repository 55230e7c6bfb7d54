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

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from pydantic import TypeAdapter

from worldsim.domain.cards import UtcDatetime, parse_utc
from worldsim.domain.contracts import lineage
from worldsim.trace.reader import TraceLine
from worldsim.trace.records import ForecastEvent, ForecastGraph, ForecastLink, proposals_of

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


@dataclass(frozen=True, slots=True)
class RecordView:
    """The envelope fields hindsight needs from one trace line."""

    type: str
    tl: str | None
    tick: int | None
    data: Mapping[str, Any]
    run: str | None = None


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

_PROPOSAL_FIELDS = ("agent", "index", "summary", "cites")
"""The fields of each proposal of a ``proposals`` record the graph reads."""

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
        (``data`` is the record's JSON data as written)."""
        fields = _READ.get(type_)
        if fields is None:
            return
        if type_ == "proposals":  # of each proposal, the fields a `proposal` record's are
            kept = {"proposals": [_kept(p) for p in data["proposals"]]}
        else:
            kept = {f: data[f] for f in fields if f in data}
        self._views.append(RecordView(type_, tl, tick, kept, self._run))

    def views(self) -> list[RecordView]:
        """Every kept record, in the order written."""
        return list(self._views)


def _kept(proposal: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a proposal the graph reads (all four, as the writer writes them)."""
    try:
        return {
            "agent": proposal["agent"],
            "index": proposal["index"],
            "summary": proposal["summary"],
            "cites": proposal["cites"],
        }
    except KeyError:
        return {f: proposal[f] for f in _PROPOSAL_FIELDS if f in proposal}


def _timeline_masses(records: Iterable[RecordView]) -> dict[str, float]:
    started: dict[str, float] = {}
    committed: dict[str, float] = {}
    ended: dict[str, float] = {}
    targets = {"timeline_started": started, "tick_committed": committed, "timeline_ended": ended}
    for r in records:
        target = targets.get(r.type)
        if target is None or r.tl is None:
            continue
        mass = r.data.get("mass")
        if isinstance(mass, int | float) and not isinstance(mass, bool):
            target[r.tl] = float(mass)
    return {**started, **committed, **ended}


_DATE = TypeAdapter(UtcDatetime | None)


def _date(value: object) -> str | None:
    """A record's date as a graph holds it in its JSON form (``None`` when it is no date)."""
    try:
        when = parse_utc(value)
    except ValueError:
        return None
    dumped: str | None = _DATE.dump_python(when, mode="json")
    return dumped


def _index(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def extract_forecast(records: list[RecordView]) -> ForecastGraph:
    """The forecast events and causal links of every timeline in a trace."""
    return ForecastGraph.model_validate(forecast_json(records))


def forecast_json(records: list[RecordView]) -> dict[str, Any]:
    """The forecast graph of the records in its JSON form: exactly what
    ``extract_forecast(records).model_dump(mode="json")`` gives, made without the objects (a
    run's end needs only its digest and sizes: ``ForecastGraphData.of``)."""
    masses = _timeline_masses(records)
    tick_dates: dict[int, str | None] = {}
    run_id: str | None = None
    card_id: str | None = None
    as_of: str | None = None
    for r in records:
        if r.type == "run_started":
            run_id = r.run
            card = r.data.get("card")
            if isinstance(card, dict):
                card_id = card.get("id") if isinstance(card.get("id"), str) else None
                as_of = _date(card.get("as_of"))
        elif r.type == "tick_started" and r.tick is not None and r.tick not in tick_dates:
            tick_dates[r.tick] = _date(r.data.get("date"))

    # a tick's proposals by timeline, and its accepted ones by tick and lineage (each once, in
    # the order first accepted), so the canonical order below sorts within a tick's timeline
    proposals: dict[tuple[str, int], dict[tuple[str, int], Mapping[str, Any]]] = {}
    accepted: dict[tuple[int, tuple[int, ...]], dict[tuple[str, int, str], None]] = {}
    lines = _Lineages()
    observations: dict[tuple[str, int], list[str]] = {}
    events: list[dict[str, Any]] = []
    links: list[dict[str, str]] = []

    def add(event_id: str, title: str, description: str, tl: str, tick: int, kind: str) -> None:
        events.append(
            {
                "id": event_id,
                "title": title,
                "description": description,
                "date": tick_dates.get(tick),
                "timeline": tl,
                "tick": tick,
                "mass": masses.get(tl),
                "kind": kind,
            }
        )

    for r in records:
        if r.tl is None or r.tick is None:
            continue
        if r.type == "tick_started":
            for obs in r.data.get("observations") or ():
                if not isinstance(obs, dict):
                    continue
                event_id = f"{r.tl}/{r.tick}/obs/{obs.get('id', len(events))}"
                add(
                    event_id,
                    str(obs.get("title", "")),
                    str(obs.get("description", "")),
                    r.tl,
                    r.tick,
                    "observation",
                )
                observations.setdefault((r.tl, r.tick), []).append(event_id)
        elif r.type == "proposals":
            made = proposals.setdefault((r.tl, r.tick), {})
            for p in proposals_of(r.type, r.data):
                made[(_text(p.get("agent", "")), _index(p.get("index")))] = p
        elif r.type == "review":
            taken = accepted.setdefault((r.tick, lines[r.tl]), {})
            for item in r.data.get("accepted") or ():
                if isinstance(item, dict):
                    taken[(_text(item.get("agent", "")), _index(item.get("index")), r.tl)] = None
        elif r.type == "fork":
            child = r.data.get("child")
            candidate = r.data.get("candidate")
            hypothesis = candidate.get("hypothesis") if isinstance(candidate, dict) else None
            if isinstance(child, str) and isinstance(hypothesis, str):
                add(f"{child}/{r.tick}/branch", hypothesis, "", child, r.tick, "branch")

    # canonical order, never the trace's: timelines interleave in the file as they were scheduled
    # (tick, lineage, agent, index; two ids of one lineage, "t0.2" and "t0.02", keep the order
    # first accepted)
    for (tick, _), taken in sorted(accepted.items()):
        date, tl_now = tick_dates.get(tick), None
        for agent, index, tl in sorted(taken, key=_BY_AGENT):
            if tl != tl_now:
                made, mass, informs = (
                    proposals.get((tl, tick), {}),
                    masses.get(tl),
                    observations.get((tl, tick)),
                )
                tl_now = tl
            data = made.get((agent, index))
            if data is None:
                continue
            event_id = f"{tl}/{tick}/{agent}/{index}"
            events.append(
                {
                    "id": event_id,
                    "title": _text(data.get("summary", "")),
                    "description": "",
                    "date": date,
                    "timeline": tl,
                    "tick": tick,
                    "mass": mass,
                    "kind": "proposal",
                }
            )
            cites = data.get("cites")
            if cites:
                links += [
                    {"source": event_id, "target": _text(d), "relation": "cites"}
                    for d in dict.fromkeys(cites)
                ]
            if informs:
                links += [
                    {"source": obs_id, "target": event_id, "relation": "informs"}
                    for obs_id in informs
                ]

    # simulated order: tick, timeline lineage, then branch < observation < proposal, then id
    events.sort(key=lambda e: (e["tick"], lines[e["timeline"]], _KIND_ORDER[e["kind"]], e["id"]))
    return {"run": run_id, "card_id": card_id, "as_of": as_of, "events": events, "links": links}


class _Lineages(dict[str, tuple[int, ...]]):
    """:func:`lineage` of each timeline id asked for, worked out once."""

    def __missing__(self, timeline: str) -> tuple[int, ...]:
        self[timeline] = found = lineage(timeline)
        return found


def _text(value: object) -> str:
    return value if type(value) is str else str(value)


_KIND_ORDER = {"branch": 0, "observation": 1, "proposal": 2}
_BY_AGENT = itemgetter(0, 1)  # an accepted proposal's agent, then index
