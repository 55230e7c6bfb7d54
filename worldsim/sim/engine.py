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
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import anyio
import structlog
from anyio.abc import TaskGroup

from worldsim.domain.cards import Card, card_hash
from worldsim.domain.contracts import Model, lineage
from worldsim.domain.errors import (
    BudgetExhausted,
    ConfigError,
    ModelError,
    ReplayMissError,
    RoleError,
    StateError,
    WorldsimError,
)
from worldsim.domain.policy import BranchPolicy
from worldsim.domain.rng import rng_for
from worldsim.domain.version import __version__
from worldsim.gateway import (
    AgentTools,
    Gateway,
    RetrievalRecord,
    gateway_for_card,
    unretrieved_citations,
)
from worldsim.models import (
    Budget,
    LeakageGuard,
    LeakageGuardModel,
    LlmCallData,
    ModelOptions,
    ModelPool,
    PriceTable,
    ResponseCache,
    RetryPolicy,
    RouteTable,
)
from worldsim.models.tracing import Emit, TracingModel
from worldsim.offline import OfflineModel
from worldsim.roles.contracts import AgentRole, InitRole, ReportRole, ReviewRole
from worldsim.roles.registry import RoleSpec, get_role
from worldsim.trace.audit import audit_run, check_world
from worldsim.trace.records import (
    ExtractionData,
    ForkData,
    ForkRejectedData,
    Observation,
    ProposalData,
    ReportData,
    ReviewData,
    RunCompletedData,
    RunFailedData,
    RunStartedData,
    TickCommittedData,
    TickStartedData,
    TimelineEndedData,
    TimelineStartedData,
    WorldInitializedData,
)
from worldsim.trace.writer import TraceWriter
from worldsim.world.build import tick_dates
from worldsim.world.extraction import EXTRACTION_RULES, Leaf, extract
from worldsim.world.moves import BranchCandidate, Proposal, Report, Review, TimelineSummary
from worldsim.world.state import Actor, WorldState, apply_deltas, apply_review, state_digest
from worldsim.world.timeline import Timeline, child_id
from worldsim.world.views import InitContext, ReportContext, ReviewContext, TickContext

__all__ = ["DEFAULT_TICKS", "Observer", "RunConfig", "RunResult", "run_card", "trace_name"]

log = structlog.get_logger(__name__)

DEFAULT_TICKS = 8
Observer = Callable[[str, Mapping[str, Any]], None]


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """How model routes are reached: flags of ``worldsim run`` beyond the card and policy."""

    model: str = "offline"
    role_models: tuple[str, ...] = ()
    max_connections: int = 8
    cache: Literal["use", "refresh", "off"] = "use"
    cache_path: Path | None = None
    replay_strict: bool = False
    max_cost_usd: float | None = None
    prices: Path | None = None
    forbidden_strings: Path | None = None
    leakage: Literal["record", "fail"] = "record"
    retry: RetryPolicy | None = None
    environ: Mapping[str, str] | None = None

    def routes(self) -> RouteTable:
        return RouteTable.from_flags(self.model, self.role_models)


@dataclass(frozen=True, slots=True)
class RunConfig:
    """Everything that determines a run's result, plus where its trace goes."""

    card: Card
    policy: BranchPolicy
    seed: int = 0
    ticks: int | None = None
    extraction_rule: str = "path-ledger/1"
    method: str | None = None
    roles: Mapping[str, str] = field(default_factory=dict)
    """Slot overrides: which role plays ``initializer``, ``governance``, ``reporter`` or a tick
    role named in the card's seeds."""
    extra_roles: tuple[str, ...] = ()
    """Roles added to the run (``--role``, a card's or policy's ``roles:``): a tick role acts as
    its own agent on every timeline; an init, review or report role takes that phase's slot."""
    card_path: Path | None = None
    models: ModelConfig = field(default_factory=ModelConfig)

    @property
    def effective_ticks(self) -> int:
        return self.ticks or self.policy.ticks or DEFAULT_TICKS

    @property
    def method_label(self) -> str:
        return self.method or self.policy.name


