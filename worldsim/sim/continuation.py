"""Continue a finished run to a later date: a particle filter over its timelines.

``worldsim run --continue PARENT --as-of DATE`` verifies PARENT, keeps its tick grid, its
random-draw keys and its timeline ids, and takes as particles its timelines as they stood at
the end of the tick before DATE's tick (:mod:`worldsim.sim.particles`). The news published
between the parent's cut-off and DATE re-weights them (:mod:`worldsim.sim.news`); the
survivors then run from DATE's tick to the deadline under the same policy, forking as before.
The calendar's origin stays the parent's (ticks keep their dates); the Temporal Gateway and
the prompts' "today" move to DATE. No initializer call is made and no tick before DATE runs.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import datetime
from datetime import time as clock
from pathlib import Path
from typing import Unpack

import anyio

from worldsim.domain.cards import utc_iso
from worldsim.domain.config import ModelConfig, RunConfig
from worldsim.domain.errors import ConfigError, NewsLeavesNoPath
from worldsim.gateway.gateway import gateway_for_card
from worldsim.models import LeakageGuard
from worldsim.models.tracing import traced
from worldsim.roles.prompts import PromptRole
from worldsim.roles.registry import RoleSpec, get_role
from worldsim.sim.lineage import calendar_of
from worldsim.sim.news import assess, news_items, news_record
from worldsim.sim.particles import (
    Particle,
    parent_particles,
    parent_values,
    reweighted_timeline,
    verified_parent,
)
from worldsim.sim.plan import ModelSource, route_table, with_role_routes
from worldsim.sim.resume import resume_config
from worldsim.sim.scheduler import Engine, Observer
from worldsim.sim.session import EngineOptions, check_trace_target, prepare, run_engine
from worldsim.sim.settlement import RunResult
from worldsim.trace.data import InterventionData
from worldsim.trace.lineage import LikelihoodData, ParentRef, ReweightingData, ReweightRow
from worldsim.trace.writer import TraceWriter
from worldsim.world.build import WorldSource, tick_dates, tick_of
from worldsim.world.particles import NoSurvivors, reweigh, reweighted_value
from worldsim.world.timeline import Timeline
from worldsim.world.views import NewsItem

__all__ = ["ASSESSOR", "Continuation", "continue_run", "continued_name"]

ASSESSOR = "assessor"
"""The role slot that judges the news (``roles: {assessor: NAME}`` puts another in it)."""


def continued_name(name: str, as_of: datetime) -> str:
    """A continued trace's file name: the file name of the trace it continues (``name``), with
    the date it continues to (to the second, and the microsecond where it has one)."""
    stamp = as_of.strftime("%Y%m%d")
    if as_of.time() != clock.min:
        stamp += as_of.strftime("T%H%M%S")
    if as_of.microsecond:
        stamp += as_of.strftime(".%f")
    return name.removesuffix(".jsonl") + f"__to{stamp}.jsonl"


class Continuation:
    """What continuing ``parent`` to ``as_of`` needs, read and checked before any file is
    written: the parent's settings, the cut tick, the particles, the parent's interventions
    dated in the ticks still to run and the new run's config."""

    def __init__(self, parent: Path, as_of: datetime, models: ModelConfig | None = None) -> None:
        trace, result = verified_parent(parent)
        config = resume_config(trace, models)
        if config.condition == "near_resolution":
            raise ConfigError(
                "a near_resolution run sees past its date; it cannot be continued", file=parent
            )
        calendar = calendar_of(trace, config)
        origin = calendar.as_of
        since = config.gateway_cutoff
        card = config.card
        if not since < as_of < card.deadline:
            raise ConfigError(
                f"{utc_iso(as_of)} is not after the parent's date {utc_iso(since)} and before "
                f"the deadline {utc_iso(card.deadline)}",
                field="as_of",
            )
        ticks = config.effective_ticks
        self.tick = tick_of(calendar, ticks, as_of)
        self.dates = tick_dates(calendar, ticks)
        self.as_of = as_of
        self.since = since
        self.particles = parent_particles(trace, self.tick)
        if any(m is not None for p in self.particles for m in p.state.cohorts.members):
            # a particle records its members by count and digest; members the ticks have
            # moved could not be made again from the trace, so the new trace would not verify
            raise ConfigError(
                "a run whose cohorts have members cannot be continued: a particle records its "
                "members by digest, and members the ticks have moved cannot be made again "
                "from the trace; run the card from that date instead (`forecast_date` in a "
                "--config file)",
                file=parent,
            )
        self.values = parent_values(trace, [p.id for p in self.particles])
        self.interventions: tuple[InterventionData, ...] = tuple(
            line.data
            for line in trace.effective
            if line.type == "intervention" and line.data.tick >= self.tick
        )
        self.config = config.model_copy(update={"forecast_date": as_of})
        self.ref = ParentRef(
            run=trace.run_id,
            path=str(Path(parent).absolute()),  # found again from any folder
            head=str(result.head),
            canonical=str(result.canonical),
            tick=self.tick,
            as_of=utc_iso(as_of),
            origin=utc_iso(origin),
            since=utc_iso(since),
        )
        self.assessor = get_role(config.roles.get(ASSESSOR, ASSESSOR), "news")
        audit = trace.first("audit")
        self.world_source: WorldSource = audit.data.world if audit is not None else "seeds"


