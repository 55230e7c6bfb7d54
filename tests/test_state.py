"""Copy-on-write world state, deltas and the ledger (DESIGN §4.4)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worldsim.domain.cards import Card
from worldsim.domain.errors import StateError
from worldsim.world.build import build_world
from worldsim.world.state import (
    LedgerUpdate,
    SetActor,
    SetCohort,
    SetHypothesis,
    SetPressure,
    SetVariable,
    ShiftPressure,
    WorldState,
    actor_columns,
    apply_deltas,
    apply_ledger,
    state_digest,
)


@pytest.fixture
def world(demo_card: Card) -> WorldState:
    state, problems = build_world(demo_card, 8)
    assert problems == []
    return state


def test_initial_pressure_encodes_the_base_rate(world: WorldState) -> None:
    assert world.probabilities()["cleared"] == pytest.approx(0.55)


def test_fork_leaves_parent_history_untouched(world: WorldState) -> None:
    before = state_digest(world)
    child = apply_deltas(
        world,
        [
            SetVariable(name="combined_share", value=0.5),
            SetCohort(id="public", attention=1.0, trust=0.1, sentiment=0.9),
            SetActor(id="regulator", field="stance", value=-0.9),
            ShiftPressure(endpoint="cleared", by=1.0),
        ],
    )
    assert state_digest(world) == before
    assert world.variables["combined_share"] == 0.34
    assert world.cohorts.sentiment[1] == -0.1
    assert child.cohorts.sentiment[1] == 0.9
    assert world.actors["regulator"].stance == 0.05


def test_unchanged_parts_are_shared_not_copied(world: WorldState) -> None:
    child = apply_deltas(world, [SetPressure(endpoint="cleared", value=2.0)])
    assert child.actors is world.actors
    assert child.cohorts is world.cohorts
    assert child.ledger is world.ledger
    assert child.events is world.events
    row = apply_deltas(world, [SetCohort(id="public", attention=0.9, trust=0.4, sentiment=-0.1)])
    assert row.cohorts.trust is world.cohorts.trust  # only the changed column is replaced
    assert row.cohorts.attention is not world.cohorts.attention


def test_cohort_columns_are_read_only(world: WorldState) -> None:
    with pytest.raises(ValueError):
        world.cohorts.sentiment[0] = 1.0


def test_json_round_trip_keeps_the_digest(world: WorldState) -> None:
    assert state_digest(WorldState.from_json(world.to_json())) == state_digest(world)


@pytest.mark.parametrize(
    ("delta", "message"),
    [
        (SetPressure(endpoint="remedies_offered", value=1.0), "unknown scored endpoint"),
        (SetActor(id="ghost", field="stance", value=0.1), "unknown actor"),
        (SetActor(id="regulator", field="activity", value=1.5), "out of range"),
        (SetCohort(id="ghost", attention=0.1, trust=0.1, sentiment=0.0), "unknown cohort"),
        (SetHypothesis(id="ghost", status="fired"), "unknown branch hypothesis"),
    ],
)
def test_invalid_deltas_are_refused(world: WorldState, delta: object, message: str) -> None:
    with pytest.raises(StateError, match=message):
        apply_deltas(world, [delta])  # type: ignore[list-item]


def test_ledger_refuses_impossible_moves(world: WorldState) -> None:
    settled = apply_ledger(
        world,
        [
            LedgerUpdate(endpoint="cleared", status="realized"),
            LedgerUpdate(endpoint="not_cleared", status="eliminated"),
        ],
        tick=3,
    )
    assert settled.outcome() == "yes" and settled.all_scored_settled()
    assert world.ledger["cleared"].status == "open"
    with pytest.raises(StateError, match="already realized"):
        apply_ledger(settled, [LedgerUpdate(endpoint="cleared", status="eliminated")], tick=4)
    with pytest.raises(StateError, match="more than one scored endpoint realized"):
        apply_ledger(
            world,
            [
                LedgerUpdate(endpoint="cleared", status="realized"),
                LedgerUpdate(endpoint="not_cleared", status="realized"),
            ],
            tick=1,
        )
    with pytest.raises(StateError, match="unknown endpoint"):
        apply_ledger(world, [LedgerUpdate(endpoint="ghost")], tick=1)


_deltas = st.one_of(
    st.builds(
        ShiftPressure, endpoint=st.sampled_from(["cleared", "not_cleared"]), by=st.floats(-5, 5)
    ),
    st.builds(
        SetVariable, name=st.sampled_from(["a", "b", "combined_share"]), value=st.floats(-1e6, 1e6)
    ),
    st.builds(
        SetCohort,
        id=st.sampled_from(["public", "investors"]),
        attention=st.floats(0, 1),
        trust=st.floats(0, 1),
        sentiment=st.floats(-1, 1),
    ),
    st.builds(
        SetActor,
        id=st.sampled_from(["regulator", "company_a"]),
        field=st.just("stance"),
        value=st.floats(-1, 1),
    ),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_deltas, max_size=12), st.lists(_deltas, max_size=12))
def test_sibling_timelines_never_see_each_others_changes(
    demo_card: Card, left: list[object], right: list[object]
) -> None:
    base, _ = build_world(demo_card, 8)
    digest = state_digest(base)
    a = apply_deltas(base, left)  # type: ignore[arg-type]
    a_digest = state_digest(a)
    b = apply_deltas(base, right)  # type: ignore[arg-type]
    assert state_digest(base) == digest
    assert state_digest(a) == a_digest
    assert state_digest(apply_deltas(base, right)) == state_digest(b)  # type: ignore[arg-type]


def test_actor_columns_follow_the_actor_map(world: WorldState) -> None:
    """An actor map's columns are its actors in id order, made once per map; a delta that moves
    an actor gives a new map and new columns, the parent's left as they were."""
    columns = actor_columns(world.actors)
    assert columns.ids == tuple(sorted(world.actors.keys()))
    assert columns.roles == tuple(world.actors[a].role for a in columns.ids)
    assert columns.stance.tolist() == [world.actors[a].stance for a in columns.ids]
    assert columns.activity.tolist() == [world.actors[a].activity for a in columns.ids]
    assert actor_columns(world.actors) is columns
    with pytest.raises(ValueError):
        columns.stance[0] = 1.0  # read-only: shared by every tick of the map
    moved = apply_deltas(world, [SetActor(id="regulator", field="stance", value=-0.9)])
    after = actor_columns(moved.actors)
    assert after.stance[after.ids.index("regulator")] == -0.9
    assert columns.stance.tolist() == [world.actors[a].stance for a in columns.ids]