@dataclass(frozen=True, slots=True)
class RunResult:
    card_id: str
    seed: int
    method: str
    run_id: str
    trace: Path
    p_yes: float | None
    p_options: dict[str, float] | None
    unresolved_mass: float
    timelines: int
    forks: int
    forks_rejected: int
    wall_s: float
    extraction: ExtractionData

    def summary(self) -> dict[str, Any]:
        return {
            "card_id": self.card_id,
            "seed": self.seed,
            "method": self.method,
            "p_yes": self.p_yes,
            "p_options": self.p_options,
            "unresolved_mass": self.unresolved_mass,
            "timelines": self.timelines,
            "forks": self.forks,
            "forks_rejected": self.forks_rejected,
            "extraction_rule": self.extraction.rule,
            "wall_s": round(self.wall_s, 4),
            "trace": str(self.trace),
            "run_id": self.run_id,
        }


def trace_name(card_id: str, method: str, seed: int) -> str:
    return f"{card_id}__{method}__s{seed}.jsonl"


SLOTS: dict[str, str] = {"initializer": "init", "governance": "review", "reporter": "report"}
"""The run's one-per-phase role slots and the phase each takes."""
_SLOT_OF_PHASE = {phase: slot for slot, phase in SLOTS.items()}
BUILTIN_TICK_ROLES = ("actor", "cohort")


class ModelSource(Protocol):
    """Anything that hands out a model per role: a :class:`ModelPool`, or a test's double."""

    def for_role(self, role: str) -> Model: ...


def role_plan(config: RunConfig) -> dict[str, RoleSpec]:
    """Which role fills each slot and each tick role of the run, checked before anything runs.

    Keys are slot names (``initializer``, ``governance``, ``reporter``) and ``tick:NAME`` for
    tick roles. Unknown names, roles in the wrong phase and a bad extraction rule are errors.
    """
    if config.extraction_rule not in EXTRACTION_RULES:
        raise ConfigError(
            f"unknown extraction rule '{config.extraction_rule}' "
            f"(known: {', '.join(EXTRACTION_RULES)})",
            field="extraction",
        )
    slots = {slot: config.roles.get(slot, slot) for slot in SLOTS}
    tick_names = set(BUILTIN_TICK_ROLES)
    seeds = config.card.seeds
    if seeds is not None:
        tick_names |= {a.role for a in seeds.actors} | {c.role for c in seeds.cohorts}
    plan: dict[str, RoleSpec] = {}
    for name in config.extra_roles:
        spec = get_role(name)
        if spec.phase == "tick":
            plan[f"tick:{name}"] = spec
        elif spec.phase in _SLOT_OF_PHASE:
            slots[_SLOT_OF_PHASE[spec.phase]] = name
        else:
            raise ConfigError(
                f"role '{name}' runs in phase '{spec.phase}', which a simulation does not have "
                "(direct forecasts run with `worldsim forecast`)",
                field="role",
            )
    for slot, phase in SLOTS.items():
        plan[slot] = get_role(slots[slot], phase)
    for name in sorted(tick_names):
        plan[f"tick:{name}"] = get_role(config.roles.get(name, name), "tick")
    return plan


def with_role_routes(config: RunConfig, plan: Mapping[str, RoleSpec]) -> RunConfig:
    """Add each prompt role's front-matter ``route`` unless ``--role-model`` names it already."""
    models = config.models
    named = {entry.split("=", 1)[0].strip() for entry in models.role_models}
    extra = tuple(
        f"{spec.name}={spec.route}"
        for spec in sorted({s.name: s for s in plan.values()}.values(), key=lambda s: s.name)
        if spec.route is not None and spec.name not in named
    )
    if not extra:
        return config
    return dataclasses.replace(
        config, models=dataclasses.replace(models, role_models=(*models.role_models, *extra))
    )


