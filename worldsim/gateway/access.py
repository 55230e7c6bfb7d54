"""The gateway's access log, indexed by agent and timeline as records are appended.

A citation check asks which documents an agent received in a timeline or its ancestors — an
ancestor's only up to the tick its descendant forked off, the history the child inherited: what
the parent went on to receive later is not the child's, and whether the parent had already
received it when the child's check ran would depend on how the timelines were scheduled.
Scanning the whole log for it made every proposal cost in proportion to the run's history; the
index answers it from the few sets of the timeline's lineage instead.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any, Literal, NamedTuple

from pydantic import AwareDatetime, BaseModel, ConfigDict, field_serializer

from worldsim.domain.cards import utc_iso
from worldsim.domain.jsonbytes import msgspec_bytes

__all__ = [
    "ACCESS_DEFAULTS",
    "Access",
    "AccessLog",
    "Calls",
    "Logged",
    "ReadBatch",
    "RetrievalRecord",
    "SearchBatch",
    "ToolName",
    "access_json",
    "ancestry",
    "merged_accesses",
]

ToolName = Literal["search_evidence", "open_document"]


class Access(BaseModel):
    """One gateway access as an agent made it: who called, which tool with what, and what came
    back. ``doc_ids`` are the documents the caller actually received: the hits of a search, or
    the one document opened. A refused open has ``refused=True``, a ``reason`` and no
    ``doc_ids``. A trace's ``retrievals`` record holds a tick's accesses in this form."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: str
    tool: ToolName
    query: str | None = None
    doc_id: str | None = None
    k: int | None = None
    doc_ids: tuple[str, ...] = ()
    refused: bool = False
    reason: Literal["unknown", "after_cutoff"] | None = None


class RetrievalRecord(Access):
    """One logged gateway access, with where it was made (timeline, tick) and the gateway's
    cut-off (each access of a ``retrievals`` record, in this form)."""

    timeline: str | None = None
    tick: int | None = None
    cutoff: AwareDatetime

    @field_serializer("cutoff", when_used="json")
    def _utc(self, value: datetime) -> str:
        return utc_iso(value)


ACCESS_DEFAULTS: dict[str, Any] = {
    name: field.default for name, field in Access.model_fields.items() if not field.is_required()
}
"""An access's fields a ``retrievals`` record leaves out when they hold their defaults."""


def access_json(
    agent: str,
    tool: ToolName,
    *,
    query: str | None = None,
    doc_id: str | None = None,
    k: int | None = None,
    doc_ids: Sequence[str] = (),
    refused: bool = False,
    reason: Literal["unknown", "after_cutoff"] | None = None,
) -> dict[str, Any]:
    """One access in a ``retrievals`` record's JSON form: :class:`Access`'s fields in its
    order, those at their defaults left out (made without building an :class:`Access`, as the
    gateway logs every call)."""
    access: dict[str, Any] = {"agent": agent, "tool": tool}
    if query is not None:
        access["query"] = query
    if doc_id is not None:
        access["doc_id"] = doc_id
    if k is not None:
        access["k"] = k
    if doc_ids:
        access["doc_ids"] = list(doc_ids)
    if refused:
        access["refused"] = True
    if reason is not None:
        access["reason"] = reason
    return access


class Logged(NamedTuple):
    """Accesses as the gateway logs them: made in one call at one timeline and tick, the
    gateway's cut-off, and each access in its JSON form (:func:`access_json`), in call order."""

    timeline: str | None
    tick: int | None
    cutoff: datetime
    accesses: list[dict[str, Any]]

    @classmethod
    def of(cls, record: RetrievalRecord) -> Logged:
        """One logged record as a batch of one."""
        fields = {f: getattr(record, f) for f in Access.model_fields}
        return cls(record.timeline, record.tick, record.cutoff, [access_json(**fields)])

    def records(self) -> list[RetrievalRecord]:
        """The accesses as validated :class:`RetrievalRecord` objects."""
        where = {"timeline": self.timeline, "tick": self.tick, "cutoff": self.cutoff}
        return [RetrievalRecord(**access, **where) for access in self.accesses]


