"""Incremental structures of the world state agree with recomputing from scratch; activation."""

from __future__ import annotations

import hashlib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import RunFn
from tests.support import ROOT
from worldsim.domain.cards import Card, load_card
from worldsim.domain.jsonbytes import canonical_bytes
from worldsim.trace.reader import read_trace
from worldsim.world.build import build_world
from worldsim.world.state import (
    Evidence,
    EvidenceIn,
    EvidenceTrail,
    LedgerUpdate,
    SetActor,
    SetCohort,
    SetVariable,
    ShiftPressure,
    WorldState,
    apply_review,
    state_digest,
)

WORLD, _ = build_world(load_card(ROOT / "scenarios" / "merger-review.yaml"), 8)
ACTORS = sorted(WORLD.actors.keys())
COHORTS = list(WORLD.cohorts.ids)
SCORED = [ep.id for ep in WORLD.scored]


def full_digest(state: WorldState) -> str:
    """The definition: SHA-256 of the whole state's canonical JSON, rendered afresh."""
    return hashlib.sha256(canonical_bytes(state.to_json())).hexdigest()


unit = st.floats(0.0, 1.0, allow_nan=False)
deltas = st.one_of(
    st.builds(SetActor, id=st.sampled_from(ACTORS), field=st.just("influence"), value=unit),
    st.builds(
        SetCohort,
        id=st.sampled_from(COHORTS),
        attention=unit,
        trust=unit,
        sentiment=st.floats(-1.0, 1.0, allow_nan=False),
    ),
    st.builds(SetVariable, name=st.sampled_from(["a", "b"]), value=st.integers(-5, 5)),
    st.builds(ShiftPressure, endpoint=st.sampled_from(SCORED), by=st.floats(-1.0, 1.0)),
)
ledger_updates = st.builds(
    LedgerUpdate,
    endpoint=st.sampled_from(SCORED),
    evidence=st.builds(
        EvidenceIn,
        kind=st.sampled_from(["supports", "contradicts"]),
        ref=st.text(max_size=8),
        note=st.text(max_size=12),
    ),
)
ticks = st.lists(
    st.tuples(st.lists(deltas, max_size=4), st.lists(ledger_updates, max_size=4)), max_size=6
)


@settings(max_examples=60, deadline=None)
@given(history=ticks, fork_at=st.integers(0, 6))
def test_incremental_digest_equals_full_recomputation(
    history: list[tuple[list[Any], list[LedgerUpdate]]], fork_at: int
) -> None:
    states = [WORLD]
    for tick, (changes, ledger) in enumerate(history):
        states.append(apply_review(states[-1], changes, ledger, tick))
    # a fork takes the same changes from an earlier state: shared parts, different histories
    fork = states[min(fork_at, len(states) - 1)]
    for tick, (changes, ledger) in enumerate(history):
        fork = apply_review(fork, changes, ledger, tick)
        states.append(fork)
    for state in states:
        assert state_digest(state) == full_digest(state)
        assert state_digest(WorldState.from_json(state.to_json())) == full_digest(state)


evidence = st.builds(
    Evidence,
    kind=st.sampled_from(["supports", "contradicts"]),
    ref=st.text(max_size=6),
    tick=st.integers(0, 9),
    note=st.text(max_size=6),
)


@settings(max_examples=100, deadline=None)
@given(chunks=st.lists(st.lists(evidence, max_size=4), max_size=6))
def test_evidence_trail_is_the_concatenation_of_what_was_added(
    chunks: list[list[Evidence]],
) -> None:
    trail = EvidenceTrail()
    flat: tuple[Evidence, ...] = ()
    for chunk in chunks:
        before, before_items = trail, tuple(trail)
        trail = trail.added(chunk)
        flat += tuple(chunk)
        assert tuple(before) == before_items  # the older trail is untouched
    assert tuple(trail) == flat and len(trail) == len(flat)
    assert trail == flat and trail == EvidenceTrail(flat)
    assert b"".join(trail.canonical_pieces()) == canonical_bytes([ev.to_json() for ev in flat])


def test_a_ledger_apply_adds_one_chunk_sharing_the_earlier_evidence() -> None:
    first = apply_review(WORLD, [], [LedgerUpdate(endpoint=SCORED[0], evidence=_ev("a"))], 0)
    updates = [LedgerUpdate(endpoint=SCORED[0], evidence=_ev(str(i))) for i in range(3)]
    second = apply_review(first, [], updates, 1)
    refs = [ev.ref for ev in second.ledger[SCORED[0]].evidence]
    assert refs == ["a", "0", "1", "2"]
    assert [ev.tick for ev in second.ledger[SCORED[0]].evidence] == [0, 1, 1, 1]
    assert [ev.ref for ev in first.ledger[SCORED[0]].evidence] == ["a"]


def _ev(ref: str) -> EvidenceIn:
    return EvidenceIn(kind="supports", ref=ref)


def test_actors_act_with_their_activity_and_the_trace_lists_who_acted(
    demo_card: Card, run: RunFn
) -> None:
    data = demo_card.model_dump(mode="json")
    seeds = data["seeds"]
    base = {"stance": 0.2, "influence": 0.5}
    seeds["actors"] = [
        {"id": "always", "name": "Always", "activity": 1.0, **base},
        {"id": "never", "name": "Never", "activity": 0.0, **base},
        *({"id": f"half_{i:02d}", "name": f"H{i}", "activity": 0.5, **base} for i in range(40)),
    ]
    seeds["relations"] = []
    result = run(Card.model_validate(data), "no_branch", 1)
    trace = read_trace(result.trace)
    ticks = [line.record for line in trace.of_type("tick_started")]
    proposals = {(p.tick, p.data.agent) for p in trace.proposals()}
    halves = 0
    for rec in ticks:
        active = rec.data.active
        assert "always" in active and "never" not in active
        assert {(rec.tick, agent) for agent in active} == {p for p in proposals if p[0] == rec.tick}
        halves += sum(agent.startswith("half_") for agent in active)
    # 40 actors × 8 ticks at activity 0.5: far outside 160 ± 60 would be a broken draw
    assert 100 <= halves <= 220