def build_roles(
    config: RunConfig, plan: Mapping[str, RoleSpec], source: ModelSource, emit: Emit
) -> dict[str, Any]:
    """Build every planned role with the model its route resolves to, every call traced."""
    return {
        key: spec.build(TracingModel(source.for_role(spec.name), emit), seed=config.seed)
        for key, spec in plan.items()
    }


class Engine:
    """Runs one multiverse for one card and streams it into one trace."""

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
        self.roles = build_roles(config, plan, source, self._trace_call)
        self.card = config.card
        self.policy = config.policy
        self.ticks = config.effective_ticks
        self.dates = tick_dates(config.card, self.ticks)
        self.writer = writer
        self.observer = observer
        self.timelines: dict[str, Timeline] = {}
        self.forks: list[dict[str, Any]] = []
        self.forks_rejected = 0
        self.proposals_seen: set[tuple[str, int, str]] = set()
        self.init_problems: list[str] = []
        self.gateway: Gateway | None = None
        self.restored_retrievals: list[RetrievalRecord] = []
        self.options = (
            None if config.card.kind == "binary" else [ep.id for ep in config.card.scored_endpoints]
        )

    # ------------------------------------------------------------------ helpers

    async def _trace_call(self, call: LlmCallData) -> None:
        await self.writer.emit("llm_call", call, tl=call.timeline, tick=call.tick)

    def _notify(self, event: str, **payload: Any) -> None:
        if self.observer is not None:
            self.observer(event, payload)

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
        for name in self.config.extra_roles:
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

    async def run(self) -> RunResult:
        started = time.perf_counter()
        card, policy, seed = self.card, self.policy, self.config.seed
        table = self.config.models.routes()
        prompt_versions = {
            role.name: getattr(role, "prompt_version", "python")
            for role in sorted(self.roles.values(), key=lambda r: r.name)
        }
        routes = {
            role.name: str(table.for_role(role.name))
            for role in sorted(self.roles.values(), key=lambda r: r.name)
        }
        await self.writer.emit(
            "run_started",
            RunStartedData(
                worldsim_version=__version__,
                git_revision=git_revision(),
                card_hash=card_hash(self.config.card),
                card=self.config.card.public_dict(),
                method=self.config.method_label,
                model=self.config.models.model,
                policy=policy.model_dump(mode="json"),
                routes=routes,
                prompt_versions=prompt_versions,
                seed=seed,
                ticks=self.ticks,
                extraction_rule=self.config.extraction_rule,
                card_path=str(self.config.card_path) if self.config.card_path else None,
                role_overrides=dict(self.config.roles),
                extra_roles=list(self.config.extra_roles),
            ),
        )
        initializer: InitRole = self.roles["initializer"]
        state = await initializer.initialize(
            InitContext(card=card, ticks=self.ticks, rng=rng_for(seed, "init"))
        )
        state = self._add_role_agents(state)
        self.init_problems = [*getattr(initializer, "problems", []), *check_world(state)]
        await self.writer.emit(
            "world_initialized",
            WorldInitializedData(
                state=state.to_json(), digest=state_digest(state), problems=self.init_problems
            ),
            durable=True,
        )
        root = Timeline("t0", None, None, 0, 1.0, policy.max_active, state)
        await self.simulate([(root, 0, True)])
        return await self.finish(started)

    async def simulate(self, starts: Sequence[tuple[Timeline, int, bool]]) -> None:
        """Run timelines from the given ticks until every one has ended.

        Each start is (timeline, first tick, whether to announce it with timeline_started);
        a resumed run passes the timelines its trace left unfinished.
        """
        async with contextlib.AsyncExitStack() as stack:
            if self.config.card.evidence is not None:
                self.gateway = await stack.enter_async_context(
                    gateway_for_card(self.config.card, card_path=self.config.card_path)
                )
                self.gateway.restore(self.restored_retrievals)
            async with anyio.create_task_group() as tg:
                for tl, tick, announce in starts:
                    tg.start_soon(self._run_timeline, tl, tick, tg, announce)

    async def finish(self, started: float) -> RunResult:
        """Extraction, report, audit and the sealed end of the trace."""
        card, seed = self.card, self.config.seed
        leaves = [
            Leaf(tl.id, tl.mass, tl.settlement, tl.forced_p_yes, tl.forced_probs)
            for tl in self.timelines.values()
        ]
        extraction = extract(leaves, self.config.extraction_rule, self.options)
        await self.writer.emit("extraction", extraction)

        summaries = tuple(
            TimelineSummary(
                tl.id,
                tl.parent,
                tl.fork_tick,
                tl.mass,
                tl.status,
                tl.settlement,
                tl.end_tick,
                tl.forced_p_yes,
            )
            for tl in sorted(self.timelines.values(), key=lambda t: lineage(t.id))
        )
        reporter: ReportRole = self.roles["reporter"]
        report_failed: str | None = None
        try:
            report = await reporter.report(
                ReportContext(
                    card=card,
                    timelines=summaries,
                    p_yes=extraction.p_yes,
                    rng=rng_for(seed, "report"),
                    forks=tuple(
                        sorted(
                            self.forks,
                            key=lambda f: (
                                lineage(f["parent"]),
                                f["tick"],
                                lineage(f["child"]),
                            ),
                        )
                    ),
                )
            )
        except ModelError as exc:
            if isinstance(exc, ReplayMissError):
                raise  # strict replay: a miss ends the run
            report_failed = f"reporter failed: {exc.message}"
            report = Report(summary=report_failed[:2000], claims=())
        await self.writer.emit(
            "report", ReportData(summary=report.summary, claims=list(report.claims))
        )
        audit = audit_run(
            card=card,
            init_problems=self.init_problems,
            timelines=summaries,
            extraction=extraction,
            claims=report.claims,
            proposals=self.proposals_seen,
            documents=(
                {doc for rec in self.gateway.access_log for doc in rec.doc_ids}
                if self.gateway is not None
                else None
            ),
            report_failed=report_failed,
            leakage=self.guard,
        )
        await self.writer.emit("audit", audit)
        await self.writer.emit(
            "run_completed",
            RunCompletedData(
                timelines=len(self.timelines),
                forks=len(self.forks),
                forks_rejected=self.forks_rejected,
                p_yes=extraction.p_yes,
            ),
            durable=True,
        )
        return RunResult(
            card_id=card.id,
            seed=seed,
            method=self.config.method_label,
            run_id=self.writer.run_id,
            trace=self.writer.path,
            p_yes=extraction.p_yes,
            p_options=extraction.p_options,
            unresolved_mass=extraction.unresolved_mass,
            timelines=len(self.timelines),
            forks=len(self.forks),
            forks_rejected=self.forks_rejected,
            wall_s=time.perf_counter() - started,
            extraction=extraction,
        )

    # ------------------------------------------------------------------ timelines

    async def _run_timeline(
        self, tl: Timeline, start_tick: int, tg: TaskGroup, announce: bool = True
    ) -> None:
        self.timelines[tl.id] = tl
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
                forced_p_yes=tl.forced_p_yes if tl.settlement == "unresolved" else None,
                forced_probs=tl.forced_probs if tl.settlement == "unresolved" else None,
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

        One uniform per actor in id order, whatever the state, so draws line up across runs.
        """
        rng = rng_for(self.config.seed, "activity", tl.id, k)
        state = tl.state
        active: list[tuple[str, str]] = []
        for actor_id in sorted(state.actors.keys()):
            actor = state.actors[actor_id]
            if float(rng.random()) < actor.activity:
                active.append((actor_id, actor.role))
        active.extend(zip(state.cohorts.ids, state.cohorts.roles, strict=True))
        return sorted(active)

    async def _tick(self, tl: Timeline, k: int, tg: TaskGroup) -> None:
        seed = self.config.seed
        snapshot = tl.state
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

        # (3) all active agents at once, against the same snapshot
        results: dict[str, Sequence[Proposal]] = {}

        async def act(agent: str, role_name: str) -> None:
            role = self._tick_role(role_name)
            ctx = TickContext(
                card=self.card,
                timeline=tl.id,
                tick=k,
                ticks=self.ticks,
                date=self.dates[k],
                agent=agent,
                state=snapshot,
                observations=observations,
                rng=rng_for(seed, "agent", tl.id, k, agent),
                tools=(
                    AgentTools(self.gateway, agent, tl.id, k) if self.gateway is not None else None
                ),
            )
            try:
                results[agent] = await role.act(ctx)
            except ModelError as exc:
                if isinstance(exc, ReplayMissError):
                    raise  # strict replay: a miss ends the run
                # the failed call is in the trace; this agent sits the tick out
                log.warning("agent_failed", agent=agent, timeline=tl.id, tick=k, error=str(exc))
                results[agent] = []

        async with anyio.create_task_group() as agents:
            for agent, role_name in active:
                agents.start_soon(act, agent, role_name)
        await self._trace_retrievals()

        # (4) canonical order: agent id, then proposal index — never arrival
        proposals: list[Proposal] = []
        roles_of = dict(active)
        for agent in sorted(results):
            for i, p in enumerate(results[agent]):
                proposals.append(p.model_copy(update={"agent": agent, "index": i}))
        for p in proposals:
            self.proposals_seen.add((tl.id, k, p.agent))
            unretrieved = (
                unretrieved_citations(p.cites, self.gateway.access_log, p.agent, timeline=tl.id)
                if self.gateway is not None
                else list(p.cites)
            )
            await self.writer.emit(
                "proposal",
                ProposalData(
                    role=roles_of[p.agent], unretrieved_citations=unretrieved, **p.model_dump()
                ),
                tl=tl.id,
                tick=k,
            )

        # (5) review, validated and applied
        reviewer: ReviewRole = self.roles["governance"]
        try:
            review = await reviewer.review(
                ReviewContext(
                    card=self.card,
                    timeline=tl.id,
                    tick=k,
                    ticks=self.ticks,
                    date=self.dates[k],
                    state=snapshot,
                    observations=observations,
                    proposals=tuple(proposals),
                    rng=rng_for(seed, "review", tl.id, k),
                    mass=tl.mass,
                    depth=tl.depth,
                )
            )
        except ModelError as exc:
            if isinstance(exc, ReplayMissError):
                raise  # strict replay: a miss ends the run
            tl.status = "terminated"
            tl.settlement = snapshot.outcome() or "unresolved"
            tl.reason = f"reviewer failed: {exc.message}"[:500]
            tl.end_tick = k
            await self._commit(tl, k, snapshot)
            return
        await self.writer.emit("review", ReviewData(**review.model_dump()), tl=tl.id, tick=k)
        try:
            _check_refs(review, proposals)
            state = apply_review(snapshot, review.deltas, review.ledger, k)
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
            state = await self._branch(tl, k, state, review.branches, children)

        if state.all_scored_settled():
            tl.status = "settled"
            tl.settlement = state.outcome() or "unresolved"
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

    async def _trace_retrievals(self) -> None:
        """Write the gateway accesses made since the last call (the tool logs, not the agent)."""
        if self.gateway is None:
            return
        for record in self.gateway.drain():
            await self.writer.emit("retrieval", record, tl=record.timeline, tick=record.tick)

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

    # ------------------------------------------------------------------ forks

    def _admission(
        self, tl: Timeline, cand: BranchCandidate, k: int, made: int, state: WorldState
    ) -> str | None:
        """Why the policy refuses this candidate, or None when it is admitted (DESIGN §4.5)."""
        policy = self.policy
        if cand.score < policy.branch_threshold:
            return f"score {cand.score:.3f} below branch_threshold {policy.branch_threshold}"
        endpoint = state.endpoint(cand.endpoint_id)
        if endpoint is None:
            return f"unknown endpoint '{cand.endpoint_id}'"
        if policy.candidate_endpoints_only and endpoint.kind != "scored":
            return f"endpoint '{cand.endpoint_id}' is not a scored endpoint"
        if tl.depth + 1 > policy.max_depth:
            return f"child depth {tl.depth + 1} exceeds max_depth {policy.max_depth}"
        if tl.slots < 2:
            return f"max_active {policy.max_active}: no timeline slot left on this lineage"
        if made >= policy.max_branches_per_tick:
            return f"max_branches_per_tick {policy.max_branches_per_tick} reached"
        remaining = self.ticks - 1 - k
        if remaining < max(1, policy.runway_ticks):
            return f"runway: {remaining} ticks remain, {max(1, policy.runway_ticks)} needed"
        if policy.adaptive is not None:
            margin = support_margin(state)
            if margin > policy.adaptive.max_margin:
                return (
                    f"adaptive: ledger support margin {margin:.3f} above "
                    f"{policy.adaptive.max_margin}"
                )
        return None

    async def _branch(
        self,
        tl: Timeline,
        k: int,
        state: WorldState,
        candidates: Sequence[BranchCandidate],
        children: list[Timeline],
    ) -> WorldState:
        """Resolve the tick's branch candidates in order: fork, or sample in place, or drop."""
        sampler = rng_for(self.config.seed, "sample", tl.id, k)
        made = 0
        invalid: dict[int, str] = {}
        for j, cand in enumerate(candidates):
            try:
                apply_deltas(state, cand.if_true)
                apply_deltas(state, cand.if_false)
            except StateError as exc:
                invalid[j] = f"invalid deltas: {exc.message}"
        for j, cand in enumerate(candidates):
            if j in invalid:
                self.forks_rejected += 1
                await self.writer.emit(
                    "fork_rejected",
                    ForkRejectedData(
                        index=j,
                        candidate=cand,
                        reason=invalid[j],
                        sampled=False,
                        came_true=None,
                        deltas=[],
                    ),
                    tl=tl.id,
                    tick=k,
                )
                continue
            reason = self._admission(tl, cand, k, made, state)
            if reason is None:
                made += 1
                tl.children += 1
                cid = child_id(tl.id, tl.children)
                child_rng = rng_for(self.config.seed, "sample", cid, k)
                child_deltas = list(cand.if_true)
                if self.policy.on_reject == "sample":
                    for n, later in enumerate(candidates[j + 1 :], start=j + 1):
                        if n in invalid:
                            continue
                        came = float(child_rng.random()) < later.probability
                        child_deltas.extend(later.if_true if came else later.if_false)
                child_state = apply_deltas(state, child_deltas)
                mass_before = tl.mass
                mass_child = mass_before * cand.probability
                mass_parent = mass_before * (1.0 - cand.probability)
                spare = tl.slots - 1
                slots_child = (spare + 1) // 2
                tl.slots -= slots_child
                tl.mass = mass_parent
                state = apply_deltas(state, cand.if_false)
                fork = ForkData(
                    child=cid,
                    parent=tl.id,
                    index=j,
                    candidate=cand,
                    mass_before=mass_before,
                    mass_child=mass_child,
                    mass_parent=mass_parent,
                    depth=tl.depth + 1,
                    slots_child=slots_child,
                    child_deltas=child_deltas,
                    parent_deltas=list(cand.if_false),
                )
                await self.writer.emit("fork", fork, tl=tl.id, tick=k)
                self.forks.append(
                    {
                        "parent": tl.id,
                        "child": cid,
                        "tick": k,
                        "hypothesis": cand.hypothesis,
                        "probability": cand.probability,
                    }
                )
                self._notify("fork", parent=tl.id, child=cid, tick=k)
                children.append(
                    Timeline(cid, tl.id, k, tl.depth + 1, mass_child, slots_child, child_state)
                )
            else:
                self.forks_rejected += 1
                came_true: bool | None = None
                deltas: list[Any] = []
                if self.policy.on_reject == "sample":
                    came_true = float(sampler.random()) < cand.probability
                    deltas = list(cand.if_true if came_true else cand.if_false)
                    state = apply_deltas(state, deltas)
                await self.writer.emit(
                    "fork_rejected",
                    ForkRejectedData(
                        index=j,
                        candidate=cand,
                        reason=reason,
                        sampled=self.policy.on_reject == "sample",
                        came_true=came_true,
                        deltas=deltas,
                    ),
                    tl=tl.id,
                    tick=k,
                )
                self._notify("fork_rejected", timeline=tl.id, tick=k, reason=reason)
        return state


