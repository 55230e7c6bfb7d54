"""Model routes: OpenAI-compatible clients and the wrappers that add caching, budget and guards.

Errors raised by models (all from `worldsim.domain.errors`)::

    ConfigError        bad route, missing key or base URL, unreadable price or cache file
    ModelError         a call failed for good; ``.call`` holds its llm_call record
    ├── ReplayMissError  strict replay found no cached reply
    └── RouteFailed      the route gave no usable reply after its retries: the run ends
    BudgetExhausted    the budget cannot hold the next call's worst case; no new call starts
    └── ProviderAnomaly  a reply reported more usage than its request could cost; its route
                         gets no more calls under that budget
    LeakageError       a forbidden string in a prompt or reply (fail mode)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from worldsim.domain.lazy import lazy_exports

if TYPE_CHECKING:
    from worldsim.models.cache import CachedModel, CacheMode, ResponseCache
    from worldsim.models.call import CallErrorEntry, LlmCallData, OutputMode, Usage, request_hash
    from worldsim.models.leakage import LeakageFinding, LeakageGuard, LeakageGuardModel
    from worldsim.models.limits import RouteLimiters
    from worldsim.models.openai_model import OpenAIModel
    from worldsim.models.pool import ModelOptions, ModelPool
    from worldsim.models.pricing import Budget, Price, PriceTable, Reservation
    from worldsim.models.retry import RetryPolicy, parse_retry_after
    from worldsim.models.routes import (
        Route,
        RouteSettings,
        RouteTable,
        parse_role_route,
        parse_route,
        resolve_settings,
    )
    from worldsim.models.schema import limit_string_lengths, response_schema, strict_schema
    from worldsim.models.secrets import Redactor

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Budget": "worldsim.models.pricing",
        "CacheMode": "worldsim.models.cache",
        "CachedModel": "worldsim.models.cache",
        "CallErrorEntry": "worldsim.models.call",
        "LeakageFinding": "worldsim.models.leakage",
        "LeakageGuard": "worldsim.models.leakage",
        "LeakageGuardModel": "worldsim.models.leakage",
        "LlmCallData": "worldsim.models.call",
        "ModelOptions": "worldsim.models.pool",
        "ModelPool": "worldsim.models.pool",
        "OpenAIModel": "worldsim.models.openai_model",
        "OutputMode": "worldsim.models.call",
        "Price": "worldsim.models.pricing",
        "PriceTable": "worldsim.models.pricing",
        "ResponseCache": "worldsim.models.cache",
        "Redactor": "worldsim.models.secrets",
        "Reservation": "worldsim.models.pricing",
        "RetryPolicy": "worldsim.models.retry",
        "Route": "worldsim.models.routes",
        "RouteLimiters": "worldsim.models.limits",
        "RouteSettings": "worldsim.models.routes",
        "RouteTable": "worldsim.models.routes",
        "Usage": "worldsim.models.call",
        "limit_string_lengths": "worldsim.models.schema",
        "parse_retry_after": "worldsim.models.retry",
        "parse_role_route": "worldsim.models.routes",
        "parse_route": "worldsim.models.routes",
        "request_hash": "worldsim.models.call",
        "resolve_settings": "worldsim.models.routes",
        "response_schema": "worldsim.models.schema",
        "strict_schema": "worldsim.models.schema",
    },
)

__all__ = [
    "Budget",
    "CacheMode",
    "CachedModel",
    "CallErrorEntry",
    "LeakageFinding",
    "LeakageGuard",
    "LeakageGuardModel",
    "LlmCallData",
    "ModelOptions",
    "ModelPool",
    "OpenAIModel",
    "OutputMode",
    "Price",
    "PriceTable",
    "Redactor",
    "Reservation",
    "ResponseCache",
    "RetryPolicy",
    "Route",
    "RouteLimiters",
    "RouteSettings",
    "RouteTable",
    "Usage",
    "limit_string_lengths",
    "parse_retry_after",
    "parse_role_route",
    "parse_route",
    "request_hash",
    "resolve_settings",
    "response_schema",
    "strict_schema",
]
