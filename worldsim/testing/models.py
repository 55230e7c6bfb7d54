"""In-process test models: `ScriptedModel` replays given replies, `SchemaModel` invents them.

Both return the same `LlmCallData` record shape as a real route (``output_mode`` tells them
apart), so engine code under test cannot tell the difference.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterable
from typing import Any, TypeAlias

from pydantic import BaseModel, ValidationError

from worldsim.domain.contracts import ModelRequest, ModelResponse
from worldsim.domain.errors import ModelError
from worldsim.models.call import LlmCallData, OutputMode, Usage, request_hash
from worldsim.models.schema import extract_json
from worldsim.testing._fake import fake_value

__all__ = ["Reply", "SchemaModel", "ScriptedModel"]

Reply: TypeAlias = "str | dict[str, Any] | BaseModel"
"""A scripted reply: JSON text, a mapping, or an instance of the output model."""


def reply_text(reply: Reply) -> str:
    """The JSON text of a scripted reply."""
    if isinstance(reply, BaseModel):
        return reply.model_dump_json()
    if isinstance(reply, dict):
        return json.dumps(reply)
    return reply


class _RecordingModel:
    """Shared machinery: validate the text, build the call record, remember the request."""

    _mode: OutputMode = "scripted"

    def __init__(self, route: str) -> None:
        provider, _, model = route.partition("/")
        self._route = route
        self._provider = provider
        self._model = model or route
        self.requests: list[ModelRequest] = []

    @property
    def route(self) -> str:
        return self._route

    def _respond(self, request: ModelRequest, text: str) -> ModelResponse:
        record = LlmCallData.for_request(
            request, provider=self._provider, requested_model=self._model, output_mode=self._mode
        )
        record.resolved_model = self._model
        record.response_id = (
            "resp-" + request_hash(request, model=self._route, output_mode=None)[:16]
        )
        record.attempts = 1
        record.finish_reason = "stop"
        record.reply = text
        record.usage = Usage(
            input_tokens=sum(len(m.content) for m in request.chat()) // 4,
            output_tokens=len(text) // 4,
        )
        try:
            output = request.output_type.model_validate_json(extract_json(text))
        except ValidationError as exc:
            record.error = f"invalid output: {exc.errors()[0]['msg']}"
            raise ModelError(
                f"{self._route}: {record.error}",
                call=record.model_dump(mode="json"),
                timeline=request.site.timeline,
                tick=request.site.tick,
            ) from None
        return ModelResponse(output=output, text=text, call=record.model_dump(mode="json"))


class ScriptedModel(_RecordingModel):
    """Replies from a list (in order) or from a callable ``(ModelRequest) -> Reply``.

    An invalid scripted reply raises `ModelError` with its call record, as a real route does
    after its repair; a list that runs out raises `ModelError` too. ``requests`` keeps every
    request seen.
    """

    def __init__(
        self,
        replies: Iterable[Reply] | Callable[[ModelRequest], Reply],
        *,
        route: str = "scripted/model",
    ) -> None:
        super().__init__(route)
        if callable(replies):
            self._fn: Callable[[ModelRequest], Reply] | None = replies
            self._queue: list[Reply] = []
        else:
            self._fn = None
            self._queue = list(replies)
        self._next = 0

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        if self._fn is not None:
            reply = self._fn(request)
        else:
            if self._next >= len(self._queue):
                raise ModelError(
                    f"{self.route}: script ran out after {len(self._queue)} replies",
                    timeline=request.site.timeline,
                    tick=request.site.tick,
                )
            reply = self._queue[self._next]
            self._next += 1
        return self._respond(request, reply_text(reply))


class SchemaModel(_RecordingModel):
    """Invents a schema-valid reply for any output model: numeric bounds, literals, enums and
    required fields are respected. The same seed and request give the same reply."""

    def __init__(self, *, seed: int = 0, route: str = "test/schema") -> None:
        super().__init__(route)
        self.seed = seed

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        digest = hashlib.sha256(
            f"{self.seed}:{request_hash(request, model=self.route, output_mode=None)}:"
            f"{request.site}".encode()
        ).digest()
        rng = random.Random(int.from_bytes(digest[:8], "big"))
        value = fake_value(request.output_type.model_json_schema(), rng)
        return self._respond(request, json.dumps(value))
