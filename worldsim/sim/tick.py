"""One tick of one timeline (DESIGN §4.3): the agents act, the reviewer decides, the state commits.

A tick reads its timeline's committed state and writes, in this order: ``tick_started``, the
gateway's ``retrievals``, ``proposals``, ``review`` and ``tick_committed``. Every active agent
acts against the same snapshot, each role's agents as one batch and the roles concurrently;
their proposals are put in canonical order (agent id, proposal index), never by arrival, before
the reviewer sees them. Children a tick forks are handed back to be started once it has
committed: a crash never leaves a child whose fork is not in the committed history.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import anyio
import numpy as np

from worldsim.domain.cards import Card, utc_iso
from worldsim.domain.config import RunConfig
from worldsim.domain.errors import ModelError, StateError
from worldsim.domain.rng import AgentSeeds, rng_for
from worldsim.gateway import Gateway
from worldsim.gateway.access import Calls
from worldsim.roles.acting import act_tick
from worldsim.roles.calling import call_role
from worldsim.roles.contracts import AgentRole, ReviewRole
from worldsim.sim.forks import ForkBook
from worldsim.trace.records import (
    Observation,
    ProposalsData,
    RetrievalsData,
    ReviewData,
    TickCommittedData,
    TickStartedData,
)
from worldsim.trace.tickbytes import review_payload
from worldsim.trace.writer import TraceWriter
from worldsim.world.columns import MoveColumns, TickProposals, TickReview, apply_evidence
from worldsim.world.moves import Proposal, Proposers, Review
from worldsim.world.state import (
    ScheduledEvent,
    WorldState,
    actor_columns,
    apply_review,
    deliver_events,
    state_digest,
)
from worldsim.world.timeline import Timeline, settlement_of
from worldsim.world.views import ReviewContext, TickBatch

__all__ = ["Stage", "commit", "run_tick", "trace_retrievals"]


@dataclass(slots=True)
class Stage:
    """What every tick of a run shares: its settings and dates, the roles, the trace, the fork
    book and the gateway (``None`` for a card without evidence, or until the run opens it)."""

    config: RunConfig
    card: Card
    ticks: int
    dates: Sequence[datetime]
    writer: TraceWriter
    reviewer: ReviewRole
    role_for: Callable[[str], AgentRole]
    fork_book: ForkBook
    notify: Callable[..., None]
    proposals_seen: Proposers
    gateway: Gateway | None = None


async def run_tick(stage: Stage, tl: Timeline, k: int) -> list[Timeline]:
    """Run tick ``k`` of ``tl`` to its commit; the children it forked, to start afterwards."""
    snapshot = deliver_events(tl.state, k)
    tick = _Tick(stage, tl, k, snapshot, snapshot.events_at(k), _active_agents(stage, tl, k))
    await tick.announce()
    proposals = await tick.act()
    await trace_retrievals(stage, tl)
    await tick.propose(proposals)
    return await tick.review(proposals)


def _active_agents(stage: Stage, tl: Timeline, k: int) -> list[tuple[str, str]]:
    """(agent id, role name) of the agents acting this tick: actors by activity, all cohorts.

    One uniform per actor in id order, whatever the state, so draws line up across runs;
    they are drawn as one array (the same numbers as one draw at a time).
    """
    rng = rng_for(stage.config.seed, "activity", tl.id, k)
    actors = actor_columns(tl.state.actors)
    acting = np.flatnonzero(rng.random(len(actors.ids)) < actors.activity).tolist()
    active = [(actors.ids[i], actors.roles[i]) for i in acting]
    cohorts = tl.state.cohorts
    active.extend(zip(cohorts.ids, cohorts.roles, strict=True))
    return sorted(active)


@dataclass(slots=True)
class _Tick:
    """Tick ``k`` of ``tl`` in the making: its snapshot, what it observes, who acts."""

    stage: Stage
    tl: Timeline
    k: int
    snapshot: WorldState
    observations: tuple[ScheduledEvent, ...]
    active: list[tuple[str, str]]

    async def announce(self) -> None:
        """``tick_started``: the tick's date, its scheduled events and its active agents."""
        await self.stage.writer.emit(
            "tick_started",
            TickStartedData(
                date=utc_iso(self.stage.dates[self.k]),
                observations=[
                    Observation(id=ev.id, title=ev.title, description=ev.description)
                    for ev in self.observations
                ],
                active=[agent for agent, _ in self.active],
            ),
            tl=self.tl.id,
            tick=self.k,
        )

    async def act(self) -> TickProposals:
        """Every active agent at once: each role's agents as one batch, the roles concurrently;
        their proposals in canonical order (agent id, then proposal index)."""
        stage, tl, k = self.stage, self.tl, self.k
        by_role: dict[str, list[str]] = {}
        for agent, role_name in self.active:
            by_role.setdefault(role_name, []).append(agent)
        roles = {name: stage.role_for(name) for name in by_role}
        results: dict[str, Sequence[Proposal]] = {}
        batches: list[MoveColumns] = []

        async def act(role_name: str, agents: Sequence[str]) -> None:
            batch = TickBatch(
                card=stage.card,
                timeline=tl.id,
                tick=k,
                ticks=stage.ticks,
                date=stage.dates[k],
                agents=tuple(agents),
                state=self.snapshot,
                observations=self.observations,
                rngs=AgentSeeds(stage.config.seed, "agent", tl.id, k, agents),
                gateway=stage.gateway,
            )
            acted = await act_tick(roles[role_name], batch)
            if isinstance(acted, MoveColumns):
                batches.append(acted)
            else:
                results.update(acted)

        async with anyio.create_task_group() as acting:
            for role_name, agents in by_role.items():
                acting.start_soon(act, role_name, agents)
        objects: list[Proposal] = []
        for agent in sorted(results):
            for i, p in enumerate(results[agent]):
                named = p.agent == agent and p.index == i
                objects.append(p if named else p.model_copy(update={"agent": agent, "index": i}))
        return TickProposals(MoveColumns.merged(batches) if batches else None, objects)

    async def propose(self, proposals: TickProposals) -> None:
        """``proposals``: each with its author's role and the citations it never retrieved."""
        stage, tl, k = self.stage, self.tl, self.k
        agents = proposals.column("agent")
        stage.proposals_seen.add_tick(tl.id, k, agents)
        cited = list(zip(agents, proposals.column("cites"), strict=True))
        unretrieved = (
            stage.gateway.unretrieved_each(cited, timeline=tl.id)
            if stage.gateway is not None
            else [list(dict.fromkeys(ids)) for _, ids in cited]
        )
        if proposals:
            roles_of = dict(self.active)
            by = [roles_of[agent] for agent in agents]
            made = ProposalsData.payload_of(proposals, by, unretrieved)
            await stage.writer.emit("proposals", made.data, tl=tl.id, tick=k, floats=made.floats)

    async def review(self, proposals: TickProposals) -> list[Timeline]:
        """The reviewer's verdict, written, checked and applied; the timeline's fate decided and
        the tick committed. A reviewer that fails, or a verdict that does not apply, ends the
        timeline at this tick's snapshot."""
        stage, tl, k = self.stage, self.tl, self.k
        try:
            verdict: Review | TickReview = await call_role(
                stage.reviewer,
                "review",
                ReviewContext(
                    card=stage.card,
                    timeline=tl.id,
                    tick=k,
                    ticks=stage.ticks,
                    date=stage.dates[k],
                    state=self.snapshot,
                    observations=self.observations,
                    proposals=proposals,
                    rng=rng_for(stage.config.seed, "review", tl.id, k),
                    mass=tl.mass,
                    depth=tl.depth,
                ),
                (Review, TickReview),
                "a Review",
            )
        except ModelError as exc:
            if exc.ends_run:
                raise  # a strict replay's miss, a route that gave no reply: the run ends
            return await self._terminate(f"reviewer failed: {exc.message}"[:500])
        if isinstance(verdict, TickReview):
            data, floats = review_payload(verdict)
            review = verdict.review
        else:
            made = ReviewData.payload(verdict)
            data, floats, review = made.data, made.floats, verdict
        await stage.writer.emit("review", data, tl=tl.id, tick=k, floats=floats)
        try:
            _check_refs(review, proposals)
            state = apply_review(self.snapshot, review.deltas, review.ledger, k)
            if isinstance(verdict, TickReview):
                state = apply_evidence(state, verdict.evidence, k)
        except StateError as exc:
            return await self._terminate(f"invalid review: {exc.message}")
        return await self._decide(review, state)

    async def _decide(self, review: Review, state: WorldState) -> list[Timeline]:
        """Forks, settlement or termination as the review says; then the commit."""
        tl, k = self.tl, self.k
        resolved = review.forced_p_yes is not None or review.forced_probs is not None
        if resolved:
            tl.forced_p_yes = review.forced_p_yes
            tl.forced_probs = review.forced_probs
        children: list[Timeline] = []
        if not (state.all_scored_settled() or review.decision == "terminate") and review.branches:
            state = await self.stage.fork_book.branch(tl, k, state, review.branches, children)
        # a timeline the reviewer ends with its outcome distribution has settled at that value
        # (the offline model's question resolving before the deadline); without one it is
        # terminated, unresolved
        if state.all_scored_settled() or (review.decision == "terminate" and resolved):
            tl.status = "settled"
            tl.settlement = settlement_of(state, "settled", tl.forced_p_yes, tl.forced_probs)
            tl.end_tick = k
            tl.reason = review.reason
        elif review.decision == "terminate":
            tl.status = "terminated"
            tl.settlement = state.outcome() or "unresolved"
            tl.end_tick = k
            tl.reason = review.reason or "terminated by the reviewer"
        await commit(self.stage, tl, k, state)
        return children

    async def _terminate(self, reason: str) -> list[Timeline]:
        """End the timeline at this tick's snapshot, for ``reason``."""
        tl = self.tl
        tl.status = "terminated"
        tl.settlement = self.snapshot.outcome() or "unresolved"
        tl.reason = reason
        tl.end_tick = self.k
        await commit(self.stage, tl, self.k, self.snapshot)
        return []


