"""Measuring a route before a run: latency, speed, output modes, context size; and an estimate.

`measure` sends a few small streamed requests straight to the server (no cache, no retries):
time to the first token, tokens per second free and under a JSON-schema response format,
prompt tokens per second, which output modes return valid JSON, and the context size where the
server tells it (llama.cpp's ``/props`` and ``/v1/models`` ``meta``, vLLM's ``max_model_len``).
`estimate` turns a run's planned calls and a measurement into calls, tokens and wall time, and
warns about every role whose ``max_tokens`` cannot be generated within the route's limits.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import openai
from openai import AsyncOpenAI, AsyncStream
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from worldsim.domain.config import RouteOptions
from worldsim.models.routes import RouteSettings
from worldsim.models.secrets import Redactor

__all__ = ["Estimate", "Measurement", "ModeCheck", "PlannedCall", "estimate", "measure"]

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"p_yes": {"type": "number"}, "reason": {"type": "string"}},
    "required": ["p_yes", "reason"],
    "additionalProperties": False,
}
_JSON_ASK = (
    "Will it rain in Paris tomorrow? Answer with only a JSON object with keys p_yes (a number "
    "between 0 and 1) and reason (a few words)."
)
_FREE_ASK = "Count from 1 to 300, numbers separated by spaces."
_FILLER = "The committee met again to review the merger and its remedies. "


@dataclass(frozen=True, slots=True)
class ModeCheck:
    """One output mode tried: whether its reply was a valid JSON object, and how fast."""

    mode: str
    ok: bool
    seconds: float
    output_tokens: int
    note: str = ""

    @property
    def tokens_per_s(self) -> float | None:
        return self.output_tokens / self.seconds if self.ok and self.seconds > 0 else None


@dataclass(slots=True)
class Measurement:
    """What `measure` found (``None``: not measured, or the server did not say)."""

    route: str
    latency_s: float | None = None
    free_tokens_per_s: float | None = None
    constrained_tokens_per_s: float | None = None
    prompt_tokens_per_s: float | None = None
    context_tokens: int | None = None
    modes: list[ModeCheck] = field(default_factory=list)
    error: str | None = None


@dataclass(frozen=True, slots=True)
class _Timed:
    text: str
    first_s: float  # to the first chunk
    total_s: float
    output_tokens: int
    prompt_tokens: int


async def _timed(
    client: AsyncOpenAI, model: str, messages: list[dict[str, str]], max_tokens: int, **extra: Any
) -> _Timed:
    started = time.perf_counter()
    first: float | None = None
    parts: list[str] = []
    usage: Any = None
    body = {
        "model": model,
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
        **extra,
    }
    chunks = await client.post(
        "/chat/completions",
        cast_to=ChatCompletion,
        body=body,
        stream=True,
        stream_cls=AsyncStream[ChatCompletionChunk],
    )
    async with chunks:
        async for chunk in chunks:
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices[:1]:
                if choice.delta.content:
                    if first is None:
                        first = time.perf_counter() - started
                    parts.append(choice.delta.content)
    total = time.perf_counter() - started
    out = usage.completion_tokens if usage is not None else len(parts)
    prompt = usage.prompt_tokens if usage is not None else 0
    return _Timed("".join(parts), first if first is not None else total, total, out, prompt)


def _speed(t: _Timed) -> float | None:
    """Tokens per second after the first one (prompt processing excluded)."""
    span = t.total_s - t.first_s
    return (t.output_tokens - 1) / span if t.output_tokens > 1 and span > 0 else None


def _valid(text: str) -> bool:
    start, end = text.find("{"), text.rfind("}")
    try:
        value = json.loads(text[start : end + 1]) if start >= 0 else None
    except json.JSONDecodeError:
        return False
    return isinstance(value, dict) and isinstance(value.get("p_yes"), int | float)


async def measure(
    settings: RouteSettings,
    options: RouteOptions | None = None,
    *,
    quick: bool = False,
    timeout_s: float = 60.0,
    redactor: Redactor | None = None,
) -> Measurement:
    """Measure a route. ``quick`` sends two short requests (latency, free and constrained
    speed); otherwise every output mode, prompt speed and the context size are measured too.
    A failure is recorded in ``error`` (redacted), never raised."""
    ro = options or RouteOptions()
    redact = redactor or Redactor([settings.secret_key])
    result = Measurement(settings.route.name)
    client = AsyncOpenAI(
        base_url=settings.base_url,
        api_key=settings.api_key,
        max_retries=0,
        timeout=openai.Timeout(ro.timeout_s or timeout_s, connect=30.0),
    )
    model = settings.route.model
    try:
        free = await _timed(
            client, model, [{"role": "user", "content": _FREE_ASK}], 24 if quick else 96
        )
        result.latency_s = free.first_s
        result.free_tokens_per_s = _speed(free)
        modes = ("json_schema",) if quick else ("json_schema", "json_object", "text")
        for mode in modes:
            result.modes.append(await _check_mode(client, model, mode, redact))
        constrained = next((m for m in result.modes if m.mode == "json_schema" and m.ok), None)
        if constrained is not None:
            result.constrained_tokens_per_s = constrained.tokens_per_s
        if not quick:
            long = await _timed(
                client, model, [{"role": "user", "content": _FILLER * 60 + "Summarise."}], 1
            )
            if long.prompt_tokens:
                result.prompt_tokens_per_s = long.prompt_tokens / long.total_s
            result.context_tokens = await _context_size(client, settings)
    except (openai.APIError, ValueError) as exc:
        result.error = redact(" ".join(str(exc).split()))[:300]
    finally:
        await client.close()
    return result


async def _check_mode(client: AsyncOpenAI, model: str, mode: str, redact: Redactor) -> ModeCheck:
    extra: dict[str, Any] = {}
    if mode == "json_schema":
        schema = {"name": "forecast", "schema": _SCHEMA, "strict": True}
        extra["response_format"] = {"type": "json_schema", "json_schema": schema}
    elif mode == "json_object":
        extra["response_format"] = {"type": "json_object"}
    ask = _JSON_ASK
    if mode != "json_schema":  # as a route in this mode is asked: the schema in the prompt
        ask += " It must validate against this JSON schema: " + json.dumps(_SCHEMA)
    started = time.perf_counter()
    try:
        t = await _timed(client, model, [{"role": "user", "content": ask}], 64, **extra)
    except openai.APIStatusError as exc:
        note = redact(" ".join(str(exc).split()))[:120]
        return ModeCheck(mode, False, time.perf_counter() - started, 0, note)
    ok = _valid(t.text)
    return ModeCheck(mode, ok, t.total_s, t.output_tokens, "" if ok else "reply was not the JSON")


async def _context_size(client: AsyncOpenAI, settings: RouteSettings) -> int | None:
    """The context size the server reports, or ``None``."""
    keys = ("max_model_len", "n_ctx", "n_ctx_train", "context_length")
    try:
        listing = await client.get("/models", cast_to=object)
    except (openai.APIError, ValueError):
        listing = None
    size = _find_int(listing, keys)
    if size is not None:
        return size
    root = settings.base_url.removesuffix("/v1")
    try:
        props = await client.get(f"{root}/props", cast_to=object)
    except (openai.APIError, ValueError):
        return None
    return _find_int(props, ("n_ctx",))


def _find_int(value: object, keys: Sequence[str]) -> int | None:
    """The first of ``keys`` holding an int anywhere in nested mappings and lists."""
    if isinstance(value, list):
        return next((n for n in (_find_int(v, keys) for v in value) if n is not None), None)
    if isinstance(value, dict):
        for key in keys:
            found = value.get(key)
            if isinstance(found, int) and found > 0:
                return found
        for inner in value.values():
            found = _find_int(inner, keys)
            if found is not None:
                return found
    return None


@dataclass(frozen=True, slots=True)
class PlannedCall:
    """One model call a run is expected to make (from a dry run with the offline model)."""

    role: str
    max_tokens: int
    prompt_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class Estimate:
    calls: int
    prompt_tokens: int
    output_tokens: int
    wall_s: float | None
    worst_wall_s: float | None
    warnings: tuple[str, ...]


def estimate(
    calls: Sequence[PlannedCall],
    m: Measurement,
    options: RouteOptions | None = None,
    *,
    timeout_s: float = 60.0,
    deadline_s: float | None = None,
    streams: bool = True,
    concurrency: int = 1,
) -> Estimate:
    """Calls, tokens and wall time of a run at the measured speed (constrained speed if the
    route constrains, else free speed), ``concurrency`` calls at a time; and a warning for every
    role whose scaled ``max_tokens`` cannot finish within the limits: the timeout when the
    server does not stream (it then bounds the whole reply), the deadline otherwise."""
    ro = options or RouteOptions()
    scale = ro.max_tokens_scale or 1.0
    modes = ro.output_modes or ("json_schema",)
    speed = m.constrained_tokens_per_s if modes[0] == "json_schema" else None
    speed = speed or m.free_tokens_per_s
    prompt_speed = m.prompt_tokens_per_s
    latency = m.latency_s or 0.0

    def seconds(prompt: int, out: int) -> float | None:
        if not speed:
            return None
        return latency + (prompt / prompt_speed if prompt_speed else 0.0) + out / speed

    typical = [seconds(c.prompt_tokens, c.output_tokens) for c in calls]
    worst = [seconds(c.prompt_tokens, math.ceil(c.max_tokens * scale)) for c in calls]
    lanes = max(1, concurrency)
    wall = sum(t for t in typical if t is not None) / lanes if speed else None
    worst_wall = sum(t for t in worst if t is not None) / lanes if speed else None
    warnings: list[str] = []
    limit, what = (deadline_s, "the run's deadline") if streams else (timeout_s, "the timeout")
    seen: set[str] = set()
    for call in calls:
        need = seconds(call.prompt_tokens, math.ceil(call.max_tokens * scale))
        if call.role in seen or need is None or limit is None or need <= limit:
            continue
        seen.add(call.role)
        warnings.append(
            f"role {call.role}: max_tokens {math.ceil(call.max_tokens * scale)} at "
            f"{speed:.1f} tokens/s needs up to {need:.0f} s, beyond {what} ({limit:g} s); "
            "set max_tokens_scale below 1 or raise " + ("deadline_s" if streams else "timeout_s")
        )
    return Estimate(
        calls=len(calls),
        prompt_tokens=sum(c.prompt_tokens for c in calls),
        output_tokens=sum(c.output_tokens for c in calls),
        wall_s=wall,
        worst_wall_s=worst_wall,
        warnings=tuple(warnings),
    )
