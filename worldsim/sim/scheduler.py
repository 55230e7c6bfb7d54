"""The event-driven tick scheduler (DESIGN §4.3): timelines as tasks, agents concurrent per tick.

Data flows one way: card → world → timelines → trace → extraction. Each timeline is its own
task in one task group; a fork starts its child at once, and no timeline waits for another.
Within a tick every active agent runs concurrently against the same immutable snapshot; their
proposals are sorted canonically (agent id, proposal index), never by arrival, before review.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import numpy as np
from anyio.abc import TaskGroup

from worldsim.domain.cards import public_card_hash
from worldsim.domain.config import RunConfig
from worldsim.domain.contracts import EXPECTED
from worldsim.domain.errors import ModelError, StateError
from worldsim.domain.rng import AgentSeeds, rng_for
from worldsim.domain.version import __version__, git_revision
from worldsim.gateway import (
    Gateway,
    RetrievalRecord,
    gateway_for_card,
)
from worldsim.gateway.access import Calls
from worldsim.models import LeakageGuard, LlmCallData
from worldsim.roles.acting import act_tick
from worldsim.roles.contracts import AgentRole, InitRole, ReportRole, ReviewRole
from worldsim.roles.registry import RoleSpec, get_role, registered_roles
from worldsim.sim.forks import ForkBook
from worldsim.sim.plan import ModelSource, build_roles, route_table
from worldsim.sim.settlement import Outcome, RunResult, settle
from worldsim.trace.audit import check_world
from worldsim.trace.forecast import ForecastRecords, RecordView
from worldsim.trace.records import (
    InterventionData,
    Observation,
    ProposalsData,
    RetrievalsData,
    ReviewData,
    RunStartedData,
    TickCommittedData,
    TickStartedData,
    TimelineEndedData,
    TimelineStartedData,
    WorldInitializedData,
)
from worldsim.trace.writer import TraceWriter
from worldsim.world.build import WorldSource, tick_dates
from worldsim.world.columns import MoveColumns, TickProposals, TickReview, apply_evidence
from worldsim.world.interventions import apply_interventions
from worldsim.world.moves import Proposal, Review
from worldsim.world.state import (
    Actor,
    WorldState,
    actor_columns,
    apply_review,
    deliver_events,
    state_digest,
)
from worldsim.world.timeline import Timeline, settlement_of
from worldsim.world.views import InitContext, ReviewContext, TickBatch

__all__ = ["Engine", "Observer", "RestorePoint", "Start"]

_AT_VALUES = ("unresolved", EXPECTED)
"""Settlements whose value is the timeline's forced values (recorded in ``timeline_ended``)."""

Observer = Callable[[str, Mapping[str, Any]], None]
Start = tuple[Timeline, int, bool]
"""A timeline to run, its first tick, and whether to announce it with ``timeline_started``."""


@dataclass(frozen=True, slots=True)
class RestorePoint:
    """What a cut-off run's trace holds, rebuilt: the timelines that ended, the ones still to
    run, and the bookkeeping the report and the audit need."""

    ended: dict[str, Timeline]
    starts: list[Start]
    forks: list[dict[str, Any]] = field(default_factory=list)
    forks_rejected: int = 0
    proposals_seen: set[tuple[str, int, str]] = field(default_factory=set)
    init_problems: list[str] = field(default_factory=list)
    world_source: WorldSource = "seeds"
    retrievals: list[RetrievalRecord] = field(default_factory=list)
    forecast: list[RecordView] = field(default_factory=list)
    """What the forecast graph is made from among the kept records (a run that builds one)."""


def _call_tracer(writer: TraceWriter) -> Callable[[LlmCallData], Awaitable[None]]:
    """What the tracing wrapper calls with each model call: write its ``llm_call`` record."""

    async def trace(call: LlmCallData) -> None:
        await writer.emit("llm_call", call, tl=call.timeline, tick=call.tick)

    return trace


def _notifier(observer: Observer | None) -> Callable[..., None]:
    """``notify(event, **payload)``: tell the observer, if there is one."""

    def notify(event: str, **payload: Any) -> None:
        if observer is not None:
            observer(event, payload)

    return notify


