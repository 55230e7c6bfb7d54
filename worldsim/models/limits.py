"""Per-route concurrency that adapts: one `AdaptiveLimiter` per route, shared by every timeline
(and, in a study, by every job).

A route starts at a modest limit and grows towards its ``max_connections`` while calls succeed;
a rate limit (429), a server error (5xx) or a timeout shrinks it to 80 % (at least 1), and a
``Retry-After`` pauses the whole route until then, so that every waiting call honours it, not
only the one that was told. Growth is slow-start (one more connection per success) until the
route first shows congestion, then one more per window of successes as large as the limit.
Only an attempt that started under the current limit can shrink it, so one burst of 429s from
calls sent under a higher limit shrinks it once.

The limit decides only how many calls run at once, never what they return: a trace does not
depend on it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import anyio

from worldsim.domain.logs import get_logger

__all__ = [
    "ADAPTIVE_START",
    "DEFAULT_MAX_CONNECTIONS",
    "AdaptiveLimiter",
    "LimitChange",
    "RouteLimiters",
    "Ticket",
]

DEFAULT_MAX_CONNECTIONS = 8
ADAPTIVE_START = 4
"""A route's first limit (or its ``max_connections``, if smaller)."""
SHRINK = 0.8

logger = get_logger("worldsim.models")

Reason = str
"""``start``, ``grow``, or the kind of failure that shrank the limit (``rate_limit``,
``server_error``, ``timeout``)."""


@dataclass(frozen=True, slots=True)
class LimitChange:
    """One change of a route's limit: when (seconds since the limiter was made), to what, why."""

    route: str
    at_s: float
    limit: int
    reason: Reason
    retry_after_s: float | None = None


@dataclass(frozen=True, slots=True)
class Ticket:
    """A held connection: which epoch of the limit it was taken under."""

    epoch: int


class AdaptiveLimiter:
    """A route's connection limit, between 1 and ``maximum``; see the module's doc.

    ``async with limiter as ticket`` holds one connection; report how the attempt went with
    `succeeded` or `congested`. (``async with`` alone, for in-process models, just limits.)
    """

    def __init__(
        self,
        route: str,
        maximum: int,
        *,
        start: int | None = None,
        on_change: Callable[[LimitChange], None] | None = None,
    ) -> None:
        if maximum < 1:
            raise ValueError(f"max_connections for {route} must be at least 1")
        self.route = route
        self.maximum = maximum
        self.limit = max(1, min(maximum, start if start is not None else ADAPTIVE_START))
        self.history: list[LimitChange] = []
        self._on_change = on_change
        self._limiter: anyio.CapacityLimiter | None = None
        self._epoch = 0
        self._successes = 0
        self._congested_once = False
        self._paused_until = 0.0
        self._born = anyio.current_time() if _in_loop() else None
        self._record("start", None)

    def _tokens(self) -> anyio.CapacityLimiter:
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.limit)
        return self._limiter

    async def __aenter__(self) -> Ticket:
        await self._unpaused()
        await self._tokens().acquire()
        return Ticket(self._epoch)

    async def __aexit__(self, *exc_info: object) -> None:
        self._tokens().release()

    async def take(self, borrower: object) -> Ticket:
        """Hold one connection for ``borrower`` (any hashable, not the current task: a call
        made on another machine) until `give_back`."""
        await self._unpaused()
        await self._tokens().acquire_on_behalf_of(borrower)
        return Ticket(self._epoch)

    def give_back(self, borrower: object) -> None:
        self._tokens().release_on_behalf_of(borrower)

    async def _unpaused(self) -> None:
        # a later Retry-After may move the end of the pause while this call sleeps
        while (wait := self._paused_until - anyio.current_time()) > 0:  # noqa: ASYNC110
            await anyio.sleep(wait)

    def succeeded(self, ticket: Ticket) -> None:
        """An attempt got its answer: grow, one connection per success (slow start) or per
        window of ``limit`` successes (after the first congestion)."""
        if self.limit >= self.maximum:
            return
        self._successes += 1
        if not self._congested_once or self._successes >= self.limit:
            self._successes = 0
            self._set(self.limit + 1, "grow", None)

    def congested(
        self,
        ticket: Ticket,
        reason: Reason,
        retry_after_s: float | None,
    ) -> None:
        """The server pushed back: pause the route for ``retry_after_s``, and shrink the limit
        unless the attempt was sent under an earlier, larger one."""
        if retry_after_s is not None and retry_after_s > 0:
            self._paused_until = max(self._paused_until, anyio.current_time() + retry_after_s)
        self._congested_once = True
        if ticket.epoch != self._epoch:
            return
        self._successes = 0
        self._set(max(1, math.floor(self.limit * SHRINK)), reason, retry_after_s)

    def _set(self, limit: int, reason: Reason, retry_after_s: float | None) -> None:
        if limit == self.limit:
            if reason != "grow":
                self._epoch += 1  # at 1 already: later pushes back of this epoch count again
            return
        self.limit = limit
        self._epoch += 1
        self._tokens().total_tokens = limit
        self._record(reason, retry_after_s)

    def _record(self, reason: Reason, retry_after_s: float | None) -> None:
        now = anyio.current_time() if _in_loop() else None
        if self._born is None:
            self._born = now
        at = 0.0 if now is None or self._born is None else round(now - self._born, 6)
        change = LimitChange(self.route, at, self.limit, reason, retry_after_s)
        self.history.append(change)
        if reason not in ("start", "grow"):  # growth is in ``history``, not worth a log line
            logger.warning(
                "connection limit",
                route=self.route,
                limit=self.limit,
                reason=reason,
                retry_after_s=retry_after_s,
            )
        if self._on_change is not None:
            self._on_change(change)


def _in_loop() -> bool:
    try:
        anyio.get_current_task()
    except RuntimeError:
        return False
    return True


@dataclass
class RouteLimiters:
    """Hands out one limiter per route name, created on first use and then shared.

    ``max_connections`` applies to every route unless ``per_route`` names it; ``on_change``
    hears every change of every route's limit; ``start`` is each route's first limit (default
    `ADAPTIVE_START`; a benchmark of steady throughput starts at the maximum).
    """

    max_connections: int = DEFAULT_MAX_CONNECTIONS
    per_route: Mapping[str, int] = field(default_factory=dict)
    on_change: Callable[[LimitChange], None] | None = None
    start: int | None = None
    _limiters: dict[str, AdaptiveLimiter] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        for name, value in {"default": self.max_connections, **self.per_route}.items():
            if value < 1:
                raise ValueError(f"max_connections for {name} must be at least 1")

    def get(self, route: str) -> AdaptiveLimiter:
        limiter = self._limiters.get(route)
        if limiter is None:
            maximum = self.per_route.get(route, self.max_connections)
            limiter = AdaptiveLimiter(route, maximum, start=self.start, on_change=self.on_change)
            self._limiters[route] = limiter
        return limiter

    def current(self) -> dict[str, int]:
        """Every route's limit now."""
        return {name: lim.limit for name, lim in sorted(self._limiters.items())}
