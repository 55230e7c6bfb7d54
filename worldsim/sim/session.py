"""One run session: a :class:`RunConfig` (plus where the trace goes) becomes a running engine.

Every way of running goes through here — ``worldsim run``, ``worldsim run --resume``,
``worldsim forecast`` (the direct baseline), a study's jobs and the library's :func:`run_card`
— so the models, cache, pool, leakage guard, role plan and trace writer are set up and closed
in one place. :func:`prepare` checks everything about a config that can be checked before a
trace file is created, so bad input leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict, Unpack

import anyio

from worldsim.domain.bounds import DEFAULT_MAX_TRACE_MB
from worldsim.domain.config import ModelConfig, RunConfig
from worldsim.domain.contracts import Model
from worldsim.domain.errors import ConfigError
from worldsim.gateway.gateway import check_evidence
from worldsim.models import (
    Budget,
    LeakageGuard,
    LeakageGuardModel,
    ModelOptions,
    ModelPool,
    PriceTable,
    ResponseCache,
    RetryPolicy,
)
from worldsim.models.cache import CACHE_FILE, default_cache_dir
from worldsim.models.pool import Shared
from worldsim.models.recorded import RecordedReplies
from worldsim.models.routes import resolve_settings
from worldsim.offline import OfflineModel
from worldsim.roles.registry import RoleSpec
from worldsim.sim.direct import (
    DirectResult,
    default_direct_role,
    direct_request,
    forecast_card,
)
from worldsim.sim.failure import guarded, unwrap_error
from worldsim.sim.plan import (
    ModelSource,
    check_run_size,
    role_plan,
    route_table,
    trace_name,
    with_role_routes,
)
from worldsim.sim.scheduler import Engine, Observer
from worldsim.sim.settlement import RunResult
from worldsim.trace.signing import Signer
from worldsim.trace.writer import TRACE_EXISTS, TraceWriter

__all__ = [
    "EngineOptions",
    "OfflineSource",
    "Prepared",
    "Session",
    "check_trace_target",
    "forecast",
    "guarded",
    "open_models",
    "open_session",
    "prepare",
    "run_card",
    "run_engine",
    "unwrap_error",
]


def check_trace_target(path: Path, overwrite: bool) -> None:
    """Refuse, before anything is written, a trace path that cannot take a new trace: one that
    exists (unless ``overwrite``) or is a folder, or whose folder is a file."""
    for folder in (path.parent, *path.parent.parents):
        if folder.exists():
            if not folder.is_dir():
                raise ConfigError("not a folder", file=folder, field="out")
            break
    if path.is_dir():
        raise ConfigError("a folder is in the trace's place", file=path)
    if path.exists() and not overwrite:
        raise ConfigError(TRACE_EXISTS, file=path)


@dataclass(frozen=True, slots=True)
class Prepared:
    """A run's settings, checked: what `prepare` found before any file is touched."""

    config: RunConfig
    """The settings, with each prompt role's own front-matter route added."""
    plan: Mapping[str, RoleSpec]
    """The role of each slot and tick role (see `role_plan`); empty for a direct forecast."""
    direct_role: str | None
    """The prompt role a direct forecast asks; ``None`` for a multiverse run."""
    trace_name: str
    """The trace's file name in its output folder (see `trace_name`)."""

    def trace_path(self, out: str | Path, trace_path: str | Path | None = None) -> Path:
        """Where the trace goes: ``trace_path`` if given, else ``out`` / `trace_name`."""
        return Path(trace_path) if trace_path else Path(out) / self.trace_name


def prepare(
    config: RunConfig,
    *,
    max_trace_mb: float | None = DEFAULT_MAX_TRACE_MB,
    direct: bool | None = None,
) -> Prepared:
    """Check ``config`` for everything that can fail before a run starts: the roles (unknown
    names, wrong phases), the extraction rule, the routes, and for a multiverse run its size
    against ``max_trace_mb`` (``None``: no limit). ``direct``: prepare the direct forecast of
    the config's card (default: when its ``kind`` is ``direct``). The one set-up path of every
    run."""
    name = trace_name(config)
    if config.kind == "direct" if direct is None else direct:
        role = config.roles.get("direct") or default_direct_role(config.card)
        direct_request(config.card, seed=config.seed, role_name=role)
        route_table(config.models)
        return Prepared(config, {}, role, name)
    plan = role_plan(config)
    check_run_size(config, plan, max_trace_mb)
    routed = with_role_routes(config, plan)
    route_table(routed.models)
    return Prepared(routed, plan, None, name)


class OfflineSource:
    """Every role on the ``offline`` route: one shared offline model."""

    def __init__(self, model: Model | None = None) -> None:
        self.model = model if model is not None else OfflineModel()

    def for_role(self, role: str) -> Model:
        return self.model


