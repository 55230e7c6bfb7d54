"""A tick's moves and review as columns: agents × fields, without an object per agent.

A model that decides a tick's agents together (the offline model, through the batched request
of :class:`~worldsim.domain.contracts.BatchModel`) answers with :class:`MoveColumns`; the engine
keeps a tick's proposals as :class:`TickProposals` (those columns, and the proposals of agents
that were asked one at a time, in canonical order); a reviewer that reads the columns answers
with a :class:`ColumnVerdict`, which the reviewer's role checks into a :class:`TickReview`.
Each gives the same records, the same state and the same canonical hash as the same proposals
and review as objects (:meth:`TickProposals.objects`, :meth:`TickReview.as_review`).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from worldsim.domain.errors import ModelError, StateError
from worldsim.domain.jsonbytes import floats_in
from worldsim.world.moves import PROPOSALS, Proposal, ProposalRef, RejectedProposal, Review
from worldsim.world.state import EvidenceIn, LedgerUpdate, WorldState

__all__ = [
    "ColumnVerdict",
    "EvidenceColumns",
    "MoveColumns",
    "TickProposals",
    "TickReview",
    "apply_evidence",
]

FloatArray = npt.NDArray[np.float64]

_KINDS = frozenset({"statement", "action", "cohort_update", "signal"})


@dataclass(frozen=True, slots=True)
class MoveColumns:
    """One proposal (index 0, no deltas) per agent of a batch, as columns in the agents'
    order: what :class:`~worldsim.world.moves.Proposal` holds, a field per column."""

    agents: tuple[str, ...]
    endpoints: Sequence[str | None]
    direction: FloatArray
    magnitude: FloatArray
    summaries: Sequence[str]
    cites: Sequence[tuple[str, ...]]
    kind: str = "action"

    def __len__(self) -> int:
        return len(self.agents)

    def checked(self) -> MoveColumns:
        """These columns, or a :class:`ModelError` saying what a ``Proposal`` would refuse
        (the same bounds, checked per column)."""
        n = len(self.agents)
        lengths = {len(self.endpoints), len(self.direction), len(self.magnitude)}
        lengths |= {len(self.summaries), len(self.cites)}
        problem = None
        if lengths != {n}:
            problem = "columns of different lengths"
        elif self.kind not in _KINDS:
            problem = f"kind '{self.kind}'"
        elif not (np.all(self.direction >= -1.0) and np.all(self.direction <= 1.0)):
            problem = "a direction outside [-1, 1]"
        elif not (np.all(self.magnitude >= 0.0) and np.all(self.magnitude <= 1.0)):
            problem = "a magnitude outside [0, 1]"
        elif max(map(len, self.agents), default=0) > 80 or any(
            e is not None and len(e) > 80 for e in set(self.endpoints)
        ):
            problem = "an agent or endpoint id over 80 characters"
        elif max(map(len, self.summaries), default=0) > 500:
            problem = "a summary over 500 characters"
        if problem is not None:
            raise ModelError(f"the batch's moves hold {problem}")
        return self

    def proposal(self, i: int) -> Proposal:
        """Row ``i`` as a :class:`Proposal`."""
        return PROPOSALS.validate_python([self._row(i)])[0]

    def objects(self) -> list[Proposal]:
        """Every row as a :class:`Proposal` (validated together)."""
        return PROPOSALS.validate_python([self._row(i) for i in range(len(self))])

    def _row(self, i: int) -> dict[str, Any]:
        return {
            "agent": self.agents[i],
            "index": 0,
            "kind": self.kind,
            "endpoint": self.endpoints[i],
            "direction": float(self.direction[i]),
            "magnitude": float(self.magnitude[i]),
            "summary": self.summaries[i],
            "cites": self.cites[i],
        }

    @classmethod
    def merged(cls, batches: Sequence[MoveColumns]) -> MoveColumns:
        """Several batches' columns as one, in agent order (an agent is in one batch)."""
        if len(batches) == 1 and list(batches[0].agents) == sorted(batches[0].agents):
            return batches[0]
        kinds = {b.kind for b in batches}
        if len(kinds) != 1:
            raise ModelError("batches of different kinds of move")
        agents = [a for b in batches for a in b.agents]
        order = sorted(range(len(agents)), key=agents.__getitem__)

        def pick(values: Sequence[Any]) -> list[Any]:
            return [values[i] for i in order]

        return cls(
            agents=tuple(pick(agents)),
            endpoints=pick([e for b in batches for e in b.endpoints]),
            direction=np.concatenate([b.direction for b in batches])[order],
            magnitude=np.concatenate([b.magnitude for b in batches])[order],
            summaries=pick([s for b in batches for s in b.summaries]),
            cites=pick([c for b in batches for c in b.cites]),
            kind=kinds.pop(),
        )