class ContinuingEngine(Engine):
    """An :class:`Engine` that starts from a parent's particles instead of a new world."""

    def __init__(
        self,
        plan_of: Continuation,
        writer: TraceWriter,
        plan: Mapping[str, RoleSpec],
        source: ModelSource,
        observer: Observer | None,
        guard: LeakageGuard | None,
    ) -> None:
        super().__init__(plan_of.config, writer, plan, source, observer, guard)
        self.plan_of = plan_of
        self.dates = plan_of.dates  # the parent's calendar: ticks keep their dates

    async def run(self) -> RunResult:
        started = time.perf_counter()
        cont, writer = self.plan_of, self.writer
        spec = cont.assessor
        assert spec.prompt is not None  # a news role is a prompt role
        route = route_table(self.config.models).for_role(spec.name)
        header = self.header()
        header["parent"] = cont.ref.model_dump(mode="json")
        header["prompt_versions"] = {**header["prompt_versions"], spec.name: spec.version}
        header["routes"] = {**header["routes"], spec.name: str(route)}
        await writer.emit("run_started", header)
        for intervention in cont.interventions:
            await writer.emit("intervention", intervention)
        for p in cont.particles:
            await writer.emit("particle", p.data, tl=p.id)
        settings = self.policy.news
        async with gateway_for_card(
            self.config.card, card_path=self.config.card_path, cutoff=cont.as_of
        ) as gateway:
            docs = await gateway.published_since(cont.since, limit=settings.max_news)
        news = news_items(docs)
        for item in news:
            await writer.emit("news", news_record(item), tick=cont.tick)
        likelihoods = await self._assess(spec.prompt, news, settings.strength)
        for p in cont.particles:
            await writer.emit("likelihood", likelihoods[p.id], tl=p.id, tick=cont.tick)
        starts = await self._reweigh(likelihoods, settings.prune_below)
        self.world_source = cont.world_source
        await self._simulate(starts)
        return await self._settle(started)

    async def _assess(
        self, prompt: PromptRole, news: tuple[NewsItem, ...], strength: float
    ) -> dict[str, LikelihoodData]:
        """One assessor call per particle (for all its news), the particles concurrently."""
        cont = self.plan_of
        model = traced(self.source.for_role(prompt.name), self._trace_call)
        out: dict[str, LikelihoodData] = {}

        async def one(p: Particle) -> None:
            out[p.id] = await assess(
                prompt,
                model,
                card=self.card,
                particle=p,
                news=news,
                tick=cont.tick,
                date=cont.as_of,
                strength=strength,
                seed=self.config.seed,
            )

        async with anyio.create_task_group() as tg:
            for p in cont.particles:
                tg.start_soon(one, p)
        return out

    async def _reweigh(
        self, likelihoods: Mapping[str, LikelihoodData], prune_below: float
    ) -> list[tuple[Timeline, int, bool]]:
        """Re-weight the particles, record it, end the settled and the pruned ones, and give
        the survivors that still run, each from the cut tick."""
        cont, writer, j = self.plan_of, self.writer, self.plan_of.tick
        particles, values = cont.particles, cont.values
        try:
            made = reweigh(
                [p.data.mass for p in particles],
                [likelihoods[p.id].likelihood for p in particles],
                prune_below,
            )
        except NoSurvivors as exc:
            raise NewsLeavesNoPath(
                f"the news up to {utc_iso(cont.as_of)} leaves no timeline: {exc}; the cause is "
                f"the policy's prune_below {prune_below} (the parent's policy): continue a run "
                "whose policy sets a lower one",
                file=writer.path,
            ) from None
        await writer.emit(
            "reweighting",
            ReweightingData(
                rows=[
                    ReweightRow(
                        timeline=p.id,
                        prior=p.data.mass,
                        likelihood=made.likelihood[i],
                        posterior=made.posterior[i],
                        pruned=made.pruned[i],
                        value=values[i] if values is not None else None,
                    )
                    for i, p in enumerate(particles)
                ],
                evidence=made.evidence,
                prune_below=prune_below,
                effective_paths=made.effective_paths,
                p_yes_reweighted=(
                    reweighted_value(made.posterior, values) if values is not None else None
                ),
            ),
            tick=j,
            durable=True,
        )
        starts: list[tuple[Timeline, int, bool]] = []
        for i, p in enumerate(particles):
            tl = reweighted_timeline(
                p,
                made.posterior[i],
                pruned=made.pruned[i],
                cut=j,
                as_of=utc_iso(cont.as_of),
                prune_below=prune_below,
            )
            if tl.status == "running":
                starts.append((tl, j, False))
                continue
            self.timelines[tl.id] = tl
            await self._ended(tl)
        return starts


