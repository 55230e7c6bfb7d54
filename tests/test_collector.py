"""The collector's pace: raised inside `collector_paced`, restored after the last use ends; set
by the programs (the worldsim command), never by a library call."""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from worldsim.cli import main
from worldsim.domain.cards import load_card
from worldsim.domain.collector import PACED_THRESHOLD, collector_paced
from worldsim.domain.config import RunConfig
from worldsim.domain.policy import load_policy
from worldsim.sim.session import run_card
from worldsim.trace import verify as verify_module
from worldsim.trace.reader import iter_trace
from worldsim.trace.verify import verify_trace

from .support import DEMO_CARD, collector_paces


@pytest.fixture(autouse=True)
def default_thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*before)


def test_raised_inside_and_restored_after() -> None:
    with collector_paced():
        assert gc.get_threshold() == (PACED_THRESHOLD, 10, 10)
    assert gc.get_threshold() == (700, 10, 10)


def test_nested_runs_restore_only_when_the_last_ends() -> None:
    with collector_paced():
        with collector_paced():
            assert gc.get_threshold()[0] == PACED_THRESHOLD
        assert gc.get_threshold()[0] == PACED_THRESHOLD
    assert gc.get_threshold() == (700, 10, 10)


def test_restored_after_a_failure() -> None:
    with pytest.raises(RuntimeError), collector_paced():
        raise RuntimeError("the run failed")
    assert gc.get_threshold() == (700, 10, 10)


@pytest.mark.parametrize("young", [0, PACED_THRESHOLD * 3])
def test_off_or_higher_is_left_alone(young: int) -> None:
    gc.set_threshold(young, 5, 5)
    with collector_paced():
        assert gc.get_threshold() == (young, 5, 5)
    assert gc.get_threshold() == (young, 5, 5)


def test_runs_in_threads_overlapping_in_any_order() -> None:
    """Two threads whose runs overlap (the first to start ends first): restored once both end."""
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[int] = []

    def first() -> None:
        with collector_paced():
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with collector_paced():
            second_in.set()
            first_out.wait(5)
            seen.append(gc.get_threshold()[0])

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == [PACED_THRESHOLD]  # still raised after the first run ended
    assert gc.get_threshold() == (700, 10, 10)


def test_a_library_run_leaves_the_collector_as_the_program_set_it(tmp_path: Path) -> None:
    card = load_card(DEMO_CARD)
    config = RunConfig(card=card, policy=load_policy("no_branch"), seed=1, ticks=2)
    seen: list[int] = []

    def observe(event: str, fields: Mapping[str, Any]) -> None:
        seen.append(gc.get_threshold()[0])

    anyio.run(lambda: run_card(config, tmp_path, fsync=False, observer=observe))
    assert seen and set(seen) == {700}
    with collector_paced():  # a program that opts in gets its pace for the whole run
        anyio.run(lambda: run_card(config, tmp_path / "paced", fsync=False, observer=observe))
    assert PACED_THRESHOLD in seen and gc.get_threshold() == (700, 10, 10)


def test_reading_replaying_and_verifying_leave_the_collector_alone(tmp_path: Path) -> None:
    card = load_card(DEMO_CARD)
    config = RunConfig(card=card, policy=load_policy("no_branch"), seed=1, ticks=2)
    trace = anyio.run(lambda: run_card(config, tmp_path, fsync=False)).trace
    seen = {gc.get_threshold()[0] for _ in iter_trace(trace)}
    replayed: list[int] = []
    verify_trace(trace, on_step=lambda step: replayed.append(gc.get_threshold()[0]))
    assert seen == {700} and set(replayed) == {700}
    assert gc.get_threshold() == (700, 10, 10)


def test_the_worldsim_command_paces_its_process_and_restores_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    card = load_card(DEMO_CARD)
    config = RunConfig(card=card, policy=load_policy("no_branch"), seed=1, ticks=2)
    trace = anyio.run(lambda: run_card(config, tmp_path, fsync=False)).trace
    with collector_paces(monkeypatch, verify_module, "verify_trace") as seen:
        monkeypatch.setattr(sys, "argv", ["worldsim", "verify", str(trace)])
        with pytest.raises(SystemExit) as done:
            main()
        after = gc.get_threshold()[0]
    assert done.value.code in (0, None)
    assert seen == [PACED_THRESHOLD] and after == 700
