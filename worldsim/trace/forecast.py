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
import itertools
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from pydantic import TypeAdapter

from worldsim.domain.cards import UtcDatetime, parse_utc
from worldsim.domain.contracts import lineage
from worldsim.domain.jsonbytes import canonical_bytes, msgspec_bytes
from worldsim.trace.reader import TraceLine
from worldsim.trace.records import (
    ForecastEvent,
    ForecastGraph,
    ForecastGraphData,
    ForecastLink,
    proposals_of,
)
from worldsim.trace.tickbytes import Kept, KeptAccepted, KeptProposals
from worldsim.trace.tickbytes import as_index as _index
from worldsim.trace.tickbytes import as_text as _text

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


def extract_forecast(records: list[RecordView]) -> ForecastGraph:
    """The forecast events and causal links of every timeline in a trace."""
    return ForecastGraph.model_validate(forecast_json(records))


def forecast_json(records: list[RecordView]) -> dict[str, Any]:
    """The forecast graph of the records in its JSON form: exactly what
    ``extract_forecast(records).model_dump(mode="json")`` gives, made without the objects (a
    run's end needs only its digest and sizes: :func:`forecast_record`)."""
    graph = _Graph(records)
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
    graph = _Graph(records)
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


_CHUNK = 4_096


def _hash_items(digest: Any, items: Iterator[tuple[bytes, int]]) -> int:
    """Hash ``items`` (each the canonical JSON of a few elements, comma-separated, and their
    number) comma-separated, a chunk at a time; the number of elements."""
    count, first = 0, True
    while chunk := list(itertools.islice(items, _CHUNK)):
        count += sum(n for _, n in chunk)
        body = b",".join([line for line, _ in chunk])
        digest.update(body if first else b"," + body)
        first = False
    return count


_text_json = msgspec_bytes  # a str's JSON: the standard library's bytes


def _event_floats(event: dict[str, Any]) -> list[float]:
    return [v for v in (event["mass"], event["tick"]) if isinstance(v, float)]