class GuardedSource:
    """A model source with the run's leakage guard around every model."""

    def __init__(self, source: ModelSource, guard: LeakageGuard | None) -> None:
        self.source = source
        self.guard = guard

    def for_role(self, role: str) -> Model:
        model = self.source.for_role(role)
        return LeakageGuardModel(model, self.guard) if self.guard is not None else model


def _guard(models: ModelConfig) -> LeakageGuard | None:
    if models.forbidden_strings is None:
        return None
    return LeakageGuard.from_file(models.forbidden_strings, mode=models.leakage)


def run_budget(models: ModelConfig, spent_usd: float = 0.0) -> Budget | None:
    """The budget of ``models.max_cost_usd`` (``None`` when there is no cap), of which
    ``spent_usd`` is already spent."""
    if models.max_cost_usd is None:
        return None
    return Budget(models.max_cost_usd, spent_usd=spent_usd)


def build_pool(
    models: ModelConfig,
    cache: ResponseCache | None,
    guard: LeakageGuard | None = None,
    environ: Mapping[str, str] | None = None,
    shared: Shared | None = None,
    recorded: RecordedReplies | None = None,
) -> ModelPool:
    """The run's model pool. Reads keys and base URLs (``environ``, else the environment and
    ``.env``) and the price table, so a missing setting fails here, before a trace exists.
    ``shared`` holds what several runs share (a study's jobs): its budget replaces the one
    ``models`` sets, its limiters the run's own connection limits. ``recorded``: a resumed
    run's answered calls, never paid again."""
    shared = shared or Shared()
    return ModelPool(
        route_table(models),
        options=ModelOptions(
            retry=RetryPolicy.from_settings(models.retry),
            max_connections=models.max_connections,
            prices=PriceTable.load(models.prices),
            routes=models.routes,
            deadline_s=models.deadline_s,
        ),
        cache=cache,
        budget=shared.budget if shared.budget is not None else run_budget(models),
        limiters=shared.limiters,
        clients=shared.clients,
        guard=guard,
        environ=environ,
        offline=OfflineModel,
        recorded=recorded,
    )


@dataclass(frozen=True, slots=True)
class Session:
    """A run's open models, with everything the engine needs to start."""

    config: RunConfig
    source: ModelSource
    guard: LeakageGuard | None

    def engine(
        self, writer: TraceWriter, plan: Mapping[str, RoleSpec], observer: Observer | None
    ) -> Engine:
        return Engine(self.config, writer, plan, self.source, observer, self.guard)


@contextlib.asynccontextmanager
async def open_models(
    models: ModelConfig,
    *,
    guard: LeakageGuard | None = None,
    model_source: ModelSource | None = None,
    environ: Mapping[str, str] | None = None,
    shared: Shared | None = None,
    recorded: RecordedReplies | None = None,
) -> AsyncIterator[ModelSource]:
    """Open the response cache and the model pool of ``models``, and close them on the way out.

    With ``model_source`` (a test's doubles), its models replace the routes' and no pool is
    built; when every route is offline, the offline model answers them all and no cache is opened.
    ``shared`` is what the models share with other runs, ``recorded`` a resumed run's answered
    calls (see `build_pool`).
    """
    async with contextlib.AsyncExitStack() as stack:
        if models.prices is not None:  # a bad price file is refused whatever the routes
            await anyio.to_thread.run_sync(PriceTable.load, models.prices)
        if model_source is not None:
            yield GuardedSource(model_source, guard)
            return
        remote = [route for route in route_table(models).routes() if not route.is_offline]
        if not remote:
            yield GuardedSource(OfflineSource(OfflineModel()), guard)
            return
        for route in remote:  # a missing base URL or key fails before any file is made
            resolve_settings(route, environ=environ)
        cache: ResponseCache | None = None
        if models.cache != "off":
            folder = models.cache_dir or default_cache_dir()
            cache = await ResponseCache.open(
                folder / CACHE_FILE,
                mode=models.cache,
                strict=models.replay_strict,
            )
            stack.push_async_callback(cache.aclose)
        pool = await anyio.to_thread.run_sync(
            build_pool, models, cache, guard, environ, shared, recorded
        )
        stack.push_async_callback(pool.aclose)
        yield pool


@contextlib.asynccontextmanager
async def open_session(
    config: RunConfig,
    out: str | Path,
    *,
    model_source: ModelSource | None = None,
    environ: Mapping[str, str] | None = None,
    shared: Shared | None = None,
    recorded: RecordedReplies | None = None,
) -> AsyncIterator[Session]:
    """Open the run's models (`open_models`), and close them on the way out."""
    guard = _guard(config.models)
    async with open_models(
        config.models,
        guard=guard,
        model_source=model_source,
        environ=environ,
        shared=shared,
        recorded=recorded,
    ) as source:
        yield Session(config, source, guard)


