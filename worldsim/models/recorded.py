"""The replies a run's trace already holds, answered again when the run is resumed.

A resumed run runs its voided ticks (and whatever followed them) again. Every call it makes
there that the trace recorded as answered — the same site (timeline, tick, role, agent,
index) and the same request hash — is answered from that record, as a cache hit: a call
answered before a crash is never paid again, whatever the response cache holds (a cache that
is off, pruned, another folder, or whose write the crash cut short).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from worldsim.domain.contracts import CallSite, ModelRequest, ModelResponse, ModelWrapper
from worldsim.models.cache import answer_again
from worldsim.models.call import LlmCallData, request_hash

__all__ = ["RecordedModel", "RecordedReplies"]

_Site = tuple[str | None, int | None, str, str, int]


def _site(site: CallSite) -> _Site:
    return (site.timeline, site.tick, site.role, site.agent, site.index)


class RecordedReplies:
    """The answered calls of a trace, by site."""

    def __init__(self, calls: Iterable[LlmCallData]) -> None:
        self._by_site: dict[_Site, list[LlmCallData]] = {}
        for call in calls:
            if call.error is None and call.reply is not None:
                key = (call.timeline, call.tick, call.role, call.agent, call.index)
                self._by_site.setdefault(key, []).append(call)

    def __len__(self) -> int:
        return sum(len(calls) for calls in self._by_site.values())

    def find(self, request: ModelRequest) -> LlmCallData | None:
        """The recorded call that answered this very request at its site, if any."""
        for call in reversed(self._by_site.get(_site(request.site), ())):
            sent = request_hash(request, model=call.requested_model, output_mode=call.output_mode)
            if sent == call.request_hash:
                return call
        return None


@dataclass(frozen=True, slots=True)
class RecordedModel(ModelWrapper):
    """Wrapper: answer from ``recorded`` where it holds the request, otherwise ask ``inner``.

    An answer is given again as a response cache's hit is (`answer_again`); a record whose
    reply no longer validates (it did when it was recorded) is asked again.
    """

    recorded: RecordedReplies

    async def request(self, request: ModelRequest) -> ModelResponse:
        call = self.recorded.find(request)
        if call is not None and call.reply is not None:
            hit = await answer_again(request, call.reply, call.model_dump(mode="json"))
            if hit is not None:
                return hit
        return await self.inner.request(request)