class TickProposals(Sequence[Proposal]):
    """A tick's proposals in canonical order (agent id, then index): the column batch of the
    agents a batch model decided, and the proposals of the agents asked one at a time.

    As a sequence it gives :class:`Proposal` objects (made once, when first asked: a reviewer
    on a model route reads them); the engine and a column reviewer read :meth:`column`."""

    __slots__ = ("_at", "_made", "_objects", "columns")

    def __init__(self, columns: MoveColumns | None, objects: Sequence[Proposal] = ()) -> None:
        self.columns = columns if columns is not None and len(columns) else None
        self._objects = list(objects)
        agents = self.columns.agents if self.columns is not None else ()
        # each object's place: the number of column rows before it (canonical order)
        self._at = [bisect.bisect_left(agents, p.agent) for p in self._objects]
        self._made: list[Proposal] | None = None

    def __len__(self) -> int:
        return len(self._objects) + (len(self.columns) if self.columns is not None else 0)

    @overload
    def __getitem__(self, i: int) -> Proposal: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Proposal]: ...
    def __getitem__(self, i: int | slice) -> Proposal | Sequence[Proposal]:
        return self.objects()[i]

    def __iter__(self) -> Iterator[Proposal]:
        return iter(self.objects())

    def objects(self) -> list[Proposal]:
        """Every proposal as an object, in canonical order (made once)."""
        if self._made is None:
            made = self.columns.objects() if self.columns is not None else []
            for shift, (at, p) in enumerate(zip(self._at, self._objects, strict=True)):
                made.insert(at + shift, p)
            self._made = made
        return self._made

    def segments(self) -> Iterator[tuple[int, int] | Proposal]:
        """The canonical order as runs of column rows ``(start, stop)`` and objects."""
        start = 0
        for at, p in zip(self._at, self._objects, strict=True):
            if at > start:
                yield (start, at)
            start = at
            yield p
        n = len(self.columns) if self.columns is not None else 0
        if n > start:
            yield (start, n)

    def column(self, name: str) -> list[Any]:
        """One field of every proposal in canonical order, as a list: ``agent``, ``index``,
        ``endpoint``, ``direction``, ``magnitude``, ``summary``, ``cites``, ``kind``."""
        cols = self.columns
        if cols is None:
            return [getattr(p, name) for p in self._objects]
        values: list[Any] = _column_of(cols, name)
        if not self._objects:
            return values
        out: list[Any] = []
        for part in self.segments():
            if isinstance(part, tuple):
                out += values[part[0] : part[1]]
            else:
                out.append(getattr(part, name))
        return out

    def position(self, agent: str, index: int) -> int | None:
        """Where the proposal ``agent#index`` is in canonical order, or ``None``."""
        for pos, p in self.objects_at():
            if p.agent == agent and p.index == index:
                return pos
        cols = self.columns
        if cols is None or index != 0:
            return None
        row = bisect.bisect_left(cols.agents, agent)
        if row == len(cols.agents) or cols.agents[row] != agent:
            return None
        return row + sum(1 for at in self._at if at <= row)

    def objects_at(self) -> Iterator[tuple[int, Proposal]]:
        """The proposals given as objects, each with its canonical position."""
        for shift, (at, p) in enumerate(zip(self._at, self._objects, strict=True)):
            yield at + shift, p

    def object_at(self, pos: int) -> Proposal | None:
        """The object proposal at canonical position ``pos`` (``None`` for a column row)."""
        for at, p in self.objects_at():
            if at == pos:
                return p
        return None


def _column_of(cols: MoveColumns, name: str) -> list[Any]:
    if name == "agent":
        return list(cols.agents)
    if name == "index":
        return [0] * len(cols)
    if name == "kind":
        return [cols.kind] * len(cols)
    if name == "direction":
        values: list[Any] = cols.direction.tolist()
        return values
    if name == "magnitude":
        values = cols.magnitude.tolist()
        return values
    if name == "deltas":
        return [()] * len(cols)
    plural = {"endpoint": cols.endpoints, "summary": cols.summaries, "cites": cols.cites}
    return list(plural[name])


