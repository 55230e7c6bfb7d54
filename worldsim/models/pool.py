"""Building the models of a run: one wrapped model per route, shared by every role on it.

Wrapping order, outermost first::

    LeakageGuardModel → RecordedModel → CachedModel → OpenAIModel (retries, and the budget
    and a connection per HTTP attempt, in its transport)

so prompts are scanned before anything else (cache hits included), a resumed run's recorded
replies and cache hits neither spend budget nor take a connection, and retry waits do not hold
a connection (`RecordedModel` only when resuming). Limits, retries and the budget are no
wrappers: only an attempt knows its worst-case cost and when its connection is free. Every
route's client redacts fragments of every key the pool resolved from what its server says.

A route's `RouteOptions` (the ``routes:`` block) override the run-wide settings for it; a local
route (a local provider or a loopback base URL, unless ``local: false``) doubles an attempt's
no-progress timeout after each timeout instead of resending under the same limit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, cast

from worldsim.domain.config import OUTPUT_MODES, RouteOptions
from worldsim.domain.contracts import Model
from worldsim.domain.errors import ConfigError
from worldsim.domain.jsonbytes import canonical_bytes
from worldsim.models.cache import CachedModel, ResponseCache
from worldsim.models.call import OutputMode
from worldsim.models.closing import Closing
from worldsim.models.leakage import LeakageGuard, LeakageGuardModel
from worldsim.models.limits import DEFAULT_MAX_CONNECTIONS, RouteLimiters
from worldsim.models.pricing import Budget, Price, PriceTable
from worldsim.models.recorded import RecordedModel, RecordedReplies
from worldsim.models.retry import RetryPolicy
from worldsim.models.routes import (
    LOCAL_PROVIDERS,
    Route,
    RouteSettings,
    RouteTable,
    parse_route,
    resolve_settings,
)
from worldsim.models.schema import DEFAULT_MAX_STRING_LENGTH
from worldsim.models.secrets import Redactor

if TYPE_CHECKING:  # the client library is imported when a run first needs a server's route
    from openai import AsyncOpenAI

    from worldsim.models.openai_model import OpenAIModel

__all__ = [
    "LOCAL_ESCALATION",
    "ModelOptions",
    "ModelPool",
    "Shared",
    "is_local",
    "route_limits",
    "route_options",
]

LOCAL_ESCALATION = 2.0
"""What a timeout multiplies a local route's next no-progress timeout by."""


@dataclass(frozen=True, slots=True)
class ModelOptions:
    """Settings every route of a run shares."""

    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    connections_per_route: Mapping[str, int] = field(default_factory=dict)
    prices: PriceTable | None = None
    max_string_length: int | None = DEFAULT_MAX_STRING_LENGTH
    strict: bool | None = None
    routes: Mapping[str, RouteOptions] = field(default_factory=dict)
    """Per-route settings by route name (the run config's ``routes:`` block)."""
    deadline_s: float | None = None
    """Seconds from the pool's creation after which no attempt starts or goes on."""
    wait_report_s: float = 30.0
    """A call still running after this long is reported, and again as often (0: never)."""


class HttpClients(Closing):
    """One HTTP client (connection pool, TLS context) per base URL and key, for runs on one
    event loop to share: making a client costs tens of milliseconds of CPU, more than many
    calls. Requests carry their own timeouts, so the client holds none. Whoever makes it closes
    it (`aclose`); the runs that borrow its clients never do."""

    def __init__(self) -> None:
        self._clients: dict[tuple[str, str], AsyncOpenAI] = {}

    def get(self, settings: RouteSettings) -> AsyncOpenAI:
        key = (settings.base_url, settings.api_key)
        client = self._clients.get(key)
        if client is None:
            from openai import AsyncOpenAI

            client = AsyncOpenAI(
                base_url=settings.base_url, api_key=settings.api_key, max_retries=0
            )
            self._clients[key] = client
        return client

    def __len__(self) -> int:
        return len(self._clients)

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()


@dataclass(frozen=True, slots=True)
class Shared:
    """What several runs share: a study's jobs one budget, and one adaptive connection limit
    per route, so that the study's ``max_connections`` bounds all its jobs together; the
    replicates of a ``run`` and the jobs of a study on one event loop their HTTP clients."""

    budget: Budget | None = None
    limiters: RouteLimiters | None = None
    clients: HttpClients | None = None


def route_options(routes: Mapping[str, RouteOptions], route: Route) -> RouteOptions:
    """The settings ``routes`` gives ``route`` (all unset when it names none).

    Every key must be a route name: a misspelt one is refused rather than silently unused.
    """
    for name in routes:
        parse_route(name, field=f"routes.{name}")
    return routes.get(route.name, RouteOptions())


def is_local(settings: RouteSettings, options: RouteOptions) -> bool:
    """A route served on the user's machine: a local provider or a loopback base URL."""
    if options.local is not None:
        return options.local
    host = settings.base_url_host.rpartition(":")[0] or settings.base_url_host
    return settings.route.provider in LOCAL_PROVIDERS or host in ("127.0.0.1", "localhost", "[::1]")


