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

Replies are streamed (``stream_options.include_usage`` for the token counts) unless the route
says not to or the server refuses, so an attempt times out on *no progress*, not on total time;
a call still running after ``wait_report_s`` is reported every ``wait_report_s`` with its
elapsed time and the chunks streamed so far.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

import anyio
import openai
import structlog
from openai import AsyncOpenAI, AsyncStream
from pydantic import ValidationError

from worldsim.domain.contracts import ModelRequest, ModelResponse
from worldsim.domain.errors import BudgetExhausted, ModelError
from worldsim.models.call import CallErrorEntry, LlmCallData, OutputMode, ToolCallEntry, Usage
from worldsim.models.inflight import waiting
from worldsim.models.limits import AdaptiveLimiter
from worldsim.models.messages import (
    ANSWER_TOOL,
    answer_of,
    describe_invalid,
    initial_messages,
    repair_prompt,
    streamed,
)
from worldsim.models.pricing import Budget, PriceTable, input_token_bound
from worldsim.models.refusals import (
    CallFailed,
    CutStreams,
    FormatRejected,
    ParamRejected,
    ToolsRejected,
    read_refusal,
    rejected_param,
)
from worldsim.models.retry import (
    Attempt,
    DeadlineReached,
    RetryPolicy,
    TransientError,
    call_with_retries,
    classify,
)
from worldsim.models.routes import RouteSettings
from worldsim.models.schema import (
    DEFAULT_MAX_STRING_LENGTH,
    extract_json,
    response_schema,
    schema_name,
)
from worldsim.models.secrets import Redactor
from worldsim.models.stream import Reply, StreamState, read_stream, reply_from_json

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
        self._retry = retry or RetryPolicy()
        self._limiter = limiter
        self._prices = prices
        self._price = prices.lookup((settings.route.name, settings.route.model)) if prices else None
        self._budget = budget if budget is not None else Budget()
        self._redact = redactor if redactor is not None else Redactor([settings.secret_key])
        self._max_string_length = max_string_length
        self._strict = strict
        self._modes = tuple(dict.fromkeys(modes))
        self._mode: OutputMode = self._modes[0]
        self._max_tokens_scale = max_tokens_scale
        self._temperature = temperature
        self._stream = stream
        self._wait_report_s = wait_report_s
        # reasoning models want max_completion_tokens and only their default temperature
        self._token_param = "max_tokens"
        self._send_temperature = True
        self._send_tools = True
        self._owns_client = client is None  # a borrowed client is closed by its owner
        self._client = client or AsyncOpenAI(
            base_url=settings.base_url,
            api_key=settings.api_key,
            max_retries=0,
            timeout=self._retry.timeout_s + 5.0,
        )

    @property
    def route(self) -> str:
        return self._settings.route.name

    @property
    def output_mode(self) -> OutputMode:
        """The mode the next call starts in: what negotiation has settled on so far."""
        return self._mode

    @property
    def limiter(self) -> AdaptiveLimiter | anyio.CapacityLimiter | None:
        return self._limiter

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.close()

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
                    reply, cut_usd = await self._round_trip(
                        request, payload, mode, errors.append, attempts + 1
                    )
                    extra_usd += cut_usd
                except CutStreams as cut:
                    extra_usd += cut.usd
                    raise cut.error from None
                except ParamRejected as exc:
                    attempts = exc.entry.attempt
                    errors.append(exc.entry)
                    self._adapt(exc)
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
                        f"{exc.entry.message}" + self._hint(exc.entry)
                    ) from None
                except DeadlineReached as exc:
                    attempts = exc.entry.attempt
                    raise CallFailed(
                        f"{exc.entry.message} (after {attempts} attempts)" + self._hint(exc.entry),
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
                        raise CallFailed(f"invalid output after one repair: {problem}") from None
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
            if errors:  # a retry that did not fit: the attempts before it were sent
                attempts = max(attempts, errors[-1].attempt)
            if attempts:  # earlier attempts were sent, and perhaps paid: trace them
                record = self._record(
                    request, mode, usage, errors, attempts, last, started, extra_usd
                )
                record.tool_calls = tool_log
                record.error = exc.message
                exc.call = record.model_dump(mode="json")
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
            raise ModelError(
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
            self._token_param: math.ceil(request.max_tokens * self._max_tokens_scale),
        }
        if self._send_temperature:
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

    async def _round_trip(
        self,
        request: ModelRequest,
        payload: dict[str, Any],
        mode: OutputMode,
        on_error: Callable[[CallErrorEntry], None],
        first_attempt: int,
    ) -> tuple[Reply, float]:
        """One round trip, its retries included. Each attempt holds its own worst case on the
        budget and settles it to what it cost: the reply's cost, or, for an attempt cut
        mid-stream, the usage the server reported for it, else (tokens had arrived, the count
        is unknown) its whole reservation. No attempt is sent that does not fit, so a run never
        spends past its cap. Returns the reply and what the cut attempts were charged."""
        bound = self._bound(payload)
        cut: list[float] = []
        try:
            reply = await call_with_retries(
                functools.partial(self._attempt, payload, mode, request, bound, cut),
                self._retry,
                on_error,
                limiter=self._limiter,
                first_attempt=first_attempt,
            )
        except Exception as exc:
            if sum(cut):
                raise CutStreams(sum(cut), exc) from None
            raise
        return reply, sum(cut)

    def _cut_charge(self, usage: Usage | None, bound: float) -> float:
        if self._prices is None:
            return 0.0
        return bound if usage is None else (self._cost(usage, None) or 0.0)

    async def _attempt(
        self,
        payload: dict[str, Any],
        mode: OutputMode,
        request: ModelRequest,
        bound: float,
        cut: list[float],
        attempt: Attempt,
    ) -> Reply:
        site = request.site
        async with self._budget.reserve(bound, request) as spend:
            state = StreamState()
            failure: Exception | None = None
            async with anyio.create_task_group() as reports:
                reports.start_soon(self._report_waiting, state, site.role, payload)
                try:
                    with waiting(self.route, site.role, site.agent, state):
                        reply = await self._send(payload, mode, attempt, state)
                except BaseException as exc:
                    if state.tokens:  # generated, perhaps billed, then cut
                        charge = self._cut_charge(state.usage, bound)
                        cut.append(charge)
                        spend.settle(charge)
                    if not isinstance(exc, Exception):
                        raise  # cancellation: the task group passes it on as it is
                    failure = exc  # raised below, outside the group, so not wrapped in one
                finally:
                    reports.cancel_scope.cancel()
            if failure is not None:
                raise failure
            spend.settle(self._cost(reply.usage, reply.model))
            return reply

    async def _report_waiting(self, state: StreamState, role: str, payload: dict[str, Any]) -> None:
        """A plain line every ``wait_report_s`` while the attempt runs: slow, not hung."""
        if self._wait_report_s <= 0:
            return
        while True:
            await anyio.sleep(self._wait_report_s)
            logger.warning(
                "model call still running",
                route=self.route,
                role=role,
                elapsed_s=round(state.elapsed_s),
                chunks=state.tokens,
                max_tokens=payload[self._token_param],
            )

    async def _send(
        self, payload: dict[str, Any], mode: OutputMode, attempt: Attempt, state: StreamState
    ) -> Reply:
        # The payload is already plain JSON; posting it directly skips the client's per-call
        # parameter transform, which walks every message and the whole JSON schema and costs
        # more than the request itself against a fast local server. The HTTP read timeout sits
        # behind the attempt's own no-progress timeout.
        options: Any = {"timeout": openai.Timeout(attempt.timeout_s + 5.0, connect=30.0)}
        number = attempt.number
        try:
            reply: Reply | None
            if self._stream:
                body = streamed(payload)
                chunks = await self._client.post(
                    "/chat/completions",
                    cast_to=object,
                    body=body,
                    options=options,
                    stream=True,
                    stream_cls=AsyncStream[object],  # chunks as plain JSON
                )
                async with chunks:
                    reply = await read_stream(chunks, number, self._redact, state, attempt.progress)
                if reply is None:  # a server that ignored ``stream``: ask it without from now
                    self._stream = False
            else:
                completion = await self._client.post(
                    "/chat/completions", cast_to=object, body=payload, options=options
                )
                reply = reply_from_json(completion, number, self._redact)
        except openai.APIStatusError as exc:
            raise self._refusal(exc, payload, mode, number) from exc
        except (openai.APIError, ValueError) as exc:
            entry, retryable, retry_after = classify(exc, number, self._redact)
            if retryable:
                raise TransientError(entry, retry_after) from exc
            raise CallFailed(f"{entry.kind}: {entry.message}", entry) from exc
        if reply is None:
            entry = CallErrorEntry(
                attempt=number, kind="bad_response", message="reply has no choices"
            )
            raise TransientError(entry)
        return reply

    def _refusal(
        self, exc: openai.APIStatusError, payload: dict[str, Any], mode: OutputMode, number: int
    ) -> Exception:
        return read_refusal(
            exc,
            offered_tools="tools" in payload,
            mode=mode,
            number=number,
            redact=self._redact,
            adaptable=lambda e: rejected_param(
                e,
                stream=self._stream,
                token_param=self._token_param,
                send_temperature=self._send_temperature,
            ),
        )

    def _hint(self, entry: CallErrorEntry) -> str:
        """What to change when attempts ran out on timeouts or the deadline."""
        if entry.kind not in ("timeout", "deadline"):
            return ""
        return (
            f". Route {self.route} is slower than its settings allow: raise its timeout_s "
            "(routes file, or --timeout) or the run's deadline_s, lower max_tokens_scale, or "
            "try output_mode: text (constrained decoding is slow on local servers); "
            f"`worldsim models check {self.route}` measures it"
        )

    def _adapt(self, exc: ParamRejected) -> None:
        if exc.param == "max_tokens":
            self._token_param = "max_completion_tokens"
        elif exc.param == "temperature":
            self._send_temperature = False
        elif exc.param == "stream":
            self._stream = False
        else:  # pragma: no cover - _rejected_param names only these
            raise CallFailed(f"server rejected parameter {exc.param}", exc.entry)
        logger.info("request parameter adapted", route=self.route, param=exc.param)

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

    def _bound(self, payload: dict[str, Any]) -> float:
        """The most one attempt with ``payload`` can cost (0 on an unpriced route), counting
        the body as it is sent (with the stream fields when it streams)."""
        if self._price is None:
            return 0.0
        body = streamed(payload) if self._stream else payload
        return self._price.worst_case(input_token_bound(body), int(payload[self._token_param]))

    def _cost(self, usage: Usage, resolved_model: str | None) -> float | None:
        if self._prices is None:
            return None
        route = self._settings.route
        return self._prices.cost((route.name, route.model, resolved_model), usage)

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
            redact=self._redact,
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
        cost = self._cost(usage, record.resolved_model)
        record.cost_usd = cost + extra_usd if cost is not None else None
        return record
