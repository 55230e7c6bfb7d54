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
from typing import Any, Final

import anyio
import structlog
from openai import AsyncOpenAI
from pydantic import ValidationError

from worldsim.domain.contracts import ModelRequest, ModelResponse
from worldsim.domain.errors import BudgetExhausted, ModelError, ProviderAnomaly, RouteFailed
from worldsim.models.call import (
    CallErrorEntry,
    LlmCallData,
    OutputMode,
    ProviderAnomalyEntry,
    ToolCallEntry,
    Usage,
)
from worldsim.models.limits import AdaptiveLimiter
from worldsim.models.messages import (
    ANSWER_TOOL,
    answer_of,
    describe_invalid,
    initial_messages,
    repair_prompt,
)
from worldsim.models.pricing import Budget, PriceTable
from worldsim.models.refusals import (
    CallFailed,
    CutStreams,
    FormatRejected,
    InvalidReply,
    OverReported,
    ParamRejected,
    ToolsRejected,
)
from worldsim.models.retry import (
    DeadlineReached,
    RetryPolicy,
    TransientError,
)
from worldsim.models.routes import RouteSettings
from worldsim.models.schema import (
    DEFAULT_MAX_STRING_LENGTH,
    extract_json,
    response_schema,
    schema_name,
)
from worldsim.models.secrets import Redactor
from worldsim.models.stream import Reply
from worldsim.models.transport import Transport

__all__ = ["OpenAIModel"]

logger = structlog.get_logger(__name__)

_MODE_ORDER: Final[tuple[OutputMode, ...]] = ("json_schema", "json_object", "text")
_MODES: Final[tuple[OutputMode, ...]] = (*_MODE_ORDER, "tools")


