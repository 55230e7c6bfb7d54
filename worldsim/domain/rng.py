"""Seeded randomness: one generator per (purpose, timeline, tick, agent), from the run's seed.

Streams are keyed by lineage, not by scheduling, so results never depend on which task ran first.
"""

from __future__ import annotations

import zlib

import numpy as np

from worldsim.domain.contracts import lineage

__all__ = ["rng_for"]

_PURPOSES = {"init": 1, "activity": 2, "agent": 3, "review": 4, "sample": 5, "report": 6}


def rng_for(
    seed: int, purpose: str, timeline: str = "t0", tick: int = -1, agent: str = ""
) -> np.random.Generator:
    """An independent generator for one use; the same arguments always give the same stream."""
    path = lineage(timeline)
    key = (_PURPOSES[purpose], tick + 1, zlib.crc32(agent.encode()), len(path), *path)
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))
