"""A tick decided from columns is the tick decided one object at a time.

The offline model answers a tick's actors and its review as columns through the batched request
of the ``Model`` seam; the same model seen without that request (every agent asked alone, the
review as a ``GovernanceOutput``) gives the same records and the same canonical hash, with or
without agents driven by another model in the same run. The column types keep the canonical
order and the JSON of their object forms.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import ROOT
from worldsim.domain.cards import Card, load_card
from worldsim.domain.config import RunConfig
from worldsim.domain.contracts import (
    BatchModel,
    CallSite,
    ChatMessage,
    Model,
    ModelRequest,
    ModelResponse,
)
from worldsim.domain.jsonbytes import compact_bytes
from worldsim.domain.outputs import ActorOutput
from worldsim.domain.policy import load_policy
from worldsim.offline import OfflineModel
from worldsim.roles.registry import register_role
from worldsim.sim.session import run_card
from worldsim.sim.settlement import RunResult
from worldsim.testing import ScriptedModel
from worldsim.trace.reader import read_trace
from worldsim.trace.records import ProposalsData, ReviewData
from worldsim.trace.tickbytes import Kept, KeptProposals, review_payload
from worldsim.trace.verify import canonical_hash, verify_trace
from worldsim.world.columns import EvidenceColumns, MoveColumns, TickProposals, TickReview
from worldsim.world.deltas import LedgerUpdate
from worldsim.world.evidence import Evidence, EvidenceTrail
from worldsim.world.moves import Proposal, RejectedProposal, Review
from worldsim.world.views import TickContext


class ObjectsOnly:
    """The offline model without its batched request: every agent asked alone."""

    def __init__(self) -> None:
        self.inner = OfflineModel()

    @property
    def route(self) -> str:
        return self.inner.route

    async def request(self, request: ModelRequest) -> ModelResponse:
        return await self.inner.request(request)


class Source:
    """Every role on ``offline``; the ``analyst`` role on a scripted model."""

    def __init__(self, offline: Model) -> None:
        self.offline = offline
        self.scripted = ScriptedModel(_analyst_reply)

    def for_role(self, role: str) -> Model:
        return self.scripted if role == "analyst" else self.offline


def _analyst_reply(request: ModelRequest) -> dict[str, Any]:
    assert request.output_type is ActorOutput
    move = {"kind": "action", "endpoint": "cleared", "direction": 0.4, "magnitude": 0.7}
    return {"proposals": [{**move, "summary": "reads the filings", "cites": []}]}


@register_role("analyst", phase="tick")
class Analyst:
    """An agent whose move comes from its model, asked one agent at a time."""

    name = "analyst"
    phase = "tick"

    def __init__(self, model: Model) -> None:
        self.model = model

    async def act(self, ctx: TickContext) -> Sequence[Proposal]:
        request = ModelRequest(
            messages=(ChatMessage("user", f"{ctx.agent} at tick {ctx.tick}"),),
            output_type=ActorOutput,
            site=CallSite("analyst", ctx.agent, ctx.timeline, ctx.tick),
            prompt_version="test/1",
        )
        out = (await self.model.request(request)).output
        assert isinstance(out, ActorOutput)
        (m,) = out.proposals
        return [
            Proposal(
                agent=ctx.agent,
                endpoint=m.endpoint,
                direction=m.direction,
                magnitude=m.magnitude,
                summary=m.summary,
            )
        ]


def _card(actors: int, analysts: int = 0) -> Card:
    data = load_card(ROOT / "scenarios" / "merger-review.yaml").model_dump(mode="json")
    seeds = data["seeds"]
    seeds["actors"] = [
        {
            "id": f"a{i:03d}",
            "name": f"Actor {i}",
            "stance": round(((i * 37) % 201) / 100.0 - 1.0, 2),
            "influence": 0.5,
            "activity": 0.8,
        }
        for i in range(actors)
    ] + [
        {"id": f"a{i:03d}x", "name": f"Analyst {i}", "role": "analyst", "activity": 1.0}
        for i in range(analysts)
    ]
    cohorts = [c["id"] for c in seeds["cohorts"]]
    seeds["relations"] = [
        {"source": f"a{i:03d}", "target": cohorts[i % len(cohorts)], "weight": 0.5}
        for i in range(min(actors, 6))
    ]
    return Card.model_validate(data)


def _run(card: Card, model: Model, out: Path, policy: str) -> RunResult:
    config = RunConfig(card=card, policy=load_policy(policy), seed=4, ticks=5)
    source = Source(model)
    return anyio.run(
        lambda: run_card(config, out, fsync=False, overwrite=True, model_source=source)
    )


@pytest.mark.parametrize(("policy", "analysts"), [("no_branch", 0), ("branching", 3)])
def test_the_columnar_tick_and_the_object_path_write_the_same_run(
    tmp_path: Path, policy: str, analysts: int
) -> None:
    assert isinstance(OfflineModel(), BatchModel) and not isinstance(ObjectsOnly(), BatchModel)
    card = _card(40, analysts)
    columns = _run(card, OfflineModel(), tmp_path / "columns", policy).trace
    objects = _run(card, ObjectsOnly(), tmp_path / "objects", policy).trace
    assert verify_trace(columns).exit_code == 0
    a, b = read_trace(columns), read_trace(objects)
    assert canonical_hash(a) == canonical_hash(b)
    assert [p.data for p in a.proposals()] == [p.data for p in b.proposals()]
    assert [r.fields for r in a.of_type("review")] == [r.fields for r in b.of_type("review")]
    assert [r.fields for r in a.of_type("retrievals")] == [
        r.fields for r in b.of_type("retrievals")
    ]
    if analysts:  # the scripted agents acted beside the columns, in canonical order
        mine = [p.data for p in a.proposals() if p.data.role == "analyst"]
        assert mine and all(p.summary == "reads the filings" for p in mine)
        agents = [p.data.agent for p in a.proposals() if p.tl == "t0" and p.tick == 0]
        assert agents == sorted(agents)


_agents = st.lists(st.sampled_from([f"a{i}" for i in range(12)]), unique=True, max_size=12)


def _columns(agents: Sequence[str], rng: np.random.Generator) -> MoveColumns:
    n = len(agents)
    # some directions and magnitudes msgspec spells otherwise (below 10⁻⁴), some zero
    odd = rng.choice([0.0, 1e-5, -3.5e-7, 0.5], size=(2, n))
    return MoveColumns(
        agents=tuple(agents),
        endpoints=[str(rng.choice(["cleared", "blocked", "x"])) for _ in range(n)],
        direction=np.where(rng.random(n) < 0.3, odd[0], rng.uniform(-1, 1, n)),
        magnitude=np.where(rng.random(n) < 0.3, np.abs(odd[1]), rng.uniform(0, 1, n)),
        summaries=[f'{a} moves «{i}» "q" \\ \n\t' for i, a in enumerate(agents)],
        cites=[
            tuple(str(d) for d in rng.choice(["d1", "d2", "d3"], size=int(rng.integers(0, 3))))
            for _ in agents
        ],
    )


@settings(max_examples=60, deadline=None)
@given(agents=_agents, split=st.integers(0, 12), seed=st.integers(0, 2**16))
def test_tick_proposals_keep_the_canonical_order_of_their_objects(
    agents: list[str], split: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    ordered = sorted(agents)
    by_columns = sorted(ordered[:split])
    by_objects = sorted(ordered[split:])
    cols = _columns(by_columns, rng)
    objects = [
        Proposal(agent=a, index=i, endpoint="cleared", summary=f"{a} #{i}")
        for a in by_objects
        for i in range(int(rng.integers(1, 3)))
    ]
    tick = TickProposals(cols, objects)
    everything = sorted([*cols.objects(), *objects], key=lambda p: (p.agent, p.index))
    assert list(tick) == everything
    for name in ("agent", "index", "endpoint", "direction", "magnitude", "summary", "cites"):
        assert tick.column(name) == [getattr(p, name) for p in everything]
    for pos, p in enumerate(everything):
        assert tick.position(p.agent, p.index) == pos
    roles = ["actor"] * len(tick)
    unretrieved = [[str(d) for d in rng.choice(["d1", "d9"], int(rng.integers(3)))] for _ in tick]
    made = ProposalsData.payload_of(tick, roles, unretrieved)
    expected = ProposalsData.payload(everything, roles, unretrieved)
    # the same record, its floats that msgspec spells otherwise given in the standard spelling
    standard = json.dumps(expected.data, separators=(",", ":"), ensure_ascii=False).encode()
    assert compact_bytes(made.data, made.floats) == standard
    assert compact_bytes(expected.data, expected.floats) == standard
    # the forecast graph keeps the columns the record was written from: what it would read
    assert isinstance(made.data, Kept) == (tick.columns is not None)
    data = made.data
    kept = data.kept if isinstance(data, Kept) else KeptProposals.of(data["proposals"])
    agents, indexes, summaries, cites = KeptProposals.of(expected.data["proposals"]).columns
    assert kept.columns[:3] == (agents, indexes, summaries)
    assert [list(c) for c in kept.columns[3]] == [list(c) for c in cites]


@settings(max_examples=60, deadline=None)
@given(agents=_agents, seed=st.integers(0, 2**16), tick=st.integers(0, 9))
def test_a_tick_review_writes_and_applies_as_its_review_of_objects(
    agents: list[str], seed: int, tick: int
) -> None:
    rng = np.random.default_rng(seed)
    proposals = TickProposals(_columns(sorted(agents), rng), [])
    accepted = [i for i in range(len(proposals)) if rng.random() < 0.7]
    rejected = tuple(
        RejectedProposal(agent=p.agent, index=p.index, reason="no")
        for i, p in enumerate(proposals)
        if i not in accepted
    )
    kinds = ["supports", "contradicts"]
    evidence = EvidenceColumns(
        endpoints=[str(rng.choice(["cleared", "blocked"])) for _ in accepted],
        kinds=[kinds[int(rng.integers(2))] for _ in accepted],
        refs=[f"t0/{tick}/{proposals[i].agent}/0" for i in accepted],
        notes=[proposals[i].summary for i in accepted],
    )
    moves = (LedgerUpdate(endpoint="cleared", status="realized"),) if rng.random() < 0.5 else ()
    review = Review(
        rejected=rejected, ledger=moves, decision="continue", reason="r", forced_p_yes=0.25
    )
    columnar = TickReview(review, accepted, proposals, evidence)
    data, floats = review_payload(columnar)
    made = ReviewData.payload(columnar.as_review())
    # the record written from the columns is, byte for byte, the review of objects dumped
    standard = json.dumps(made.data, separators=(",", ":"), ensure_ascii=False).encode()
    assert compact_bytes(data, floats) == standard
    assert Counter(floats) == Counter(made.floats)
    assert isinstance(data, Kept)
    kept = data.kept["accepted"]
    refs = [(r["agent"], r["index"]) for r in made.data["accepted"]]
    assert list(zip(kept.agents, kept.indexes, strict=True)) == refs
    # the ledger's evidence kept as columns is the evidence kept as objects
    trail = EvidenceTrail([Evidence("supports", "t0/0/x/0", 0, "before")])
    by_columns = trail.added_columns(evidence.kinds, evidence.refs, evidence.notes, tick)
    by_objects = trail.added(
        Evidence(k, r, tick, n)  # type: ignore[arg-type]
        for k, r, n in zip(evidence.kinds, evidence.refs, evidence.notes, strict=True)
    )
    assert by_columns == by_objects and len(by_columns) == len(by_objects)
    assert b"".join(by_columns.canonical_pieces()) == b"".join(by_objects.canonical_pieces())
