"""Gateway tools as function-calling descriptors, and a binding that runs them for one agent.

The descriptors carry a name, a description and the JSON schema of the arguments, generated
from pydantic models, so they can be handed to an OpenAI-compatible API as function tools.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from worldsim.domain.errors import ConfigError, GatewayRefusal
from worldsim.domain.files import first_error
from worldsim.domain.memo import IdentityMemo

if TYPE_CHECKING:
    from worldsim.gateway.gateway import Gateway
    from worldsim.world.views import TickBatch, TickContext

__all__ = [
    "GATEWAY_TOOLS",
    "OPEN_DOCUMENT",
    "SEARCH_EVIDENCE",
    "AgentTools",
    "OpenDocumentArgs",
    "SearchEvidenceArgs",
    "ToolSpec",
    "batch_of_one",
]


class SearchEvidenceArgs(BaseModel):
    """Arguments of ``search_evidence``."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, description="keywords to search for")
    k: int = Field(5, ge=1, le=20, description="how many documents to return")


class OpenDocumentArgs(BaseModel):
    """Arguments of ``open_document``."""

    model_config = ConfigDict(extra="forbid")

    doc_id: str = Field(min_length=1, description="the id of a document returned by a search")


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool's name, description and argument schema."""

    name: str
    description: str
    arguments: type[BaseModel]

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the arguments."""
        schema = self.arguments.model_json_schema()
        schema.pop("title", None)
        schema.pop("description", None)
        return schema

    def openai(self) -> dict[str, Any]:
        """The descriptor in the OpenAI ``tools`` format."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


SEARCH_EVIDENCE = ToolSpec(
    name="search_evidence",
    description=(
        "Search the evidence archive. Returns the best-matching documents published before "
        "the forecast date, each with id, title, date, source and a snippet."
    ),
    arguments=SearchEvidenceArgs,
)
OPEN_DOCUMENT = ToolSpec(
    name="open_document",
    description=(
        "Open one document by id and read its full text. Only documents published before "
        "the forecast date can be opened."
    ),
    arguments=OpenDocumentArgs,
)
GATEWAY_TOOLS: tuple[ToolSpec, ...] = (SEARCH_EVIDENCE, OPEN_DOCUMENT)


#: JSON forms of the views the gateway hands out (the same object for the same hit or document).
_JSON_READY: IdentityMemo[dict[str, Any]] = IdentityMemo(2_048)


def _json_ready(view: BaseModel) -> dict[str, Any]:
    """A frozen hit's or document's JSON form, made once per view; callers get a copy of it."""
    return _JSON_READY.get("json", view, lambda: view.model_dump(mode="json"))


@dataclass(frozen=True, slots=True)
class AgentTools:
    """The gateway tools as one agent in one timeline and tick calls them."""

    gateway: Gateway
    agent: str
    timeline: str | None = None
    tick: int | None = None

    async def call(self, name: str, arguments: str | dict[str, Any]) -> dict[str, Any]:
        """Run a tool call and return JSON-ready output; refusals come back as ``error``.

        Malformed arguments or an unknown tool name raise :class:`ConfigError`, because they
        are a fault of the caller rather than an answer the agent should read.
        """
        try:
            raw = json.loads(arguments) if isinstance(arguments, str) else arguments
        except json.JSONDecodeError as exc:
            raise ConfigError(f"tool arguments are not JSON: {exc.msg}", field=name) from None
        try:
            if name == SEARCH_EVIDENCE.name:
                args = SearchEvidenceArgs.model_validate(raw)
                hits = await self.gateway.search(
                    args.query, args.k, agent=self.agent, timeline=self.timeline, tick=self.tick
                )
                return {"results": [dict(_json_ready(h)) for h in hits]}
            if name == OPEN_DOCUMENT.name:
                opened = OpenDocumentArgs.model_validate(raw)
                try:
                    doc = await self.gateway.open_document(
                        opened.doc_id, agent=self.agent, timeline=self.timeline, tick=self.tick
                    )
                except GatewayRefusal as exc:
                    return {"error": exc.message, "reason": exc.reason, "doc_id": exc.doc_id}
                return {"document": dict(_json_ready(doc))}
        except ValidationError as exc:
            field, message = first_error(exc)
            raise ConfigError(message, field=f"{name}.{field}") from None
        raise ConfigError(f"unknown tool '{name}'", field="name")


def batch_of_one(ctx: TickContext) -> TickBatch:
    """One agent's view as a batch of one (its generator, the gateway behind its tools)."""
    from worldsim.world.views import TickBatch  # (numpy: not for `worldsim roles`)

    tools = ctx.tools
    if tools is not None and not isinstance(tools, AgentTools):
        raise ConfigError(
            f"agent '{ctx.agent}': the offline actor reads evidence through the gateway's "
            f"tools, not a {type(tools).__name__}",
            field="tools",
        )
    return TickBatch(
        card=ctx.card,
        timeline=ctx.timeline,
        tick=ctx.tick,
        ticks=ctx.ticks,
        date=ctx.date,
        agents=(ctx.agent,),
        state=ctx.state,
        observations=ctx.observations,
        rngs=(ctx.rng,),
        gateway=tools.gateway if tools is not None else None,
    )
