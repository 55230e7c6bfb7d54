"""How a server's refusals are read: which HTTP errors say that a response format, the function
tools or a parameter is not supported (the route adapts and asks again), which are worth a retry,
and which end the call."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Final

import openai

from worldsim.domain.errors import ProviderAnomaly
from worldsim.models.call import AttemptFailed, CallErrorEntry, OutputMode
from worldsim.models.retry import TransientError, classify
from worldsim.models.stream import Reply

__all__ = [
    "CallFailed",
    "FormatRejected",
    "InvalidReply",
    "OverReported",
    "ParamRejected",
    "ToolsRejected",
    "is_format_rejection",
    "is_tools_rejection",
    "read_refusal",
    "rejected_param",
]

REJECTION_MARKERS: Final = (
    "response_format",
    "response format",
    "json_schema",
    "input should be 'text' or 'json_object'",
)
"""What a server that cannot do a response format says (llama-cpp-python answers HTTP 500
"Input should be 'text' or 'json_object'")."""


class OverReported(ProviderAnomaly):
    """A reply whose reported usage costs more than the round trip reserved: the call that
    sent it turns it into its `ProviderAnomaly`, with the call's record."""

    def __init__(self, message: str, reply: Reply, reported_usd: float, reserved_usd: float):
        super().__init__(message)
        self.reply = reply
        self.reported_usd = reported_usd
        self.reserved_usd = reserved_usd


class ToolsRejected(AttemptFailed):
    """The server refused the request's function tools."""


class FormatRejected(AttemptFailed):
    """The server refused the request's response format (or, in ``tools`` mode, its tools)."""


class ParamRejected(AttemptFailed):
    """The server refused a parameter the route can drop or rename (``param``)."""

    def __init__(self, entry: CallErrorEntry, param: str) -> None:
        super().__init__(entry)
        self.param = param


class CallFailed(Exception):
    """The call cannot succeed; ``entry`` is the attempt's error, when there was one."""

    def __init__(self, message: str, entry: CallErrorEntry | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.entry = entry


class InvalidReply(CallFailed):
    """The route answered, but the reply stayed invalid after its repair: the model's answer,
    not the route's failure."""


def _text(exc: openai.APIStatusError) -> str:
    body = exc.body if isinstance(exc.body, str) else json.dumps(exc.body, default=str)
    return f"{exc.message} {body}".lower()


def is_tools_rejection(exc: openai.APIStatusError) -> bool:
    """A 400/422 that names the ``tools`` parameter: the server has no function calling.

    Anything else (a 5xx while parsing a tool call, say) is an ordinary error, retried as such.
    """
    if exc.status_code not in (400, 422):
        return False
    markers = ('"tools"', "'tools'", "tools ", "tool_choice", "tool choice")
    return any(marker in _text(exc) for marker in markers)


def is_format_rejection(exc: openai.APIStatusError, mode: OutputMode) -> bool:
    """An error that says the server cannot do ``mode``'s response format."""
    if mode == "text" or exc.status_code in (401, 403, 404, 408, 429):
        return False
    markers = (*REJECTION_MARKERS, "json_object") if mode == "json_object" else REJECTION_MARKERS
    return any(marker in _text(exc) for marker in markers)


def rejected_param(
    exc: openai.APIStatusError, *, stream: bool, token_param: str, send_temperature: bool
) -> str | None:
    """The parameter a 400 refuses that the route can adapt, if any: ``stream``,
    ``max_tokens`` (to ``max_completion_tokens``) or ``temperature``."""
    if exc.status_code != 400:
        return None
    text = f"{exc.message} {exc.body}".lower()
    if stream and "stream" in text:
        return "stream"
    if token_param == "max_tokens" and "max_completion_tokens" in text:
        return "max_tokens"
    if send_temperature and "temperature" in text and "unsupported" in text:
        return "temperature"
    return None


def read_refusal(
    exc: openai.APIStatusError,
    *,
    offered_tools: bool,
    mode: OutputMode,
    number: int,
    redact: Callable[[str], str],
    adaptable: Callable[[openai.APIStatusError], str | None],
) -> Exception:
    """What an HTTP error of attempt ``number`` means for the call: a format, tools or
    parameter rejection the route adapts to, a `TransientError` worth a retry, or `CallFailed`."""
    entry, retryable, retry_after = classify(exc, number, redact)
    if mode == "tools" and is_tools_rejection(exc):  # no function calling: the next mode
        entry.kind = "format_rejected"
        return FormatRejected(entry)
    if offered_tools and is_tools_rejection(exc):
        entry.kind = "tools_rejected"
        return ToolsRejected(entry)
    if is_format_rejection(exc, mode):
        entry.kind = "format_rejected"
        return FormatRejected(entry)
    param = adaptable(exc)
    if param is not None:
        entry.kind = "param_rejected"
        return ParamRejected(entry, param)
    if retryable:
        return TransientError(entry, retry_after)
    return CallFailed(f"HTTP {entry.status}: {entry.message}", entry)
