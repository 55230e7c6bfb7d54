"""Per-route concurrency: one `anyio.CapacityLimiter` per route, shared by every timeline."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import anyio

from worldsim.domain.contracts import Model, ModelRequest, ModelResponse

__all__ = ["DEFAULT_MAX_CONNECTIONS", "LimitedModel", "RouteLimiters"]

DEFAULT_MAX_CONNECTIONS = 8


@dataclass
class RouteLimiters:
    """Hands out one limiter per route name, created on first use and then shared.

    ``max_connections`` applies to every route unless ``per_route`` names it.
    """

    max_connections: int = DEFAULT_MAX_CONNECTIONS
    per_route: Mapping[str, int] = field(default_factory=dict)
    _limiters: dict[str, anyio.CapacityLimiter] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        for name, value in {"default": self.max_connections, **self.per_route}.items():
            if value < 1:
                raise ValueError(f"max_connections for {name} must be at least 1")

    def get(self, route: str) -> anyio.CapacityLimiter:
        limiter = self._limiters.get(route)
        if limiter is None:
            limiter = anyio.CapacityLimiter(self.per_route.get(route, self.max_connections))
            self._limiters[route] = limiter
        return limiter


@dataclass(frozen=True, slots=True)
class LimitedModel:
    """Wrapper: hold one token of ``limiter`` for the whole call.

    For in-process models; `OpenAIModel` takes the limiter itself and holds it per HTTP
    attempt, so that retry waits free the connection.
    """

    inner: Model
    limiter: anyio.CapacityLimiter

    @property
    def route(self) -> str:
        return self.inner.route

    async def request(self, request: ModelRequest) -> ModelResponse:
        async with self.limiter:
            return await self.inner.request(request)
