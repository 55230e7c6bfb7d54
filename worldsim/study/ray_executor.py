"""A study's jobs as Ray tasks (``worldsim batch --executor ray``, the ``worldsim[ray]`` extra).

Each job runs as one Ray task (one CPU) on any node of the cluster, into a temporary folder on
that node; the task sends the finished trace back, and this process writes it into the study
folder (atomically, so a job lost with its node leaves nothing half-written). A torn trace to
resume travels the other way. The study's budget and its per-route connection limits stay
global: one Ray actor, the `Governor`, owns them, and every model call on every node reserves
its cost and takes its connection from it (a route whose provider over-reports usage is
distrusted there, for every job). Changes of a limit come back to this process and
go to ``DIR/limits.jsonl`` as in a local study.

What a node needs: worldsim installed with the same version (``pip install 'worldsim[ray]'``),
the routes' keys and base URLs in its environment, and any evidence database a card names at
the same path (a shared file system). Which node ran a job never changes its trace's canonical
hash: a run depends on its config and seed alone.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from worldsim.domain.collector import collector_paced
from worldsim.domain.contracts import ModelRequest
from worldsim.domain.errors import BudgetExhausted, ConfigError, ProviderAnomaly, WorldsimError
from worldsim.domain.files import write_files
from worldsim.models import Budget
from worldsim.models.limits import AdaptiveLimiter, LimitChange, RouteLimiters, Ticket
from worldsim.models.pool import Shared
from worldsim.study.execution import (
    STUDY_BUDGET_RAISED_BY,
    Action,
    JobRunner,
    JobSettings,
    execute_job,
)
from worldsim.study.jobs import Job

__all__ = ["Governor", "RayExecutor"]

POLL_S = 0.5
"""How often the limits' changes are fetched from the governor while jobs run."""

Refusal = tuple[str, str]
"""A reservation the governor refused: the error's kind and its message."""


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "the ray executor needs Ray: pip install 'worldsim[ray]'", field="executor"
        ) from None
    return ray


class Governor:
    """The study's budget and connection limits, in one Ray actor that every job calls.

    A reservation or a connection is named by a token its caller makes; a caller that gives
    up while waiting (its call was cancelled) gives the token back, and whatever the token
    gets later is released at once, so nothing is held for a caller that left.
    """

    def __init__(
        self,
        max_usd: float | None,
        spent_usd: float,
        max_connections: int,
        per_route: dict[str, int],
    ) -> None:
        self.budget = Budget(max_usd, spent_usd=spent_usd, raised_by=STUDY_BUDGET_RAISED_BY)
        self.changes: list[LimitChange] = []
        self.limiters = RouteLimiters(max_connections, per_route, on_change=self._changed)
        self._reserved: dict[str, float] = {}
        self._holding: dict[str, str] = {}
        self._dropped: set[str] = set()

    def _changed(self, change: LimitChange) -> None:
        if change.reason != "start":
            self.changes.append(change)

    async def reserve(self, token: str, usd: float, route: str | None = None) -> Refusal | None:
        """Reserve ``usd`` for ``token`` on ``route``; the refusal (its kind and message) if
        the budget is spent or the route distrusted."""
        if token in self._dropped:
            self._dropped.discard(token)
            return None
        try:
            await self.budget.acquire(usd, route=route)
        except BudgetExhausted as exc:
            return type(exc).__name__, exc.message
        if token in self._dropped:
            self._dropped.discard(token)
            self.budget.release(usd, 0.0)
        else:
            self._reserved[token] = usd
        return None

    async def settle(self, token: str, cost_usd: float) -> None:
        usd = self._reserved.pop(token, None)
        if usd is None:
            self._dropped.add(token)  # its reservation has not arrived yet
        else:
            self.budget.release(usd, cost_usd)

    async def take(self, route: str, borrower: str) -> int:
        """Hold one connection of ``route`` for ``borrower``; the limit's epoch."""
        if borrower in self._dropped:
            self._dropped.discard(borrower)
            return 0
        limiter = self.limiters.get(route)
        ticket = await limiter.take(borrower)
        if borrower in self._dropped:
            self._dropped.discard(borrower)
            limiter.give_back(borrower)
        else:
            self._holding[borrower] = route
        return ticket.epoch

    async def give_back(self, route: str, borrower: str) -> None:
        if self._holding.pop(borrower, None) is None:
            self._dropped.add(borrower)  # its connection has not arrived yet
        else:
            self.limiters.get(route).give_back(borrower)

    async def succeeded(self, route: str, epoch: int) -> None:
        self.limiters.get(route).succeeded(Ticket(epoch))

    async def congested(
        self, route: str, epoch: int, reason: str, retry_after_s: float | None
    ) -> None:
        self.limiters.get(route).congested(Ticket(epoch), reason, retry_after_s)

    async def distrust(self, route: str, reason: str) -> None:
        self.budget.distrust(route, reason)

    async def exhausted(self) -> bool:
        return self.budget.exhausted

    async def changes_since(self, n: int) -> list[LimitChange]:
        return self.changes[n:]


