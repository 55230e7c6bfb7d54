"""Contracts shared by every part of worldsim: type aliases, the role and model protocols.

This module imports nothing of worldsim's, so anything may import it.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, runtime_checkable

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = [
    "EXPECTED",
    "EXTRACTION_RULES",
    "PHASE_METHODS",
    "BatchModel",
    "BatchRequest",
    "BatchResponse",
    "CallSite",
    "ChatMessage",
    "JSONValue",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "ModelWrapper",
    "Phase",
    "TimelineId",
    "TimelineStatus",
    "ToolHandler",
    "lineage",
]

ToolHandler: TypeAlias = "Callable[[str, str], Awaitable[str]]"

TimelineId: TypeAlias = str
"""Lineage id: the root is ``t0``, its children ``t0.1``, ``t0.2``, ... in fork order."""

JSONValue: TypeAlias = "bool | int | float | str | list[JSONValue] | dict[str, JSONValue] | None"

Phase = Literal["init", "tick", "review", "report"]
"""When a role runs: world initialization, each tick (actors, cohorts), review, final report."""

PHASE_METHODS: dict[Phase, str] = {
    "init": "initialize",
    "tick": "act",
    "review": "review",
    "report": "report",
}
"""The method a Python role of each phase implements."""

TimelineStatus = Literal["running", "settled", "terminated", "deadline"]

EXTRACTION_RULES: tuple[str, ...] = ("path-ledger/1", "candidate-status-mass/1")
"""The versioned rules that turn a run's finished timelines into p_yes
(``worldsim.world.extraction``); a run's settings name one, the first unless told."""

EXPECTED = "expected"
"""The settlement of a timeline whose question resolved at a value rather than an outcome: the
reviewer ended it with its outcome distribution (forced values), as the offline model does when
the question resolves before the deadline. It counts as settled, at that value."""


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True, slots=True)
class CallSite:
    """Where in the run a model call happens; part of the response-cache key."""

    role: str
    agent: str
    timeline: TimelineId | None = None
    tick: int | None = None
    index: int = 0


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One structured request: messages in, an instance of ``output_type`` out.

    ``messages`` may be a function that renders them: a model that answers from ``view`` (the
    offline model) never renders a prompt. Read them through :meth:`chat`.
    """

    messages: tuple[ChatMessage, ...] | Callable[[], tuple[ChatMessage, ...]]
    output_type: type[BaseModel]
    site: CallSite
    prompt_version: str
    temperature: float = 0.0
    seed: int | None = None
    max_tokens: int = 1024
    tools: tuple[Mapping[str, Any], ...] = ()
    """Function tools (OpenAI format) the model may call before it answers."""
    tool_handler: ToolHandler | None = None
    """Runs one tool call: (name, JSON arguments) → JSON result; required with ``tools``."""
    max_tool_rounds: int = 3
    check: Callable[[BaseModel], str | None] | None = None
    """A further check of a reply that fits ``output_type`` (a direct forecast's outcome ids
    against the card's, say): the problem it names makes the reply invalid, repaired once as a
    schema violation is. Never sent, cached or traced."""
    view: Any = None
    """The role's structured view beside the messages: its context (who acts, the tick's
    snapshot, the endpoints, the proposals under review) and the prompt's variables. Models that
    answer from structure read it; it is never sent, cached or traced."""

    def chat(self) -> tuple[ChatMessage, ...]:
        """The messages, rendered if they were given as a function."""
        messages = self.messages
        return messages() if callable(messages) else messages


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """A validated reply plus the metadata the trace records about the call."""

    output: BaseModel
    text: str
    call: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class Model(Protocol):
    """Anything that answers structured requests: the offline model, a route, a test double."""

    @property
    def route(self) -> str: ...

    async def request(self, request: ModelRequest) -> ModelResponse: ...


@dataclass(frozen=True, slots=True)
class ModelWrapper:
    """A model around ``inner`` (a cache, a guard, recorded replies): the same route, and what
    it adds in its own ``request``."""

    inner: Model

    @property
    def route(self) -> str:
        return self.inner.route


@dataclass(frozen=True, slots=True)
class BatchRequest:
    """Many agents' requests of one role at once (a tick's agents, or a tick's review of all
    their proposals), for a model that answers them together without a prompt: ``view`` holds
    the structure (the tick's batch or review, and the variables the prompt would show)."""

    output_type: type[BaseModel]
    """The output schema each agent's reply would have one at a time."""
    site: CallSite
    prompt_version: str
    view: Any
    seed: int | None = None


@dataclass(frozen=True, slots=True)
class BatchResponse:
    """The answer to a :class:`BatchRequest`: ``output`` in the engine's column form (the
    moves of every agent, or the review of every proposal), and the calls to trace."""

    output: Any
    calls: tuple[Mapping[str, Any], ...] = ()


@runtime_checkable
class BatchModel(Model, Protocol):
    """A model that also answers a batch of agents in one pass (the offline model): a role
    whose model is one hands it a tick's agents together, else asks one agent at a time."""

    def answers_batch(self, output_type: type[BaseModel]) -> bool:
        """Whether :meth:`request_batch` answers requests for ``output_type``."""
        ...

    async def request_batch(self, request: BatchRequest) -> BatchResponse: ...


@functools.lru_cache(maxsize=65536)
def lineage(timeline: TimelineId) -> tuple[int, ...]:
    """``"t0.2.1"`` → ``(0, 2, 1)``: the integers that name a timeline's place in the tree
    (remembered: a trace asks it for every record of the same few timelines)."""
    return tuple(int(part) for part in timeline[1:].split("."))
