"""Round trips to one OpenAI-compatible route: what a request costs to send, not what it says.

A round trip is one request body and its retries (only one attempt of them returns a reply).
Each attempt reserves its worst case on the budget before it is sent and settles to what it
cost; holds the route's connection limiter; streams the reply (``stream_options.include_usage``
for the token counts) unless the route says not to or the server refuses, so it times out on
*no progress* rather than on total time; and reports itself every ``wait_report_s`` while it
runs. A parameter the server rejects (``max_tokens`` for reasoning models, ``temperature``,
``stream``) is adapted for the rest of the run. Everything the server sends back passes through
the redactor as it arrives. What the request asks (output modes, tools, repairs) is
:class:`~worldsim.models.openai_model.OpenAIModel`'s.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable
from typing import Any

import anyio
import openai
from openai import AsyncOpenAI, AsyncStream

from worldsim.domain.contracts import CallSite, ModelRequest
from worldsim.domain.logs import get_logger
from worldsim.models.call import CallErrorEntry, OutputMode, Usage
from worldsim.models.inflight import waiting
from worldsim.models.limits import AdaptiveLimiter
from worldsim.models.messages import streamed
from worldsim.models.pricing import Budget, PriceTable, input_token_bound
from worldsim.models.refusals import (
    CallFailed,
    OverReported,
    ParamRejected,
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
from worldsim.models.secrets import Redactor
from worldsim.models.stream import Reply, StreamState, read_stream, reply_from_json

__all__ = ["Transport"]

logger = get_logger(__name__)

_ROUNDING_USD = 1e-9
"""Costs are rounded to 10 decimals: a reply costing its reservation may exceed it by this."""


class Transport:
    """Sends request bodies to one route and reads the replies (see the module docstring).

    Args:
        settings: base URL and key of the route.
        retry: attempts, per-attempt timeout and backoff.
        limiter: the route's connection limiter, held by each attempt.
        prices: price table for costs; ``None`` leaves every attempt unpriced.
        budget: the budget attempts reserve on.
        redactor: removes key fragments from server text.
        stream: stream replies (a server that refuses is asked without, from then on).
        wait_report_s: report an attempt still running after this many seconds, and every
            this many seconds after (0: never).
        client: an `AsyncOpenAI` to use instead of building one (closed by its owner).
    """

    def __init__(
        self,
        settings: RouteSettings,
        *,
        retry: RetryPolicy,
        limiter: AdaptiveLimiter | anyio.CapacityLimiter | None,
        prices: PriceTable | None,
        budget: Budget,
        redactor: Redactor,
        stream: bool,
        wait_report_s: float,
        client: AsyncOpenAI | None,
    ) -> None:
        self._settings = settings
        self._retry = retry
        self.limiter = limiter
        self._prices = prices
        self._price = prices.lookup((settings.route.name, settings.route.model)) if prices else None
        self.budget = budget
        self.redact = redactor
        self.stream = stream
        self._wait_report_s = wait_report_s
        # reasoning models want max_completion_tokens and only their default temperature
        self.token_param = "max_tokens"
        self.send_temperature = True
        self._owns_client = client is None
        self.client = client or AsyncOpenAI(
            base_url=settings.base_url,
            api_key=settings.api_key,
            max_retries=0,
            timeout=retry.timeout_s + 5.0,
        )

    @property
    def route(self) -> str:
        return self._settings.route.name

    async def aclose(self) -> None:
        if self._owns_client:
            await self.client.close()

    async def round_trip(
        self,
        request: ModelRequest,
        payload: dict[str, Any],
        mode: OutputMode,
        *,
        on_error: Callable[[CallErrorEntry], None],
        on_cut: Callable[[float], None],
        first_attempt: int,
    ) -> Reply:
        """One round trip, its retries included: the reply, or `CallFailed` once the attempts
        or the run's deadline ran out.

        ``payload`` is sent as the server accepts it: ``max_tokens`` renamed and
        ``temperature`` dropped once a server refused them (a refusal is retried at once
        without). Each attempt holds its own worst case on the budget and settles it to what
        it cost: the reply's cost (its whole reservation when it reported no usage: the
        reply's ``charged_usd``), or, for an attempt cut mid-stream (a stream that ends without
        a ``finish_reason`` included), the usage the server reported for it, else (tokens had
        arrived, the count is unknown) its whole reservation, which ``on_cut`` hears. No
        attempt is sent that does not fit, so a run never spends past its cap. Every failed
        attempt goes to ``on_error``."""
        body = self._as_sent(payload)
        try:
            return await call_with_retries(
                functools.partial(
                    self._attempt, body, mode, request, self._bound(body), on_cut, on_error
                ),
                self._retry,
                on_error,
                limiter=self.limiter,
                first_attempt=first_attempt,
            )
        except ParamRejected as exc:  # each parameter is adapted once: at most three rounds
            on_error(exc.entry)
            self.adapt(exc)
            return await self.round_trip(
                request,
                payload,
                mode,
                on_error=on_error,
                on_cut=on_cut,
                first_attempt=exc.entry.attempt + 1,
            )
        except TransientError as exc:
            entry = exc.entry
            raise CallFailed(
                f"gave up after {entry.attempt} attempts; last error {entry.kind}: "
                f"{entry.message}" + self._hint(entry)
            ) from None
        except DeadlineReached as exc:
            entry = exc.entry
            hint = "" if exc.rate_limited else self._hint(entry)
            raise CallFailed(
                f"{entry.message} (after {entry.attempt} attempts)" + hint, entry
            ) from None

    def _as_sent(self, payload: dict[str, Any]) -> dict[str, Any]:
        """``payload`` with the parameters this server takes: its token limit's name, and no
        ``temperature`` where it accepts only its default."""
        body = dict(payload)
        if self.token_param != "max_tokens":
            body[self.token_param] = body.pop("max_tokens")
        if not self.send_temperature:
            body.pop("temperature", None)
        return body

    def adapt(self, exc: ParamRejected) -> None:
        """Stop sending the parameter the server rejected, for the rest of the run."""
        if exc.param == "max_tokens":
            self.token_param = "max_completion_tokens"
        elif exc.param == "temperature":
            self.send_temperature = False
        elif exc.param == "stream":
            self.stream = False
        else:  # pragma: no cover - rejected_param names only these
            raise CallFailed(f"server rejected parameter {exc.param}", exc.entry)
        logger.info("request parameter adapted", route=self.route, param=exc.param)

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

    def cost(self, usage: Usage, resolved_model: str | None) -> float | None:
        """What ``usage`` cost on this route (``None`` when unpriced)."""
        if self._prices is None:
            return None
        route = self._settings.route
        return self._prices.cost((route.name, route.model, resolved_model), usage)

    def _bound(self, payload: dict[str, Any]) -> float:
        """The most one attempt with ``payload`` can cost (0 on an unpriced route), counting
        the body as it is sent (with the stream fields when it streams)."""
        if self._price is None:
            return 0.0
        body = streamed(payload) if self.stream else payload
        return self._price.worst_case(input_token_bound(body), int(payload[self.token_param]))

    def _cut_charge(self, usage: Usage | None, bound: float) -> float:
        """What a stream cut mid-way is charged: the usage it reported, at most its
        reservation (the whole reservation when it reported none)."""
        if self._prices is None:
            return 0.0
        return bound if usage is None else min(bound, self.cost(usage, None) or 0.0)

    def _over_reported(self, reply: Reply, cost: float, bound: float) -> OverReported:
        """Distrust the route on the budget (every run sharing it stops calling it) and say
        what was reported against what could be."""
        message = (
            f"{self.route}: the provider reported usage costing ${cost:.4f} for a request that "
            f"could cost at most ${bound:.4f} (excess ${cost - bound:.4f}; "
            f"{reply.usage.input_tokens} input and {reply.usage.output_tokens} output tokens "
            "reported); the cost cap cannot hold against such reports, so no more calls go to "
            "this route and the run stopped (resumable; the call was charged its reservation)"
        )
        self.budget.distrust(self.route, message)
        return OverReported(message, reply, cost, bound)

    async def _attempt(
        self,
        payload: dict[str, Any],
        mode: OutputMode,
        request: ModelRequest,
        bound: float,
        on_cut: Callable[[float], None],
        on_error: Callable[[CallErrorEntry], None],
        attempt: Attempt,
    ) -> Reply:
        async with self.budget.reserve(bound, request, route=self.route) as spend:
            state = StreamState()
            try:
                reply = await self._watched(payload, mode, attempt, state, request.site)
            except BaseException as exc:
                if state.tokens:  # generated, perhaps billed, then cut
                    charge = self._cut_charge(state.usage, bound)
                    on_cut(charge)
                    spend.settle(charge)
                if not isinstance(exc, Exception) and not attempt.timed_out:
                    # the run stopped around it (its own timeout is the retries' to record):
                    # it was sent, so it is traced
                    on_error(CallErrorEntry(attempt=attempt.number, kind="cancelled"))
                raise
            cost = self.cost(reply.usage, reply.model)
            if cost is not None and bound > 0 and cost > bound + _ROUNDING_USD:
                spend.settle(bound)  # the most the request could cost: what the cap counted on
                raise self._over_reported(reply, cost, bound)
            if cost is not None and bound > 0 and not reply.usage_reported:
                spend.settle(bound)  # its usage is unknown: the most it could have cost
                return dataclasses.replace(reply, charged_usd=bound)
            spend.settle(cost)
            return reply

    async def _watched(
        self,
        payload: dict[str, Any],
        mode: OutputMode,
        attempt: Attempt,
        state: StreamState,
        site: CallSite,
    ) -> Reply:
        """Send one attempt, in the in-flight list and reported while it runs."""
        failure: Exception | None = None
        async with anyio.create_task_group() as reports:
            reports.start_soon(self._report_waiting, state, site.role, payload)
            try:
                with waiting(self.route, site.role, site.agent, state):
                    reply = await self._send(payload, mode, attempt, state)
            except Exception as exc:
                failure = exc  # raised below, outside the group, so not wrapped in one
            finally:
                reports.cancel_scope.cancel()
        if failure is not None:
            raise failure
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
                max_tokens=payload[self.token_param],
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
        completion: object = None
        try:
            reply: Reply | None
            if self.stream:
                body = streamed(payload)
                chunks = await self.client.post(
                    "/chat/completions",
                    cast_to=object,
                    body=body,
                    options=options,
                    stream=True,
                    stream_cls=AsyncStream[object],  # chunks as plain JSON
                )
                async with chunks:
                    reply = await read_stream(chunks, number, self.redact, state, attempt.progress)
                if reply is None:  # a server that ignored ``stream``: ask it without from now
                    self.stream = False
                elif reply.finish_reason is None:  # the connection closed before the end
                    entry = CallErrorEntry(
                        attempt=number,
                        kind="connection",
                        message="the stream ended without a finish_reason: cut short",
                    )
                    raise TransientError(entry)
            else:
                completion = await self.client.post(
                    "/chat/completions", cast_to=object, body=payload, options=options
                )
                reply = reply_from_json(completion, number, self.redact)
        except openai.APIStatusError as exc:
            raise self._refusal(exc, payload, mode, number) from exc
        except (openai.APIError, ValueError) as exc:
            entry, retryable, retry_after = classify(exc, number, self.redact)
            if retryable:
                raise TransientError(entry, retry_after) from exc
            raise CallFailed(f"{entry.kind}: {entry.message}", entry) from exc
        if reply is None:
            unread = isinstance(completion, str) and not _is_json(completion)
            message = "reply was not JSON" if unread else "reply has no choices"
            raise TransientError(
                CallErrorEntry(attempt=number, kind="bad_response", message=message)
            )
        return reply

    def _refusal(
        self, exc: openai.APIStatusError, payload: dict[str, Any], mode: OutputMode, number: int
    ) -> Exception:
        return read_refusal(
            exc,
            offered_tools="tools" in payload,
            mode=mode,
            number=number,
            redact=self.redact,
            adaptable=lambda e: rejected_param(
                e,
                stream=self.stream,
                token_param=self.token_param,
                send_temperature=self.send_temperature,
            ),
        )


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
