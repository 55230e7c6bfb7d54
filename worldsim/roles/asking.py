"""Asking a prompt role's model: render the prompt (only if a model reads it), send the request
with the role's structured view, and check the output's type.

:class:`PromptedRole` is what every prompt role shares; the roles themselves, one per output
schema, are in :mod:`worldsim.roles.prompted` and :mod:`worldsim.roles.cohorts`. A model that
answers a role's output for a whole batch (a `BatchModel`) is asked once per tick through
`PromptedRole.ask_batch`, whatever its route.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import Any

from worldsim.domain.contracts import (
    BatchModel,
    BatchRequest,
    CallSite,
    ChatMessage,
    Model,
    ModelRequest,
    ModelResponse,
)
from worldsim.domain.errors import ConfigError, ModelError
from worldsim.domain.outputs import OUTPUTS
from worldsim.gateway.tools import GATEWAY_TOOLS
from worldsim.roles.prompts import PromptRole
from worldsim.world.state import WorldState
from worldsim.world.views import (
    InitContext,
    ReportContext,
    ReviewContext,
    RoleView,
    TickContext,
)

__all__ = ["PromptedRole", "public_card", "tick_view"]


class PromptedRole:
    """Shared machinery: render the role's prompt, ask the model, return the validated output."""

    def __init__(self, prompt: PromptRole, model: Model, *, seed: int = 0) -> None:
        self.prompt = prompt
        self.model = model
        self.seed = seed
        self.name = prompt.name
        self.phase = prompt.meta.phase
        self.output_type = OUTPUTS[prompt.meta.output]

    @property
    def prompt_version(self) -> str:
        return self.prompt.version

    @property
    def route(self) -> str:
        return self.model.route

    def site(self, agent: str, timeline: str | None = None, tick: int | None = None) -> CallSite:
        return CallSite(role=self.name, agent=agent, timeline=timeline, tick=tick)

    def batched(self) -> BatchModel | None:
        """The role's model where it answers this role's output for a batch at once."""
        model = self.model
        if isinstance(model, BatchModel) and model.answers_batch(self.output_type):
            return model
        return None

    async def ask_batch(self, model: BatchModel, site: CallSite, view: RoleView) -> Any:
        """Ask a batch model for a batch's output in its column form."""
        request = BatchRequest(
            output_type=self.output_type,
            site=site,
            prompt_version=self.prompt.version,
            view=view,
            seed=self.seed,
        )
        return (await model.request_batch(request)).output

    async def ask(
        self,
        site: CallSite,
        context: InitContext | TickContext | ReviewContext | ReportContext,
        variables: Callable[[], Mapping[str, Any]],
        *,
        tools: Any = None,
        **structured: Any,
    ) -> Any:
        """Ask the model for this role's output. The prompt is rendered from ``variables()``
        only when a model reads the messages; ``structured`` (values already at hand) joins
        the view. With ``tools`` (an agent's gateway tools) the model may search and open
        documents before it answers, every access logged by the tool."""
        response = await self.reply(site, context, variables, tools=tools, **structured)
        return response.output

    async def reply(
        self,
        site: CallSite,
        context: InitContext | TickContext | ReviewContext | ReportContext,
        variables: Callable[[], Mapping[str, Any]],
        *,
        tools: Any = None,
        **structured: Any,
    ) -> ModelResponse:
        """:meth:`ask`, the whole response (the call it made, if any)."""
        prompt = self.prompt
        once: list[tuple[ChatMessage, ...]] = []

        def messages() -> tuple[ChatMessage, ...]:
            if not once:
                system, user = prompt.render(**variables(), **structured)
                user_message = ChatMessage("user", user)
                once.append(
                    (ChatMessage("system", system), user_message) if system else (user_message,)
                )
            return once[0]

        offered: tuple[dict[str, Any], ...] = ()
        handler = None
        if tools is not None and prompt.meta.tools:
            offered = _offered(prompt.meta.tools)

            async def handler(name: str, arguments: str) -> str:
                try:
                    result = await tools.call(name, arguments)
                except ConfigError as exc:  # the model's malformed call is its to read
                    result = {"error": exc.message}
                return json.dumps(result)

        request = ModelRequest(
            messages=messages,
            view=RoleView(context=context, variables=structured),
            output_type=self.output_type,
            site=site,
            prompt_version=prompt.version,
            temperature=prompt.meta.temperature,
            seed=self.seed,
            max_tokens=prompt.meta.max_tokens,
            tools=offered,
            tool_handler=handler,
        )
        response = await self.model.request(request)
        if not isinstance(response.output, self.output_type):
            raise ModelError(
                f"{self.model.route}: the reply is a {type(response.output).__name__}, "
                f"not a {self.output_type.__name__}"
            )
        return response


@functools.cache
def _offered(names: tuple[str, ...]) -> tuple[dict[str, Any], ...]:
    """The OpenAI descriptors of the named gateway tools (built once per set of names)."""
    return tuple(spec.openai() for spec in GATEWAY_TOOLS if spec.name in names)


def _endpoint_rows(state: WorldState) -> list[dict[str, Any]]:
    probs = state.probabilities()
    return [
        {
            "id": ep.id,
            "title": ep.title,
            "kind": ep.kind,
            "p": probs.get(ep.id),
            "status": state.ledger[ep.id].status,
        }
        for ep in state.endpoints
    ]


def tick_view(ctx: TickContext | ReviewContext) -> dict[str, Any]:
    """What every per-tick prompt shows: the card, where in time it is, the endpoints."""
    return {
        "card": public_card(ctx),
        "tick": ctx.tick,
        "ticks": ctx.ticks,
        "timeline": ctx.timeline,
        "date": ctx.date.date().isoformat(),
        "endpoints": _endpoint_rows(ctx.state),
        "observations": ctx.observations,
    }


def public_card(ctx: Any) -> dict[str, Any]:
    # documents reach agents only through the gateway, never from the card
    data: dict[str, Any] = ctx.card.model_dump(mode="json", exclude={"evidence", "seeds"})
    return data
