"""The ``llm_call`` trace record and the canonical request hash.

`ModelResponse.call` (and `ModelError.call`) is ``LlmCallData(...).model_dump(mode="json")``;
``LlmCallData.model_validate(response.call)`` reads it back. No field can hold a key: the record
is built from the request, the reply and the route's base-URL host only.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from worldsim.domain.contracts import ModelRequest
from worldsim.domain.jsonbytes import canonical_bytes

__all__ = [
    "CANCELLED",
    "AttemptFailed",
    "CacheStatus",
    "CallErrorEntry",
    "LlmCallData",
    "OutputMode",
    "PromptMessage",
    "ProviderAnomalyEntry",
    "Usage",
    "abandon",
    "abandoned_call",
    "output_schema",
    "output_schema_of",
    "request_hash",
]

OutputMode = Literal["json_schema", "json_object", "text", "tools", "scripted", "offline"]
"""How the reply was constrained: a JSON-schema response format, JSON mode with the schema in
the prompt, plain text with the schema in the prompt, a forced function call whose arguments
are the reply (``tools``), or an in-process model."""

CacheStatus = Literal["hit", "miss", "off"]


class Usage(BaseModel):
    """Token counts summed over every HTTP attempt that returned a reply."""

    model_config = ConfigDict(extra="forbid")

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )


class CallErrorEntry(BaseModel):
    """One failed attempt: what went wrong and how long the retry waited after it."""

    model_config = ConfigDict(extra="forbid")

    attempt: int
    kind: str
    """``rate_limit``, ``server_error``, ``timeout``, ``connection``, ``bad_response``,
    ``format_rejected``, ``invalid_output``, ``deadline``, ``client_error`` or ``cancelled``
    (the run stopped while the attempt was in flight)."""
    status: int | None = None
    message: str = ""
    wait_s: float | None = None
    timeout_s: float | None = None
    """The no-progress limit a timed-out attempt ran under (the next may run under more)."""


class AttemptFailed(Exception):
    """How one attempt failed, with its ``entry`` for the call's ``errors``."""

    def __init__(self, entry: CallErrorEntry) -> None:
        super().__init__(entry.message)
        self.entry = entry


class ProviderAnomalyEntry(BaseModel):
    """A reply whose reported usage costs more than its request could (its reservation), or
    that reported no usage on a priced route: what the provider reported (zeros, costing 0, for
    none), and what the call was charged instead (the reservation)."""

    model_config = ConfigDict(extra="forbid")

    attempt: int
    reported_usage: Usage
    reported_cost_usd: float
    reserved_usd: float
    """The round trip's worst case, reserved before it was sent, and what it was charged."""