def support_margin(state: WorldState) -> float:
    """|supports − contradicts| / max(1, entries) over the scored endpoints' ledger evidence."""
    supports = contradicts = 0
    for ep in state.scored:
        for ev in state.ledger[ep.id].evidence:
            if (ev.kind == "supports") == (ep.polarity != "no"):
                supports += 1
            else:
                contradicts += 1
    return abs(supports - contradicts) / max(1, supports + contradicts)


def _check_refs(review: Review, proposals: Sequence[Proposal]) -> None:
    known = {(p.agent, p.index) for p in proposals}
    refs = [(r.agent, r.index) for r in review.accepted] + [
        (r.agent, r.index) for r in review.rejected
    ]
    for agent, index in refs:
        if (agent, index) not in known:
            raise StateError(f"review refers to unknown proposal {agent}#{index}")


def git_revision() -> str | None:
    """The source checkout's commit, when worldsim runs from one; read from files, no subprocess."""
    root = Path(__file__).resolve().parents[2] / ".git"
    try:
        head = (root / "HEAD").read_text().strip()
        if head.startswith("ref: "):
            ref = root / head[5:]
            if ref.is_file():
                return ref.read_text().strip()
            packed = root / "packed-refs"
            if packed.is_file():
                for line in packed.read_text().splitlines():
                    if line.endswith(" " + head[5:]):
                        return line.split()[0]
            return None
        return head
    except OSError:
        return None


