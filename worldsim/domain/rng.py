"""Seeded randomness: one generator per (purpose, timeline, tick, agent), from the run's seed.

Streams are keyed by lineage, not by scheduling, so results never depend on which task ran first.

A tick's agents get their generators from :class:`AgentSeeds`: the same streams
:func:`rng_for` gives, with their seeds mixed for all the tick's agents at once. Numpy's
``SeedSequence`` spends most of a generator's making on bookkeeping around a few dozen 32-bit
hash steps; those steps (numpy's documented mixing algorithm, which it keeps stable so that seeds
give the same streams across releases) are done here as array operations, once per tick.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any, cast, overload

import numpy as np
import numpy.typing as npt
from numpy.random.bit_generator import ISeedSequence

from worldsim.domain.contracts import lineage

__all__ = ["AgentSeeds", "rng_for"]

_PURPOSES = {"init": 1, "activity": 2, "agent": 3, "review": 4, "sample": 5, "report": 6}


def _key(purpose: str, timeline: str, tick: int, agent: str) -> tuple[int, ...]:
    path = lineage(timeline)
    return (_PURPOSES[purpose], tick + 1, zlib.crc32(agent.encode()), len(path), *path)


def rng_for(
    seed: int, purpose: str, timeline: str = "t0", tick: int = -1, agent: str = ""
) -> np.random.Generator:
    """An independent generator for one use; the same arguments always give the same stream."""
    key = _key(purpose, timeline, tick, agent)
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))


# numpy's SeedSequence constants (numpy/random/bit_generator.pyx)
_POOL = 4
_MASK = 0xFFFFFFFF
_INIT_A, _MULT_A = 0x43B0D7E5, 0x931E8875
_INIT_B, _MULT_B = 0x8B51F9DD, 0x58F38DED
_MIX_L, _MIX_R = 0xCA01F9DD, 0x4973F715
_SHIFT = 16


def _words(value: int) -> list[int]:
    """An entropy integer as numpy coerces it: 32-bit words, least significant first."""
    if value < 0:
        raise ValueError("seed entropy must be non-negative")
    words = []
    while True:
        words.append(value & _MASK)
        value >>= 32
        if not value:
            return words


class _Mixer:
    """The pool of a ``SeedSequence`` being mixed, for many keys at once: each pool word is an
    array over the keys (or a plain int while every key has fed it the same words). The hash
    constant moves with the number of words mixed, never with their values, so it is shared."""

    def __init__(self) -> None:
        self.const = _INIT_A
        self.pool: list[Any] = [0] * _POOL

    def _hash(self, value: Any) -> Any:
        value = value ^ self.const
        self.const = (self.const * _MULT_A) & _MASK
        value = (value * self.const) & _MASK
        return value ^ (value >> _SHIFT)

    @staticmethod
    def _mix(x: Any, y: Any) -> Any:
        result = (_MIX_L * x - _MIX_R * y) & _MASK
        return result ^ (result >> _SHIFT)

    def start(self, entropy: Sequence[int]) -> None:
        """Mix the first words (the run's entropy, padded to the pool)."""
        for i in range(_POOL):
            self.pool[i] = self._hash(entropy[i] if i < len(entropy) else 0)
        for src in range(_POOL):
            for dst in range(_POOL):
                if src != dst:
                    self.pool[dst] = self._mix(self.pool[dst], self._hash(self.pool[src]))
        for word in entropy[_POOL:]:
            self.feed(word)

    def feed(self, word: Any) -> None:
        """Mix one more entropy word (an int, or an array with one word per key)."""
        for dst in range(_POOL):
            self.pool[dst] = self._mix(self.pool[dst], self._hash(word))


def _state_words(pool: Sequence[Any], n_words: int) -> list[Any]:
    """``generate_state``'s 32-bit words: drawn cycling over the pool, each hashed."""
    const, out = _INIT_B, []
    for i in range(n_words):
        value = pool[i % _POOL] ^ const
        const = (const * _MULT_B) & _MASK
        value = (value * const) & _MASK
        out.append(value ^ (value >> _SHIFT))
    return out


class AgentSeeds(Sequence[np.random.Generator]):
    """The seeds of ``rng_for(seed, purpose, timeline, tick, agent)`` for many agents, mixed
    together: :meth:`generator` (or ``seeds[i]``) gives agent ``i``'s generator, the same stream
    as ``rng_for``; each is made when asked for."""

    def __init__(
        self, seed: int, purpose: str, timeline: str, tick: int, agents: Sequence[str]
    ) -> None:
        parts = _key(purpose, timeline, tick, "")
        before, after = parts[:2], parts[3:]  # the agent's crc32 is the key's third part
        run = _words(seed)
        mixer = _Mixer()
        mixer.start(run + [0] * (_POOL - len(run)) + [w for p in before for w in _words(p)])
        mixer.pool = [np.full(len(agents), w, dtype=np.uint64) for w in mixer.pool]
        mixer.feed(np.array([zlib.crc32(a.encode()) for a in agents], dtype=np.uint64))
        for part in after:
            for word in _words(part):
                mixer.feed(word)
        self.pools = np.stack(mixer.pool, axis=1)
        """Each agent's mixed pool: four 32-bit words (held as uint64)."""
        words = _state_words(mixer.pool, 8)
        self.states = np.stack(
            [words[2 * j] | (words[2 * j + 1] << np.uint64(32)) for j in range(4)], axis=1
        )
        """Each agent's PCG64 seed: ``generate_state(4, uint64)`` of its pool."""

    def __len__(self) -> int:
        return len(self.states)

    @overload
    def __getitem__(self, i: int) -> np.random.Generator: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[np.random.Generator]: ...
    def __getitem__(self, i: int | slice) -> np.random.Generator | Sequence[np.random.Generator]:
        if isinstance(i, slice):
            return [self.generator(j) for j in range(len(self))[i]]
        return self.generator(i)

    def generator(self, i: int) -> np.random.Generator:
        # numpy accepts any ISeedSequence (its stubs name SeedSequence only)
        mixed = cast(np.random.SeedSequence, _Seeded(self.pools[i], self.states[i]))
        return np.random.Generator(np.random.PCG64(mixed))


class _Seeded(ISeedSequence):
    """One agent's seed sequence, mixed already (:class:`AgentSeeds`)."""

    __slots__ = ("_pool", "_state")

    def __init__(self, pool: npt.NDArray[np.uint64], state: npt.NDArray[np.uint64]) -> None:
        self._pool, self._state = pool, state

    def generate_state(self, n_words: int, dtype: Any = np.uint32) -> npt.NDArray[Any]:
        kind = np.dtype(dtype)
        if kind == np.uint64 and n_words == 4:
            return self._state  # what PCG64 asks for
        if kind == np.uint32:
            return np.array(_state_words(self._pool.tolist(), n_words), dtype=np.uint32)
        if kind == np.uint64:
            w = _state_words(self._pool.tolist(), 2 * n_words)
            return np.array([w[2 * j] | (w[2 * j + 1] << 32) for j in range(n_words)], kind)
        raise ValueError("only support uint32 or uint64")
