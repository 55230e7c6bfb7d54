"""The records of a run indexed for its forecast graph (:mod:`worldsim.trace.forecast`): its
events group by group in simulated order and its links in the canonical order of their
proposals, as JSON objects or as canonical JSON bytes.

A run's own records, kept as the columns they were written from
(:class:`~worldsim.trace.tickbytes.KeptProposals`, :class:`~worldsim.trace.tickbytes.
KeptAccepted`), stay columns where a (tick, lineage) group is one timeline's tick whose
proposals were all accepted in canonical order (the offline model's): its events and links are
then made a column at a time, without an entry per proposal in an index.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from pydantic import TypeAdapter

from worldsim.domain.cards import UtcDatetime, parse_utc
from worldsim.domain.contracts import lineage
from worldsim.domain.jsonbytes import canonical_bytes, msgspec_bytes
from worldsim.trace.records import proposals_of
from worldsim.trace.tickbytes import KeptAccepted, KeptProposals
from worldsim.trace.tickbytes import as_index as _index
from worldsim.trace.tickbytes import as_text as _text

__all__ = ["Graph", "RecordView"]


@dataclass(frozen=True, slots=True)
class RecordView:
    """The envelope fields hindsight needs from one trace line."""

    type: str
    tl: str | None
    tick: int | None
    data: Mapping[str, Any]
    run: str | None = None


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


_text_json = msgspec_bytes  # a str's JSON: the standard library's bytes


def _event_floats(event: dict[str, Any]) -> list[float]:
    return [v for v in (event["mass"], event["tick"]) if isinstance(v, float)]


class Graph:
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
        # a run's own records, kept as columns (KeptProposals, KeptAccepted), stay columns
        # where a group is one timeline's tick accepted whole, in order (``fast``)
        self.columns: dict[tuple[str, int], _Columns] = {}
        self.pending: dict[tuple[int, tuple[int, ...]], tuple[str, KeptAccepted]] = {}
        self.fast: dict[tuple[int, tuple[int, ...]], tuple[str, _Columns]] = {}
        # a group's event ids as JSON, from its events' bytes until its links' (each id once)
        self._sources: dict[tuple[int, tuple[int, ...]], list[bytes]] = {}
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
        for group, (tl, accepted) in list(self.pending.items()):
            columns = self.columns.get((tl, group[0]))
            if (
                columns is not None
                and accepted.agents == columns[0]
                and accepted.indexes == columns[1]
                and _increasing(columns[0])
            ):
                self.fast[group] = (tl, columns)
                del self.pending[group]
            else:
                self._taken(group)
        for tl, tick in list(self.columns):
            if (tick, self.lines[tl]) not in self.fast:
                self._made(tl, tick)

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
            data = r.data
            at = (tl, tick)
            if isinstance(data, KeptProposals):
                if at not in self.proposals and at not in self.columns:
                    self.columns[at] = data.columns
                    return
                data = {"proposals": _items(data.columns)}
            made = self._made(tl, tick)
            for p in proposals_of(r.type, data):
                made[(_text(p.get("agent", "")), _index(p.get("index")))] = (
                    p.get("summary", ""),
                    p.get("cites"),
                )
        elif r.type == "review":
            group = (tick, self.lines[tl])
            accepted = r.data.get("accepted") or ()
            if isinstance(accepted, KeptAccepted):
                if group not in self.accepted and group not in self.pending:
                    self.pending[group] = (tl, accepted)
                    return
                accepted = _refs(accepted)
            taken = self._taken(group)
            for item in accepted:
                if isinstance(item, dict):
                    taken[(_text(item.get("agent", "")), _index(item.get("index")), tl)] = None
        elif r.type == "fork":
            child = r.data.get("child")
            candidate = r.data.get("candidate")
            hypothesis = candidate.get("hypothesis") if isinstance(candidate, dict) else None
            if isinstance(child, str) and isinstance(hypothesis, str):
                self._other(f"{child}/{tick}/branch", hypothesis, "", child, tick, "branch")

    def _made(self, tl: str, tick: int) -> dict[tuple[str, int], tuple[Any, Any]]:
        """The proposals of ``tl``'s tick by agent and index (those kept as columns added)."""
        made = self.proposals.setdefault((tl, tick), {})
        columns = self.columns.pop((tl, tick), None)
        if columns is not None:
            for agent, index, summary, cites in zip(*columns, strict=True):
                made[(agent, index)] = (summary, cites)
        return made

    def _taken(self, group: tuple[int, tuple[int, ...]]) -> dict[tuple[str, int, str], None]:
        """The group's accepted references, each once (those kept as columns added)."""
        taken = self.accepted.setdefault(group, {})
        pending = self.pending.pop(group, None)
        if pending is not None:
            tl, accepted = pending
            for agent, index in zip(accepted.agents, accepted.indexes, strict=True):
                taken[(agent, index, tl)] = None
        return taken

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
        return sorted({*self.accepted, *self.fast, *self.others})

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
        ids, tls, summaries, _ = self._rows(group)
        for event_id, tl, summary in zip(ids, tls, summaries, strict=True):
            yield {
                "id": event_id,
                "title": _text(summary),
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
        for group in sorted({*self.accepted, *self.fast}):
            tick, _ = group
            ids, tls, _, cites_of = self._rows(group)
            for event_id, tl, cites in zip(ids, tls, cites_of, strict=True):
                if cites:
                    for d in dict.fromkeys(cites):
                        yield {"source": event_id, "target": _text(d), "relation": "cites"}
                for obs_id in self.observations.get((tl, tick), ()):
                    yield {"source": obs_id, "target": event_id, "relation": "informs"}

    def _rows(self, group: tuple[int, tuple[int, ...]]) -> _Rows:
        """The group's accepted proposals in canonical order as columns: event ids, timelines,
        summaries and cites (those of a ``fast`` group as they were kept)."""
        fast = self.fast.get(group)
        if fast is not None:
            tl, (agents, indexes, summaries, cites) = fast
            prefix = f"{tl}/{group[0]}/"
            ids = [f"{prefix}{agent}/{index}" for agent, index in zip(agents, indexes, strict=True)]
            return ids, [tl] * len(ids), summaries, cites
        made = list(self._accepted(group))
        return (
            [event_id for event_id, _, _ in made],
            [tl for _, tl, _ in made],
            [data[0] for _, _, data in made],
            [data[1] for _, _, data in made],
        )

    def event_bytes(self) -> Iterator[tuple[bytes, int]]:
        """Each of :meth:`events` as its canonical JSON (key-sorted), a proposal's made from
        its parts; a group's proposals at once (comma-separated, with their number)."""
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
            parts = _Parts(self.masses, tick)  # timeline -> what follows an event's id
            ids, tls, summaries, _ = self._rows(group)
            # the ids' JSON, kept for the links that follow (each id is the source of some)
            sources = self._sources[group] = list(map(_text_json, ids))
            lines = [
                b"".join((head, source, parts[tl], _text_json(_text(text)), b"}"))
                for source, tl, text in zip(sources, tls, summaries, strict=True)
            ]
            if not _increasing(ids):  # ids in order of their text
                lines = [lines[i] for i in sorted(range(len(ids)), key=ids.__getitem__)]
            if lines:
                yield b",".join(lines), len(lines)

    def link_bytes(self) -> Iterator[tuple[bytes, int]]:
        """:meth:`links` as canonical JSON (key-sorted), a group's at once: the bytes of its
        links, comma-separated, and their number (``cites`` made by one join per proposal,
        from parts shared by the proposals that cite the same documents)."""
        cited: dict[tuple[object, ...], tuple[list[bytes], int]] = {}  # by the documents
        for group in sorted({*self.accepted, *self.fast}):
            tick, _ = group
            out: list[bytes] = []
            count = 0
            informs: dict[str, list[bytes]] = {}  # timeline -> each observation's link head
            ids, tls, _, cites_of = self._rows(group)
            sources = self._sources.pop(group, None) or list(map(_text_json, ids))
            for source, tl, cites in zip(sources, tls, cites_of, strict=True):
                if cites:
                    key = tuple(cites)
                    parts = cited.get(key)
                    if parts is None:
                        parts = cited[key] = _cites_parts(key)
                    out.append(source.join(parts[0]))
                    count += parts[1]
                heads = informs.get(tl)
                if heads is None:
                    heads = informs[tl] = [
                        b'{"relation":"informs","source":' + _text_json(obs) + b',"target":'
                        for obs in self.observations.get((tl, tick), ())
                    ]
                for obs_head in heads:
                    out.append(obs_head + source + b"}")
                count += len(heads)
            if out:
                yield b",".join(out), count


class _Parts(dict[str, bytes]):
    """What follows a proposal event's id in its canonical JSON, by timeline, at one tick."""

    def __init__(self, masses: Mapping[str, float], tick: int) -> None:
        super().__init__()
        self.masses, self.tick = masses, tick

    def __missing__(self, tl: str) -> bytes:
        mass = self.masses.get(tl)
        self[tl] = part = (
            b',"kind":"proposal","mass":'
            + canonical_bytes(mass, [mass] if isinstance(mass, float) else [])
            + b',"tick":%d,"timeline":%s,"title":' % (self.tick, _text_json(tl))
        )
        return part


_Columns = tuple[list[str], list[int], list[str], list[Sequence[str]]]
_Rows = tuple[list[str], list[str], Sequence[Any], Sequence[Any]]


def _increasing(values: Sequence[Any]) -> bool:
    """Whether ``values`` are in strictly increasing order."""
    return all(map(operator.lt, values, itertools.islice(values, 1, None)))


def _items(columns: _Columns) -> list[dict[str, Any]]:
    """Kept proposal columns as the items of a ``proposals`` record's JSON data."""
    agents, indexes, summaries, cites = columns
    return [
        {"agent": a, "index": i, "summary": s, "cites": c}
        for a, i, s, c in zip(agents, indexes, summaries, cites, strict=True)
    ]


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


def _refs(accepted: KeptAccepted) -> list[dict[str, Any]]:
    """Kept accepted references as the items of a ``review`` record's JSON data."""
    return [
        {"agent": a, "index": i} for a, i in zip(accepted.agents, accepted.indexes, strict=True)
    ]
