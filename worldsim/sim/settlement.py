"""The end of a run: the forecast-time causal graph (for a condition that builds one),
extraction over the timelines' leaves, the report, the audit and the sealed ``run_completed``
record."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worldsim.domain.config import RunConfig
from worldsim.domain.contracts import lineage
from worldsim.domain.errors import ModelError
from worldsim.domain.rng import rng_for
from worldsim.gateway import Gateway
from worldsim.models import LeakageGuard
from worldsim.roles.calling import call_role
from worldsim.roles.contracts import ReportRole
from worldsim.trace.audit import audit_run
from worldsim.trace.forecast import ForecastRecords, forecast_record
from worldsim.trace.records import (
    ExtractionData,
    ReportData,
    RunCompletedData,
)
from worldsim.trace.writer import TraceWriter
from worldsim.world.build import WorldSource
from worldsim.world.extraction import Leaf, extract
from worldsim.world.moves import Proposers, Report, TimelineSummary
from worldsim.world.timeline import Timeline
from worldsim.world.views import ReportContext

__all__ = ["Outcome", "RunResult", "Settled", "settle"]


@dataclass(frozen=True, slots=True)
class Settled:
    """What every finished run or direct forecast says of itself: who, the forecast, its trace."""

    card_id: str
    seed: int
    method: str
    run_id: str
    trace: Path
    wall_s: float
    extraction: ExtractionData
    head: str  # the trace's head: the SHA-256 of its sealed last line

    @property
    def p_yes(self) -> float | None:
        return self.extraction.p_yes

    @property
    def p_options(self) -> dict[str, float] | None:
        return self.extraction.p_options

    @property
    def unresolved_mass(self) -> float:
        return self.extraction.unresolved_mass

    def details(self) -> dict[str, Any]:
        """What this kind of run adds to its summary."""
        return {}

    def summary(self) -> dict[str, Any]:
        """The one JSON object ``--json`` prints of it."""
        extraction = self.extraction
        return {
            "card_id": self.card_id,
            "seed": self.seed,
            "method": self.method,
            "p_yes": extraction.p_yes,
            "p_options": extraction.p_options,
            "unresolved_mass": extraction.unresolved_mass,
            "extraction_rule": extraction.rule,
            **self.details(),
            "wall_s": round(self.wall_s, 4),
            "trace": str(self.trace),
            "run_id": self.run_id,
            "head": self.head,
        }


@dataclass(frozen=True, slots=True)
class RunResult(Settled):
    """A finished multiverse run: its forecast, how many timelines and forks, its trace."""

    timelines: int
    forks: int
    forks_rejected: int

    def details(self) -> dict[str, Any]:
        return {
            "timelines": self.timelines,
            "forks": self.forks,
            "forks_rejected": self.forks_rejected,
        }


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the scheduler leaves behind for settlement."""

    timelines: Mapping[str, Timeline]
    forks: list[dict[str, Any]]
    forks_rejected: int
    init_problems: list[str]
    world_source: WorldSource
    proposals_seen: Proposers
    gateway: Gateway | None
    forecast: ForecastRecords | None = None  # kept as written, when the run builds a graph


async def settle(
    config: RunConfig,
    outcome: Outcome,
    reporter: ReportRole,
    writer: TraceWriter,
    guard: LeakageGuard | None,
    started: float,
) -> RunResult:
    """Forecast graph, extraction, report, audit and the sealed end of the trace."""
    card, seed = config.card, config.seed
    if outcome.forecast is not None:
        writer.tap = None  # the graph's records are all kept: let them go with the graph
        await writer.emit("forecast_graph", forecast_record(outcome.forecast.views()))
    timelines = outcome.timelines.values()
    options = None if card.kind == "binary" else [ep.id for ep in card.scored_endpoints]
    leaves = [
        Leaf(tl.id, tl.mass, tl.settlement, tl.forced_p_yes, tl.forced_probs) for tl in timelines
    ]
    extraction = extract(leaves, config.extraction_rule, options)
    await writer.emit("extraction", extraction)
    summaries = _summaries(timelines)
    report_failed: str | None = None
    try:
        report: Report = await call_role(
            reporter,
            "report",
            ReportContext(
                card=card,
                timelines=summaries,
                p_yes=extraction.p_yes,
                rng=rng_for(seed, "report"),
                forks=tuple(
                    sorted(
                        outcome.forks,
                        key=lambda f: (lineage(f["parent"]), f["tick"], lineage(f["child"])),
                    )
                ),
            ),
            (Report,),
            "a Report",
        )
    except ModelError as exc:
        if exc.ends_run:
            raise  # a strict replay's miss, a route that gave no reply: the run ends
        report_failed = f"reporter failed: {exc.message}"
        report = Report(summary=report_failed[:2000], claims=())
    await writer.emit("report", ReportData(summary=report.summary, claims=list(report.claims)))
    gateway = outcome.gateway
    audit = audit_run(
        card=card,
        init_problems=outcome.init_problems,
        world_source=outcome.world_source,
        timelines=summaries,
        extraction=extraction,
        claims=report.claims,
        proposals=outcome.proposals_seen,
        documents=gateway.documents if gateway is not None else None,
        report_failed=report_failed,
        leakage=guard,
    )
    await writer.emit("audit", audit)
    count = len(outcome.timelines)
    await writer.emit(
        "run_completed",
        RunCompletedData(
            timelines=count,
            forks=len(outcome.forks),
            forks_rejected=outcome.forks_rejected,
            p_yes=extraction.p_yes,
        ),
        durable=True,
    )
    return RunResult(
        card_id=card.id,
        seed=seed,
        method=config.method_label,
        run_id=writer.run_id,
        trace=writer.path,
        timelines=count,
        forks=len(outcome.forks),
        forks_rejected=outcome.forks_rejected,
        wall_s=time.perf_counter() - started,
        extraction=extraction,
        head=writer.prev,
    )


def _summaries(timelines: Iterable[Timeline]) -> tuple[TimelineSummary, ...]:
    return tuple(
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
        for tl in sorted(timelines, key=lambda t: lineage(t.id))
    )
