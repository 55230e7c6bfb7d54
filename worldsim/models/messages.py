"""The messages of a structured call: the first ones (with the schema in the system prompt when
the output mode does not carry it), the repair prompt after an invalid reply, and reading a
``tools``-mode answer."""

from __future__ import annotations

import json
from typing import Any, Final

from pydantic import ValidationError

from worldsim.domain.contracts import ModelRequest
from worldsim.models.call import OutputMode
from worldsim.models.schema import schema_instructions
from worldsim.models.stream import Reply

__all__ = [
    "ANSWER_TOOL",
    "answer_of",
    "describe_invalid",
    "initial_messages",
    "repair_prompt",
    "streamed",
]

ANSWER_TOOL: Final = "answer"
"""The function a ``tools``-mode reply is given as: its arguments are the output."""


def initial_messages(
    request: ModelRequest, mode: OutputMode, schema: dict[str, Any]
) -> list[dict[str, Any]]:
    """The request's messages; in ``json_object`` and ``text`` mode the schema's instructions
    join the system prompt (``json_schema`` and ``tools`` send the schema with the request)."""
    messages: list[dict[str, Any]] = [
        {"role": m.role, "content": m.content} for m in request.chat()
    ]
    if mode in ("json_schema", "tools"):
        return messages
    instructions = schema_instructions(schema)
    if messages and messages[0]["role"] == "system":
        messages[0] = {"role": "system", "content": messages[0]["content"] + "\n\n" + instructions}
    else:
        messages.insert(0, {"role": "system", "content": instructions})
    return messages


def streamed(payload: dict[str, Any]) -> dict[str, Any]:
    """The body of a streamed request: the payload, and usage asked for at the end."""
    return {**payload, "stream": True, "stream_options": {"include_usage": True}}


def answer_of(reply: Reply) -> str | None:
    """A ``tools``-mode reply's answer: the arguments of its call of `ANSWER_TOOL`."""
    for _, name, arguments in reply.tool_calls:
        if name == ANSWER_TOOL:
            return arguments
    return None


def describe_invalid(exc: ValidationError, finish_reason: object) -> str:
    """A reply's validation errors as one line (the first five), for the repair prompt."""
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "(root)"
        parts.append(f"{where}: {err['msg']}")
    text = "; ".join(parts)
    if finish_reason == "length":
        text += " (the reply was cut off at the token limit; answer more briefly)"
    return text


def repair_prompt(problem: str, schema: dict[str, Any]) -> str:
    """The user message that asks once for a corrected reply."""
    return (
        f"Your reply was not valid: {problem}. Reply again with only the corrected JSON object. "
        "It must validate against this JSON schema:\n" + json.dumps(schema)
    )
