"""Ledger evidence as a persistent, append-only sequence.

A reviewer adds evidence every tick; copying a row's whole tuple for each entry made a tick cost
in proportion to the evidence so far, once per entry. A trail instead adds one chunk per apply
and shares every earlier chunk with the states before it, each chunk keeping its canonical JSON,
so neither a fork, nor an apply, nor a digest re-renders old evidence.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from worldsim.domain.jsonbytes import canonical_bytes

__all__ = ["Evidence", "EvidenceTrail"]


@dataclass(frozen=True, slots=True)
class Evidence:
    kind: Literal["supports", "contradicts"]
    ref: str
    tick: int
    note: str = ""

    def to_json(self) -> dict[str, str | int]:
        return {"kind": self.kind, "ref": self.ref, "tick": self.tick, "note": self.note}


class EvidenceTrail:
    """An immutable sequence of :class:`Evidence` in the order it was added.

    Equal to another trail (or a tuple) holding the same entries, however they were chunked.
    """

    __slots__ = ("_chunk", "_cols", "_json", "_len", "_prev")

    def __init__(self, entries: Iterable[Evidence] = (), prev: EvidenceTrail | None = None) -> None:
        self._chunk: tuple[Evidence, ...] | None = tuple(entries)
        self._cols: tuple[Sequence[str], Sequence[str], Sequence[str], int] | None = None
        self._prev = prev if prev is not None and len(prev) else None
        self._len = len(self._chunk) + (len(self._prev) if self._prev is not None else 0)
        # the canonical JSON of the chunk's list, without its brackets: its entries' JSON joined
        # (given its floats, none where the entries are as a review makes them, the bytes need
        # no look for floats msgspec spells otherwise)
        floats = [  # (typed otherwise, but a forged trace's entry may hold one)
            value
            for ev in self._chunk
            for value in (ev.kind, ev.ref, ev.tick, ev.note)
            if isinstance(value, float)
        ]
        self._json = canonical_bytes([ev.to_json() for ev in self._chunk], floats)[1:-1]

    def added(self, entries: Iterable[Evidence]) -> EvidenceTrail:
        """This trail with ``entries`` after it; this trail is shared, not copied."""
        chunk = tuple(entries)
        return EvidenceTrail(chunk, self) if chunk else self

    def added_columns(
        self, kinds: Sequence[str], refs: Sequence[str], notes: Sequence[str], tick: int
    ) -> EvidenceTrail:
        """This trail with the entries ``(kinds[i], refs[i], tick, notes[i])`` after it, kept
        as columns (an :class:`Evidence` each is made only when the trail is iterated)."""
        if not kinds:
            return self
        trail = EvidenceTrail((), self)
        trail._chunk, trail._cols = None, (kinds, refs, notes, tick)
        trail._len += len(kinds)
        # key-sorted, as canonical JSON is, and holding no float
        trail._json = canonical_bytes(
            [
                {"kind": k, "note": n, "ref": r, "tick": tick}
                for k, r, n in zip(kinds, refs, notes, strict=True)
            ],
            (),
        )[1:-1]
        return trail

    def _entries(self) -> tuple[Evidence, ...]:
        """This chunk's entries (made from its columns once, when first asked)."""
        if self._chunk is None:
            assert self._cols is not None
            kinds, refs, notes, tick = self._cols
            self._chunk = tuple(
                Evidence(k, r, tick, n)  # type: ignore[arg-type]
                for k, r, n in zip(kinds, refs, notes, strict=True)
            )
            self._cols = None
        return self._chunk

    def _chunks(self) -> list[EvidenceTrail]:
        nodes: list[EvidenceTrail] = []
        node: EvidenceTrail | None = self
        while node is not None:
            nodes.append(node)
            node = node._prev
        nodes.reverse()
        return nodes

    def __iter__(self) -> Iterator[Evidence]:
        for node in self._chunks():
            yield from node._entries()

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0

    def __eq__(self, other: object) -> bool:
        if isinstance(other, EvidenceTrail | tuple):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"EvidenceTrail({list(self)!r})"

    def canonical_pieces(self) -> list[bytes]:
        """The canonical JSON of the list of entries in pieces (each chunk's kept bytes, the
        brackets and commas between), for a digest to take one after another without joining
        them."""
        pieces = [b"["]
        for node in self._chunks():
            if node._json:
                if len(pieces) > 1:
                    pieces.append(b",")
                pieces.append(node._json)
        pieces.append(b"]")
        return pieces