class RemoteBudget(Budget):
    """A job's view of the governor's budget: each reservation is made there."""

    def __init__(self, governor: Any, max_usd: float | None) -> None:
        super().__init__(max_usd)
        self._governor = governor

    async def acquire(
        self, usd: float, request: ModelRequest | None = None, *, route: str | None = None
    ) -> str:
        token = uuid.uuid4().hex
        try:
            refusal = await self._governor.reserve.remote(token, usd, route)
        except BaseException:
            self._governor.settle.remote(token, 0.0)
            raise
        if refusal is not None:
            kind, message = refusal
            site = request.site if request is not None else None
            error = ProviderAnomaly if kind == ProviderAnomaly.__name__ else BudgetExhausted
            raise error(
                message,
                timeline=site.timeline if site else None,
                tick=site.tick if site else None,
            )
        return token

    def distrust(self, route: str, reason: str) -> None:
        super().distrust(route, reason)
        self._governor.distrust.remote(route, reason)

    def release(self, reserved: float, cost: float, token: str | None = None) -> None:
        if token is not None:
            self._governor.settle.remote(token, cost)


class RemoteLimiter(AdaptiveLimiter):
    """A job's view of one route's limit at the governor: each attempt holds a connection
    there, and tells it how the server answered."""

    def __init__(self, governor: Any, route: str) -> None:
        super().__init__(route, 1)
        self._governor = governor
        self._borrowers: dict[int, str] = {}

    async def __aenter__(self) -> Ticket:
        borrower = uuid.uuid4().hex
        try:
            epoch = await self._governor.take.remote(self.route, borrower)
        except BaseException:
            self._governor.give_back.remote(self.route, borrower)
            raise
        self._borrowers[anyio.get_current_task().id] = borrower
        return Ticket(epoch)

    async def __aexit__(self, *exc_info: object) -> None:
        borrower = self._borrowers.pop(anyio.get_current_task().id)
        self._governor.give_back.remote(self.route, borrower)

    def succeeded(self, ticket: Ticket) -> None:
        self._governor.succeeded.remote(self.route, ticket.epoch)

    def congested(self, ticket: Ticket, reason: str, retry_after_s: float | None) -> None:
        self._governor.congested.remote(self.route, ticket.epoch, reason, retry_after_s)


class RemoteLimiters(RouteLimiters):
    """Every route's limit at the governor."""

    def __init__(self, governor: Any) -> None:
        super().__init__()
        self._governor = governor

    def get(self, route: str) -> AdaptiveLimiter:
        limiter = self._limiters.get(route)
        if limiter is None:
            limiter = self._limiters[route] = RemoteLimiter(self._governor, route)
        return limiter


def run_remote_job(
    job: Job,
    action: Action,
    trace: bytes | None,
    governor: Any,
    max_usd: float | None,
    settings: JobSettings,
    folder: str,
    previous: bytes | None = None,
) -> tuple[bytes | None, str | None]:
    """One job on a Ray worker: its trace's bytes and its failure's message, if any (paths in
    it name the study folder ``folder``, not the worker's temporary one). ``previous`` is the
    trace a rolling job continues, put where the job expects it."""
    with tempfile.TemporaryDirectory(prefix="worldsim-job-") as tmp:
        out = Path(tmp)
        path = out / job.trace
        if trace is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(trace)
        if previous is not None and job.previous is not None:
            (out / job.previous).parent.mkdir(parents=True, exist_ok=True)
            (out / job.previous).write_bytes(previous)
        shared = Shared(RemoteBudget(governor, max_usd), RemoteLimiters(governor))
        error: str | None = None
        try:
            with collector_paced():  # the worker's process is the study's, as a command's
                anyio.run(execute_job, job, action, out, settings, shared)
        except WorldsimError as exc:
            error = str(exc).replace(tmp, folder)
        return (path.read_bytes() if path.exists() else None), error


