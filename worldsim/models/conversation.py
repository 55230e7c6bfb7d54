"""One structured call's conversation with its route: what is sent next and what came of it.

A call is a few round trips: the first request, a round of the agent's tools, a repair after an
invalid reply, the same request again in a lower output mode. `Conversation` holds what they
share — the messages to send, the replies' usage, every attempt's error, what cut streams were
charged — and the three ways a reply moves it on: the tools it called are run and answered,
an invalid reply is answered with one repair prompt, a valid one ends the call.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from worldsim.domain.contracts import ModelRequest
from worldsim.models.call import (
    CallErrorEntry,
    OutputMode,
    ProviderAnomalyEntry,
    ToolCallEntry,
    Usage,
)
from worldsim.models.messages import answer_of, describe_invalid, initial_messages, repair_prompt
from worldsim.models.refusals import InvalidReply
from worldsim.models.schema import extract_json
from worldsim.models.stream import Reply

__all__ = ["Answer", "Conversation"]


@dataclass(frozen=True, slots=True)
class Answer:
    """A reply that validated: the output and the text it was read from."""

    output: BaseModel
    text: str


@dataclass(slots=True)
class Conversation:
    """One call's round trips so far (see the module's doc)."""

    request: ModelRequest
    schema: dict[str, Any]
    mode: OutputMode
    messages: list[dict[str, Any]]
    started: float = field(default_factory=time.perf_counter)
    errors: list[CallErrorEntry] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    last: Reply | None = None
    """The latest reply (its model, id and finish reason go on the record)."""
    repaired: bool = False
    tool_rounds: int = 0
    tool_calls: list[ToolCallEntry] = field(default_factory=list)
    unreported_usd: float = 0.0
    """What attempts were charged beyond the usage their replies reported: streams cut
    mid-way (their replies never came), replies that reported no usage."""
    anomaly: ProviderAnomalyEntry | None = None
    """The latest reply that reported no usage and was charged its reservation."""

    @classmethod
    def start(cls, request: ModelRequest, mode: OutputMode, schema: dict[str, Any]) -> Conversation:
        return cls(request, schema, mode, initial_messages(request, mode, schema))

    @property
    def attempts(self) -> int:
        """HTTP attempts sent so far: the latest attempt a reply or an error names."""
        latest = self.last.attempt if self.last is not None else 0
        return max([latest, *(e.attempt for e in self.errors)])

    def failed(self, entry: CallErrorEntry) -> None:
        """An attempt failed (retried, adapted to, or the last)."""
        self.errors.append(entry)

    def charged(self, usd: float) -> None:
        """An attempt cut mid-stream was charged ``usd``."""
        self.unreported_usd += usd

    def restart(self, mode: OutputMode) -> None:
        """Ask again from the first messages, in ``mode`` (the route refused the last one)."""
        self.mode = mode
        self.messages = initial_messages(self.request, mode, self.schema)
        self.repaired = False

    def may_call_tools(self, route_takes_tools: bool) -> bool:
        """Whether the next round trip offers the agent's tools."""
        request = self.request
        return (
            bool(request.tools)
            and request.tool_handler is not None
            and route_takes_tools
            and self.tool_rounds < request.max_tool_rounds
        )

    async def received(self, reply: Reply, *, tools_offered: bool) -> Answer | None:
        """Take ``reply``: its answer, or ``None`` when the conversation goes on (the tools it
        called were answered, or an invalid reply was sent back for its one repair)."""
        self.last = reply
        self.usage = self.usage + reply.usage
        if reply.charged_usd is not None:
            self.unreported_usd += reply.charged_usd
            self.anomaly = ProviderAnomalyEntry(
                attempt=reply.attempt,
                reported_usage=reply.usage,
                reported_cost_usd=0.0,
                reserved_usd=round(reply.charged_usd, 10),
            )
        answer = answer_of(reply) if self.mode == "tools" else None
        if answer is None and reply.tool_calls and tools_offered:
            await self._answer_tools(reply)
            return None
        return self._validated(reply, reply.content if answer is None else answer)

    async def _answer_tools(self, reply: Reply) -> None:
        handler = self.request.tool_handler
        assert handler is not None  # tools are offered only with a handler
        self.tool_rounds += 1
        self.messages.append(
            {
                "role": "assistant",
                "content": reply.content or None,
                "tool_calls": [
                    {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
                    for cid, name, args in reply.tool_calls
                ],
            }
        )
        for cid, name, args in reply.tool_calls:
            self.tool_calls.append(ToolCallEntry(name=name, arguments=args))
            result = await handler(name, args)
            self.messages.append({"role": "tool", "tool_call_id": cid, "content": result})

    def _validated(self, reply: Reply, text: str) -> Answer | None:
        check = self.request.check
        try:
            output = self.request.output_type.model_validate_json(extract_json(text))
        except ValidationError as exc:
            problem: str | None = describe_invalid(exc, reply.finish_reason)
        else:
            problem = check(output) if check is not None else None
        if problem is not None:
            self.failed(
                CallErrorEntry(attempt=self.attempts, kind="invalid_output", message=problem)
            )
            if self.repaired:
                raise InvalidReply(f"invalid output after one repair: {problem}") from None
            self.repaired = True
            self.messages = [
                *self.messages,
                {"role": "assistant", "content": text},
                {"role": "user", "content": repair_prompt(problem, self.schema)},
            ]
            return None
        return Answer(output, text)
