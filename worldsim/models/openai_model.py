"""A route served by any OpenAI-compatible Chat Completions endpoint.

Output modes, tried in order and remembered per route for the rest of the run:

* ``json_schema`` — a JSON-schema response format generated from the output model;
* ``json_object`` — JSON mode, the schema carried in the system prompt;
* ``text`` — no response format, the schema carried in the system prompt.

A server that rejects a response format (llama-cpp-python answers HTTP 500 "Input should be
'text' or 'json_object'") moves the route one mode down. A server that silently ignores it is
caught by validation. An invalid reply gets one repair round trip with the validation error;
a second invalid reply is a recorded failure.
"""

from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass
from typing import Any, Final

import anyio
import openai
import structlog
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletion, ChatCompletionMessageFunctionToolCall
from pydantic import ValidationError

from worldsim.domain.contracts import ModelRequest, ModelResponse
from worldsim.domain.errors import ModelError
from worldsim.models.call import CallErrorEntry, LlmCallData, OutputMode, ToolCallEntry, Usage
from worldsim.models.pricing import PriceTable
from worldsim.models.retry import RetryPolicy, TransientError, call_with_retries, classify
from worldsim.models.routes import RouteSettings
from worldsim.models.schema import (
    DEFAULT_MAX_STRING_LENGTH,
    extract_json,
    response_schema,
    schema_instructions,
    schema_name,
)

__all__ = ["OpenAIModel"]

logger = structlog.get_logger(__name__)

_NEXT_MODE: Final[dict[OutputMode, OutputMode]] = {
    "json_schema": "json_object",
    "json_object": "text",
}
_MODE_ORDER: Final[tuple[OutputMode, ...]] = ("json_schema", "json_object", "text")
_REJECTION_MARKERS: Final = (
    "response_format",
    "response format",
    "json_schema",
    "input should be 'text' or 'json_object'",
)


@dataclass(frozen=True, slots=True)
class _Reply:
    """What one successful HTTP attempt brought back."""

    attempt: int
    content: str
    finish_reason: str | None
    model: str | None
    id: str | None
    system_fingerprint: str | None
    usage: Usage
    tool_calls: tuple[tuple[str, str, str], ...] = ()  # (id, name, arguments)


class _ToolsRejected(Exception):
    """The server refused the request's function tools."""

    def __init__(self, entry: CallErrorEntry) -> None:
        super().__init__(entry.message)
        self.entry = entry


class _FormatRejected(Exception):
    def __init__(self, entry: CallErrorEntry) -> None:
        super().__init__(entry.message)
        self.entry = entry


class _ParamRejected(Exception):
    def __init__(self, entry: CallErrorEntry, param: str) -> None:
        super().__init__(entry.message)
        self.entry = entry
        self.param = param