class _Batch:
    """One batch call's accesses as columns, one row per agent: what a ``retrievals`` record
    holds of them is made when asked (:attr:`accesses`), and each agent's receipts are looked
    up by row."""

    __slots__ = ("_rows", "agents", "cutoff", "tick", "timeline")

    def __init__(
        self, timeline: str | None, tick: int | None, cutoff: datetime, agents: Sequence[str]
    ) -> None:
        self.timeline, self.tick, self.cutoff = timeline, tick, cutoff
        self.agents = agents
        self._rows: dict[str, int] | None = None

    def rows(self) -> dict[str, int]:
        """Each agent's row (an agent has one row in a batch)."""
        if self._rows is None:
            self._rows = dict(zip(self.agents, range(len(self.agents)), strict=True))
        return self._rows

    def received_by(self, agent: str) -> frozenset[str] | None:
        """The ids ``agent`` received in this call (``None``: it made none of its calls)."""
        i = self.rows().get(agent)
        return None if i is None else _ids(self.receipt(i))

    def receipt(self, i: int) -> tuple[str, ...]:
        """The ids row ``i``'s agent received (a tuple shared between rows that received the
        same)."""
        raise NotImplementedError

    @property
    def documents(self) -> set[str]:
        """Every id received in this call."""
        raise NotImplementedError

    @property
    def accesses(self) -> list[dict[str, Any]]:
        """The accesses in their JSON form (:func:`access_json`), in call order."""
        raise NotImplementedError

    def records(self) -> list[RetrievalRecord]:
        return Logged(self.timeline, self.tick, self.cutoff, self.accesses).records()


class SearchBatch(_Batch):
    """A ``search_evidence`` per agent, with ``k``: its query and the ids of its hits (the
    same tuple for agents whose searches the store answered alike)."""

    __slots__ = ("hits", "k", "queries")

    def __init__(
        self,
        timeline: str | None,
        tick: int | None,
        cutoff: datetime,
        agents: Sequence[str],
        queries: Sequence[str],
        k: int,
        hits: Sequence[tuple[str, ...]],
    ) -> None:
        super().__init__(timeline, tick, cutoff, agents)
        self.queries, self.k, self.hits = queries, k, hits

    def receipt(self, i: int) -> tuple[str, ...]:
        return self.hits[i]

    @property
    def documents(self) -> set[str]:
        return {doc for ids in {id(h): h for h in self.hits}.values() for doc in ids}

    @property
    def accesses(self) -> list[dict[str, Any]]:
        return [
            access_json(agent, "search_evidence", query=query, k=self.k, doc_ids=ids)
            for agent, query, ids in zip(self.agents, self.queries, self.hits, strict=True)
        ]


class ReadBatch(_Batch):
    """The ``open_document`` calls of several agents: each agent's ids in call order (the
    same tuple for agents that read the same list) and, for the ids refused, the reason."""

    __slots__ = ("reads", "refused")

    def __init__(
        self,
        timeline: str | None,
        tick: int | None,
        cutoff: datetime,
        agents: Sequence[str],
        reads: Sequence[tuple[str, ...]],
        refused: dict[str, Literal["unknown", "after_cutoff"]],
    ) -> None:
        super().__init__(timeline, tick, cutoff, agents)
        self.reads, self.refused = reads, refused

    def receipt(self, i: int) -> tuple[str, ...]:
        ids = self.reads[i]
        return ids if not self.refused else tuple(d for d in ids if d not in self.refused)

    @property
    def documents(self) -> set[str]:
        unique = {id(ids): ids for ids in self.reads}.values()
        return {doc for ids in unique for doc in ids if doc not in self.refused}

    @property
    def accesses(self) -> list[dict[str, Any]]:
        return [
            access_json(agent, "open_document", doc_id=doc, doc_ids=[doc])
            if doc not in self.refused
            else access_json(
                agent, "open_document", doc_id=doc, refused=True, reason=self.refused[doc]
            )
            for agent, ids in zip(self.agents, self.reads, strict=True)
            for doc in ids
        ]


def merged_accesses(logged: Sequence[Calls]) -> bytes | None:
    """The JSON list of a tick's accesses by agent, each agent's in call order, where the
    calls are a batch of searches and then a batch of reads by the same agents in id order (an
    offline tick's): made from the columns as bytes, each access exactly as ``json.dumps``
    writes its JSON form (:func:`access_json`). ``None`` for any other calls (sort their
    accesses instead)."""
    if len(logged) != 2:
        return None
    search, read = logged
    if not (
        isinstance(search, SearchBatch)
        and isinstance(read, ReadBatch)
        and search.agents == read.agents
        and all(a < b for a, b in itertools.pairwise(search.agents))
    ):
        return None
    k = b',"k":%d' % search.k
    found: dict[int, bytes] = {}  # the hits' part of a search, by the hits' tuple
    opened: dict[str, bytes] = {}  # a read's part after its agent, by document
    out: list[bytes] = []
    for agent, query, hits, reads in zip(
        search.agents, search.queries, search.hits, read.reads, strict=True
    ):
        who = b'{"agent":' + _json(agent)
        tail = found.get(id(hits))
        if tail is None:
            tail = found[id(hits)] = (b',"doc_ids":' + _json(list(hits)) if hits else b"") + b"}"
        out.append(who + b',"tool":"search_evidence","query":' + _json(query) + k + tail)
        for doc in reads:
            part = opened.get(doc)
            if part is None:
                reason = read.refused.get(doc)
                access = access_json("", "open_document", doc_id=doc, refused=bool(reason))
                if reason is None:
                    access["doc_ids"] = [doc]
                else:
                    access["reason"] = reason
                del access["agent"]
                part = opened[doc] = b"," + _json(access)[1:]
            out.append(who + part)
    return b"[" + b",".join(out) + b"]"