class ToolCallEntry(BaseModel):
    """One tool call the model made before answering (its result is logged by the tool)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: str


class PromptMessage(BaseModel):
    """One message of the prompt a call sent (``llm_call.data.messages``)."""

    model_config = ConfigDict(extra="forbid")

    role: str
    content: str


class LlmCallData(BaseModel):
    """The ``data`` of an ``llm_call`` trace record (DESIGN §4.8)."""

    model_config = ConfigDict(extra="forbid")

    role: str
    agent: str
    timeline: str | None = None
    tick: int | None = None
    index: int = 0
    provider: str
    base_url_host: str | None = None
    requested_model: str
    resolved_model: str | None = None
    response_id: str | None = None
    system_fingerprint: str | None = None
    prompt_version: str
    request_hash: str
    temperature: float
    seed: int | None = None
    max_tokens: int
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = 0.0
    attempts: int = 0
    errors: list[CallErrorEntry] = Field(default_factory=list)
    cache: CacheStatus = "off"
    cost_usd: float | None = None
    """What the call was charged: its replies' cost, except that a round trip whose reported
    usage costs more than its reservation, or that reported none, is charged the reservation
    (see ``anomaly``), and a stream cut mid-way what it reported, else its reservation."""
    finish_reason: str | None = None
    error: str | None = None
    anomaly: ProviderAnomalyEntry | None = None
    """Set when the provider reported more usage than the request could cost, or none."""
    output_mode: OutputMode
    reply: str | None = None
    tool_calls: list[ToolCallEntry] = Field(default_factory=list)
    messages: list[PromptMessage]
    """The prompt as sent (system and user messages, after redaction)."""

    @property
    def paid_usd(self) -> float:
        """What this call cost the run: nothing when the cache answered it (its ``cost_usd`` is
        then the first call's), else its ``cost_usd`` (0 when unpriced)."""
        return 0.0 if self.cache == "hit" else self.cost_usd or 0.0

    @classmethod
    def for_request(
        cls,
        request: ModelRequest,
        *,
        provider: str,
        requested_model: str,
        output_mode: OutputMode,
        base_url_host: str | None = None,
        redact: Callable[[str], str] | None = None,
    ) -> LlmCallData:
        """A record filled with everything known before the call is sent, the prompt's
        messages passed through ``redact`` when given."""
        clean = redact or (lambda text: text)
        return cls(
            **asdict(request.site),  # role, agent, timeline, tick, index
            provider=provider,
            base_url_host=base_url_host,
            requested_model=requested_model,
            prompt_version=request.prompt_version,
            request_hash=request_hash(request, model=requested_model, output_mode=output_mode),
            temperature=request.temperature,
            seed=request.seed,
            max_tokens=request.max_tokens,
            output_mode=output_mode,
            messages=[PromptMessage(role=m.role, content=clean(m.content)) for m in request.chat()],
        )


CANCELLED = "cancelled: the run stopped while the call was in flight"
"""The ``error`` of a call that was sent and then cancelled: a failed route, the budget or an
interrupt stopped the run around it. Its cost is what the budget counted: the usage the server
reported for a cut stream, its reservation when tokens had come, else nothing."""

_ABANDONED = "_worldsim_abandoned_call"


def abandon(cancelled: BaseException, call: LlmCallData) -> None:
    """Hand ``call``, which the ``cancelled`` exception cut short after it was sent, to the
    tracing wrapper above it: a cancellation must go on as it is, so the record rides on it."""
    setattr(cancelled, _ABANDONED, call.model_dump(mode="json"))


def abandoned_call(cancelled: BaseException, *, take: bool = True) -> dict[str, Any] | None:
    """The record :func:`abandon` put on ``cancelled``: taken off it (it is traced once), or
    left there for a wrapper to add to."""
    held = vars(cancelled)
    call: dict[str, Any] | None = held.pop(_ABANDONED, None) if take else held.get(_ABANDONED)
    return call


def output_schema(output_type: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema pydantic generates for an output model (a fresh copy, safe to edit)."""
    return dict(json.loads(_schema_text(output_type)))


def output_schema_of(request: ModelRequest) -> dict[str, Any]:
    """The JSON schema of the request's output model."""
    return output_schema(request.output_type)


@functools.lru_cache(maxsize=512)
def _schema_text(output_type: type[BaseModel]) -> str:
    # Generating a schema costs about a millisecond; every call needs it at least twice.
    return canonical_bytes(output_type.model_json_schema()).decode()


def request_hash(request: ModelRequest, *, model: str, output_mode: str | None) -> str:
    """SHA-256 of the canonical request: model, messages, output schema, temperature, seed,
    max tokens and output mode (``None`` leaves the mode out, as the cache key does)."""
    payload: dict[str, Any] = {
        "model": model,
        "messages": [{"role": m.role, "content": m.content} for m in request.chat()],
        "schema": output_schema_of(request),
        "temperature": request.temperature,
        "seed": request.seed,
        "max_tokens": request.max_tokens,
    }
    if output_mode is not None:
        payload["output_mode"] = output_mode
    return hashlib.sha256(canonical_bytes(payload)).hexdigest()