class _Failed(Exception):
    def __init__(self, message: str, entry: CallErrorEntry | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.entry = entry


class OpenAIModel:
    """One route on an OpenAI-compatible server, with retries, output-mode negotiation, one
    repair round trip, and a full `LlmCallData` record on every response and failure.

    Args:
        settings: base URL and key of the route (from `resolve_settings`).
        retry: attempts, per-attempt timeout and backoff.
        limiter: the route's connection limiter, held by each HTTP attempt.
        prices: price table for ``cost_usd``; ``None`` leaves every call unpriced.
        max_string_length: ``maxLength`` put on every string of the schema (``None``: none).
        strict: the ``strict`` flag of the schema format; ``None`` sets it when the schema fits
            the strict subset.
        output_mode: start in this mode instead of negotiating from ``json_schema``.
        client: an `AsyncOpenAI` to use instead of building one.
    """

    def __init__(
        self,
        settings: RouteSettings,
        *,
        retry: RetryPolicy | None = None,
        limiter: anyio.CapacityLimiter | None = None,
        prices: PriceTable | None = None,
        max_string_length: int | None = DEFAULT_MAX_STRING_LENGTH,
        strict: bool | None = None,
        output_mode: OutputMode | None = None,
        client: AsyncOpenAI | None = None,
    ) -> None:
        if output_mode is not None and output_mode not in _MODE_ORDER:
            raise ValueError(f"output_mode must be one of {_MODE_ORDER}")
        self._settings = settings
        self._retry = retry or RetryPolicy()
        self._limiter = limiter
        self._prices = prices
        self._max_string_length = max_string_length
        self._strict = strict
        self._mode: OutputMode = output_mode or "json_schema"
        # reasoning models want max_completion_tokens and only their default temperature
        self._token_param = "max_tokens"
        self._send_temperature = True
        self._send_tools = True
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
    def limiter(self) -> anyio.CapacityLimiter | None:
        return self._limiter

    async def aclose(self) -> None:
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
        last: _Reply | None = None
        mode = self._mode
        messages: list[dict[str, Any]] = list(_initial_messages(request, mode, schema))
        repaired = False
        tool_rounds = 0
        tool_log: list[ToolCallEntry] = []
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
                    payload["tools"] = [dict(t) for t in request.tools]
                try:
                    reply = await call_with_retries(
                        functools.partial(self._attempt, payload, mode),
                        self._retry,
                        errors.append,
                        limiter=self._limiter,
                        first_attempt=attempts + 1,
                    )
                except _ParamRejected as exc:
                    attempts = exc.entry.attempt
                    errors.append(exc.entry)
                    self._adapt(exc)
                    continue
                except _ToolsRejected as exc:
                    # a server without function calling: answer from the prompt alone
                    attempts = exc.entry.attempt
                    errors.append(exc.entry)
                    self._send_tools = False
                    logger.info("tools dropped for this route", route=self.route)
                    continue
                except _FormatRejected as exc:
                    attempts = exc.entry.attempt
                    errors.append(exc.entry)
                    mode = self._downgrade(mode, exc.entry)
                    messages = _initial_messages(request, mode, schema)
                    repaired = False
                    continue
                except TransientError as exc:
                    attempts = exc.entry.attempt
                    raise _Failed(
                        f"gave up after {attempts} attempts; last error {exc.entry.kind}: "
                        f"{exc.entry.message}"
                    ) from None
                attempts = reply.attempt
                usage = usage + reply.usage
                last = reply
                if reply.tool_calls and offer_tools and request.tool_handler is not None:
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
                text = reply.content
                try:
                    output = request.output_type.model_validate_json(extract_json(text))
                except ValidationError as exc:
                    problem = _describe(exc, reply.finish_reason)
                    errors.append(
                        CallErrorEntry(attempt=attempts, kind="invalid_output", message=problem)
                    )
                    if repaired:
                        raise _Failed(f"invalid output after one repair: {problem}") from None
                    repaired = True
                    messages = [
                        *messages,
                        {"role": "assistant", "content": text},
                        {"role": "user", "content": _repair_prompt(problem, schema)},
                    ]
                    continue
                record = self._record(request, mode, usage, errors, attempts, last, started)
                record.tool_calls = tool_log
                return ModelResponse(output=output, text=text, call=record.model_dump(mode="json"))
        except _Failed as failure:
            if failure.entry is not None:
                errors.append(failure.entry)
                attempts = failure.entry.attempt
            record = self._record(request, mode, usage, errors, attempts, last, started)
            record.tool_calls = tool_log
            record.error = self._redact(failure.message)
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
            self._token_param: request.max_tokens,
        }
        if self._send_temperature:
            payload["temperature"] = request.temperature
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
        return payload

    async def _attempt(self, payload: dict[str, Any], mode: OutputMode, number: int) -> _Reply:
        try:
            # The payload is already plain JSON; posting it directly skips the client's
            # per-call parameter transform, which walks every message and the whole JSON schema
            # and costs more than the request itself against a fast local server.
            completion = await self._client.post(
                "/chat/completions", cast_to=ChatCompletion, body=payload
            )
        except openai.APIStatusError as exc:
            entry, retryable, retry_after = classify(exc, number)
            if "tools" in payload and _is_tools_rejection(exc):
                entry.kind = "tools_rejected"
                raise _ToolsRejected(entry) from exc
            if _is_format_rejection(exc, mode):
                entry.kind = "format_rejected"
                raise _FormatRejected(entry) from exc
            param = self._rejected_param(exc)
            if param is not None:
                entry.kind = "param_rejected"
                raise _ParamRejected(entry, param) from exc
            if retryable:
                raise TransientError(entry, retry_after) from exc
            raise _Failed(f"HTTP {entry.status}: {entry.message}", entry) from exc
        except (openai.APIError, ValueError) as exc:
            entry, retryable, retry_after = classify(exc, number)
            if retryable:
                raise TransientError(entry, retry_after) from exc
            raise _Failed(f"{entry.kind}: {entry.message}", entry) from exc
        if not completion.choices:
            entry = CallErrorEntry(
                attempt=number, kind="bad_response", message="reply has no choices"
            )
            raise TransientError(entry)
        choice = completion.choices[0]
        u = completion.usage
        usage = Usage()
        if u is not None:
            details = u.prompt_tokens_details
            out_details = u.completion_tokens_details
            usage = Usage(
                input_tokens=u.prompt_tokens or 0,
                cached_input_tokens=(details.cached_tokens or 0) if details else 0,
                output_tokens=u.completion_tokens or 0,
                reasoning_tokens=(out_details.reasoning_tokens or 0) if out_details else 0,
            )
        calls = tuple(
            (c.id, c.function.name, c.function.arguments)
            for c in (choice.message.tool_calls or ())
            if isinstance(c, ChatCompletionMessageFunctionToolCall)
        )
        return _Reply(
            attempt=number,
            tool_calls=calls,
            content=choice.message.content or "",
            finish_reason=choice.finish_reason,
            model=completion.model,
            id=completion.id,
            system_fingerprint=completion.system_fingerprint,
            usage=usage,
        )

    def _rejected_param(self, exc: openai.APIStatusError) -> str | None:
        """The parameter a 400 refuses that this route can adapt, if any."""
        if exc.status_code != 400:
            return None
        text = f"{exc.message} {exc.body}".lower()
        if self._token_param == "max_tokens" and "max_completion_tokens" in text:
            return "max_tokens"
        if self._send_temperature and "temperature" in text and "unsupported" in text:
            return "temperature"
        return None

    def _adapt(self, exc: _ParamRejected) -> None:
        if exc.param == "max_tokens":
            self._token_param = "max_completion_tokens"
        elif exc.param == "temperature":
            self._send_temperature = False
        else:  # pragma: no cover - _rejected_param names only these
            raise _Failed(f"server rejected parameter {exc.param}", exc.entry)
        logger.info("request parameter adapted", route=self.route, param=exc.param)

    def _downgrade(self, mode: OutputMode, entry: CallErrorEntry) -> OutputMode:
        lower = _NEXT_MODE.get(mode)
        if lower is None:
            raise _Failed(f"server rejected the request format: {entry.message}")
        if _MODE_ORDER.index(self._mode) < _MODE_ORDER.index(lower):
            logger.info("output mode downgraded", route=self.route, from_mode=mode, to_mode=lower)
            self._mode = lower
        return lower

    def _redact(self, text: str) -> str:
        """Remove the key from server-supplied text (some servers echo credentials in errors)."""
        key = self._settings.api_key
        return text.replace(key, "[redacted]") if len(key) >= 8 else text

    def _record(
        self,
        request: ModelRequest,
        mode: OutputMode,
        usage: Usage,
        errors: list[CallErrorEntry],
        attempts: int,
        last: _Reply | None,
        started: float,
    ) -> LlmCallData:
        model = self._settings.route.model
        record = LlmCallData.for_request(
            request,
            provider=self._settings.route.provider,
            requested_model=model,
            output_mode=mode,
            base_url_host=self._settings.base_url_host,
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
        record.errors = [e.model_copy(update={"message": self._redact(e.message)}) for e in errors]
        if self._prices is not None:
            record.cost_usd = self._prices.cost(
                (self._settings.route.name, model, record.resolved_model), usage
            )
        return record


def _initial_messages(
    request: ModelRequest, mode: OutputMode, schema: dict[str, Any]
) -> list[dict[str, str]]:
    messages = [{"role": m.role, "content": m.content} for m in request.chat()]
    if mode == "json_schema":
        return messages
    instructions = schema_instructions(schema)
    if messages and messages[0]["role"] == "system":
        messages[0] = {"role": "system", "content": messages[0]["content"] + "\n\n" + instructions}
    else:
        messages.insert(0, {"role": "system", "content": instructions})
    return messages


def _is_tools_rejection(exc: openai.APIStatusError) -> bool:
    """A 400/422 that names the ``tools`` parameter: the server has no function calling.

    Anything else (a 5xx while parsing a tool call, say) is an ordinary error, retried as such.
    """
    if exc.status_code not in (400, 422):
        return False
    body = exc.body if isinstance(exc.body, str) else json.dumps(exc.body, default=str)
    text = f"{exc.message} {body}".lower()
    markers = ('"tools"', "'tools'", "tools ", "tool_choice", "tool choice")
    return any(marker in text for marker in markers)


def _is_format_rejection(exc: openai.APIStatusError, mode: OutputMode) -> bool:
    if mode == "text" or exc.status_code in (401, 403, 404, 408, 429):
        return False
    body = exc.body if isinstance(exc.body, str) else json.dumps(exc.body, default=str)
    text = f"{exc.message} {body}".lower()
    markers = (*_REJECTION_MARKERS, "json_object") if mode == "json_object" else _REJECTION_MARKERS
    return any(marker in text for marker in markers)


def _describe(exc: ValidationError, finish_reason: object) -> str:
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "(root)"
        parts.append(f"{where}: {err['msg']}")
    text = "; ".join(parts)
    if finish_reason == "length":
        text += " (the reply was cut off at the token limit; answer more briefly)"
    return text


def _repair_prompt(problem: str, schema: dict[str, Any]) -> str:
    return (
        f"Your reply was not valid: {problem}. Reply again with only the corrected JSON object. "
        "It must validate against this JSON schema:\n" + json.dumps(schema)
    )
