"""A route served by any OpenAI-compatible Chat Completions endpoint.

Output modes, tried in order (by default the order below, or the route's ``output_mode``) and
remembered per route for the rest of the run:

* ``json_schema`` — a JSON-schema response format generated from the output model;
* ``json_object`` — JSON mode, the schema carried in the system prompt;
* ``text`` — no response format, the schema carried in the system prompt;
* ``tools`` — function calling: one ``answer`` function whose parameters are the output
  schema, which the model is told to call (``tool_choice``); its arguments are the reply. Tried
  only when a route names it (``output_mode: tools``), for servers whose function calling is
  better than their response formats. With the gateway's tools offered too, the model may call
  those first and must end with ``answer``.

A server that rejects a response format (llama-cpp-python answers HTTP 500 "Input should be
'text' or 'json_object'") moves the route to the next mode. A server that silently ignores it is
caught by validation. An invalid reply gets one repair round trip with the validation error;
a second invalid reply is a recorded failure.

Each request body goes out through the route's :class:`~worldsim.models.transport.Transport`:
the budget reservation, retries, streamed replies (timed out on *no progress*), refused
parameters and the reports of a slow call are its; this module decides what to ask.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any, Final, cast

import anyio
from openai import AsyncOpenAI

from worldsim.domain.config import OUTPUT_MODES
from worldsim.domain.contracts import ModelRequest, ModelResponse
from worldsim.domain.errors import BudgetExhausted, ModelError, ProviderAnomaly, RouteFailed
from worldsim.domain.logs import get_logger
from worldsim.models.call import (
    CANCELLED,
    CallErrorEntry,
    LlmCallData,
    OutputMode,
    ProviderAnomalyEntry,
    abandon,
)
from worldsim.models.closing import Closing
from worldsim.models.conversation import Answer, Conversation
from worldsim.models.limits import AdaptiveLimiter
from worldsim.models.messages import ANSWER_TOOL, answer_of
from worldsim.models.pricing import Budget, PriceTable
from worldsim.models.refusals import (
    CallFailed,
    FormatRejected,
    InvalidReply,
    OverReported,
    ToolsRejected,
)
from worldsim.models.retry import RetryPolicy
from worldsim.models.routes import RouteSettings
from worldsim.models.schema import (
    DEFAULT_MAX_STRING_LENGTH,
    response_schema,
    schema_name,
)
from worldsim.models.secrets import Redactor
from worldsim.models.transport import Transport

__all__ = ["OpenAIModel"]

logger = get_logger(__name__)

_MODE_ORDER: Final = cast("tuple[OutputMode, ...]", OUTPUT_MODES)
_MODES: Final[tuple[OutputMode, ...]] = (*_MODE_ORDER, "tools")


class OpenAIModel(Closing):
    """One route on an OpenAI-compatible server, with retries, output-mode negotiation, one
    repair round trip, and a full `LlmCallData` record on every response and failure.

    A call is a `Conversation` of round trips (the first request, a tool round, a repair, the
    request again in a lower output mode), each sent by the route's `Transport`, where every
    HTTP attempt reserves its worst case on the budget before it is sent and settles to what it
    cost. Everything the server sends back (error bodies, reply text, ids) passes through the
    redactor as it arrives.

    Args:
        settings: base URL and key of the route (from `resolve_settings`).
        retry: attempts, per-attempt timeout and backoff.
        limiter: the route's connection limiter, held by each HTTP attempt.
        prices: price table for ``cost_usd``; ``None`` leaves every call unpriced.
        budget: the budget HTTP attempts reserve on (``None``: no limit).
        redactor: removes key fragments from server text (default: this route's key).
        max_string_length: ``maxLength`` put on every string of the schema (``None``: none).
        strict: the ``strict`` flag of the schema format; ``None`` sets it when the schema fits
            the strict subset.
        modes: the output modes negotiation tries, in order (one: forced).
        max_tokens_scale: every request's ``max_tokens`` is multiplied by this, rounded up.
        temperature: sent instead of each request's temperature (``None``: the request's).
        stream: stream replies (a server that refuses is asked without, from then on).
        wait_report_s: report a call still running after this many seconds, and every this
            many seconds after (0: never).
        client: an `AsyncOpenAI` to use instead of building one.
    """

    def __init__(
        self,
        settings: RouteSettings,
        *,
        retry: RetryPolicy | None = None,
        limiter: AdaptiveLimiter | anyio.CapacityLimiter | None = None,
        prices: PriceTable | None = None,
        budget: Budget | None = None,
        redactor: Redactor | None = None,
        max_string_length: int | None = DEFAULT_MAX_STRING_LENGTH,
        strict: bool | None = None,
        modes: Sequence[OutputMode] = _MODE_ORDER,
        max_tokens_scale: float = 1.0,
        temperature: float | None = None,
        stream: bool = True,
        wait_report_s: float = 30.0,
        client: AsyncOpenAI | None = None,
    ) -> None:
        if not modes or any(m not in _MODES for m in modes):
            raise ValueError(f"modes must be some of {_MODES}")
        self._settings = settings
        self._transport = Transport(
            settings,
            retry=retry or RetryPolicy(),
            limiter=limiter,
            prices=prices,
            budget=budget if budget is not None else Budget(),
            redactor=redactor if redactor is not None else Redactor([settings.secret_key]),
            stream=stream,
            wait_report_s=wait_report_s,
            client=client,
        )
        self._max_string_length = max_string_length
        self._strict = strict
        self._modes = tuple(dict.fromkeys(modes))
        self._mode: OutputMode = self._modes[0]
        self._max_tokens_scale = max_tokens_scale
        self._temperature = temperature
        self._send_tools = True

    @property
    def route(self) -> str:
        return self._settings.route.name

    @property
    def output_mode(self) -> OutputMode:
        """The mode the next call starts in: what negotiation has settled on so far."""
        return self._mode

    @property
    def limiter(self) -> AdaptiveLimiter | anyio.CapacityLimiter | None:
        return self._transport.limiter

    @property
    def client(self) -> AsyncOpenAI:
        """The HTTP client requests go through (borrowed, or this model's own)."""
        return self._transport.client

    async def aclose(self) -> None:
        await self._transport.aclose()

    async def request(self, request: ModelRequest) -> ModelResponse:
        schema, strict_ok = response_schema(
            request.output_type, max_string_length=self._max_string_length
        )
        strict = strict_ok if self._strict is None else self._strict
        talk = Conversation.start(request, self._mode, schema)
        try:
            answer = None
            while answer is None:
                answer = await self._round_trip(talk, strict)
        except BudgetExhausted as exc:
            raise self._stopped(talk, exc) from None
        except CallFailed as failure:
            raise self._failed(talk, failure) from None
        except anyio.get_cancelled_exc_class() as cancelled:
            if talk.attempts:  # sent, perhaps paid: the tracing wrapper records it
                record = self._record(talk, error=CANCELLED)
                record.reply = None  # never used, so never scanned for leaks either
                abandon(cancelled, record)
            raise
        record = self._record(talk)
        return ModelResponse(answer.output, answer.text, record.model_dump(mode="json"))

    async def _round_trip(self, talk: Conversation, strict: bool) -> Answer | None:
        """Send the conversation once: its answer, or ``None`` when it goes on (the route
        refused the tools or the output mode and is asked again without, a tool round, a
        repair)."""
        tools = talk.may_call_tools(self._send_tools)
        try:
            reply = await self._transport.round_trip(
                talk.request,
                self._payload(talk, strict, tools=tools),
                talk.mode,
                on_error=talk.failed,
                on_cut=talk.charged,
                first_attempt=talk.attempts + 1,
            )
        except ToolsRejected as exc:  # a server without function calling: the prompt alone
            talk.failed(exc.entry)
            self._send_tools = False
            logger.info("tools dropped for this route", route=self.route)
            return None
        except FormatRejected as exc:
            talk.failed(exc.entry)
            talk.restart(self._downgrade(talk.mode, exc.entry))
            return None
        return await talk.received(reply, tools_offered=tools)

    def _stopped(self, talk: Conversation, exc: BudgetExhausted) -> BudgetExhausted:
        """The budget refused a round trip, or a reply reported more usage than it reserved:
        the error to raise, with the record of what the call sent before, if anything."""
        anomaly = None
        if isinstance(exc, OverReported):  # a reply came, reporting more than it could cost
            talk.last = exc.reply
            talk.charged(exc.reserved_usd)
            anomaly = ProviderAnomalyEntry(
                attempt=exc.reply.attempt,
                reported_usage=exc.reply.usage,
                reported_cost_usd=round(exc.reported_usd, 10),
                reserved_usd=round(exc.reserved_usd, 10),
            )
        if talk.attempts:  # earlier attempts were sent, and perhaps paid: trace them
            record = self._record(talk, error=exc.message)
            if anomaly is not None:
                record.anomaly = anomaly
                record.usage = talk.usage + anomaly.reported_usage
            exc.call = record.model_dump(mode="json")
        if anomaly is None:
            return exc
        site = talk.request.site
        return ProviderAnomaly(exc.message, call=exc.call, timeline=site.timeline, tick=site.tick)

    def _failed(self, talk: Conversation, failure: CallFailed) -> ModelError:
        """The call cannot succeed: a `ModelError` with its record (`RouteFailed` unless the
        reply itself stayed invalid: that is the model's answer, not the route's failure)."""
        if failure.entry is not None:
            talk.failed(failure.entry)
        record = self._record(talk, error=failure.message)
        site = talk.request.site
        error = ModelError if isinstance(failure, InvalidReply) else RouteFailed
        return error(
            f"{self.route}: {record.error}",
            call=record.model_dump(mode="json"),
            timeline=site.timeline,
            tick=site.tick,
        )

    def _payload(self, talk: Conversation, strict: bool, *, tools: bool) -> dict[str, Any]:
        """The body of the conversation's next request in its mode, the agent's tools offered
        when ``tools``, as the route's transport adapts it to what the server accepts."""
        request, mode, schema = talk.request, talk.mode, talk.schema
        payload: dict[str, Any] = {
            "model": self._settings.route.model,
            "messages": talk.messages,
            "max_tokens": math.ceil(request.max_tokens * self._max_tokens_scale),
            "temperature": request.temperature if self._temperature is None else self._temperature,
        }
        if request.seed is not None:
            payload["seed"] = request.seed
        if mode == "json_schema":
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": schema_name(request.output_type),
                    "schema": schema,
                    "strict": strict,
                },
            }
        elif mode == "json_object":
            payload["response_format"] = {"type": "json_object"}
        elif mode == "tools":
            payload["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": ANSWER_TOOL,
                        "description": "Give your answer: call this once, with the answer's "
                        "fields as arguments.",
                        "parameters": schema,
                        "strict": strict,
                    },
                }
            ]
            payload["tool_choice"] = {"type": "function", "function": {"name": ANSWER_TOOL}}
        if tools:
            payload["tools"] = [*(dict(t) for t in request.tools), *payload.get("tools", [])]
            if mode == "tools":  # gateway tools first if it likes, then the answer
                payload["tool_choice"] = "required"
        return payload

    def _downgrade(self, mode: OutputMode, entry: CallErrorEntry) -> OutputMode:
        order = self._modes
        place = order.index(mode) if mode in order else len(order)
        if place + 1 >= len(order):
            raise CallFailed(f"server rejected the request format: {entry.message}")
        lower = order[place + 1]
        if order.index(self._mode) < order.index(lower):
            logger.info("output mode downgraded", route=self.route, from_mode=mode, to_mode=lower)
            self._mode = lower
        return lower

    def _record(self, talk: Conversation, *, error: str | None = None) -> LlmCallData:
        """The call's ``llm_call`` record as it stands."""
        route = self._settings.route
        record = LlmCallData.for_request(
            talk.request,
            provider=route.provider,
            requested_model=route.model,
            output_mode=talk.mode,
            base_url_host=self._settings.base_url_host,
            redact=self._transport.redact,
        )
        last = talk.last
        if last is not None:
            record.resolved_model = last.model
            record.response_id = last.id
            record.system_fingerprint = last.system_fingerprint
            record.finish_reason = last.finish_reason
            answer = answer_of(last) if talk.mode == "tools" else None
            record.reply = last.content if answer is None else answer
        record.usage = talk.usage
        record.latency_s = round(time.perf_counter() - talk.started, 6)
        record.attempts = talk.attempts
        record.errors = list(talk.errors)
        record.tool_calls = list(talk.tool_calls)
        record.error = error
        cost = self._transport.cost(talk.usage, record.resolved_model)
        record.cost_usd = cost + talk.unreported_usd if cost is not None else None
        record.anomaly = talk.anomaly
        return record