def unwrap_error(exc: BaseException) -> BaseException:
    """The error a task group's exception group stands for: a worldsim error if there is one."""
    if isinstance(exc, BaseExceptionGroup):
        leaves: list[BaseException] = []

        def walk(group: BaseExceptionGroup[BaseException]) -> None:
            for inner in group.exceptions:
                if isinstance(inner, BaseExceptionGroup):
                    walk(inner)
                else:
                    leaves.append(inner)

        walk(exc)
        for leaf in leaves:
            if isinstance(leaf, WorldsimError):
                return leaf
        return leaves[0] if leaves else exc
    return exc


def default_cache_path(out: str | Path) -> Path:
    """Where the response cache lives unless ``--cache-path`` says otherwise."""
    return Path(out) / ".cache" / "responses.sqlite"


def build_pool(
    models: ModelConfig, out: str | Path, cache: ResponseCache | None
) -> tuple[ModelPool | None, LeakageGuard | None]:
    """The run's models (None when every role is offline) and its leakage guard.

    Reads keys and base URLs (environment, ``.env``) and the price table, so a missing setting
    fails here, before a trace exists.
    """
    routes = models.routes()
    guard = (
        LeakageGuard.from_file(models.forbidden_strings, mode=models.leakage)
        if models.forbidden_strings is not None
        else None
    )
    if all(route.is_offline for route in routes.routes()):
        return None, guard
    pool = ModelPool(
        routes,
        options=ModelOptions(
            retry=models.retry or RetryPolicy(),
            max_connections=models.max_connections,
            prices=PriceTable.load(models.prices),
        ),
        cache=cache,
        budget=Budget(models.max_cost_usd) if models.max_cost_usd is not None else None,
        guard=guard,
        environ=models.environ,
        offline=OfflineModel,
    )
    return pool, guard


