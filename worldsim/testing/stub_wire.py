"""What the stub server sends and sees: its replies' shapes, its faults, the requests it
records, and how it reads what a request asks for (a forced function, a JSON schema).

Shared by `worldsim.testing.stub_server` (which re-exports the public names).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from worldsim.models.pricing import input_token_bound

__all__ = [
    "LLAMA_CPP_REJECTION",
    "Fault",
    "Faults",
    "RecordedRequest",
    "Script",
    "StubReply",
    "UsageFn",
    "completion_json",
    "error_body",
    "forced_function",
    "requested_schema",
    "stream_chunks",
    "worst_case_usage",
]

Fault = Literal["rate_limit", "server_error", "timeout", "malformed", "truncated"]


@dataclass(frozen=True, slots=True)
class StubReply:
    """A raw HTTP answer a script can return instead of content (an error, say)."""

    status: int
    body: Mapping[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)


Script = Callable[[dict[str, Any]], "str | dict[str, Any] | BaseModel | StubReply"]
UsageFn = Callable[[Mapping[str, Any], str], tuple[int, int]]
"""``(request JSON, reply content) -> (prompt_tokens, completion_tokens)``."""


def worst_case_usage(body: Mapping[str, Any], content: str) -> tuple[int, int]:
    """A `UsageFn` reporting the most a reply could count: the bound a budget reserves for
    (the request body's bytes in, its ``max_tokens`` out), so each call costs its reservation."""
    out = body.get("max_tokens", body.get("max_completion_tokens"))
    return input_token_bound(body), int(out) if out is not None else len(content)


LLAMA_CPP_REJECTION = (
    "1 validation error for CreateChatCompletionRequest\nresponse_format.type\n"
    "  Input should be 'text' or 'json_object' [type=literal_error, input_value='json_schema', "
    "input_type=str]"
)


@dataclass(frozen=True, slots=True)
class Faults:
    """Fault rates (each in [0, 1], summing to at most 1) and how faults behave.

    Attributes:
        rate_limit: share of requests answered 429 with ``Retry-After: retry_after``.
        server_error: share answered 500.
        timeout: share that sleep ``timeout_sleep_s`` before answering.
        malformed: share whose content is broken JSON.
        truncated: share whose content is cut short with ``finish_reason: "length"``.
        retry_after: the ``Retry-After`` header value sent with 429s (seconds or HTTP date).
        retry_after_ms: if set, a ``retry-after-ms`` header sent with 429s.
        reject_json_schema: answer ``json_schema`` formats like llama-cpp-python (HTTP 500).
        reject_response_format: answer any response format with HTTP 400.
        reasoning_model: refuse ``max_tokens`` and a non-default ``temperature`` with HTTP 400,
            as OpenAI's reasoning models do.
        reject_stream: refuse ``stream: true`` with HTTP 400, as a server without streaming.
        reject_tools: refuse any request with ``tools`` with HTTP 400, as a server without
            function calling.

    A request whose ``tool_choice`` names a function (or is ``required``: then the last one
    offered) is answered with a call of it, the invented (or scripted) content as its
    arguments, as function-calling servers do.
    """

    rate_limit: float = 0.0
    server_error: float = 0.0
    timeout: float = 0.0
    malformed: float = 0.0
    truncated: float = 0.0
    retry_after: str = "1"
    retry_after_ms: str | None = None
    timeout_sleep_s: float = 2.0
    reject_json_schema: bool = False
    reject_response_format: bool = False
    reasoning_model: bool = False
    reject_stream: bool = False
    reject_tools: bool = False

    def __post_init__(self) -> None:
        rates = (self.rate_limit, self.server_error, self.timeout, self.malformed, self.truncated)
        if any(r < 0 for r in rates) or sum(rates) > 1:
            raise ValueError("fault rates must be non-negative and sum to at most 1")

    def refusal(self, body: Mapping[str, Any]) -> tuple[int, dict[str, Any]] | None:
        """The status and error body with which this server refuses ``body`` for what it asks
        (a response format, tools, streaming, a reasoning model's parameters), or ``None``."""
        fmt = body.get("response_format") or {}
        fmt_type = fmt.get("type") if isinstance(fmt, dict) else None
        if fmt_type and self.reject_response_format:
            return 400, error_body(
                "response_format is not supported by this server",
                "invalid_request_error",
                param="response_format",
            )
        if self.reject_tools and body.get("tools"):
            return 400, error_body("tools are not supported", "invalid_request_error", "tools")
        if self.reject_stream and body.get("stream"):
            return 400, error_body("stream is not supported", "invalid_request_error", "stream")
        if self.reasoning_model and "max_tokens" in body:
            return 400, error_body(
                "Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead.",
                "invalid_request_error",
                param="max_tokens",
            )
        if self.reasoning_model and body.get("temperature", 1) != 1:
            return 400, error_body(
                "Unsupported value: 'temperature' does not support "
                f"{body['temperature']} with this model. "
                "Only the default (1) value is supported.",
                "invalid_request_error",
                param="temperature",
            )
        if fmt_type == "json_schema" and self.reject_json_schema:
            return 500, error_body(LLAMA_CPP_REJECTION, "server_error")
        return None

    def draw(self, roll: float) -> Fault | None:
        edge = 0.0
        for name, rate in (
            ("rate_limit", self.rate_limit),
            ("server_error", self.server_error),
            ("timeout", self.timeout),
            ("malformed", self.malformed),
            ("truncated", self.truncated),
        ):
            edge += rate
            if roll < edge:
                return name  # type: ignore[return-value]
        return None


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request as the server saw it (header names lower-cased) and the fault injected
    into its answer, if any."""

    number: int
    path: str
    headers: Mapping[str, str]
    body: Mapping[str, Any]
    fault: Fault | None
    connection: str = ""
    """The client's address and port: the TCP connection the request came on."""


def error_body(message: str, kind: str, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": None}}


def forced_function(body: Mapping[str, Any]) -> str | None:
    """The function ``tool_choice`` tells the model to call: the one it names, or, when any
    call is ``required``, the last function offered."""
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        name = choice["function"].get("name")
        return name if isinstance(name, str) else None
    tools = body.get("tools") or []
    if choice == "required" and tools and isinstance(tools[-1], dict):
        name = (tools[-1].get("function") or {}).get("name")
        return name if isinstance(name, str) else None
    return None


def requested_schema(body: Mapping[str, Any]) -> dict[str, Any] | None:
    forced = forced_function(body)
    for tool in body.get("tools") or ():
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and function.get("name") == forced:
            parameters = function.get("parameters")
            if isinstance(parameters, dict):
                return parameters
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        schema = (fmt.get("json_schema") or {}).get("schema")
        if isinstance(schema, dict):
            return schema
    decoder = json.JSONDecoder()
    for message in body.get("messages", []):
        text = str(message.get("content", ""))
        marker = text.find("JSON schema")
        start = text.find("{", marker if marker >= 0 else 0)
        while start >= 0:
            try:
                value, _ = decoder.raw_decode(text, start)
            except json.JSONDecodeError:
                start = text.find("{", start + 1)
                continue
            if isinstance(value, dict) and ("properties" in value or "type" in value):
                return value
            start = text.find("{", start + 1)
    return None


def stream_chunks(
    body: Mapping[str, Any], completion: Mapping[str, Any], chunk_chars: int
) -> list[str]:
    """A completion as the ``data:`` lines of a stream, with usage last if asked for."""
    head = {k: completion.get(k) for k in ("id", "created", "model", "system_fingerprint")}
    head["object"] = "chat.completion.chunk"
    head["created"] = head["created"] or int(time.time())
    choice = completion["choices"][0]
    message = choice.get("message") or {}
    content = message.get("content") or ""
    step = chunk_chars
    pieces = [content[i : i + step] for i in range(0, len(content), step)] or [""]
    events: list[dict[str, Any]] = [{"role": "assistant", "content": piece} for piece in pieces[:1]]
    events += [{"content": piece} for piece in pieces[1:]]
    for index, call in enumerate(message.get("tool_calls") or ()):
        events.append({"tool_calls": [{**call, "index": index}]})
    finish = [None] * (len(events) - 1) + [choice.get("finish_reason")]
    lines: list[dict[str, Any]] = [
        {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": end}]}
        for delta, end in zip(events, finish, strict=True)
    ]
    options = body.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage") and "usage" in completion:
        lines.append({**head, "choices": [], "usage": completion["usage"]})
    return [json.dumps(line) for line in lines]


def completion_json(
    content: str, finish: str, number: int, seed: int, model: str, tokens: tuple[int, int]
) -> dict[str, Any]:
    """A Chat Completions reply holding ``content``, as the ``number``-th answer of a server
    seeded ``seed``, with ``tokens`` (prompt, completion) as its usage."""
    prompt_tokens, completion_tokens = tokens
    return {
        "id": f"chatcmpl-stub{seed:x}-{number:06d}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": f"fp_stub{seed:04x}",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish,
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0},
        },
    }
