"""A finished run lets its engine go at once: no reference cycle keeps the engine (and the world,
trace views and indexes it holds) alive until the collector finds it, which would walk them all
when the collector's pace comes back (docs/performance.md)."""

from __future__ import annotations

import gc
from pathlib import Path

import anyio

from tests.support import DEMO_CARD
from worldsim.domain.cards import load_card
from worldsim.domain.config import RunConfig
from worldsim.domain.policy import load_policy
from worldsim.sim.resuming import resume_run
from worldsim.sim.scheduler import Engine
from worldsim.sim.session import run_card


def _engines() -> list[Engine]:
    return [o for o in gc.get_objects() if isinstance(o, Engine)]


def test_a_finished_or_resumed_run_leaves_no_engine_behind(tmp_path: Path) -> None:
    config = RunConfig(card=load_card(DEMO_CARD), policy=load_policy("branching"), seed=3, ticks=3)
    gc.collect()
    gc.disable()  # only reference counting frees anything in here
    try:
        result = anyio.run(lambda: run_card(config, tmp_path, fsync=False))
        after_run = _engines()
        lines = result.trace.read_bytes().splitlines(keepends=True)
        cut = tmp_path / "cut.jsonl"
        cut.write_bytes(b"".join(lines[: len(lines) // 2]))
        anyio.run(lambda: resume_run(cut, fsync=False))
        after_resume = _engines()
    finally:
        gc.enable()
    assert result.p_yes is not None
    assert after_run == [] and after_resume == []