class OfflineSource:
    """Every role on the ``offline`` route: one shared :class:`OfflineModel`."""

    def __init__(self) -> None:
        self.model = OfflineModel()

    def for_role(self, role: str) -> Model:
        return self.model


class _GuardedSource:
    """A caller's model source with the run's leakage guard around every model."""

    def __init__(self, source: ModelSource, guard: LeakageGuard | None) -> None:
        self.source = source
        self.guard = guard

    def for_role(self, role: str) -> Model:
        model = self.source.for_role(role)
        return LeakageGuardModel(model, self.guard) if self.guard is not None else model


async def open_models(
    config: RunConfig,
    out: str | Path,
    stack: contextlib.AsyncExitStack,
    source: ModelSource | None = None,
) -> tuple[ModelSource, LeakageGuard | None]:
    """Open the run's response cache and model pool on ``stack``.

    With ``source`` (a test's doubles), its models replace the routes' and no pool is built;
    when every role is offline, the offline model answers them all.
    """
    models = config.models
    if source is not None:
        guard = (
            LeakageGuard.from_file(models.forbidden_strings, mode=models.leakage)
            if models.forbidden_strings is not None
            else None
        )
        return _GuardedSource(source, guard), guard
    remote = not all(route.is_offline for route in models.routes().routes())
    cache: ResponseCache | None = None
    if remote and models.cache != "off":
        cache = await ResponseCache.open(
            models.cache_path or default_cache_path(out),
            mode=models.cache,
            strict=models.replay_strict,
        )
        stack.push_async_callback(cache.aclose)
    pool, guard = await anyio.to_thread.run_sync(build_pool, models, out, cache)
    if pool is None:
        return _GuardedSource(OfflineSource(), guard), guard
    stack.push_async_callback(pool.aclose)
    return pool, guard