class EngineOptions(TypedDict, total=False):
    """How a run writes its trace and reaches its models: `run_engine`'s keywords, which
    `run_card`, `worldsim.sim.continuation.continue_run` and a study's jobs pass on."""

    overwrite: bool
    fsync: bool
    model_source: ModelSource | None
    environ: Mapping[str, str] | None
    shared: Shared | None
    signer: Signer | None


async def run_card(
    config: RunConfig,
    out: str | Path = "traces",
    *,
    observer: Observer | None = None,
    trace_path: str | Path | None = None,
    max_trace_mb: float | None = DEFAULT_MAX_TRACE_MB,
    **options: Unpack[EngineOptions],
) -> RunResult:
    """Run one card under one policy and seed; stream the trace into ``out``.

    A failure during the run ends the trace with ``run_failed``; a run stopped by its budget is
    marked resumable. ``model_source`` replaces the configured routes' models (tests pass
    ``worldsim.testing`` doubles); ``environ`` replaces the environment for keys and base URLs;
    ``shared`` is what the run shares with other runs (see `build_pool`).
    A run whose estimated trace exceeds ``max_trace_mb`` (``None``: no limit) refuses to start.
    ``signer`` signs the sealed last record.
    """
    if config.kind != "multiverse":
        raise ConfigError("a direct config runs with `worldsim forecast`", field="kind")
    prepared = prepare(config, max_trace_mb=max_trace_mb)
    path = prepared.trace_path(out, trace_path)
    check_trace_target(path, options.get("overwrite", False))
    return await run_engine(
        prepared.config,
        path,
        lambda session, writer: session.engine(writer, prepared.plan, observer),
        **options,
    )


async def run_engine(
    config: RunConfig,
    path: Path,
    make: Callable[[Session, TraceWriter], Engine],
    *,
    overwrite: bool = False,
    fsync: bool = True,
    model_source: ModelSource | None = None,
    environ: Mapping[str, str] | None = None,
    shared: Shared | None = None,
    signer: Signer | None = None,
    resumes_from: str | None = None,
) -> RunResult:
    """Open the run's models, create its trace at ``path`` and run the engine ``make`` builds
    (a new run's, or a continued run's), guarded: a failure ends the trace with ``run_failed``.
    ``resumes_from``: the record a resume needs the trace to hold (a continued run's
    ``reweighting``); None where a resume can start from anything (a new run cut before its
    world runs again)."""
    await check_evidence(config.card, card_path=config.card_path)
    async with open_session(
        config, path.parent, model_source=model_source, environ=environ, shared=shared
    ) as session:
        writer = await TraceWriter.create(
            path, uuid.uuid4().hex[:16], fsync=fsync, overwrite=overwrite
        )
        writer.signer = signer
        try:
            made = [make(session, writer)]
        except BaseException:  # before the first record (a role that cannot be built)
            with contextlib.suppress(OSError):
                writer.path.unlink()  # held still: no run left anything in it
            await writer.aclose()
            raise

        async def body() -> RunResult:  # the engine lives only while it runs (see guarded)
            return await made.pop().run()

        return await guarded(
            writer,
            body,
            has_world=lambda: resumes_from is None or resumes_from in writer.types_written,
        )
    raise AssertionError("unreachable")  # pragma: no cover


async def forecast(
    config: RunConfig,
    out: str | Path = "traces",
    *,
    overwrite: bool = False,
    fsync: bool = True,
    trace_path: str | Path | None = None,
    model_source: ModelSource | None = None,
    environ: Mapping[str, str] | None = None,
    shared: Shared | None = None,
    signer: Signer | None = None,
) -> DirectResult:
    """The direct baseline for ``config.card``: one call on the direct role's route.

    The role is ``config.roles["direct"]`` (default ``direct``, or ``direct_choice`` for a
    multiple-choice card), a prompt role of phase ``direct``. On the ``offline`` route the
    offline model answers with the card's base rate. ``shared`` is what the call shares with
    other runs (see `build_pool`); ``signer`` signs the sealed last record.
    """
    prepared = prepare(config, direct=True)  # a bad card or role fails here
    role = prepared.direct_role or default_direct_role(config.card)
    route = route_table(config.models).for_role(role)
    path = prepared.trace_path(out, trace_path)
    check_trace_target(path, overwrite)
    async with open_session(
        config, out, model_source=model_source, environ=environ, shared=shared
    ) as session:
        return await forecast_card(
            config.card,
            model=session.source.for_role(role),
            route=route.name,
            out=out,
            seed=config.seed,
            overwrite=overwrite,
            fsync=fsync,
            method=config.method_label,
            guard=session.guard,
            config=config,
            role=role,
            trace_path=path,
            signer=signer,
        )
    raise AssertionError("unreachable")  # pragma: no cover
