"""A tick's agents' generators, seeded together, are the streams ``rng_for`` gives one by one."""

from __future__ import annotations

import zlib

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from worldsim.domain.bounds import MAX_SEED
from worldsim.domain.rng import AgentSeeds, rng_for

timelines = st.lists(st.integers(0, 2**40), min_size=0, max_size=4).map(
    lambda path: ".".join(["t0", *map(str, path)])
)
agent_lists = st.lists(st.text(max_size=30), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, MAX_SEED),
    purpose=st.sampled_from(["agent", "review", "sample", "activity"]),
    timeline=timelines,
    tick=st.integers(-1, 10_000),
    agents=agent_lists,
)
def test_seeded_together_is_seeded_alone(
    seed: int, purpose: str, timeline: str, tick: int, agents: list[str]
) -> None:
    seeds = AgentSeeds(seed, purpose, timeline, tick, agents)
    for i, agent in enumerate(agents):
        alone = rng_for(seed, purpose, timeline, tick, agent)
        together = seeds.generator(i)
        assert together.bit_generator.state == alone.bit_generator.state
        assert together.normal(0.0, 1.0, 4).tolist() == alone.normal(0.0, 1.0, 4).tolist()


@settings(max_examples=50, deadline=None)
@given(
    seed=st.integers(0, MAX_SEED),
    timeline=timelines,
    agent=st.text(max_size=30),
    n_words=st.integers(1, 9),
)
def test_a_mixed_seed_gives_any_state_numpy_would(
    seed: int, timeline: str, agent: str, n_words: int
) -> None:
    """Asked for other words than PCG64's, the mixed pool answers as a SeedSequence does."""
    path = tuple(int(part) for part in timeline[1:].split("."))
    key = (3, 5, zlib.crc32(agent.encode()), len(path), *path)
    reference = np.random.SeedSequence(seed, spawn_key=key)
    mixed = AgentSeeds(seed, "agent", timeline, 4, [agent]).generator(0).bit_generator.seed_seq
    for dtype in (np.uint32, np.uint64):
        got = mixed.generate_state(n_words, dtype)
        assert got.dtype == dtype
        assert got.tolist() == reference.generate_state(n_words, dtype).tolist()


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, MAX_SEED))
def test_half_a_draw_plus_a_half_is_numpys_uniform_draw(seed: int) -> None:
    """The offline actor's vigour: ``0.5 + 0.5 * random()`` is ``uniform(0.5, 1.0)`` to the bit."""
    ours, numpys = rng_for(seed, "agent"), rng_for(seed, "agent")
    for _ in range(20):
        assert 0.5 + 0.5 * float(ours.random()) == float(numpys.uniform(0.5, 1.0))
