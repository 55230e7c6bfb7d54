"""A tick's agents decided together are the agents decided one at a time.

The gateway's batched calls give the answers and the access log of the calls made one by one;
the offline actor decided for a whole tick gives each actor the move it makes alone, with the
same accesses; the prompt actor on the offline route hands the engine the moves its per-agent
``act`` gives; and a plugged-in role with ``act_batch`` is handed each tick's agents at once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import RunFn
from tests.gateway.test_store_and_tools import CUTOFF, DOCS
from tests.support import ROOT
from worldsim.domain.cards import Card, load_card
from worldsim.domain.contracts import CallSite, ModelRequest
from worldsim.domain.errors import GatewayRefusal, ModelError, RoleError
from worldsim.domain.jsonbytes import compact_bytes
from worldsim.domain.outputs import ActorOutput
from worldsim.domain.policy import load_policy
from worldsim.domain.rng import AgentSeeds
from worldsim.gateway import Gateway, gateway_for_card, memory_store
from worldsim.gateway.access import ReadBatch, SearchBatch
from worldsim.offline import OfflineModel
from worldsim.offline.agents import offline_moves
from worldsim.roles.acting import BatchRole, act_tick, agent_context
from worldsim.roles.registry import get_role, register_role
from worldsim.trace.reader import read_trace
from worldsim.trace.records import RetrievalsData
from worldsim.world.build import build_world, tick_dates
from worldsim.world.columns import MoveColumns
from worldsim.world.moves import Proposal
from worldsim.world.views import RoleView, TickBatch, TickContext

WORDS = ["merger", "regulator", "rain", "remedies", "approved", "Company", "zzz", "A"]
queries = st.lists(
    st.tuples(
        st.sampled_from(["x", "y", "z"]),
        st.lists(st.sampled_from(WORDS), min_size=0, max_size=4).map(" ".join),
    ),
    max_size=6,
)
opens = st.lists(
    st.tuples(st.sampled_from(["x", "y"]), st.sampled_from(["a", "b", "c", "late", "nope"])),
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(asked=queries, read=opens, k=st.integers(0, 4))
def test_batched_gateway_calls_answer_and_log_as_calls_one_by_one(
    asked: list[tuple[str, str]], read: list[tuple[str, str]], k: int
) -> None:
    async def go() -> None:
        async with memory_store(DOCS) as one_store, memory_store(DOCS) as batch_store:
            one, batch = Gateway(one_store, cutoff=CUTOFF), Gateway(batch_store, cutoff=CUTOFF)
            singly = [await one.search(q, k, agent=a, timeline="t0.1", tick=2) for a, q in asked]
            docs: list[Any] = []
            for agent, doc_id in read:
                try:
                    docs.append(
                        await one.open_document(doc_id, agent=agent, timeline="t0.1", tick=2)
                    )
                except GatewayRefusal:  # a refusal is None in the batched answer
                    docs.append(None)
            assert await batch.search_each(asked, k, timeline="t0.1", tick=2) == singly
            assert await batch.open_each(read, timeline="t0.1", tick=2) == docs
            assert batch.access_log == one.access_log
            assert batch.documents == one.documents
            for agent in ("x", "y", "z"):
                cited = ["a", "b", "c", "late"]
                assert batch.unretrieved_citations(cited, agent, timeline="t0.1") == (
                    one.unretrieved_citations(cited, agent, timeline="t0.1")
                )

    anyio.run(go)


def _rows(
    asked: list[tuple[str, str]], read: list[tuple[str, str]]
) -> tuple[list[str], dict[str, str], dict[str, tuple[str, ...]]]:
    """A batch's rows: its agents in id order, each one's query and the documents it reads."""
    queries = dict(asked)
    reads: dict[str, tuple[str, ...]] = {}
    for agent, doc_id in read:
        if agent in queries:
            reads[agent] = (*reads.get(agent, ()), doc_id)
    return sorted(queries), queries, reads


@settings(max_examples=80, deadline=None)
@given(asked=queries, read=opens, k=st.integers(1, 4))
def test_a_batch_of_searches_and_reads_is_the_calls_one_by_one_logged_as_one_entry(
    asked: list[tuple[str, str]], read: list[tuple[str, str]], k: int
) -> None:
    """One agent per row, its search then its reads (a tick's columnar batch): the same
    answers, accesses, retrievals record, documents and citation checks as the calls made one
    by one, held as one entry per batch call."""
    agents, queries, reads = _rows(asked, read)

    async def go() -> None:
        async with memory_store(DOCS) as one_store, memory_store(DOCS) as batch_store:
            one, batch = Gateway(one_store, cutoff=CUTOFF), Gateway(batch_store, cutoff=CUTOFF)
            where = {"timeline": "t0.1", "tick": 2}
            found = await batch.search_batch(agents, [queries[a] for a in agents], k, **where)
            opened = await batch.read_batch(agents, [reads.get(a, ()) for a in agents], **where)
            for agent, ids in zip(agents, found, strict=True):
                hits = await one.search(queries[agent], k, agent=agent, **where)
                assert ids == tuple(h.id for h in hits)
                for doc_id in reads.get(agent, ()):
                    try:
                        doc = await one.open_document(doc_id, agent=agent, **where)
                    except GatewayRefusal:
                        doc = None
                    assert opened[doc_id] == doc
            assert _by_agent(batch) == _by_agent(one)
            assert batch.documents == one.documents
            for agent in ("x", "y", "z"):
                cited = ["a", "b", "c", "late"]
                assert batch.unretrieved_citations(cited, agent, timeline="t0.1") == (
                    one.unretrieved_citations(cited, agent, timeline="t0.1")
                )
                assert batch.unretrieved_each([(agent, cited)], timeline="t0.1.3") == (
                    one.unretrieved_each([(agent, cited)], timeline="t0.1.3")
                )
            # a tick's citations checked together: some of each agent's hits (every one
            # covered by the search batch), then some documents besides
            for extra in ((), ("a",), ("late", "b")):
                pairs = zip(agents, found, strict=True)
                ticks = [(a, (*ids[: k // 2], *extra)) for a, ids in pairs]
                singly = [one.unretrieved_citations(c, a, timeline="t0.1") for a, c in ticks]
                assert batch.unretrieved_each(ticks, timeline="t0.1") == singly
            held = batch.take("t0.1")
            assert len(held) == (2 if agents else 0)  # one entry per batch call
            if agents:  # the tick's retrievals record: the same bytes
                made = compact_bytes(RetrievalsData.payload(held).data)
                assert made == compact_bytes(RetrievalsData.payload(one.take("t0.1")).data)
            assert _by_agent(batch) == []  # taken: the log lets them go

    anyio.run(go)


@settings(max_examples=80, deadline=None)
@given(
    agents=st.lists(st.sampled_from([f"a{i}" for i in range(9)]), unique=True, max_size=9),
    each=st.integers(0, 3),
    k=st.integers(1, 5),
    seed=st.integers(0, 2**16),
    refuse=st.booleans(),
)
def test_a_ticks_retrievals_record_from_its_batches_is_its_accesses_sorted_by_agent(
    agents: list[str], each: int, k: int, seed: int, refuse: bool
) -> None:
    """Every agent reading as many documents (or not), some refused (or none), hits or none,
    queries with quotes, escapes and non-ASCII: the record's bytes are the accesses' JSON."""
    rng = np.random.default_rng(seed)
    agents.sort()
    docs = ["d1", "d2", "é3"]
    hits = [tuple(map(str, rng.choice(docs, int(rng.integers(0, 3))))) for _ in agents]
    reads = [tuple(map(str, rng.choice(docs, each))) for _ in agents]
    queries = [f'{a} «q» "{i}" \\ \n' for i, a in enumerate(agents)]
    refused: dict[str, Any] = {"é3": "after_cutoff"} if refuse else {}
    search = SearchBatch("t0", 1, CUTOFF, tuple(agents), queries, k, hits)
    read = ReadBatch("t0", 1, CUTOFF, tuple(agents), reads, refused)
    payload = RetrievalsData.payload([search, read])
    made = payload.data
    accesses = sorted([*search.accesses, *read.accesses], key=lambda a: a["agent"])
    standard = {"cutoff": made["cutoff"], "accesses": accesses}
    assert (
        compact_bytes(made)
        == json.dumps(standard, separators=(",", ":"), ensure_ascii=False).encode()
    )


def _demo() -> Card:
    return load_card(ROOT / "scenarios" / "merger-review.yaml")


def _batch(card: Card, tick: int, seed: int, gateway: Gateway | None) -> TickBatch:
    state, _ = build_world(card, 6)
    agents = tuple(sorted(state.actors.keys()))
    return TickBatch(
        card=card,
        timeline="t0.2",
        tick=tick,
        ticks=6,
        date=tick_dates(card, 6)[tick],
        agents=agents,
        state=state,
        observations=state.events_at(tick),
        rngs=AgentSeeds(seed, "agent", "t0.2", tick, agents),
        gateway=gateway,
    )


async def _alone(ctx: TickContext) -> Proposal:
    """The actor's move asked of the offline model for one agent (a Python role's way)."""
    request = ModelRequest(
        messages=(),
        output_type=ActorOutput,
        site=CallSite(role="actor", agent=ctx.agent, timeline=ctx.timeline, tick=ctx.tick),
        prompt_version="test/1",
        view=RoleView(context=ctx),
    )
    output = (await OfflineModel().request(request)).output
    assert isinstance(output, ActorOutput)
    (m,) = output.proposals
    return Proposal(
        agent=ctx.agent,
        kind=m.kind,
        endpoint=m.endpoint,
        direction=m.direction,
        magnitude=m.magnitude,
        summary=m.summary,
        cites=tuple(m.cites),
    )


def _by_agent(gateway: Gateway) -> list[Any]:
    return sorted(gateway.access_log, key=lambda r: r.agent)  # stable: each agent's call order


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**32), tick=st.integers(0, 5))
def test_the_offline_actors_of_a_tick_move_as_each_would_alone(seed: int, tick: int) -> None:
    card = _demo()

    async def go() -> None:
        async with gateway_for_card(card) as together, gateway_for_card(card) as alone:
            batch = _batch(card, tick, seed, together)
            moves = (await offline_moves(batch)).objects()
            one = _batch(card, tick, seed, alone)
            each = [await _alone(agent_context(one, i)) for i in range(len(one.agents))]
            assert moves == each
            assert any(m.cites for m in moves)  # the demo card's actors read evidence
            assert _by_agent(together) == _by_agent(alone)

    anyio.run(go)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**32), tick=st.integers(0, 5))
def test_the_offline_prompt_actor_gives_a_batch_what_it_gives_each_agent(
    seed: int, tick: int
) -> None:
    card = _demo()
    role = get_role("actor", "tick").build(OfflineModel(), seed=seed)
    assert isinstance(role, BatchRole)

    async def go() -> None:
        async with gateway_for_card(card) as together, gateway_for_card(card) as alone:
            moves = await act_tick(role, _batch(card, tick, seed, together))
            assert isinstance(moves, MoveColumns)  # decided together, as columns
            one = _batch(card, tick, seed, alone)
            each = [await role.act(agent_context(one, i)) for i in range(len(one.agents))]
            assert [[p] for p in moves.objects()] == each
            assert _by_agent(together) == _by_agent(alone)

    anyio.run(go)


HANDED: list[tuple[str, int, tuple[str, ...]]] = []


class _BatchOnly:
    phase = "tick"

    async def act(self, ctx: TickContext) -> Sequence[Proposal]:
        raise AssertionError("a role with act_batch is handed its agents together")


def _with_actors(card: Card, role: str, ids: Sequence[str]) -> Card:
    """``card`` with actors ``ids`` of ``role`` added, each acting every tick."""
    data = card.model_dump(mode="json")
    data["seeds"]["actors"] += [
        {"id": i, "name": i, "role": role, "stance": 0.0, "influence": 0.5, "activity": 1.0}
        for i in ids
    ]
    return Card.model_validate(data)


@register_role("herd", phase="tick")
class Herd(_BatchOnly):
    """Moves all its agents of a tick together, toward yes."""

    name = "herd"

    async def act_batch(self, batch: TickBatch) -> Mapping[str, Sequence[Proposal]]:
        HANDED.append((batch.timeline, batch.tick, batch.agents))
        return {
            agent: [
                Proposal(
                    agent=agent,
                    endpoint="cleared",
                    direction=float(batch.rngs[i].uniform(0.0, 1.0)),
                    magnitude=0.5,
                    summary="follows the herd",
                )
            ]
            for i, agent in enumerate(batch.agents)
        }


def test_a_plugged_in_batch_role_is_handed_each_ticks_agents_at_once(
    demo_card: Card, run: RunFn
) -> None:
    herd = [f"h{i}" for i in range(5)]
    card = _with_actors(demo_card, "herd", herd)
    HANDED.clear()
    result = run(card, load_policy("no_branch"), 4)
    trace = read_trace(result.trace)
    ticks = [(line.tl, line.tick) for line in trace.of_type("tick_started")]
    assert [(tl, tick) for tl, tick, _ in HANDED] == ticks  # once a tick
    assert all(agents == tuple(herd) for _, _, agents in HANDED)
    mine = [p.data for p in trace.proposals() if p.data.agent in herd]
    assert len(mine) == len(herd) * len(ticks)
    assert all(p.role == "herd" and p.summary == "follows the herd" for p in mine)
    # each agent's generator is its own: the same directions in a second run
    first = [p.direction for p in mine]
    again = read_trace(run(card, load_policy("no_branch"), 4).trace)
    assert [p.data.direction for p in again.proposals() if p.data.agent in herd] == first
    assert len(set(first)) == len(first)


class Stray:
    """Answers for an agent it was not handed."""

    name = "stray"
    phase = "tick"

    async def act(self, ctx: TickContext) -> Sequence[Proposal]:
        return []

    async def act_batch(self, batch: TickBatch) -> Mapping[str, Sequence[Proposal]]:
        return {"nobody": [Proposal(agent="nobody", summary="not here")]}


def test_a_batch_role_answering_for_an_agent_it_was_not_handed_is_a_role_error() -> None:
    batch = _batch(_demo(), 0, 1, None)
    with pytest.raises(RoleError, match=r"role 'stray': act_batch answered for .*\(nobody\)"):
        anyio.run(act_tick, Stray(), batch)


@register_role("unlucky_herd", phase="tick")
class UnluckyHerd(_BatchOnly):
    """A batch role whose model call fails on odd ticks."""

    name = "unlucky_herd"

    async def act_batch(self, batch: TickBatch) -> Mapping[str, Sequence[Proposal]]:
        if batch.tick % 2:
            raise ModelError("stub/route: the server said no")
        return {a: [Proposal(agent=a, endpoint="cleared", summary="herds")] for a in batch.agents}


def test_a_batch_whose_model_call_fails_sits_the_tick_out(demo_card: Card, run: RunFn) -> None:
    herd = ["u1", "u2"]
    result = run(_with_actors(demo_card, "unlucky_herd", herd), load_policy("no_branch"), 2)
    trace = read_trace(result.trace)
    assert trace.complete
    ticks = {line.tick for line in trace.of_type("tick_committed")}
    herding = {p.tick for p in trace.proposals() if p.data.agent in herd}
    assert herding == {t for t in ticks if t is not None and t % 2 == 0}
    others = {p.tick for p in trace.proposals() if p.data.agent not in herd}
    assert others == ticks  # the rest of the world acted every tick
