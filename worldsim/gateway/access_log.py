"""The gateway's access log, indexed by agent and timeline as records are appended.

A citation check asks which documents an agent received in a timeline or its ancestors — an
ancestor's only up to the tick its descendant forked off, the history the child inherited: what
the parent went on to receive later is not the child's, and whether the parent had already
received it when the child's check ran would depend on how the timelines were scheduled.
Scanning the whole log for it made every proposal cost in proportion to the run's history; the
index answers it from the few sets of the timeline's lineage instead.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any, cast

from worldsim.gateway.access import Calls, Logged, ReadBatch, RetrievalRecord, SearchBatch

__all__ = ["AccessLog", "ancestry"]


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
        cited = list(cited)
        if self._searched_all(cited, timeline):
            return [[] for _ in cited]
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

    def _searched_all(
        self, cited: Sequence[tuple[str, Sequence[str]]], timeline: str | None
    ) -> bool:
        """Whether every agent that cites anything cites only what one search batch of the
        timeline's latest gave it (an offline tick's: each reads, and cites, some of its
        hits), worked out with one check per distinct pair of hits and citations."""
        if not cited:
            return False
        every, all_ids = zip(*cited, strict=True)
        agents = list(itertools.compress(every, all_ids))  # those that cite anything
        ids = list(filter(None, all_ids))
        for batch in self._recent.get(timeline, ()):
            if not isinstance(batch, SearchBatch):
                continue
            rows = batch.rows()
            found = list(map(rows.get, agents))
            if None in found:
                continue
            at = cast(list[int], found)
            try:
                pairs = dict.fromkeys(zip(map(batch.receipt, at), ids, strict=True))
            except TypeError:  # citations given as a list: checked one by one
                return False
            if all(set(hits).issuperset(cites) for hits, cites in pairs):
                return True
        return False

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
