"""Calls in flight are visible while they run — route, role, agent, elapsed time and chunks
streamed so far — in the run's progress column and the study's live display, and gone after."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest
from rich.console import Console
from rich.progress import Progress

from worldsim.cli.progress import in_flight_column
from worldsim.models import OpenAIModel
from worldsim.models.inflight import describe, in_flight, waiting
from worldsim.models.stream import StreamState
from worldsim.study.progress import StudyProgress


@pytest.mark.asyncio
async def test_a_streaming_call_is_in_flight_while_it_runs(
    make_request: Any, fast_retry: Any
) -> None:
    from worldsim.testing import StubServer

    seen: list[list[tuple[str, str, str, int]]] = []
    async with StubServer(seed=1, chunk_chars=2, chunk_delay_s=0.01) as server:
        model = OpenAIModel(server.settings(), retry=fast_retry())

        async def watch() -> None:
            while True:
                seen.append([(w.route, w.role, w.agent, w.state.tokens) for w in in_flight()])
                await anyio.sleep(0.02)

        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            await model.request(make_request(agent="regulator"))
            tg.cancel_scope.cancel()
        await model.aclose()
    during = [entry for snapshot in seen for entry in snapshot]
    assert during and {e[:3] for e in during} == {("stub/test-model", "actor", "regulator")}
    assert max(e[3] for e in during) > 0  # chunks counted as they stream
    assert in_flight() == []  # gone once answered


def test_the_displays_name_a_slow_call() -> None:
    slow = StreamState(started=time.monotonic() - 75, tokens=12)
    quick = StreamState()
    with waiting("local/smollm2", "actor", "regulator", slow), waiting("r/m", "cohort", "c", quick):
        assert [w.agent for w in in_flight(min_elapsed_s=2.0)] == ["regulator"]
        line = describe(in_flight(min_elapsed_s=2.0))
        assert line.startswith("1 call(s) in flight: actor regulator on local/smollm2 75 s")
        assert "12 chunks" in line

        console = Console(force_terminal=True, record=True, width=200, color_system=None)
        with Progress(in_flight_column(), console=console, auto_refresh=False) as progress:
            progress.add_task("run")
            progress.refresh()
        assert "actor regulator on local/smollm2 75 s, 12 chunks" in console.export_text()

        display = StudyProgress("s", total=1)
        console = Console(force_terminal=True, record=True, width=200, color_system=None)
        console.print(display.render())
        assert "actor regulator on local/smollm2 75 s" in console.export_text()
    assert in_flight() == []
