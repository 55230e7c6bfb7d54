"""The tick scheduler: forks under the policy, lineage ids, path mass, canonical order."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.conftest import RunFn
from worldsim.domain.cards import Card
from worldsim.domain.policy import BranchPolicy, load_policy
from worldsim.roles.registry import register_role
from worldsim.trace.reader import read_trace
from worldsim.trace.verify import canonical_hash
from worldsim.world.moves import BranchCandidate, Proposal, Review
from worldsim.world.views import ReviewContext, TickContext

WIDE = BranchPolicy(
    name="wide",
    max_depth=3,
    max_active=16,
    max_branches_per_tick=2,
    branch_threshold=0.5,
    runway_ticks=1,
)


def _records(path: Path, type_: str) -> list[Any]:
    return [line.record for line in read_trace(path).of_type(type_)]


def test_branching_forks_within_the_policy_caps(demo_card: Card, run: RunFn) -> None:
    policy = load_policy("branching")
    most = 0
    for seed in range(6):
        result = run(demo_card, "branching", seed)
        forks = _records(result.trace, "fork")
        assert result.timelines == len(forks) + 1 <= policy.max_active
        most = max(most, result.timelines)
        per_tick: dict[tuple[str, int], int] = {}
        for rec in forks:
            assert rec.data.depth <= policy.max_depth
            assert rec.data.candidate.score >= policy.branch_threshold
            assert rec.data.candidate.endpoint_id in {"cleared", "not_cleared"}
            assert 8 - 1 - rec.tick >= policy.runway_ticks
            key = (rec.tl, rec.tick)
            per_tick[key] = per_tick.get(key, 0) + 1
            assert per_tick[key] <= policy.max_branches_per_tick
        rejected = _records(result.trace, "fork_rejected")
        assert result.forks_rejected == len(rejected)
        assert all(rec.data.reason for rec in rejected)
        ended = _records(result.trace, "timeline_ended")
        assert sum(r.data.mass for r in ended) == pytest.approx(1.0, abs=1e-12)
    assert most >= 3


def test_rejections_name_the_rule_that_refused(demo_card: Card, run: RunFn) -> None:
    reasons = " ".join(
        rec.data.reason
        for seed in range(4)
        for rec in _records(run(demo_card, "branching", seed).trace, "fork_rejected")
    )
    assert "below branch_threshold" in reasons  # the auxiliary hypothesis scores 0.41
    assert "max_active" in reasons or "max_depth" in reasons


def test_no_branch_makes_exactly_one_timeline(demo_card: Card, run: RunFn) -> None:
    for seed in range(5):
        result = run(demo_card, "no_branch", seed)
        assert result.timelines == 1 and result.forks == 0
        assert [r.tl for r in _records(result.trace, "timeline_started")] == ["t0"]


def test_timeline_ids_follow_lineage_and_mass_splits(demo_card: Card, run: RunFn) -> None:
    result = run(demo_card, WIDE, 2)
    forks = _records(result.trace, "fork")
    assert len(forks) >= 3
    children: dict[str, list[str]] = {}
    for rec in forks:
        d = rec.data
        assert d.parent == rec.tl
        children.setdefault(d.parent, []).append(d.child)
        p = d.candidate.probability
        assert d.mass_child == d.mass_before * p
        assert d.mass_parent == d.mass_before * (1 - p)
    for parent, kids in children.items():
        assert kids == [f"{parent}.{n}" for n in range(1, len(kids) + 1)]
    assert any(kid.count(".") >= 2 for kids in children.values() for kid in kids)


def test_max_active_is_never_exceeded(demo_card: Card, run: RunFn) -> None:
    for cap in (2, 3, 5):
        policy = WIDE.model_copy(update={"max_active": cap, "max_depth": 5})
        for seed in range(3):
            assert run(demo_card, policy, seed).timelines <= cap


def test_same_seed_gives_the_same_canonical_hash(demo_card: Card, run: RunFn) -> None:
    a = run(demo_card, "branching", 11)
    b = run(demo_card, "branching", 11)
    assert a.run_id != b.run_id
    assert a.p_yes == b.p_yes
    assert canonical_hash(read_trace(a.trace)) == canonical_hash(read_trace(b.trace))
    c = run(demo_card, "branching", 12)
    assert canonical_hash(read_trace(c.trace)) != canonical_hash(read_trace(a.trace))


@register_role("sleepy_actor", phase="tick")
class SleepyActor:
    """An actor that answers after a scripted delay, so proposals arrive in a shuffled order."""

    name = "sleepy_actor"
    phase = "tick"
    delays = iter(())

    async def act(self, ctx: TickContext) -> Sequence[Proposal]:
        await anyio.sleep(next(self.delays, 0.0))
        actor = ctx.state.actors[ctx.agent]
        return [
            Proposal(
                agent=ctx.agent,
                endpoint="cleared",
                direction=actor.stance,
                magnitude=0.5,
                summary=f"{actor.name} speaks",
            )
        ]


def test_proposal_order_is_canonical_not_arrival(demo_card: Card, run: RunFn) -> None:
    data = demo_card.model_dump(mode="json")
    for actor in data["seeds"]["actors"]:
        actor["role"] = "sleepy_actor"
    card = Card.model_validate(data)
    hashes = []
    for delays in ([0.0, 0.003, 0.001, 0.002] * 200, [0.003, 0.0, 0.002, 0.001] * 200):
        SleepyActor.delays = iter(delays)
        result = run(card, "branching", 5)
        trace = read_trace(result.trace)
        proposed = trace.proposals()
        assert proposed
        for p in proposed:
            assert p.data.summary.endswith("speaks") or p.data.role == "cohort"
        hashes.append(canonical_hash(trace))
    assert hashes[0] == hashes[1]


def test_each_tick_reviews_proposals_sorted_by_agent(demo_card: Card, run: RunFn) -> None:
    trace = read_trace(run(demo_card, "no_branch", 3).trace)
    by_tick: dict[tuple[str, int], list[str]] = {}
    for p in trace.proposals():
        by_tick.setdefault((p.tl, p.tick), []).append(p.data.agent)
    assert by_tick
    for agents in by_tick.values():
        assert agents == sorted(agents)


def test_unseeded_card_gets_the_generic_world(tmp_path: Path, run: RunFn) -> None:
    card = Card.model_validate(
        {
            "id": "bare",
            "question": "Will the bill pass?",
            "as_of": "2027-01-01",
            "deadline": "2027-02-01",
            "endpoints": [
                {"id": "pass", "title": "Passes", "polarity": "yes"},
                {"id": "fail", "title": "Fails", "polarity": "no"},
            ],
        }
    )
    result = run(card, "branching", 0)
    init = read_trace(result.trace).first("world_initialized")
    assert init is not None
    actors = [a["id"] for a in init.record.data.state["actors"]]
    assert actors == ["decision_maker", "opponents", "proponents"]
    assert 0.0 <= (result.p_yes or 0.0) <= 1.0


@register_role("ghostly_reviewer", phase="review")
class GhostlyReviewer:
    """The offline reviewer, plus one branch candidate whose deltas name an unknown actor."""

    name = "ghostly_reviewer"
    phase = "review"

    async def review(self, ctx: ReviewContext) -> Review:
        from worldsim.offline.governance import OfflineGovernance
        from worldsim.roles.apply import review_from_output
        from worldsim.world.state import SetActor

        review = review_from_output(await OfflineGovernance().answer(ctx), ctx)
        if review.decision == "fork":
            ghost = BranchCandidate(
                hypothesis="a ghost acts",
                endpoint_id="cleared",
                probability=0.5,
                score=1.0,
                if_true=(SetActor(id="ghost", field="stance", value=1.0),),
            )
            review = review.model_copy(update={"branches": (ghost, *review.branches)})
        return review


def test_a_candidate_with_invalid_deltas_is_rejected_not_fatal(demo_card: Card, run: RunFn) -> None:
    result = run(demo_card, "branching", 6, roles={"governance": "ghostly_reviewer"})
    trace = read_trace(result.trace)
    rejected = [line.record.data for line in trace.of_type("fork_rejected")]
    ghosts = [r for r in rejected if r.candidate.hypothesis == "a ghost acts"]
    assert ghosts and all(
        r.reason.startswith("invalid deltas: unknown actor 'ghost'") and r.came_true is None
        for r in ghosts
    )
    assert trace.complete and result.forks > 0
    assert trace.started.role_overrides == {"governance": "ghostly_reviewer"}
