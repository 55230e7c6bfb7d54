"""The wrapper model that writes every call, answered or failed, into the trace as ``llm_call``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
from pydantic import BaseModel

from worldsim.domain.contracts import (
    BatchModel,
    BatchRequest,
    BatchResponse,
    Model,
    ModelRequest,
    ModelResponse,
)
from worldsim.domain.errors import BudgetExhausted, ModelError
from worldsim.models.call import LlmCallData, abandoned_call

__all__ = ["BatchTracingModel", "Emit", "TracingModel", "traced"]

Emit = Callable[[LlmCallData], Awaitable[None]]


class TracingModel:
    """Records each call's metadata through ``emit`` before handing the reply (or error) on."""

    def __init__(self, inner: Model, emit: Emit) -> None:
        self.inner = inner
        self._emit = emit

    @property
    def route(self) -> str:
        return self.inner.route

    async def request(self, request: ModelRequest) -> ModelResponse:
        try:
            response = await self.inner.request(request)
        except (ModelError, BudgetExhausted) as exc:
            if exc.call:
                await self._record_shielded(exc.call)
            raise
        except anyio.get_cancelled_exc_class() as cancelled:
            call = abandoned_call(cancelled)  # a call sent, then cut short by the run's stop
            if call is not None:
                await self._record_shielded(call)
            raise
        if response.call:
            await self._record_shielded(response.call)
        return response

    async def _record_shielded(self, call: Mapping[str, Any]) -> None:
        # a paid call is recorded even when the run is being cancelled around it (the budget
        # stopped it, say): a resumed run's budget counts what the trace says was spent
        with anyio.CancelScope(shield=True):
            await self._emit(_record(call))


class BatchTracingModel(TracingModel):
    """:class:`TracingModel` around a model that also answers batches: each call a batch
    made is recorded as well."""

    def __init__(self, inner: BatchModel, emit: Emit) -> None:
        super().__init__(inner, emit)
        self.batch_inner = inner

    def answers_batch(self, output_type: type[BaseModel]) -> bool:
        return self.batch_inner.answers_batch(output_type)

    async def request_batch(self, request: BatchRequest) -> BatchResponse:
        response = await self.batch_inner.request_batch(request)
        for call in response.calls:
            await self._record_shielded(call)
        return response


def traced(inner: Model, emit: Emit) -> TracingModel:
    """``inner`` with its calls traced: batches too where it answers them."""
    if isinstance(inner, BatchModel):
        return BatchTracingModel(inner, emit)
    return TracingModel(inner, emit)


def _record(call: Mapping[str, Any]) -> LlmCallData:
    return LlmCallData.model_validate(dict(call))