class Engine:
    """Runs one multiverse for one card and streams it into one trace.

    :meth:`run` starts from the card; :meth:`resume` continues from a :class:`RestorePoint`
    rebuilt from a cut-off trace. Either way the run ends in :func:`settle`.
    """

    def __init__(
        self,
        config: RunConfig,
        writer: TraceWriter,
        plan: Mapping[str, RoleSpec],
        source: ModelSource,
        observer: Observer | None = None,
        guard: LeakageGuard | None = None,
    ) -> None:
        self.config = config
        self.guard = guard
        self.source = source
        # the roles' tracing and the fork book's notices hold the writer and the observer,
        # not the engine: no cycle keeps a finished run's world alive for the collector to walk
        self._trace_call = _call_tracer(writer)
        self._notify = _notifier(observer)
        self.roles = build_roles(config, plan, source, self._trace_call)
        self.card = config.world_card  # as_of at the forecast date, if one is set
        self.policy = config.policy
        self.ticks = config.effective_ticks
        self.dates = tick_dates(self.card, self.ticks)
        self.writer = writer
        self.observer = observer
        self.timelines: dict[str, Timeline] = {}
        self.fork_book = ForkBook(self.policy, config.seed, self.ticks, writer, self._notify)
        self.proposals_seen: set[tuple[str, int, str]] = set()
        self.init_problems: list[str] = []
        self.world_source: WorldSource = "seeds"
        self.gateway: Gateway | None = None
        self._retrievals: list[RetrievalRecord] = []
        # what the forecast graph is made from, kept as it is written (a condition with a graph)
        self.forecast: ForecastRecords | None = None
        if config.graph:
            self._keep_forecast(ForecastRecords(run=writer.run_id))

    # ------------------------------------------------------------------ helpers

    def _keep_forecast(self, records: ForecastRecords) -> None:
        self.forecast = records
        self.writer.tap = records.keep

    def _tick_role(self, name: str) -> AgentRole:
        """The role driving agents of role ``name``; one a model-built world names is built
        on first use (an unknown name fails the run with a RoleError)."""
        key = f"tick:{name}"
        if key not in self.roles:
            plan = {key: get_role(self.config.roles.get(name, name), "tick")}
            self.roles.update(build_roles(self.config, plan, self.source, self._trace_call))
        role: AgentRole = self.roles[key]
        return role

    def _add_role_agents(self, state: WorldState) -> WorldState:
        """Each added tick role joins the world as its own actor, acting every tick."""
        actors = state.actors
        for name in self.config.added_roles:
            if f"tick:{name}" in self.roles and name not in actors:
                actors = actors.set(
                    name,
                    Actor(
                        id=name,
                        name=name,
                        kind="institution",
                        role=name,
                        stance=0.0,
                        influence=0.5,
                        activity=1.0,
                    ),
                )
        return dataclasses.replace(state, actors=actors) if actors is not state.actors else state

    # ------------------------------------------------------------------ the run

    def header(self) -> dict[str, Any]:
        """The run's ``run_started`` data: versions, card, policy, routes, prompts, seed."""
        config, policy = self.config, self.policy
        table = route_table(config.models)
        ordered = sorted(self.roles.values(), key=lambda r: r.name)
        prompt_versions = {role.name: getattr(role, "prompt_version", "python") for role in ordered}
        routes = {role.name: str(table.for_role(role.name)) for role in ordered}
        card_data = config.card.public_dict()  # (made once: for the hash and the record)
        header = RunStartedData(
            worldsim_version=__version__,
            git_revision=git_revision(),
            card_hash=public_card_hash(card_data),
            card={},  # the big parts go into the record as they are, not through the model
            method=config.method_label,
            model=config.models.model,
            policy=policy.model_dump(mode="json"),
            routes=routes,
            prompt_versions=prompt_versions,
            seed=config.seed,
            ticks=self.ticks,
            extraction_rule=config.extraction_rule,
            card_path=str(config.card_path) if config.card_path else None,
            role_overrides=dict(config.roles),
            extra_roles=list(config.added_roles),
            config={},
            signed_by=self.writer.signer.key_id if self.writer.signer is not None else "",
            **config.started_fields(),
        ).model_dump(mode="json")
        header["card"], header["config"] = card_data, config.to_dict()
        return header

    async def run(self) -> RunResult:
        """Write the header, build the world and run every timeline to its end."""
        started = time.perf_counter()
        config, card, policy, seed = self.config, self.card, self.policy, self.config.seed
        header = self.header()
        await self.writer.emit("run_started", header)
        initializer: InitRole = self.roles["initializer"]
        state = await initializer.initialize(
            InitContext(
                card=card,
                ticks=self.ticks,
                rng=rng_for(seed, "init"),
                tick_roles=frozenset(
                    name for name, spec in registered_roles().items() if spec.phase == "tick"
                ),
            )
        )
        state = self._add_role_agents(state)
        state, applied = apply_interventions(state, config.interventions, card, self.ticks)
        for record in applied:
            await self.writer.emit("intervention", InterventionData(**record))
        self.init_problems = [*getattr(initializer, "problems", []), *check_world(state)]
        self.world_source = getattr(initializer, "world_source", "role")
        await self.writer.emit(
            "world_initialized",
            WorldInitializedData(
                state=state.to_json(),
                digest=state_digest(state),
                problems=self.init_problems,
                source=self.world_source,
            ),
            durable=True,
        )
        root = Timeline("t0", None, None, 0, 1.0, policy.max_active, state)
        await self._simulate([(root, 0, True)])
        return await self._settle(started)

    async def resume(self, point: RestorePoint) -> RunResult:
        """Continue a cut-off run from what its trace holds: the ended timelines and the
        bookkeeping are restored, the unfinished timelines run on from their next tick."""
        started = time.perf_counter()
        self.timelines.update(point.ended)
        self.fork_book.forks.extend(point.forks)
        self.fork_book.rejected += point.forks_rejected
        self.proposals_seen |= point.proposals_seen
        self.init_problems = list(point.init_problems)
        self.world_source = point.world_source
        self._retrievals = list(point.retrievals)
        if self.forecast is not None:  # the records kept before, then what is written
            self._keep_forecast(ForecastRecords(point.forecast, run=self.writer.run_id))
        await self._simulate(point.starts)
        return await self._settle(started)

    async def _simulate(self, starts: Sequence[Start]) -> None:
        """Run timelines from the given ticks until every one has ended."""
        async with contextlib.AsyncExitStack() as stack:
            config = self.config
            if config.retrieval and config.card.evidence is not None:
                self.gateway = await stack.enter_async_context(
                    gateway_for_card(
                        config.card, card_path=config.card_path, cutoff=config.gateway_cutoff
                    )
                )
                self.gateway.restore(self._retrievals)
                for known in self.timelines.values():  # a resumed run's ended timelines
                    self._lineage_known(known)
            async with anyio.create_task_group() as tg:
                for tl, tick, announce in starts:
                    tg.start_soon(self._run_timeline, tl, tick, tg, announce)

    async def _settle(self, started: float) -> RunResult:
        outcome = Outcome(
            timelines=self.timelines,
            forks=self.fork_book.forks,
            forks_rejected=self.fork_book.rejected,
            init_problems=self.init_problems,
            world_source=self.world_source,
            proposals_seen=self.proposals_seen,
            gateway=self.gateway,
            forecast=self.forecast,
        )
        reporter: ReportRole = self.roles["reporter"]
        return await settle(self.config, outcome, reporter, self.writer, self.guard, started)

    def _lineage_known(self, tl: Timeline) -> None:
        """Tell the gateway where ``tl`` forked off its parent (its citation checks count the
        parent's receipts up to there, whatever the parent has done since)."""
        if self.gateway is not None and tl.fork_tick is not None:
            self.gateway.forked(tl.id, tl.fork_tick)

    async def _run_timeline(
        self, tl: Timeline, start_tick: int, tg: TaskGroup, announce: bool = True
    ) -> None:
        self.timelines[tl.id] = tl
        self._lineage_known(tl)
        if announce:
            await self.writer.emit(
                "timeline_started",
                TimelineStartedData(
                    parent=tl.parent,
                    fork_tick=tl.fork_tick,
                    depth=tl.depth,
                    mass=tl.mass,
                    slots=tl.slots,
                    digest=state_digest(tl.state),
                ),
                tl=tl.id,
            )
        self._notify("timeline_started", timeline=tl.id, parent=tl.parent, mass=tl.mass)
        for k in range(start_tick, self.ticks):
            await self._tick(tl, k, tg)
            if tl.status != "running":
                break
        if tl.status == "running":
            tl.status = "deadline"
            tl.end_tick = self.ticks - 1
            outcome = tl.state.outcome()
            if outcome is not None:
                tl.settlement = outcome
                tl.forced_p_yes = tl.forced_probs = None
        await self.writer.emit(
            "timeline_ended",
            TimelineEndedData(
                status=tl.status,
                settlement=tl.settlement,
                forced_p_yes=tl.forced_p_yes if tl.settlement in _AT_VALUES else None,
                forced_probs=tl.forced_probs if tl.settlement in _AT_VALUES else None,
                mass=tl.mass,
                end_tick=tl.end_tick,
                reason=tl.reason,
            ),
            tl=tl.id,
            durable=True,
        )
        self._notify("timeline_ended", timeline=tl.id, status=tl.status, settlement=tl.settlement)

    def _active_agents(self, tl: Timeline, k: int) -> list[tuple[str, str]]:
        """(agent id, role name) of the agents acting this tick: actors by activity, all cohorts.

        One uniform per actor in id order, whatever the state, so draws line up across runs;
        they are drawn as one array (the same numbers as one draw at a time).
        """
        rng = rng_for(self.config.seed, "activity", tl.id, k)
        actors = actor_columns(tl.state.actors)
        acting = np.flatnonzero(rng.random(len(actors.ids)) < actors.activity).tolist()
        active = [(actors.ids[i], actors.roles[i]) for i in acting]
        cohorts = tl.state.cohorts
        active.extend(zip(cohorts.ids, cohorts.roles, strict=True))
        return sorted(active)

    async def _tick(self, tl: Timeline, k: int, tg: TaskGroup) -> None:
        seed = self.config.seed
        snapshot = deliver_events(tl.state, k)
        observations = snapshot.events_at(k)
        active = self._active_agents(tl, k)
        await self.writer.emit(
            "tick_started",
            TickStartedData(
                date=self.dates[k].isoformat().replace("+00:00", "Z"),
                observations=[
                    Observation(id=ev.id, title=ev.title, description=ev.description)
                    for ev in observations
                ],
                active=[agent for agent, _ in active],
            ),
            tl=tl.id,
            tick=k,
        )

        # (3) all active agents at once, against the same snapshot: each role's agents as one
        # batch, the roles concurrently
        by_role: dict[str, list[str]] = {}
        for agent, role_name in active:
            by_role.setdefault(role_name, []).append(agent)
        roles = {name: self._tick_role(name) for name in by_role}
        results: dict[str, Sequence[Proposal]] = {}
        batches: list[MoveColumns] = []

        async def act(role_name: str, agents: Sequence[str]) -> None:
            batch = TickBatch(
                card=self.card,
                timeline=tl.id,
                tick=k,
                ticks=self.ticks,
                date=self.dates[k],
                agents=tuple(agents),
                state=snapshot,
                observations=observations,
                rngs=AgentSeeds(seed, "agent", tl.id, k, agents),
                gateway=self.gateway,
            )
            acted = await act_tick(roles[role_name], batch)
            if isinstance(acted, MoveColumns):
                batches.append(acted)
            else:
                results.update(acted)

        async with anyio.create_task_group() as acting:
            for role_name, agents in by_role.items():
                acting.start_soon(act, role_name, agents)
        await self._trace_retrievals(tl)

        # (4) canonical order: agent id, then proposal index — never arrival
        objects: list[Proposal] = []
        for agent in sorted(results):
            for i, p in enumerate(results[agent]):
                named = p.agent == agent and p.index == i
                objects.append(p if named else p.model_copy(update={"agent": agent, "index": i}))
        proposals = TickProposals(MoveColumns.merged(batches) if batches else None, objects)
        agents = proposals.column("agent")
        self.proposals_seen.update((tl.id, k, agent) for agent in agents)
        cited = list(zip(agents, proposals.column("cites"), strict=True))
        unretrieved = (
            self.gateway.unretrieved_each(cited, timeline=tl.id)
            if self.gateway is not None
            else [list(dict.fromkeys(ids)) for _, ids in cited]
        )
        if proposals:
            roles_of = dict(active)
            by = [roles_of[agent] for agent in agents]
            made = ProposalsData.payload_of(proposals, by, unretrieved)
            await self.writer.emit("proposals", made.data, tl=tl.id, tick=k, floats=made.floats)

        # (5) review, validated and applied
        reviewer: ReviewRole = self.roles["governance"]
        try:
            verdict = await reviewer.review(
                ReviewContext(
                    card=self.card,
                    timeline=tl.id,
                    tick=k,
                    ticks=self.ticks,
                    date=self.dates[k],
                    state=snapshot,
                    observations=observations,
                    proposals=proposals,
                    rng=rng_for(seed, "review", tl.id, k),
                    mass=tl.mass,
                    depth=tl.depth,
                )
            )
        except ModelError as exc:
            if exc.ends_run:
                raise  # a strict replay's miss, a route that gave no reply: the run ends
            tl.status = "terminated"
            tl.settlement = snapshot.outcome() or "unresolved"
            tl.reason = f"reviewer failed: {exc.message}"[:500]
            tl.end_tick = k
            await self._commit(tl, k, snapshot)
            return
        if isinstance(verdict, TickReview):
            data, floats = verdict.payload()
            review = verdict.review
        else:
            made = ReviewData.payload(verdict)
            data, floats, review = made.data, made.floats, verdict
        await self.writer.emit("review", data, tl=tl.id, tick=k, floats=floats)
        try:
            _check_refs(review, proposals)
            state = apply_review(snapshot, review.deltas, review.ledger, k)
            if isinstance(verdict, TickReview):
                state = apply_evidence(state, verdict.evidence, k)
        except StateError as exc:
            tl.status = "terminated"
            tl.settlement = snapshot.outcome() or "unresolved"
            tl.reason = f"invalid review: {exc.message}"
            tl.end_tick = k
            await self._commit(tl, k, snapshot)
            return

        if review.forced_p_yes is not None or review.forced_probs is not None:
            tl.forced_p_yes = review.forced_p_yes
            tl.forced_probs = review.forced_probs

        ending = state.all_scored_settled() or review.decision == "terminate"
        children: list[Timeline] = []
        if not ending and review.branches:
            state = await self.fork_book.branch(tl, k, state, review.branches, children)

        # a timeline the reviewer ends with its outcome distribution has settled at that value
        # (the offline model's question resolving before the deadline); without one it is
        # terminated, unresolved
        resolved = review.forced_p_yes is not None or review.forced_probs is not None
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
        await self._commit(tl, k, state)
        # children start once the fork tick is committed: a crash never leaves a child whose
        # fork is not in the committed history
        for child in children:
            tg.start_soon(self._run_timeline, child, k + 1, tg, True)

    async def _trace_retrievals(self, tl: Timeline) -> None:
        """Write the gateway accesses made in ``tl`` since the last call (the tool logs, not
        the agent): one ``retrievals`` record per tick they were made at (the tick's own)."""
        if self.gateway is None:
            return
        groups: dict[int | None, list[Calls]] = {}
        for calls in self.gateway.take(tl.id):
            groups.setdefault(calls.tick, []).append(calls)
        for tick, accesses in groups.items():
            made = RetrievalsData.payload(accesses)
            await self.writer.emit("retrievals", made.data, tl=tl.id, tick=tick, floats=made.floats)

    async def _commit(self, tl: Timeline, k: int, state: WorldState) -> None:
        tl.state = state
        probs = state.probabilities()
        yes = next((ep.id for ep in state.scored if ep.polarity == "yes"), None)
        await self.writer.emit(
            "tick_committed",
            TickCommittedData(
                digest=state_digest(state),
                mass=tl.mass,
                status=tl.status,
                ledger={key: row.status for key, row in sorted(state.ledger.items())},
                pressure={key: state.pressure[key] for key in sorted(state.pressure.keys())},
                p_yes_now=probs[yes] if yes is not None else None,
                reason=tl.reason,
                forced_p_yes=tl.forced_p_yes,
                forced_probs=tl.forced_probs,
            ),
            tl=tl.id,
            tick=k,
            durable=True,
        )
        self._notify("tick_committed", timeline=tl.id, tick=k, ticks=self.ticks)


def _check_refs(review: Review, proposals: TickProposals) -> None:
    refs = [(r.agent, r.index) for r in review.accepted] + [
        (r.agent, r.index) for r in review.rejected
    ]
    for agent, index in refs:
        if proposals.position(agent, index) is None:
            raise StateError(f"review refers to unknown proposal {agent}#{index}")
