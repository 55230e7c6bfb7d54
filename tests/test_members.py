"""Cohort members as arrays: the update rule, exact means, the state, the trace, both routes."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import RunFn
from tests.support import ROOT, card_with
from tests.test_cpu_determinism import _dispatched_features
from tests.test_llm_roles import _run as run_scripted
from worldsim.domain import bounds
from worldsim.domain.cards import Card, load_card
from worldsim.domain.errors import CardError, StateError
from worldsim.trace.reader import read_trace
from worldsim.trace.verify import canonical_hash, verify_trace
from worldsim.world.build import build_world
from worldsim.world.members import initial, mean, update
from worldsim.world.state import (
    CohortTable,
    MemberAction,
    SetCohort,
    UpdateMembers,
    apply_deltas,
    state_digest,
)

unit = st.floats(0.0, 1.0)
signed = st.floats(-1.0, 1.0)
actions = st.lists(st.tuples(signed, unit, unit), min_size=1, max_size=5)


def _with_members(card: Card, **members: int) -> Card:
    cohorts = [
        {**c.model_dump(mode="json"), "members": members.get(c.id, 0)}
        for c in card.seeds.cohorts  # type: ignore[union-attr]
    ]
    return card_with(card, cohorts=cohorts)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 300),
    start=st.tuples(unit, unit, signed),
    chosen=actions,
    target=st.tuples(unit, unit),
    draw=st.integers(0, 2**63 - 1),
)
def test_an_update_keeps_members_in_range_and_depends_on_its_inputs_only(
    n: int,
    start: tuple[float, float, float],
    chosen: list[tuple[float, float, float]],
    target: tuple[float, float],
    draw: int,
) -> None:
    members = initial("c", n, *start)
    before = members.digest()
    args: dict[str, Any] = {
        "directions": [d for d, _, _ in chosen],
        "magnitudes": [m for _, m, _ in chosen],
        "probabilities": [p for _, _, p in chosen],
        "attention": target[0],
        "trust": target[1],
        "draw": draw,
    }
    after = update(members, **args)
    assert len(after) == n and members.digest() == before  # the old arrays are untouched
    assert update(members, **args).digest() == after.digest()
    for column in (after.attention, after.trust, after.exposure):
        assert column.min() >= 0.0 and column.max() <= 1.0
    assert after.sentiment.min() >= -1.0 and after.sentiment.max() <= 1.0
    lo, hi = min(d for d, _, _ in chosen), max(d for d, _, _ in chosen)
    # each member moves from where it was toward the direction it picked, never past it
    assert np.all(after.sentiment >= np.minimum(members.sentiment, lo) - 1e-6)
    assert np.all(after.sentiment <= np.maximum(members.sentiment, hi) + 1e-6)
    assert not after.sentiment.flags.writeable


def test_members_pick_actions_in_proportion_and_follow_them() -> None:
    members = initial("public", 100_000, 1.0, 1.0, 0.0)
    moved = update(
        members,
        directions=[1.0, -1.0],
        magnitudes=[1.0, 0.0],
        probabilities=[0.7, 0.3],
        attention=1.0,
        trust=1.0,
        draw=7,
    )
    # a member's exposure is positive exactly when it picked the first action
    share = float(np.mean(moved.exposure > 0))
    assert abs(share - 0.7) < 0.01
    # about ½·attention·trust·(0.7 − 0.3), attention and trust near 1
    assert abs(mean(moved.sentiment) - 0.5 * 0.4) < 0.02
    again = update(moved, **{**_args(1.0, 1.0), "draw": 8})
    assert mean(again.sentiment) > mean(moved.sentiment)


def _args(direction: float, probability: float) -> dict[str, Any]:
    return {
        "directions": [direction],
        "magnitudes": [0.5],
        "probabilities": [probability],
        "attention": 1.0,
        "trust": 1.0,
        "draw": 1,
    }


@settings(max_examples=60, deadline=None)
@given(values=st.lists(signed, min_size=1, max_size=200), data=st.data())
def test_the_mean_is_exact_and_independent_of_order(values: list[float], data: Any) -> None:
    shuffled = data.draw(st.permutations(values))
    as_members = np.array(values, dtype=np.float32)
    assert mean(as_members) == mean(np.array(shuffled, dtype=np.float32))
    exact = math.fsum(float(v) for v in as_members) / len(values)
    assert abs(mean(as_members) - exact) <= 2**-24


def test_members_are_state_shared_by_forks_and_covered_by_the_digest(demo_card: Card) -> None:
    card = _with_members(demo_card, public=2000)
    state, problems = build_world(card, 8)
    assert problems == []
    table = state.cohorts
    i = table.index("public")
    assert table.members[i] is not None and len(table.members[i]) == 2000  # type: ignore[arg-type]
    assert table.members[table.index("investors")] is None
    decision = UpdateMembers(
        id="public",
        actions=(
            MemberAction(direction=0.9, magnitude=0.5, probability=0.6),
            MemberAction(direction=-0.4, magnitude=0.5, probability=0.4),
        ),
        attention=0.8,
        trust=0.8,
        draw=3,
    )
    child = apply_deltas(state, [decision])
    assert state.cohorts.members[i] is table.members[i]  # the parent keeps its members
    assert child.cohorts.members[i] is not table.members[i]
    assert float(child.cohorts.sentiment[i]) == mean(child.cohorts.members[i].sentiment)  # type: ignore[union-attr]
    assert state_digest(child) != state_digest(state)
    # a sibling taking another draw differs in its members' bytes, and so in its digest
    sibling = apply_deltas(state, [decision.model_copy(update={"draw": 4})])
    assert state_digest(sibling) != state_digest(child)
    assert state_digest(apply_deltas(state, [decision])) == state_digest(child)


def test_members_are_made_again_from_the_recorded_world_and_checked(demo_card: Card) -> None:
    state, _ = build_world(_with_members(demo_card, public=500), 8)
    recorded = state.cohorts.to_json()
    assert CohortTable.from_json(recorded).to_json() == recorded
    tampered = {**recorded, "members": [None, {"count": 500, "sha256": "0" * 64}]}
    with pytest.raises(StateError, match="members differ"):
        CohortTable.from_json(tampered)
    # a recorded count no card could hold is refused before any array is made
    for count in (bounds.MAX_MEMBERS + 1, -1, "many"):
        huge = {**recorded, "members": [None, {"count": count, "sha256": "0" * 64}]}
        with pytest.raises(StateError, match="member counts"):
            CohortTable.from_json(huge)


def test_a_decision_for_a_cohort_without_members_is_refused(demo_card: Card) -> None:
    state, _ = build_world(demo_card, 8)
    decision = UpdateMembers(
        id="public",
        actions=(MemberAction(direction=0.5, magnitude=0.5, probability=1.0),),
        attention=0.5,
        trust=0.5,
        draw=0,
    )
    with pytest.raises(StateError, match="cohort 'public' has no members"):
        apply_deltas(state, [decision])


def test_the_members_scenario_simulates_a_million_members() -> None:
    card = load_card(ROOT / "scenarios" / "members" / "merger-review-members.yaml")
    assert card.seeds is not None
    assert {c.id: c.members for c in card.seeds.cohorts} == {"investors": 800, "public": 10**6}


def test_a_card_with_too_many_members_is_refused_naming_the_field(tmp_path: Path) -> None:
    text = (ROOT / "scenarios" / "merger-review.yaml").read_text(encoding="utf-8")
    too_many = bounds.MAX_MEMBERS // 2 + 1
    text = text.replace("sentiment: 0.3}", f"sentiment: 0.3, members: {too_many}}}")
    text = text.replace("sentiment: -0.1}", f"sentiment: -0.1, members: {too_many}}}")
    path = tmp_path / "card.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CardError, match="members in all; at most") as caught:
        load_card(path)
    assert caught.value.field == "seeds"


def test_an_offline_run_with_members_verifies_and_repeats(demo_card: Card, run: RunFn) -> None:
    card = _with_members(demo_card, public=20_000, investors=3_000)
    first, second = run(card, seed=5), run(card, seed=5)
    assert verify_trace(first.trace).exit_code == 0
    trace = read_trace(first.trace)
    assert canonical_hash(trace) == canonical_hash(read_trace(second.trace))
    updates = [d for p in trace.proposals() for d in p.data.deltas if p.data.role == "cohort"]
    assert updates and all(isinstance(d, UpdateMembers) for d in updates)
    assert {d.id for d in updates} == {"public", "investors"}
    assert all(math.isclose(math.fsum(a.probability for a in d.actions), 1.0) for d in updates)
    init = trace.first("world_initialized")
    assert init is not None
    counts = [m["count"] for m in init.record.data.state["cohorts"]["members"]]
    assert counts == [3_000, 20_000]
    # a card without members is written as before: its cohorts carry no members key
    plain = read_trace(run(demo_card, seed=5).trace)
    world, started = plain.first("world_initialized"), plain.first("run_started")
    assert world is not None and "members" not in world.record.data.state["cohorts"]
    assert started is not None
    assert all("members" not in c for c in started.record.data.card["seeds"]["cohorts"])


def test_a_model_cohort_decides_for_all_its_members(demo_card: Card, tmp_path: Path) -> None:
    """On a model route, the archetype's actions (0.7 buy at +0.8, 0.3 sell at -0.5) go to
    every member in one delta; the proposal pushes with their expected direction."""
    result = run_scripted(_with_members(demo_card, investors=5_000), tmp_path)
    assert verify_trace(result.trace).exit_code == 0
    cohort = [p.data for p in read_trace(result.trace).proposals() if p.data.role == "cohort"]
    assert cohort
    for p in cohort:
        (decision,) = p.deltas
        assert isinstance(decision, UpdateMembers) and not isinstance(decision, SetCohort)
        assert [a.probability for a in decision.actions] == pytest.approx([0.7, 0.3])
        assert (decision.attention, decision.trust) == (0.7, 0.5)
        assert p.direction == pytest.approx(0.7 * 0.8 - 0.3 * 0.5)


PROBE = r"""
from worldsim.world.members import initial, update, mean
m = initial("public", 50_000, 0.4, 0.6, -0.2)
for draw in range(3):
    m = update(m, directions=[0.9, -0.4, 0.1], magnitudes=[0.3, 0.8, 0.5],
               probabilities=[0.5, 0.3, 0.2], attention=0.7, trust=0.3, draw=draw)
print(m.digest(), repr(mean(m.sentiment)))
"""


def test_members_are_the_same_bits_without_vector_instructions() -> None:
    features = _dispatched_features()
    if not features:
        pytest.skip("this CPU has no vector features beyond numpy's baseline to switch off")
    outputs = []
    for env in ({}, {"NPY_DISABLE_CPU_FEATURES": " ".join(features)}):
        done = subprocess.run(
            [sys.executable, "-c", PROBE],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1] and outputs[0].strip()


def test_continuing_a_run_whose_cohorts_have_members_is_refused_before_anything_is_written(
    demo_card: Card, run: RunFn, tmp_path: Path
) -> None:
    from tests.support import invoke

    parent = run(_with_members(demo_card, public=50), ticks=3).trace
    before = sorted(parent.parent.iterdir())
    refused = invoke("run", "--continue", parent, "--as-of", "mid")
    assert refused.code == 2, refused.err
    assert "cohorts have members cannot be continued" in refused.err
    assert str(parent) in refused.err and "Traceback" not in refused.err
    assert sorted(parent.parent.iterdir()) == before