def _check_refs(review: Review, proposals: TickProposals) -> None:
    refs = [(r.agent, r.index) for r in review.accepted]
    refs += [(r.agent, r.index) for r in review.rejected]
    for agent, index in refs:
        if proposals.position(agent, index) is None:
            raise StateError(f"review refers to unknown proposal {agent}#{index}")


async def trace_retrievals(stage: Stage, tl: Timeline) -> None:
    """Write the gateway accesses made in ``tl`` since the last call (the tool logs, not
    the agent): one ``retrievals`` record per tick they were made at (the tick's own)."""
    if stage.gateway is None:
        return
    groups: dict[int | None, list[Calls]] = {}
    for calls in stage.gateway.take(tl.id):
        groups.setdefault(calls.tick, []).append(calls)
    for tick, accesses in groups.items():
        made = RetrievalsData.payload(accesses)
        await stage.writer.emit("retrievals", made.data, tl=tl.id, tick=tick, floats=made.floats)


async def commit(stage: Stage, tl: Timeline, k: int, state: WorldState) -> None:
    """Make ``state`` the timeline's and write ``tick_committed``."""
    tl.state = state
    await stage.writer.emit(
        "tick_committed",
        TickCommittedData(
            digest=state_digest(state),
            mass=tl.mass,
            status=tl.status,
            **state.tick_summary(),
            reason=tl.reason,
            forced_p_yes=tl.forced_p_yes,
            forced_probs=tl.forced_probs,
        ),
        tl=tl.id,
        tick=k,
        durable=True,
    )
    stage.notify("tick_committed", timeline=tl.id, tick=k, ticks=stage.ticks)
