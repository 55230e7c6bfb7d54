"""Scheduler efficiency on real model calls: engine wall time against the latency-bound ideal.

The engine runs a card of 20 actors for 8 ticks under a policy that forks into 4 timelines;
every actor call goes to the stub OpenAI-compatible server, which answers after a fixed latency
(the reviewer, initializer, reporter and cohorts stay on the offline route, so actor calls are
the only latency). Within a tick a timeline's actors call at once; the next tick waits for the
review, so the ideal wall time is the critical path, 8 waves of one latency each, or, when the
connection limiter binds, the calls of each wave spread over the connections. The ratio
``wall / ideal`` is the scheduler's overhead factor (target ≤ 1.15).

The stub server runs in its own process so that its work does not share the engine's core. What
remains is the client side: with 80 calls in flight, each costs milliseconds of CPU in the HTTP
stack (h11 and the SSE decoder read a streamed reply chunk by chunk), so at 50 ms latency the
waves are CPU-bound; at realistic model latencies the ratio falls toward 1. To tell the
scheduler's share from the library's, the run's own actor requests (recorded by the stub) are
sent again by a bare ``AsyncOpenAI`` in the same waves at the same latency: ``bare_client_ratio``
is what any client built on the library reaches, and ``run_vs_bare`` the run's wall time over it;
``bare_unstreamed_ratio`` is the same bare client asking for whole replies (one JSON body a
call, the least a client can read).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from collections import Counter
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from benchmarks._common import demo_card_data, run_async, send_bare, stub_process, unstreamed
from worldsim.domain.cards import Card
from worldsim.domain.config import ModelConfig, RetrySettings, RunConfig
from worldsim.domain.policy import BranchPolicy
from worldsim.sim.session import run_card
from worldsim.trace.reader import read_trace

__all__ = ["make_card", "rows", "run"]

ACTORS = 20
TICKS = 8
POLICY = BranchPolicy(
    name="bench_fork4",
    max_depth=2,
    max_active=4,
    max_branches_per_tick=1,
    branch_threshold=0.5,
    runway_ticks=1,
)


def _days_after(day: str, days: int) -> str:
    return (date.fromisoformat(str(day)[:10]) + timedelta(days=days)).isoformat()


def make_card() -> Card:
    """20 always-active actors, no resolution hazard, two early hypotheses to fork on."""
    data = demo_card_data()
    seeds = data["seeds"]
    seeds["hazard"] = 0.0
    seeds["cohorts"] = []
    seeds["relations"] = []
    seeds["events"] = []
    seeds["actors"] = [
        {"id": f"a{i:02d}", "name": f"Actor {i}", "stance": 0.1, "influence": 0.5, "activity": 1.0}
        for i in range(ACTORS)
    ]
    seeds["hypotheses"] = [
        {
            "id": "h_yes",
            "title": "An early development for",
            "endpoint": "cleared",
            "probability": 0.5,
            "impact": 1.0,
            "end": _days_after(data["as_of"], 12),
        },
        {
            "id": "h_no",
            "title": "An early development against",
            "endpoint": "not_cleared",
            "probability": 0.5,
            "impact": 1.0,
            "end": _days_after(data["as_of"], 12),
        },
    ]
    data["evidence"] = None
    data["id"] = "bench-scheduler"
    return Card.model_validate(data)


def _waves(trace_path: Path) -> list[int]:
    """The actor calls of each tick (over all timelines), tick by tick, from the trace."""
    trace = read_trace(trace_path)
    per_tick = Counter(
        line.record.tick for line in trace.of_type("llm_call") if line.record.data.role == "actor"
    )
    return [per_tick[tick] for tick in sorted(per_tick)]


def _bare_waves(
    bodies: list[dict[str, Any]], waves: list[int], base_url: str, connections: int
) -> float:
    """Wall time of a bare ``AsyncOpenAI`` sending the run's actor requests in the run's waves:
    each wave at once (at most ``connections`` in flight), reading every streamed chunk, the
    next wave once the last reply of this one is read. What any client built on the library
    spends on the same calls: the floor of the run's own ratio."""
    began = time.perf_counter()
    send_bare(bodies, base_url, connections=connections, waves=waves)
    return time.perf_counter() - began


def measure(connections: int, latency_s: float, workdir: Path) -> dict[str, Any]:
    card = make_card()
    dump = workdir / f"bodies-{connections}.json"
    with stub_process(latency_s, dump=dump) as base_url:
        environ = {**os.environ, "STUB_API_KEY": "bench", "STUB_BASE_URL": base_url}
        models = ModelConfig(
            model="offline",
            role_models=("actor=stub/bench-model",),
            max_connections=connections,
            cache="off",
            retry=RetrySettings(max_attempts=3, timeout_s=30.0),
        )
        config = RunConfig(card=card, policy=POLICY, seed=1, ticks=TICKS, models=models)
        out = workdir / f"c{connections}"
        start = time.perf_counter()
        result = run_async(
            lambda: run_card(config, out, fsync=False, overwrite=True, environ=environ)
        )
        wall = time.perf_counter() - start
    waves = _waves(result.trace)
    bodies = json.loads(dump.read_text(encoding="utf-8"))
    whole = unstreamed(bodies)
    with stub_process(latency_s) as base_url:
        bare = _bare_waves(bodies, waves, base_url, connections)
        bare_whole = _bare_waves(whole, waves, base_url, connections)
    ideal = sum(math.ceil(n / connections) for n in waves) * latency_s
    return {
        "timelines": result.timelines,
        "actors": ACTORS,
        "ticks": TICKS,
        "calls": sum(waves),
        "connections": connections,
        "latency_s": latency_s,
        "widest_wave": max(waves, default=0),
        "wall_s": round(wall, 3),
        "ideal_s": round(ideal, 3),
        "ratio": round(wall / ideal, 3) if ideal else None,
        "bare_client_wall_s": round(bare, 3),
        "bare_client_ratio": round(bare / ideal, 3) if ideal else None,
        "run_vs_bare": round(wall / bare, 3) if bare else None,
        "bare_unstreamed_ratio": round(bare_whole / ideal, 3) if ideal else None,
    }


def run(quick: bool = False) -> dict[str, Any]:
    settings = [(100, 0.05)] if quick else [(100, 0.05), (16, 0.05), (100, 0.5)]
    with tempfile.TemporaryDirectory() as tmp:
        results = [measure(c, latency, Path(tmp)) for c, latency in settings]
    return {"runs": results}


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    return list(result["runs"])


if __name__ == "__main__":
    from worldsim.domain.collector import collector_paced

    with collector_paced():  # as the worldsim command runs
        for row in rows(run()):
            print(row)
