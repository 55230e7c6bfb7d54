"""What one HTTP attempt brings back, whole or streamed: a `Reply`.

Both are read as plain JSON, not as the client library's typed objects (building those, for
every chunk of a stream, costs more than the rest of a call); a value of an unexpected JSON type
is ignored, as a missing one would be.

A streamed reply is assembled from its chunks and only then redacted, since a key fragment can
straddle two chunks. Every string taken from a reply passes the redaction: text, tool calls and
their ids, finish reason, model, id and fingerprint. Every chunk counts as progress for the
attempt's no-progress timeout, and `StreamState` keeps what an attempt has received so far,
for the waiting report and for what a stream cut mid-way is charged.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterable, Callable
from dataclasses import dataclass, field
from typing import Any

from worldsim.models.call import Usage

__all__ = ["Reply", "StreamState", "read_stream", "reply_from_json"]


@dataclass(frozen=True, slots=True)
class Reply:
    """What one successful HTTP attempt brought back (redacted)."""

    attempt: int
    content: str
    finish_reason: str | None
    model: str | None
    id: str | None
    system_fingerprint: str | None
    usage: Usage
    tool_calls: tuple[tuple[str, str, str], ...] = ()  # (id, name, arguments)
    usage_reported: bool = True
    """Whether the server reported ``usage`` (without it, ``usage`` is zeros)."""
    charged_usd: float | None = None
    """What the attempt was charged instead of its usage's cost (a reply that reported no
    usage on a priced route: its reservation), ``None`` when charged its usage."""


@dataclass(slots=True)
class StreamState:
    """One attempt as it goes: when it started, the chunks with text so far, the usage the
    server reported (``None`` until it does)."""

    started: float = field(default_factory=time.monotonic)
    tokens: int = 0
    usage: Usage | None = None

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started


def reply_from_json(completion: object, number: int, redact: Callable[[str], str]) -> Reply | None:
    """A whole reply, read as plain JSON as a streamed one is (see `read_stream`); ``None``
    when it has no choice. A JSON body the server did not label as JSON arrives as text and is
    read all the same."""
    if isinstance(completion, str):
        try:
            completion = json.loads(completion)
        except ValueError:
            return None
    choices = completion.get("choices") if isinstance(completion, dict) else None
    choice = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(completion, dict) or not isinstance(choice, dict):
        return None
    message = choice.get("message")
    message = message if isinstance(message, dict) else {}
    calls: list[tuple[str, str, str]] = []
    for call in _dicts(message.get("tool_calls")):
        function = call.get("function")
        if call.get("type", "function") == "function" and isinstance(function, dict):
            name, arguments = _text(function, "name") or "", _text(function, "arguments") or ""
            calls.append((redact(_text(call, "id") or ""), redact(name), redact(arguments)))
    usage = completion.get("usage")
    return Reply(
        attempt=number,
        tool_calls=tuple(calls),
        content=redact(_text(message, "content") or ""),
        finish_reason=_maybe(redact, _text(choice, "finish_reason")),
        model=_maybe(redact, _text(completion, "model")),
        id=_maybe(redact, _text(completion, "id")),
        system_fingerprint=_maybe(redact, _text(completion, "system_fingerprint")),
        usage=_usage(usage) if isinstance(usage, dict) else Usage(),
        usage_reported=isinstance(usage, dict),
    )


async def read_stream(
    chunks: AsyncIterable[object],
    number: int,
    redact: Callable[[str], str],
    state: StreamState,
    progress: Callable[[], None],
) -> Reply | None:
    """Assemble a streamed reply from its chunks (parsed JSON); ``None`` when no chunk carried
    a choice.

    ``progress`` is called on every chunk. The usage comes from the final chunk
    (``stream_options.include_usage``); a server that sends none leaves zeros, and
    ``usage_reported`` false.
    """
    text: list[str] = []
    calls: dict[int, list[str]] = {}  # index -> [id, name, arguments]
    finish: str | None = None
    model = ident = fingerprint = None
    chosen = False
    async for chunk in chunks:
        progress()
        if not isinstance(chunk, dict):
            continue
        model = _text(chunk, "model") or model
        ident = _text(chunk, "id") or ident
        fingerprint = _text(chunk, "system_fingerprint") or fingerprint
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            state.usage = _usage(usage)
        for choice in _dicts(chunk.get("choices"))[:1]:
            chosen = True
            delta = choice.get("delta")
            delta = delta if isinstance(delta, dict) else {}
            content = _text(delta, "content")
            if content:
                text.append(content)
                state.tokens += 1
            for call in _dicts(delta.get("tool_calls")):
                index = call.get("index")
                slot = calls.setdefault(index if isinstance(index, int) else 0, ["", "", ""])
                slot[0] = _text(call, "id") or slot[0]
                function = call.get("function")
                if isinstance(function, dict):
                    slot[1] += _text(function, "name") or ""
                    slot[2] += _text(function, "arguments") or ""
                state.tokens += 1
            finish = _text(choice, "finish_reason") or finish
    if not chosen:
        return None
    return Reply(
        attempt=number,
        content=redact("".join(text)),
        tool_calls=tuple(
            (redact(calls[i][0]), redact(calls[i][1]), redact(calls[i][2])) for i in sorted(calls)
        ),
        finish_reason=_maybe(redact, finish),
        model=_maybe(redact, model),
        id=_maybe(redact, ident),
        system_fingerprint=_maybe(redact, fingerprint),
        usage=state.usage or Usage(),
        usage_reported=state.usage is not None,
    )


def _dicts(value: object) -> list[dict[str, Any]]:
    """The objects of a JSON list (nothing, for anything else)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _text(data: dict[str, object], key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) else None


def _count(data: object, key: str) -> int:
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _usage(u: dict[str, object]) -> Usage:
    """A reply's ``usage`` (zeros for counts it does not give as integers)."""
    return Usage(
        input_tokens=_count(u, "prompt_tokens"),
        cached_input_tokens=_count(u.get("prompt_tokens_details"), "cached_tokens"),
        output_tokens=_count(u, "completion_tokens"),
        reasoning_tokens=_count(u.get("completion_tokens_details"), "reasoning_tokens"),
    )


def _maybe(redact: Callable[[str], str], value: str | None) -> str | None:
    return redact(value) if value else None
