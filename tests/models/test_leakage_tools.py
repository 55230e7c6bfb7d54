"""The leakage guard around tool calls."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.mark.asyncio
async def test_tool_results_are_scanned_like_prompts(make_request: Any) -> None:
    """What a tool returns is sent to the model: the guard sees it before the model does."""
    import dataclasses

    from worldsim.domain.errors import LeakageError
    from worldsim.models import LeakageGuard, LeakageGuardModel
    from worldsim.testing import ScriptedModel

    class ToolUser(ScriptedModel):
        async def request(self, request: Any) -> Any:
            await request.tool_handler("open_document", '{"doc_id": "d1"}')
            return await super().request(request)

    async def handler(name: str, arguments: str) -> str:
        return '{"document": {"text": "a memo from Northwind Steel"}}'

    reply = {"p_yes": 0.5, "stance": "neutral", "rationale": "ok"}
    request = dataclasses.replace(
        make_request(), tools=({"type": "function"},), tool_handler=handler
    )
    guard = LeakageGuard.from_strings(["northwind steel"], mode="record")
    await LeakageGuardModel(ToolUser([reply]), guard).request(request)
    assert [(f.where, f.count) for f in guard.findings] == [("prompt", 1)]
    strict = LeakageGuard.from_strings(["northwind steel"], mode="fail")
    with pytest.raises(LeakageError):
        await LeakageGuardModel(ToolUser([reply]), strict).request(request)