async def continue_run(
    parent: str | Path,
    as_of: datetime,
    out: str | Path | None = None,
    *,
    models: ModelConfig | None = None,
    observer: Observer | None = None,
    trace_path: str | Path | None = None,
    **options: Unpack[EngineOptions],
) -> RunResult:
    """Continue the finished run whose trace is ``parent`` to ``as_of`` (see the module's doc)
    and write a new trace, by default beside the parent (``out``: another folder). ``models``
    may change cache, budget or limits; the routes are the parent's (the assessor's own
    front-matter route added where the parent names none for it). ``options``: how the trace
    is written and the models reached (`EngineOptions`), as for `run_card`."""
    parent = Path(parent)
    cont = await anyio.to_thread.run_sync(Continuation, parent, as_of, models)
    config: RunConfig = cont.config
    prepared = prepare(config, max_trace_mb=None)  # the parent's size was checked when it ran
    plan = prepared.plan
    config = with_role_routes(prepared.config, {ASSESSOR: cont.assessor})
    cont.config = config
    folder = Path(out) if out is not None else parent.parent
    # named as the trace it continues, then the date: not as a run started at that date, and
    # a chain (to one date, then another) apart from a run continued straight to the last
    path = Path(trace_path) if trace_path else folder / continued_name(parent.name, as_of)
    if path.resolve() == parent.resolve():
        raise ConfigError("the continued trace would replace its parent", file=path)
    check_trace_target(path, options.get("overwrite", False))
    return await run_engine(
        config,
        path,
        lambda session, writer: ContinuingEngine(
            cont, writer, plan, session.source, observer, session.guard
        ),
        resumes_from="reweighting",
        **options,
    )
