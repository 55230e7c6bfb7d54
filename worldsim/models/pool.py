"""Building the models of a run: one wrapped model per route, shared by every role on it.

Wrapping order, outermost first::

    LeakageGuardModel → CachedModel → BudgetedModel → OpenAIModel (limiter per HTTP attempt)

so prompts are scanned before anything else (cache hits included), cache hits neither spend
budget nor take a connection, and retry waits do not hold a connection.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from worldsim.domain.contracts import Model
from worldsim.domain.errors import ConfigError
from worldsim.models.cache import CachedModel, ResponseCache
from worldsim.models.leakage import LeakageGuard, LeakageGuardModel
from worldsim.models.limits import DEFAULT_MAX_CONNECTIONS, RouteLimiters
from worldsim.models.openai_model import OpenAIModel
from worldsim.models.pricing import Budget, BudgetedModel, PriceTable
from worldsim.models.retry import RetryPolicy
from worldsim.models.routes import Route, RouteSettings, RouteTable, resolve_settings
from worldsim.models.schema import DEFAULT_MAX_STRING_LENGTH

__all__ = ["ModelOptions", "ModelPool"]


@dataclass(frozen=True, slots=True)
class ModelOptions:
    """Settings every route of a run shares."""

    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    connections_per_route: Mapping[str, int] = field(default_factory=dict)
    prices: PriceTable | None = None
    max_string_length: int | None = DEFAULT_MAX_STRING_LENGTH
    strict: bool | None = None


class ModelPool:
    """The models of one run, built from a `RouteTable`.

    Every route's settings are resolved when the pool is made, so a missing key or base URL
    fails before the run starts. Models are built on first use and shared by all roles on the
    same route; `aclose` closes their HTTP clients.

    Args:
        routes: role → route.
        options: retries, connections, prices, schema options.
        cache: the response cache, or ``None`` for none.
        budget: the run's budget, or ``None`` for no limit.
        guard: the leakage guard, or ``None`` for none.
        offline: builds the model for the ``offline`` route (the engine's rule-based model).
        environ, dotenv: where keys and base URLs come from (see `resolve_settings`).
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
    ) -> None:
        self.routes = routes
        self.options = options or ModelOptions()
        self.cache = cache
        self.budget = budget
        self.guard = guard
        self.limiters = RouteLimiters(
            self.options.max_connections, dict(self.options.connections_per_route)
        )
        self._offline = offline
        self._settings: dict[Route, RouteSettings] = {}
        for route in sorted(routes.routes(), key=lambda r: r.name):
            if route.is_offline:
                if offline is None:
                    raise ConfigError("the offline route is not available here", field="route")
            else:
                self._settings[route] = resolve_settings(route, environ=environ, dotenv=dotenv)
        self._models: dict[Route, Model] = {}
        self._clients: list[OpenAIModel] = []

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
        for c in self._clients:
            if c.route == route.name:
                return c
        return None

    async def aclose(self) -> None:
        for c in self._clients:
            await c.aclose()
        self._clients.clear()
        self._models.clear()

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
            o = self.options
            client = OpenAIModel(
                settings,
                retry=o.retry,
                limiter=self.limiters.get(route.name),
                prices=o.prices,
                max_string_length=o.max_string_length,
                strict=o.strict,
            )
            self._clients.append(client)
            model = client
            if self.budget is not None:
                model = BudgetedModel(model, self.budget)
            if self.cache is not None:
                model = CachedModel(model, self.cache)
        if self.guard is not None:
            model = LeakageGuardModel(model, self.guard)
        return model