class _Graph:
    """The records indexed for the graph: its events made group by group in simulated order
    (tick, timeline lineage; then branch < observation < proposal, then id) and its links in
    the canonical order of their proposals (tick, lineage, agent, index)."""

    def __init__(self, records: list[RecordView]) -> None:
        self.masses = _timeline_masses(records)
        self.tick_dates: dict[int, str | None] = {}
        self.run_id: str | None = None
        self.card_id: str | None = None
        self.as_of: str | None = None
        # a tick's proposals by timeline, and its accepted ones by tick and lineage (each once,
        # in the order first accepted); observations and branches by tick and lineage
        # (a proposal kept as its summary and cites)
        self.proposals: dict[tuple[str, int], dict[tuple[str, int], tuple[Any, Any]]] = {}
        self.accepted: dict[tuple[int, tuple[int, ...]], dict[tuple[str, int, str], None]] = {}
        self.others: dict[tuple[int, tuple[int, ...]], list[dict[str, Any]]] = {}
        self.observations: dict[tuple[str, int], list[str]] = {}
        self.lines = _Lineages()
        for r in records:
            if r.type == "run_started":
                self.run_id = r.run
                card = r.data.get("card")
                if isinstance(card, dict):
                    self.card_id = card.get("id") if isinstance(card.get("id"), str) else None
                    self.as_of = _date(card.get("as_of"))
            elif r.type == "tick_started" and r.tick is not None and r.tick not in self.tick_dates:
                self.tick_dates[r.tick] = _date(r.data.get("date"))
        for r in records:
            if r.tl is not None and r.tick is not None:
                self._index(r, r.tl, r.tick)

    def _index(self, r: RecordView, tl: str, tick: int) -> None:
        if r.type == "tick_started":
            for obs in r.data.get("observations") or ():
                if not isinstance(obs, dict):
                    continue
                count = sum(len(group) for group in self.others.values())
                event_id = f"{tl}/{tick}/obs/{obs.get('id', count)}"
                self._other(
                    event_id,
                    str(obs.get("title", "")),
                    str(obs.get("description", "")),
                    tl,
                    tick,
                    "observation",
                )
                self.observations.setdefault((tl, tick), []).append(event_id)
        elif r.type == "proposals":
            made = self.proposals.setdefault((tl, tick), {})
            data = r.data
            if isinstance(data, KeptProposals):
                for agent, index, summary, cites in zip(*data.columns, strict=True):
                    made[(agent, index)] = (summary, cites)
                return
            for p in proposals_of(r.type, data):
                made[(_text(p.get("agent", "")), _index(p.get("index")))] = (
                    p.get("summary", ""),
                    p.get("cites"),
                )
        elif r.type == "review":
            taken = self.accepted.setdefault((tick, self.lines[tl]), {})
            accepted = r.data.get("accepted") or ()
            if isinstance(accepted, KeptAccepted):
                for agent, index in zip(accepted.agents, accepted.indexes, strict=True):
                    taken[(agent, index, tl)] = None
                return
            for item in accepted:
                if isinstance(item, dict):
                    taken[(_text(item.get("agent", "")), _index(item.get("index")), tl)] = None
        elif r.type == "fork":
            child = r.data.get("child")
            candidate = r.data.get("candidate")
            hypothesis = candidate.get("hypothesis") if isinstance(candidate, dict) else None
            if isinstance(child, str) and isinstance(hypothesis, str):
                self._other(f"{child}/{tick}/branch", hypothesis, "", child, tick, "branch")

    def _other(
        self, event_id: str, title: str, description: str, tl: str, tick: int, kind: str
    ) -> None:
        self.others.setdefault((tick, self.lines[tl]), []).append(
            {
                "id": event_id,
                "title": title,
                "description": description,
                "date": self.tick_dates.get(tick),
                "timeline": tl,
                "tick": tick,
                "mass": self.masses.get(tl),
                "kind": kind,
            }
        )

    def _groups(self) -> list[tuple[int, tuple[int, ...]]]:
        return sorted({*self.accepted, *self.others})

    def events(self) -> Iterator[dict[str, Any]]:
        """The events in simulated order, a (tick, lineage) group at a time."""
        for group in self._groups():
            made = [*self.others.get(group, ()), *self._proposal_events(group)]
            made.sort(key=_in_group)
            yield from made

    def _accepted(
        self, group: tuple[int, tuple[int, ...]]
    ) -> Iterator[tuple[str, str, tuple[Any, Any]]]:
        """The group's accepted proposals in canonical order (agent, index; two ids of one
        lineage, "t0.2" and "t0.02", keep the order first accepted): each event's id, its
        timeline and the proposal's kept fields."""
        tick, _ = group
        tl_now, made = None, {}
        for agent, index, tl in sorted(self.accepted.get(group, ()), key=_BY_AGENT):
            if tl != tl_now:
                made, tl_now = self.proposals.get((tl, tick), {}), tl
            data = made.get((agent, index))
            if data is not None:
                yield f"{tl}/{tick}/{agent}/{index}", tl, data

    def _proposal_events(self, group: tuple[int, tuple[int, ...]]) -> Iterator[dict[str, Any]]:
        tick, _ = group
        date = self.tick_dates.get(tick)
        for event_id, tl, data in self._accepted(group):
            yield {
                "id": event_id,
                "title": _text(data[0]),
                "description": "",
                "date": date,
                "timeline": tl,
                "tick": tick,
                "mass": self.masses.get(tl),
                "kind": "proposal",
            }

    def links(self) -> Iterator[dict[str, str]]:
        """``cites`` (a proposal → each document it cites, once) and ``informs`` (each of its
        tick's observations → the proposal), in the canonical order of the proposals."""
        for group in sorted(self.accepted):
            tick, _ = group
            for event_id, tl, data in self._accepted(group):
                cites = data[1]
                if cites:
                    for d in dict.fromkeys(cites):
                        yield {"source": event_id, "target": _text(d), "relation": "cites"}
                for obs_id in self.observations.get((tl, tick), ()):
                    yield {"source": obs_id, "target": event_id, "relation": "informs"}

    def event_bytes(self) -> Iterator[tuple[bytes, int]]:
        """Each of :meth:`events` as its canonical JSON (key-sorted), a proposal's made from
        its parts."""
        for group in self._groups():
            others = sorted(self.others.get(group, ()), key=_in_group)
            for event in others:
                yield canonical_bytes(event, _event_floats(event)), 1
            tick, _ = group
            head = (
                b'{"date":'
                + canonical_bytes(self.tick_dates.get(tick))
                + b',"description":"","id":'
            )
            parts: dict[str, bytes] = {}  # timeline -> what follows an event's id
            made: list[tuple[str, bytes]] = []
            for event_id, tl, data in self._accepted(group):
                part = parts.get(tl)
                if part is None:
                    mass = self.masses.get(tl)
                    part = parts[tl] = (
                        b',"kind":"proposal","mass":'
                        + canonical_bytes(mass, [mass] if isinstance(mass, float) else [])
                        + b',"tick":%d,"timeline":%s,"title":' % (tick, _text_json(tl))
                    )
                text = _text_json(_text(data[0]))
                made.append((event_id, b"".join((head, _text_json(event_id), part, text, b"}"))))
            made.sort(key=_FIRST)
            for _, line in made:
                yield line, 1

    def link_bytes(self) -> Iterator[tuple[bytes, int]]:
        """:meth:`links` as canonical JSON (key-sorted), a proposal's at a time: the bytes of
        its links, comma-separated, and their number (``cites`` made by one join per
        proposal, from parts shared by the proposals that cite the same documents)."""
        cited: dict[tuple[object, ...], tuple[list[bytes], int]] = {}  # by the documents
        for group in sorted(self.accepted):
            tick, _ = group
            for event_id, tl, data in self._accepted(group):
                source = _text_json(event_id)
                cites = data[1]
                if cites:
                    key = tuple(cites)
                    parts = cited.get(key)
                    if parts is None:
                        parts = cited[key] = _cites_parts(key)
                    yield source.join(parts[0]), parts[1]
                for obs_id in self.observations.get((tl, tick), ()):
                    yield (
                        b'{"relation":"informs","source":'
                        + _text_json(obs_id)
                        + b',"target":'
                        + source
                        + b"}",
                        1,
                    )


def _cites_parts(cites: Iterable[object]) -> tuple[list[bytes], int]:
    """The ``cites`` links of a proposal citing ``cites`` (each document once), as the parts
    that its source's JSON joins, and their number."""
    targets = [_text_json(_text(d)) for d in dict.fromkeys(cites)]
    head, parts = b'{"relation":"cites","source":', []
    for target in targets:
        parts.append(head)
        head = b',"target":' + target + b'},{"relation":"cites","source":'
    parts.append(head[: -len(b',{"relation":"cites","source":')])
    return parts, len(targets)


class _Lineages(dict[str, tuple[int, ...]]):
    """:func:`lineage` of each timeline id asked for, worked out once."""

    def __missing__(self, timeline: str) -> tuple[int, ...]:
        self[timeline] = found = lineage(timeline)
        return found


_KIND_ORDER = {"branch": 0, "observation": 1, "proposal": 2}
_BY_AGENT = itemgetter(0, 1)  # an accepted proposal's agent, then index
_FIRST = itemgetter(0)


def _in_group(event: dict[str, Any]) -> tuple[int, str]:
    return _KIND_ORDER[event["kind"]], event["id"]