@dataclass(frozen=True, slots=True)
class EvidenceColumns:
    """Ledger evidence entries (no status moves) as columns, in the order they were made."""

    endpoints: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    refs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.endpoints)

    def updates(self) -> list[LedgerUpdate]:
        """The entries as :class:`LedgerUpdate` objects."""
        return [
            LedgerUpdate(endpoint=e, evidence=EvidenceIn(kind=k, ref=r, note=n))
            for e, k, r, n in zip(self.endpoints, self.kinds, self.refs, self.notes, strict=True)
        ]

    def where(self, keep: Sequence[bool]) -> EvidenceColumns:
        """The entries whose ``keep`` is true."""
        return EvidenceColumns(
            *([v for v, k in zip(col, keep, strict=True) if k] for col in self._cols())
        )

    def _cols(self) -> tuple[list[str], list[str], list[str], list[str]]:
        return self.endpoints, self.kinds, self.refs, self.notes


@dataclass(frozen=True, slots=True)
class ColumnVerdict:
    """A reviewer's verdict on a tick's proposals, read from their columns: which it accepts
    (by canonical position), why it rejects the others it decides on, and the evidence it
    enters in the ledger; ``rest`` is everything else a reviewer answers (pressure, ledger
    status moves, decision, branches, forced values), as the reviewer's output schema holds
    it, its ``accepted``, ``rejected`` and ``ledger`` left empty or few."""

    accepted: npt.NDArray[np.bool_]
    rejected: dict[int, str]
    evidence: EvidenceColumns
    rest: Any


@dataclass(frozen=True, slots=True)
class TickReview:
    """A tick's review whose per-proposal parts are columns: the accepted proposals' canonical
    positions and the ledger's evidence entries (after ``review.ledger``); ``review`` holds
    every other part (its ``accepted`` empty)."""

    review: Review
    accepted: Sequence[int]
    proposals: TickProposals
    evidence: EvidenceColumns

    def review_json(self) -> tuple[dict[str, Any], list[float]]:
        """The JSON data of ``review`` (its ``accepted`` empty, its ``ledger`` the status moves
        only) as a ``review`` record holds it, and every float it holds (the accepted
        references and the evidence, which hold none, are written from the columns:
        :func:`worldsim.trace.tickbytes.review_payload`)."""
        data: dict[str, Any] = self.review.model_dump(mode="json")
        floats = _floats(data)
        data["agent"] = "governance"
        return data, floats

    def ledger(self) -> list[LedgerUpdate]:
        """Every ledger update as an object (status moves, then the evidence)."""
        return [*self.review.ledger, *self.evidence.updates()]

    def as_review(self) -> Review:
        """The same review as one :class:`Review` of objects."""
        agents, indexes = self.proposals.column("agent"), self.proposals.column("index")
        return self.review.model_copy(
            update={
                "accepted": tuple(_ref(agents[i], indexes[i]) for i in self.accepted),
                "ledger": tuple(self.ledger()),
            }
        )


def _ref(agent: str, index: int) -> ProposalRef:
    return ProposalRef(agent=agent, index=index)


def _floats(data: dict[str, Any]) -> list[float]:
    """The floats of a review's JSON data outside its references and ledger (which hold none)."""
    return list(floats_in([v for k, v in data.items() if k not in ("accepted", "ledger")]))


def rejected_of(proposals: TickProposals, reasons: dict[int, str]) -> list[RejectedProposal]:
    """The rejected proposals at the given canonical positions, with their reasons."""
    agents, indexes = proposals.column("agent"), proposals.column("index")
    return [
        RejectedProposal(agent=agents[i], index=indexes[i], reason=reason)
        for i, reason in sorted(reasons.items())
    ]


def apply_evidence(state: WorldState, evidence: EvidenceColumns, tick: int) -> WorldState:
    """``state`` with the evidence entries added to their endpoints' ledger rows at ``tick``
    (one chunk per endpoint, kept as columns): the state :func:`~worldsim.world.state.
    apply_review` makes of the same entries as ``LedgerUpdate`` objects."""
    if not len(evidence):
        return state
    groups: dict[str, list[int]] = {}
    for i, endpoint in enumerate(evidence.endpoints):
        groups.setdefault(endpoint, []).append(i)
    ledger = state.ledger
    for endpoint, rows in groups.items():
        row = ledger.get(endpoint)
        if row is None:
            raise StateError(f"ledger update for unknown endpoint '{endpoint}'")
        if len(groups) == 1:
            kinds, refs, notes = evidence.kinds, evidence.refs, evidence.notes
        else:
            kinds = [evidence.kinds[i] for i in rows]
            refs = [evidence.refs[i] for i in rows]
            notes = [evidence.notes[i] for i in rows]
        trail = row.evidence.added_columns(kinds, refs, notes, tick)
        ledger = ledger.set(endpoint, replace(row, evidence=trail))
    return replace(state, ledger=ledger)