class ModelPool:
    """The models of one run, built from a `RouteTable`.

    Every route's settings are resolved when the pool is made, so a missing key or base URL
    fails before the run starts. Models are built on first use and shared by all roles on the
    same route; `aclose` closes the HTTP clients the pool made.

    Args:
        routes: role → route.
        options: retries, connections, prices, schema options.
        cache: the response cache, or ``None`` for none.
        budget: the run's budget, or ``None`` for no limit.
        guard: the leakage guard, or ``None`` for none.
        limiters: connection limits shared with other pools, or ``None`` for the pool's own
            (``options.max_connections`` and the routes' ``max_connections``).
        offline: builds the model for the ``offline`` route (the engine's rule-based model).
        environ, dotenv: where keys and base URLs come from (see `resolve_settings`).
        clients: HTTP clients shared with other pools (their owner closes them), or ``None``
            for the pool's own (closed by `aclose`).
        recorded: a resumed run's recorded replies, answered before the cache is asked.
    """

    def __init__(
        self,
        routes: RouteTable,
        *,
        options: ModelOptions | None = None,
        cache: ResponseCache | None = None,
        budget: Budget | None = None,
        guard: LeakageGuard | None = None,
        offline: Callable[[], Model] | None = None,
        environ: Mapping[str, str] | None = None,
        dotenv: Path | str | None = Path(".env"),
        limiters: RouteLimiters | None = None,
        clients: HttpClients | None = None,
        recorded: RecordedReplies | None = None,
    ) -> None:
        self.routes = routes
        self.recorded = recorded
        self._owns_clients = clients is None
        self._http = clients if clients is not None else HttpClients()
        self.options = options or ModelOptions()
        self.cache = cache
        self.budget = budget
        self.guard = guard
        self.limiters = limiters or RouteLimiters(
            self.options.max_connections, route_limits(routes, self.options)
        )
        self._retry = self.options.retry.with_deadline(self.options.deadline_s)
        self._offline = offline
        self._settings: dict[Route, RouteSettings] = {}
        for route in sorted(routes.routes(), key=lambda r: r.name):
            if route.is_offline:
                if offline is None:
                    raise ConfigError("the offline route is not available here", field="route")
            else:
                self._settings[route] = resolve_settings(route, environ=environ, dotenv=dotenv)
        self.redactor = Redactor(s.secret_key for s in self._settings.values())
        self._models: dict[Route, Model] = {}
        self._remote: list[OpenAIModel] = []

    def for_role(self, role: str) -> Model:
        return self.for_route(self.routes.for_role(role))

    def for_route(self, route: Route) -> Model:
        model = self._models.get(route)
        if model is None:
            model = self._build(route)
            self._models[route] = model
        return model

    def client(self, route: Route) -> OpenAIModel | None:
        """The innermost model of a remote route once built (its negotiated output mode)."""
        for c in self._remote:
            if c.route == route.name:
                return c
        return None

    async def aclose(self) -> None:
        self._remote.clear()
        self._models.clear()
        if self._owns_clients:
            await self._http.aclose()

    def _build(self, route: Route) -> Model:
        model: Model
        if route.is_offline:
            if self._offline is None:
                raise ConfigError("the offline route is not available here", field="route")
            model = self._offline()
        else:
            settings = self._settings.get(route)
            if settings is None:
                raise ConfigError(f"route {route.name} is not in this run's route table")
            ro = route_options(self.options.routes, route)
            client = self._client(settings, ro)
            self._remote.append(client)
            model = client
            if self.cache is not None:
                model = CachedModel(model, self.cache, _cache_variant(ro))
            if self.recorded is not None:
                model = RecordedModel(model, self.recorded)
        if self.guard is not None:
            model = LeakageGuardModel(model, self.guard)
        return model

    def _client(self, settings: RouteSettings, ro: RouteOptions) -> OpenAIModel:
        from worldsim.models.openai_model import OpenAIModel

        o = self.options
        retry = self._retry
        if ro.timeout_s is not None:
            retry = replace(retry, timeout_s=ro.timeout_s)
        if ro.max_attempts is not None:
            retry = replace(retry, max_attempts=ro.max_attempts)
        if is_local(settings, ro):
            retry = replace(retry, escalate=LOCAL_ESCALATION)
        prices = o.prices
        if ro.price is not None:
            price = Price(**ro.price.model_dump())
            table = dict(prices.prices) if prices is not None else {}
            prices = PriceTable({**table, settings.route.name: price})
        modes = cast("tuple[OutputMode, ...]", ro.output_modes or OUTPUT_MODES)
        return OpenAIModel(
            settings,
            retry=retry,
            limiter=self.limiters.get(settings.route.name),
            prices=prices,
            budget=self.budget,
            redactor=self.redactor,
            max_string_length=o.max_string_length,
            strict=o.strict,
            modes=modes,
            max_tokens_scale=ro.max_tokens_scale or 1.0,
            temperature=ro.temperature,
            stream=ro.stream if ro.stream is not None else True,
            wait_report_s=o.wait_report_s,
            client=self._http.get(settings),
        )


def _cache_variant(ro: RouteOptions) -> str:
    """The route settings that change what a request sends, for the cache key."""
    sent = {"max_tokens_scale": ro.max_tokens_scale, "temperature": ro.temperature}
    chosen = {k: v for k, v in sent.items() if v is not None}
    return canonical_bytes(chosen).decode() if chosen else ""


def route_limits(routes: RouteTable, options: ModelOptions) -> dict[str, int]:
    """The routes' own ``max_connections`` where they set one (else ``options``' applies)."""
    per_route = dict(options.connections_per_route)
    for route in routes.routes():
        limit = route_options(options.routes, route).max_connections
        if limit is not None:
            per_route[route.name] = limit
    return per_route
