"""Where a study's jobs run: in this process (`LocalExecutor`, the default), or as Ray tasks on
a cluster (`worldsim.study.ray_executor.RayExecutor`, the ``worldsim[ray]`` extra).

An executor opens a `JobRunner` for one study invocation, given the study's budget and its
per-route connection limits; the runner runs one job at a time per call, through the engine's
own entry points (`execute_job`), and leaves the job's trace at its place in the study folder.
Which executor ran a job never changes its trace's canonical hash.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from worldsim.models import Budget
from worldsim.models.limits import RouteLimiters
from worldsim.models.pool import HttpClients, Shared
from worldsim.sim.continuation import continue_run
from worldsim.sim.resuming import resume_run
from worldsim.sim.session import EngineOptions, forecast, run_card
from worldsim.study.jobs import Job

__all__ = [
    "STUDY_BUDGET_RAISED_BY",
    "Action",
    "Executor",
    "JobRunner",
    "JobSettings",
    "LocalExecutor",
    "execute_job",
]

Action = Literal["keep", "keep_failed", "run", "restart", "resume"]

STUDY_BUDGET_RAISED_BY = (
    "raise the manifest's max_cost_usd, then `worldsim batch --retry-failed` goes on"
)
"""What a study's budget refusal says goes on (a study's budget is its manifest's)."""


@dataclass(frozen=True, slots=True)
class JobSettings:
    """What every job of one invocation is run with, besides its own config."""

    environ: Mapping[str, str] | None = None
    """Replaces the environment for the routes' keys and base URLs (``None``: the process's)."""
    fsync: bool = True
    cache_dir: Path | None = None
    """The response cache's folder for every method that names none (``None``: the user's)."""


class JobRunner(Protocol):
    """Runs the jobs of one invocation."""

    async def exhausted(self) -> bool:
        """Whether the study's budget is spent: no job starts then."""
        ...

    async def execute(self, job: Job, action: Action, out: Path) -> None:
        """Run, restart or resume ``job``; its trace ends at ``out / job.trace``. A failure of
        the run is a `WorldsimError` (the trace says how far it got)."""
        ...


class Executor(Protocol):
    def open(
        self, budget: Budget | None, limiters: RouteLimiters, settings: JobSettings
    ) -> contextlib.AbstractAsyncContextManager[JobRunner]:
        """A runner whose jobs share ``budget`` and ``limiters`` (changes of a limit reach
        ``limiters.on_change``)."""
        ...


async def execute_job(
    job: Job, action: Action, out: Path, settings: JobSettings, shared: Shared
) -> None:
    """Run, restart or resume one job into ``out`` through the engine's own entry points."""
    path = out / job.trace
    config = job.config
    if settings.cache_dir is not None and config.models.cache_dir is None:
        models = config.models.model_copy(update={"cache_dir": settings.cache_dir})
        config = config.model_copy(update={"models": models})
    fsync, environ = settings.fsync, settings.environ
    options: EngineOptions = {
        "overwrite": True,
        "fsync": fsync,
        "environ": environ,
        "shared": shared,
    }
    if config.kind != "direct" and action == "resume":  # a continued run's too
        await resume_run(path, models=config.models, fsync=fsync, environ=environ, shared=shared)
        return
    if job.previous is not None:  # a rolling job: the job before it, carried forward
        await continue_run(
            out / job.previous, job.when, models=config.models, trace_path=path, **options
        )
        return
    start = forecast if config.kind == "direct" else run_card
    await start(config, out, trace_path=path, **options)


@dataclass(frozen=True, slots=True)
class _LocalRunner:
    settings: JobSettings
    shared: Shared

    async def exhausted(self) -> bool:
        return self.shared.budget is not None and self.shared.budget.exhausted

    async def execute(self, job: Job, action: Action, out: Path) -> None:
        await execute_job(job, action, out, self.settings, self.shared)


class LocalExecutor:
    """Every job in this process, concurrently on its event loop."""

    @contextlib.asynccontextmanager
    async def open(
        self, budget: Budget | None, limiters: RouteLimiters, settings: JobSettings
    ) -> AsyncIterator[JobRunner]:
        async with HttpClients() as clients:  # one per route for all the jobs
            yield _LocalRunner(settings, Shared(budget, limiters, clients))