async def guarded(writer: TraceWriter, body: Callable[[], Awaitable[RunResult]]) -> RunResult:
    """Run ``body``; a failure ends the trace with a sealed ``run_failed`` and is re-raised.

    Cancellation (Ctrl-C, a kill) writes nothing: the trace stays open-ended, resumable.
    """
    try:
        return await body()
    except BaseException as raw:
        exc = unwrap_error(raw)
        if isinstance(exc, Exception):
            kind = "config" if isinstance(exc, RoleError) else type(exc).__name__
            log.error("run_failed", error=str(exc), trace=str(writer.path))
            with anyio.CancelScope(shield=True):
                await writer.emit(
                    "run_failed",
                    RunFailedData(
                        error=str(exc)[:2000],
                        kind=kind,
                        resumable=isinstance(exc, BudgetExhausted | ModelError),
                    ),
                    durable=True,
                )
            if exc is not raw:
                raise exc from None
        raise
    finally:
        await writer.aclose()


async def run_card(
    config: RunConfig,
    out: str | Path = "traces",
    *,
    overwrite: bool = False,
    fsync: bool = True,
    observer: Observer | None = None,
    trace_path: str | Path | None = None,
    model_source: ModelSource | None = None,
) -> RunResult:
    """Run one card under one policy and seed; stream the trace into ``out``.

    Everything that can be checked is checked before the trace file is created, so bad input
    leaves nothing behind. A failure during the run ends the trace with ``run_failed``; a run
    stopped by its budget is marked resumable. ``model_source`` replaces the configured routes'
    models (tests pass ``worldsim.testing`` doubles).
    """
    plan = role_plan(config)  # every name checked before any file is touched
    config = with_role_routes(config, plan)
    path = (
        Path(trace_path)
        if trace_path
        else Path(out) / trace_name(config.card.id, config.method_label, config.seed)
    )
    if path.exists() and not overwrite:
        raise ConfigError("trace already exists (use --force to replace it)", file=path)
    async with contextlib.AsyncExitStack() as stack:
        source, guard = await open_models(config, out, stack, model_source)
        writer = await TraceWriter.create(
            path, uuid.uuid4().hex[:16], fsync=fsync, overwrite=overwrite
        )
        engine = Engine(config, writer, plan, source, observer, guard)
        return await guarded(writer, engine.run)
    raise AssertionError("unreachable")  # pragma: no cover
