"""The canonical hash of a trace: the result-determining content only, in a fixed order.

Operational metadata — run id, wall-clock times, seq, prev, latency, attempts, retried errors,
cache status, resume markers — is left out, so two runs with the same card, policy, seed, routes
and replies hash the same whether they ran live, from the cache, or resumed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from worldsim.domain.contracts import lineage
from worldsim.domain.jsonbytes import canonical_bytes
from worldsim.trace.reader import TraceLine
from worldsim.trace.records import accesses_of

__all__ = ["CanonicalHash"]

_PHASE = {
    "run_started": 0,
    "intervention": 1,
    "world_initialized": 1,
    "news": 1,
    "particle": 2,
    "timeline_started": 2,
    "tick_started": 3,
    "retrieval": 4,
    "retrievals": 4,
    "likelihood": 4,
    "llm_call": 5,
    "proposal": 6,
    "proposals": 6,
    "review": 7,
    "fork": 8,
    "fork_rejected": 8,
    "tick_committed": 9,
    "timeline_ended": 10,
    "reweighting": 10,
    "extraction": 11,
    "report": 12,
    "audit": 13,
    "run_completed": 14,
}

_KEEP: dict[str, tuple[str, ...] | None] = {
    "run_started": (
        "card_hash",
        "policy",
        "routes",
        "prompt_versions",
        "seed",
        "ticks",
        "extraction_rule",
    ),
    "world_initialized": ("digest",),
    "llm_call": ("request_hash", "reply", "error"),
    "run_completed": ("timelines", "forks", "forks_rejected", "p_yes"),
    "retrieval": ("agent", "tool", "query", "doc_id", "k", "doc_ids", "refused", "reason"),
}


_DROP: dict[str, frozenset[str]] = {"audit": frozenset({"world", "prior"})}
"""Fields derived from what is kept elsewhere (the audit's world source and prior follow from
the card and the routes), left out so that adding them changed no hash."""


_PARENT_KEEP = ("canonical", "tick", "as_of")
"""Of a continued run's parent: its canonical hash, not its head (which holds timestamps)."""


def _content(type_: str, data: dict[str, Any]) -> dict[str, Any]:
    if type_ == "run_started" and "parent" in data:
        parent = {k: data["parent"][k] for k in _PARENT_KEEP}
        rest = {k: v for k, v in data.items() if k != "parent"}
        return {**_content(type_, rest), "parent": parent}
    keep = _KEEP.get(type_)
    if keep is None:
        drop = _DROP.get(type_)
        return data if drop is None else {k: v for k, v in data.items() if k not in drop}
    return {k: data[k] for k in keep if k in data}


class CanonicalHash:
    """The canonical hash, taken as a trace's effective lines stream past: each line's hashed
    content is kept, as its canonical JSON bytes, until :meth:`hexdigest` sorts the entries into
    the canonical order. The hash is the SHA-256 of the canonical JSON of the list of entries,
    fed entry by entry (a compact JSON list is its items' bytes joined by commas in brackets)."""

    def __init__(self) -> None:
        self._entries: list[tuple[tuple[Any, ...], bytes]] = []

    def add(self, line: TraceLine) -> None:
        t = line.type
        if t not in _PHASE:
            return  # run_failed and other resume markers are operational
        rec = line.record
        data = rec.data.model_dump(mode="json")
        if t == "retrievals":  # hashed as the retrieval records it stands for
            for access in accesses_of(t, data, rec.tl, rec.tick):
                self._add("retrieval", rec.tl, rec.tick, access)
        elif t == "proposals":  # hashed as the proposal records it stands for
            for proposal in data["proposals"]:
                self._add("proposal", rec.tl, rec.tick, proposal)
        else:
            self._add(t, rec.tl, rec.tick, data)

    def _add(self, t: str, tl: str | None, tick: int | None, data: dict[str, Any]) -> None:
        path = lineage(tl) if tl else ()
        group = 1 if tl else (0 if _PHASE[t] <= 1 else 2)
        agent = str(data.get("agent", ""))
        index = int(data.get("index", 0) or 0)
        key = (group, path, tick if tick is not None else -1, _PHASE[t], agent, index)
        self._entries.append((key, canonical_bytes([t, tl, tick, _content(t, data)])))

    @classmethod
    def of(cls, lines: Iterable[TraceLine]) -> str:
        """The hash of effective lines a caller has already checked (a trace its own process
        just wrote); a trace from elsewhere is hashed by ``worldsim.trace.verify.canonical_hash``,
        which verifies it first."""
        hashed = cls()
        for line in lines:
            hashed.add(line)
        return hashed.hexdigest()

    def hexdigest(self) -> str:
        entries = sorted(self._entries, key=lambda e: e[0])
        digest = hashlib.sha256(b"[")
        for i, (_, entry) in enumerate(entries):
            if i:
                digest.update(b",")
            digest.update(entry)
        digest.update(b"]")
        return digest.hexdigest()