class JobFailed(WorldsimError):
    """A job's run failed on a Ray worker (the message is the worker's)."""


@dataclass(frozen=True, slots=True)
class _RayRunner:
    ray: Any
    governor: Any
    task: Any
    max_usd: float | None
    settings: JobSettings

    async def exhausted(self) -> bool:
        return bool(await self.governor.exhausted.remote())

    async def execute(self, job: Job, action: Action, out: Path) -> None:
        path = out / job.trace
        trace = path.read_bytes() if action == "resume" else None
        previous = (out / job.previous).read_bytes() if job.previous is not None else None
        ref = self.task.remote(
            job, action, trace, self.governor, self.max_usd, self.settings, str(out), previous
        )
        try:
            data, error = await ref
        except BaseException:
            self.ray.cancel(ref)
            raise
        if data is not None:
            write_files({path: data})
        if error is not None:
            raise JobFailed(error)


class RayExecutor:
    """Every job as a Ray task; see the module's doc.

    ``address`` is the cluster's (``ray start --head`` prints it; ``auto`` finds one started
    on this machine; ``local`` starts a new one for this invocation); without it, Ray's own
    rule applies: ``RAY_ADDRESS``, else a cluster ``ray start`` started on this machine, else a
    new local Ray for this invocation, stopped after it. A Ray already initialised in this
    process (a notebook's) is used as it is.
    """

    def __init__(self, address: str | None = None) -> None:
        self.address = address

    @contextlib.asynccontextmanager
    async def open(
        self, budget: Budget | None, limiters: RouteLimiters, settings: JobSettings
    ) -> AsyncIterator[JobRunner]:
        ray = _ray()
        started = False
        if not ray.is_initialized():
            try:
                ray.init(
                    address=self.address,
                    include_dashboard=False,
                    logging_level=logging.WARNING,
                    configure_logging=True,
                )
            except ConnectionError as exc:
                where = (
                    f"at {self.address}"
                    if self.address
                    else "named by RAY_ADDRESS or last started on this machine by `ray start` "
                    "(`ray stop` clears a stale one; --ray-address local starts a new one)"
                )
                raise ConfigError(
                    f"cannot reach the Ray cluster {where}: {exc}", field="ray_address"
                ) from None
            started = True
        max_usd = budget.max_usd if budget is not None else None
        governor = (
            ray.remote(Governor)
            .options(max_concurrency=10_000, num_cpus=0)
            .remote(
                max_usd,
                budget.spent_usd if budget is not None else 0.0,
                limiters.max_connections,
                dict(limiters.per_route),
            )
        )
        task = ray.remote(run_remote_job).options(num_cpus=1)
        try:
            async with anyio.create_task_group() as tg:
                forwarded = [0]
                tg.start_soon(_forward, governor, limiters.on_change, forwarded)
                yield _RayRunner(ray, governor, task, max_usd, settings)
                tg.cancel_scope.cancel()
            await _forward_once(governor, limiters.on_change, forwarded)
        finally:
            ray.kill(governor)
            if started:
                ray.shutdown()


async def _forward(
    governor: Any, tell: Callable[[LimitChange], None] | None, forwarded: list[int]
) -> None:
    while True:
        await anyio.sleep(POLL_S)
        await _forward_once(governor, tell, forwarded)


async def _forward_once(
    governor: Any, tell: Callable[[LimitChange], None] | None, forwarded: list[int]
) -> None:
    changes: list[LimitChange] = await governor.changes_since.remote(forwarded[0])
    forwarded[0] += len(changes)
    if tell is not None:
        for change in changes:
            tell(change)