_json = msgspec_bytes
"""JSON of strings, ints, booleans and lists of them: the standard library's bytes."""


@functools.lru_cache(maxsize=4_096)
def _ids(ids: tuple[str, ...]) -> frozenset[str]:
    """A tuple of ids as a set (the same few lists recur across a batch's agents)."""
    return frozenset(ids)


Calls = Logged | SearchBatch | ReadBatch
"""What the log holds per call: a call's accesses in their JSON form, or a batch's columns."""


def ancestry(timeline: str) -> list[str]:
    """``"t0.2.1"`` → ``["t0", "t0.2", "t0.2.1"]``: the timeline and every ancestor's id."""
    parts = timeline.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


class AccessLog:
    """The accesses in call order, a call's at a time, plus the ids each agent received per
    timeline and every id anyone received.

    Only :meth:`add_each` (and :meth:`append`, :meth:`extend` for records) may add accesses, so the
    index describes every access added, including those :meth:`forget` has let go. Iterating
    gives the accesses still held as :class:`RetrievalRecord` objects.
    """

    def __init__(self, records: Iterable[RetrievalRecord] = ()) -> None:
        self._held: list[Calls] = []
        self._received: dict[str, dict[str | None, set[str]]] = {}
        # the same, by tick: what an ancestor's receipts up to a fork are made of
        self._by_tick: dict[str, dict[str | None, dict[int | None, set[str]]]] = {}
        self._forked_at: dict[str, int] = {}
        self._batches: dict[str | None, list[SearchBatch | ReadBatch]] = {}
        # each timeline's batches of its latest tick: where a tick's citations are checked first
        self._recent: dict[str | None, list[SearchBatch | ReadBatch]] = {}
        self.extend(records)

    @property
    def documents(self) -> set[str]:
        """Every document id received through the gateway so far: what the agents received,
        gathered when asked (once, at a run's end) rather than at every access."""
        found = {
            doc
            for by_timeline in self._received.values()
            for ids in by_timeline.values()
            for doc in ids
        }
        for batches in self._batches.values():
            for batch in batches:
                found |= batch.documents
        return found

    def add_batch(self, batch: SearchBatch | ReadBatch) -> None:
        """Log one batch call's accesses, held as its columns."""
        if not batch.agents:
            return
        self._held.append(batch)
        self._batches.setdefault(batch.timeline, []).append(batch)
        recent = self._recent.get(batch.timeline)
        if recent and recent[-1].tick == batch.tick:
            recent.append(batch)
        else:
            self._recent[batch.timeline] = [batch]

    def add_each(
        self,
        timeline: str | None,
        tick: int | None,
        cutoff: datetime,
        accesses: list[dict[str, Any]],
    ) -> None:
        """Log the accesses of one call, made at one timeline, tick and cut-off (each in its
        JSON form, in call order), and index the documents each received."""
        if not accesses:
            return
        self._held.append(Logged(timeline, tick, cutoff, accesses))
        index = self._received
        for access in accesses:
            received = access.get("doc_ids")
            if received and not access.get("refused", False):
                by_timeline = index.get(access["agent"])
                if by_timeline is None:
                    by_timeline = index[access["agent"]] = {}
                ids = by_timeline.get(timeline)
                if ids is None:
                    by_timeline[timeline] = set(received)
                else:
                    ids.update(received)
                ticks = self._by_tick.setdefault(access["agent"], {}).setdefault(timeline, {})
                ticks.setdefault(tick, set()).update(received)

    def forked(self, child: str, tick: int) -> None:
        """``child`` forked off its parent at ``tick``: in its lineage, the parent's receipts
        count up to that tick only."""
        self._forked_at[child] = tick

    def append(self, record: RetrievalRecord) -> None:
        logged = Logged.of(record)
        self.add_each(logged.timeline, logged.tick, logged.cutoff, logged.accesses)

    def extend(self, records: Iterable[RetrievalRecord]) -> None:
        for record in records:
            self.append(record)

    def __iter__(self) -> Iterator[RetrievalRecord]:
        return (record for logged in self._held for record in logged.records())

    def __len__(self) -> int:
        return sum(len(logged.accesses) for logged in self._held)

    def forget(self) -> list[Calls]:
        """Let every held access go (they are in the trace) and return them, a call's at a
        time; the index keeps what they said."""
        held, self._held = self._held, []
        return held

    def take(self, timeline: str) -> list[Calls]:
        """Let the accesses made in ``timeline`` go and return them (in call order, a call's
        at a time); the others stay, and the index keeps what every access said."""
        taken = [a for a in self._held if a.timeline == timeline]
        if taken:
            self._held = [a for a in self._held if a.timeline != timeline]
        return taken

    def received(self, agent: str, timeline: str | None = None) -> frozenset[str]:
        """Ids ``agent`` received: in ``timeline`` and its ancestors (records without a
        timeline count everywhere), or anywhere when ``timeline`` is None."""
        return frozenset().union(*self._received_sets(agent, timeline))

    def unreceived(self, ids: Iterable[str], agent: str, timeline: str | None = None) -> list[str]:
        """The ids (once each, in order) ``agent`` did not receive where :meth:`received`
        looks: answered from the index's few sets, without joining them."""
        return self.unreceived_each([(agent, tuple(ids))], timeline)[0]

    def unreceived_each(
        self, cited: Iterable[tuple[str, Sequence[str]]], timeline: str | None = None
    ) -> list[list[str]]:
        """:meth:`unreceived` for each ``(agent, ids)`` (a tick's proposals), in order."""
        found: list[list[str]] = []
        index = self._received
        # a batch's agent citing what it received in its timeline's latest tick: its receipts
        # are a tuple shared with the agents that received the same, each pair checked once
        recent = [(batch.rows(), batch) for batch in self._recent.get(timeline, ())]
        covered: dict[tuple[int, int], bool] = {}
        for agent, ids in cited:
            if not ids:
                found.append([])
                continue
            hit = False
            for rows, batch in recent:
                i = rows.get(agent)
                if i is None:
                    continue
                receipt = batch.receipt(i)
                key = (id(receipt), id(ids))
                ok = covered.get(key)
                if ok is None:
                    ok = covered[key] = set(receipt).issuperset(ids)
                if ok:
                    hit = True
                    break
            if hit:
                found.append([])
                continue
            # the usual case first: an agent's accesses all made in this one timeline
            by_timeline = index.get(agent)
            alone = by_timeline and len(by_timeline) == 1 and not self._batches
            only = by_timeline.get(timeline) if alone and by_timeline else None
            sets = [only] if only is not None else self._received_sets(agent, timeline)
            if len(sets) == 1:
                (only,) = sets
                found.append(
                    [] if only.issuperset(ids) else [i for i in dict.fromkeys(ids) if i not in only]
                )
            else:
                found.append([i for i in dict.fromkeys(ids) if not any(i in s for s in sets)])
        return found

    def _received_sets(self, agent: str, timeline: str | None) -> list[set[str]]:
        by_timeline = self._received.get(agent) or {}
        by_tick = self._by_tick.get(agent) or {}
        places: list[tuple[str | None, int | None]] = (
            [(key, None) for key in {*by_timeline, *self._batches}]
            if timeline is None
            else self._where(timeline)
        )
        sets: list[set[str]] = []
        for place, until in places:
            if until is None:
                found = by_timeline.get(place)
                if found:
                    sets.append(found)
            else:
                ticks = by_tick.get(place, {})
                sets += [ids for t, ids in ticks.items() if t is None or t <= until]
            for batch in self._batches.get(place, ()):
                if until is not None and batch.tick is not None and batch.tick > until:
                    continue
                got = batch.received_by(agent)
                if got:
                    sets.append(set(got))
        return sets

    def _where(self, timeline: str) -> list[tuple[str | None, int | None]]:
        """Where an access counts for ``timeline``, and up to which tick: anywhere (``None``),
        the timeline itself, each ancestor up to the tick its descendant on the way forked off
        (without limit when that fork is not known: a log indexed from records alone)."""
        lineage = ancestry(timeline)
        bounded: list[tuple[str | None, int | None]] = [(None, None)]
        for ancestor, descendant in itertools.pairwise(lineage):
            bounded.append((ancestor, self._forked_at.get(descendant)))
        bounded.append((timeline, None))
        return bounded