class OpenAIModel:
    """One route on an OpenAI-compatible server, with retries, output-mode negotiation, one
    repair round trip, and a full `LlmCallData` record on every response and failure.

    Each round trip (the first request, a repair, a tool round; its retries included, since
    only one attempt of them returns a reply) reserves its worst case on the budget before it
    is sent and settles to the reply's cost. Everything the server sends back (error bodies,
    reply text, ids) passes through the redactor as it arrives.

    Args:
        settings: base URL and key of the route (from `resolve_settings`).
        retry: attempts, per-attempt timeout and backoff.
        limiter: the route's connection limiter, held by each HTTP attempt.
        prices: price table for ``cost_usd``; ``None`` leaves every call unpriced.
        budget: the budget round trips reserve on (``None``: no limit).
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

    async def __aenter__(self) -> OpenAIModel:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def request(self, request: ModelRequest) -> ModelResponse:
        started = time.perf_counter()
        schema, strict_ok = response_schema(
            request.output_type, max_string_length=self._max_string_length
        )
        strict = strict_ok if self._strict is None else self._strict
        errors: list[CallErrorEntry] = []
        usage = Usage()
        attempts = 0
        last: Reply | None = None
        mode = self._mode
        messages: list[dict[str, Any]] = list(initial_messages(request, mode, schema))
        repaired = False
        tool_rounds = 0
        tool_log: list[ToolCallEntry] = []
        extra_usd = 0.0  # what streams cut mid-way were charged
        try:
            while True:
                offer_tools = (
                    bool(request.tools)
                    and request.tool_handler is not None
                    and self._send_tools
                    and tool_rounds < request.max_tool_rounds
                )
                payload = self._payload(request, messages, mode, schema, strict)
                if offer_tools:
                    answer_tool = payload.get("tools", [])
                    payload["tools"] = [*(dict(t) for t in request.tools), *answer_tool]
                    if mode == "tools":  # gateway tools first if it likes, then the answer
                        payload["tool_choice"] = "required"
                try:
                    reply, cut_usd = await self._transport.round_trip(
                        request, payload, mode, errors.append, attempts + 1
                    )
                    extra_usd += cut_usd
                except CutStreams as cut:
                    extra_usd += cut.usd
                    raise cut.error from None
                except ParamRejected as exc:
                    attempts = exc.entry.attempt
                    errors.append(exc.entry)
                    self._transport.adapt(exc)
                    continue
                except ToolsRejected as exc:
                    # a server without function calling: answer from the prompt alone
                    attempts = exc.entry.attempt
                    errors.append(exc.entry)
                    self._send_tools = False
                    logger.info("tools dropped for this route", route=self.route)
                    continue
                except FormatRejected as exc:
                    attempts = exc.entry.attempt
                    errors.append(exc.entry)
                    mode = self._downgrade(mode, exc.entry)
                    messages = initial_messages(request, mode, schema)
                    repaired = False
                    continue
                except TransientError as exc:
                    attempts = exc.entry.attempt
                    raise CallFailed(
                        f"gave up after {attempts} attempts; last error {exc.entry.kind}: "
                        f"{exc.entry.message}" + self._transport.hint(exc.entry)
                    ) from None
                except DeadlineReached as exc:
                    attempts = exc.entry.attempt
                    raise CallFailed(
                        f"{exc.entry.message} (after {attempts} attempts)"
                        + self._transport.hint(exc.entry),
                        exc.entry,
                    ) from None
                attempts = reply.attempt
                usage = usage + reply.usage
                last = reply
                answer = answer_of(reply) if mode == "tools" else None
                if answer is None and reply.tool_calls and offer_tools and request.tool_handler:
                    tool_rounds += 1
                    messages.append(
                        {
                            "role": "assistant",
                            "content": reply.content or None,
                            "tool_calls": [
                                {
                                    "id": cid,
                                    "type": "function",
                                    "function": {"name": name, "arguments": args},
                                }
                                for cid, name, args in reply.tool_calls
                            ],
                        }
                    )
                    for cid, name, args in reply.tool_calls:
                        tool_log.append(ToolCallEntry(name=name, arguments=args))
                        result = await request.tool_handler(name, args)
                        messages.append({"role": "tool", "tool_call_id": cid, "content": result})
                    continue
                text = reply.content if answer is None else answer
                try:
                    output = request.output_type.model_validate_json(extract_json(text))
                except ValidationError as exc:
                    problem = describe_invalid(exc, reply.finish_reason)
                    errors.append(
                        CallErrorEntry(attempt=attempts, kind="invalid_output", message=problem)
                    )
                    if repaired:
                        raise InvalidReply(f"invalid output after one repair: {problem}") from None
                    repaired = True
                    messages = [
                        *messages,
                        {"role": "assistant", "content": text},
                        {"role": "user", "content": repair_prompt(problem, schema)},
                    ]
                    continue
                record = self._record(
                    request, mode, usage, errors, attempts, last, started, extra_usd
                )
                record.tool_calls = tool_log
                return ModelResponse(output=output, text=text, call=record.model_dump(mode="json"))
        except BudgetExhausted as exc:
            anomaly = None
            if isinstance(exc, OverReported):  # a reply came, reporting more than it could cost
                reply = exc.reply
                attempts, last = reply.attempt, reply
                extra_usd += exc.reserved_usd
                anomaly = ProviderAnomalyEntry(
                    attempt=reply.attempt,
                    reported_usage=reply.usage,
                    reported_cost_usd=round(exc.reported_usd, 10),
                    reserved_usd=round(exc.reserved_usd, 10),
                )
            if errors:  # a retry that did not fit: the attempts before it were sent
                attempts = max(attempts, errors[-1].attempt)
            if attempts:  # earlier attempts were sent, and perhaps paid: trace them
                record = self._record(
                    request, mode, usage, errors, attempts, last, started, extra_usd
                )
                record.tool_calls = tool_log
                record.error = exc.message
                if anomaly is not None:
                    record.anomaly = anomaly
                    record.usage = usage + anomaly.reported_usage
                exc.call = record.model_dump(mode="json")
            if anomaly is not None:
                raise ProviderAnomaly(
                    exc.message,
                    call=exc.call,
                    timeline=request.site.timeline,
                    tick=request.site.tick,
                ) from None
            raise
        except CallFailed as failure:
            if failure.entry is not None:
                errors.append(failure.entry)
                attempts = failure.entry.attempt
            record = self._record(request, mode, usage, errors, attempts, last, started, extra_usd)
            record.tool_calls = tool_log
            record.error = failure.message
            logger.warning(
                "model call failed",
                route=self.route,
                role=request.site.role,
                agent=request.site.agent,
                attempts=attempts,
                error=record.error,
            )
            # an invalid reply is the model's answer; any other failure is the route's
            error = ModelError if isinstance(failure, InvalidReply) else RouteFailed
            raise error(
                f"{self.route}: {record.error}",
                call=record.model_dump(mode="json"),
                timeline=request.site.timeline,
                tick=request.site.tick,
            ) from None

    def _payload(
        self,
        request: ModelRequest,
        messages: list[dict[str, str]],
        mode: OutputMode,
        schema: dict[str, Any],
        strict: bool,
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self._settings.route.model,
            "messages": messages,
            self._transport.token_param: math.ceil(request.max_tokens * self._max_tokens_scale),
        }
        if self._transport.send_temperature:
            payload["temperature"] = (
                request.temperature if self._temperature is None else self._temperature
            )
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

    def _record(
        self,
        request: ModelRequest,
        mode: OutputMode,
        usage: Usage,
        errors: list[CallErrorEntry],
        attempts: int,
        last: Reply | None,
        started: float,
        extra_usd: float = 0.0,
    ) -> LlmCallData:
        model = self._settings.route.model
        record = LlmCallData.for_request(
            request,
            provider=self._settings.route.provider,
            requested_model=model,
            output_mode=mode,
            base_url_host=self._settings.base_url_host,
            redact=self._transport.redact,
        )
        if last is not None:
            record.resolved_model = last.model
            record.response_id = last.id
            record.system_fingerprint = last.system_fingerprint
            record.finish_reason = last.finish_reason
            record.reply = last.content
        record.usage = usage
        record.latency_s = round(time.perf_counter() - started, 6)
        record.attempts = attempts
        record.errors = list(errors)
        cost = self._transport.cost(usage, record.resolved_model)
        record.cost_usd = cost + extra_usd if cost is not None else None
        return record
