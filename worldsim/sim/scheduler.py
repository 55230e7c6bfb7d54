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
from anyio.abc import TaskGroup

from worldsim.domain.cards import public_card_hash
from worldsim.domain.config import RunConfig
from worldsim.domain.contracts import EXPECTED
from worldsim.domain.rng import rng_for
from worldsim.domain.version import __version__, git_revision
from worldsim.gateway import (
    Gateway,
    RetrievalRecord,
    gateway_for_card,
)
from worldsim.models import LeakageGuard, LlmCallData
from worldsim.roles.calling import call_role
from worldsim.roles.contracts import AgentRole, InitRole, ReportRole
from worldsim.roles.registry import RoleSpec, get_role, registered_roles
from worldsim.sim.forks import ForkBook
from worldsim.sim.plan import ModelSource, build_roles, route_table
from worldsim.sim.settlement import Outcome, RunResult, settle
from worldsim.sim.tick import Stage, run_tick
from worldsim.trace.audit import check_world
from worldsim.trace.forecast import ForecastRecords, RecordView
from worldsim.trace.records import (
    InterventionData,
    RunStartedData,
    TimelineEndedData,
    TimelineStartedData,
    WorldInitializedData,
)
from worldsim.trace.writer import TraceWriter
from worldsim.world.build import WorldSource, tick_dates
from worldsim.world.interventions import apply_interventions
from worldsim.world.moves import Proposers
from worldsim.world.state import (
    Actor,
    WorldState,
    state_digest,
)
from worldsim.world.timeline import Timeline
from worldsim.world.views import InitContext

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
    proposals_seen: Proposers = field(default_factory=Proposers)
    init_problems: list[str] = field(default_factory=list)
    world_source: WorldSource = "seeds"
    retrievals: list[RetrievalRecord] = field(default_factory=list)
    forecast: list[RecordView] = field(default_factory=list)
    """What the forecast graph is made from among the kept records (a run that builds one)."""
    unrecorded_ends: list[Timeline] = field(default_factory=list)
    """Timelines that had ended before the cut without their ``timeline_ended`` record: a
    continued run's particles its re-weighting ended, cut off before it wrote them all."""


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
        self.timelines: dict[str, Timeline] = {}
        self.fork_book = ForkBook(self.policy, config.seed, self.ticks, writer, self._notify)
        self.proposals_seen = Proposers()
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
        header["card"], header["config"] = card_data, config.to_dict(card_data)
        return header

    async def run(self) -> RunResult:
        """Write the header, build the world and run every timeline to its end."""
        started = time.perf_counter()
        config, card, policy, seed = self.config, self.card, self.policy, self.config.seed
        header = self.header()
        await self.writer.emit("run_started", header)
        initializer: InitRole = self.roles["initializer"]
        state: WorldState = await call_role(
            initializer,
            "initialize",
            InitContext(
                card=card,
                ticks=self.ticks,
                rng=rng_for(seed, "init"),
                tick_roles=frozenset(
                    name for name, spec in registered_roles().items() if spec.phase == "tick"
                ),
            ),
            (WorldState,),
            "a WorldState",
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
        self.proposals_seen.update(point.proposals_seen)
        self.init_problems = list(point.init_problems)
        self.world_source = point.world_source
        self._retrievals = list(point.retrievals)
        if self.forecast is not None:  # the records kept before, then what is written
            self._keep_forecast(ForecastRecords(point.forecast, run=self.writer.run_id))
        for tl in point.unrecorded_ends:
            self.timelines[tl.id] = tl
            await self._ended(tl)
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
            # the stage lives in the timelines' tasks, not on the engine: it holds the engine's
            # role lookup, and a cycle would keep a finished run's engine for the collector
            stage = Stage(
                config=config,
                card=self.card,
                ticks=self.ticks,
                dates=self.dates,
                writer=self.writer,
                reviewer=self.roles["governance"],
                role_for=self._tick_role,
                fork_book=self.fork_book,
                notify=self._notify,
                proposals_seen=self.proposals_seen,
                gateway=self.gateway,
            )
            async with anyio.create_task_group() as tg:
                for tl, tick, announce in starts:
                    tg.start_soon(self._run_timeline, stage, tl, tick, tg, announce)

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
        self, stage: Stage, tl: Timeline, start_tick: int, tg: TaskGroup, announce: bool = True
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
            children = await run_tick(stage, tl, k)
            for child in children:
                tg.start_soon(self._run_timeline, stage, child, k + 1, tg, True)
            if tl.status != "running":
                break
        if tl.status == "running":
            tl.status = "deadline"
            tl.end_tick = self.ticks - 1
            outcome = tl.state.outcome()
            if outcome is not None:
                tl.settlement = outcome
                tl.forced_p_yes = tl.forced_probs = None
        await self._ended(tl)
        self._notify("timeline_ended", timeline=tl.id, status=tl.status, settlement=tl.settlement)

    async def _ended(self, tl: Timeline) -> None:
        """Write ``tl``'s ``timeline_ended`` record: a forced value only where the settlement
        takes one (unresolved or expected)."""
        forced = tl.settlement in _AT_VALUES
        await self.writer.emit(
            "timeline_ended",
            TimelineEndedData(
                status=tl.status,
                settlement=tl.settlement,
                forced_p_yes=tl.forced_p_yes if forced else None,
                forced_probs=tl.forced_probs if forced else None,
                mass=tl.mass,
                end_tick=tl.end_tick,
                reason=tl.reason,
            ),
            tl=tl.id,
            durable=True,
        )
