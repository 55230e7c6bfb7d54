"""What one HTTP attempt brings back, whole or streamed: a `Reply`.

A streamed reply is assembled from its chunks and only then redacted, since a key fragment can
straddle two chunks. Every chunk counts as progress for the attempt's no-progress timeout, and
`StreamState` keeps what an attempt has received so far, for the waiting report and for what a
stream cut mid-way is charged.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterable, Callable
from dataclasses import dataclass, field

from openai.types.chat import ChatCompletion, ChatCompletionMessageFunctionToolCall
from openai.types.completion_usage import CompletionUsage

from worldsim.models.call import Usage

__all__ = ["Reply", "StreamState", "read_stream", "reply_from_completion", "usage_of"]


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


def usage_of(u: CompletionUsage | None) -> Usage:
    """The server's token counts as a `Usage` (zeros when it reported none)."""
    if u is None:
        return Usage()
    details = u.prompt_tokens_details
    out_details = u.completion_tokens_details
    return Usage(
        input_tokens=u.prompt_tokens or 0,
        cached_input_tokens=(details.cached_tokens or 0) if details else 0,
        output_tokens=u.completion_tokens or 0,
        reasoning_tokens=(out_details.reasoning_tokens or 0) if out_details else 0,
    )


def reply_from_completion(
    completion: ChatCompletion, number: int, redact: Callable[[str], str]
) -> Reply | None:
    """A whole reply, or ``None`` when it has no choices."""
    if not completion.choices:
        return None
    choice = completion.choices[0]
    calls = tuple(
        (c.id, redact(c.function.name), redact(c.function.arguments))
        for c in (choice.message.tool_calls or ())
        if isinstance(c, ChatCompletionMessageFunctionToolCall)
    )
    return Reply(
        attempt=number,
        tool_calls=calls,
        content=redact(choice.message.content or ""),
        finish_reason=choice.finish_reason,
        model=_maybe(redact, completion.model),
        id=_maybe(redact, completion.id),
        system_fingerprint=_maybe(redact, completion.system_fingerprint),
        usage=usage_of(completion.usage),
    )


async def read_stream(
    chunks: AsyncIterable[object],
    number: int,
    redact: Callable[[str], str],
    state: StreamState,
    progress: Callable[[], None],
) -> Reply | None:
    """Assemble a streamed reply from its chunks as parsed JSON (a chunk is read as plain data:
    building the client's typed chunk objects costs more than the rest of the call); ``None``
    when no chunk carried a choice.

    ``progress`` is called on every chunk. The usage comes from the final chunk
    (``stream_options.include_usage``); a server that sends none leaves zeros. Anything in a
    chunk that is not of the expected JSON type is ignored, as a missing field would be.
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
        choices = chunk.get("choices")
        for choice in choices[:1] if isinstance(choices, list) else ():
            if not isinstance(choice, dict):
                continue
            chosen = True
            delta = choice.get("delta")
            delta = delta if isinstance(delta, dict) else {}
            content = _text(delta, "content")
            if content:
                text.append(content)
                state.tokens += 1
            tool_calls = delta.get("tool_calls")
            for call in tool_calls if isinstance(tool_calls, list) else ():
                if not isinstance(call, dict):
                    continue
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
            (calls[i][0], redact(calls[i][1]), redact(calls[i][2])) for i in sorted(calls)
        ),
        finish_reason=finish,
        model=_maybe(redact, model),
        id=_maybe(redact, ident),
        system_fingerprint=_maybe(redact, fingerprint),
        usage=state.usage or Usage(),
    )


def _text(data: dict[str, object], key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) else None


def _count(data: object, key: str) -> int:
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _usage(u: dict[str, object]) -> Usage:
    """A streamed chunk's ``usage``, read as `usage_of` reads the typed one."""
    return Usage(
        input_tokens=_count(u, "prompt_tokens"),
        cached_input_tokens=_count(u.get("prompt_tokens_details"), "cached_tokens"),
        output_tokens=_count(u, "completion_tokens"),
        reasoning_tokens=_count(u.get("completion_tokens_details"), "reasoning_tokens"),
    )


def _maybe(redact: Callable[[str], str], value: str | None) -> str | None:
    return redact(value) if value else None
