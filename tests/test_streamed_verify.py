"""``verify`` checks a trace in one streamed pass, and finds what a check of the whole trace
read into memory finds: the same verdict for every prefix of a trace, a refusal for any edit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import DEMO_CARD
from worldsim.domain.cards import load_card
from worldsim.domain.config import RunConfig
from worldsim.domain.errors import TraceError, TraceIncomplete
from worldsim.domain.policy import load_policy
from worldsim.sim.session import run_card
from worldsim.trace.reader import read_trace
from worldsim.trace.replay import TickStep
from worldsim.trace.verify import Verification, canonical_hash, replay, verify_trace


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("recorded")
    config = RunConfig(card=load_card(DEMO_CARD), policy=load_policy("branching"), seed=3, ticks=4)
    return anyio.run(lambda: run_card(config, out, fsync=False)).trace


def _held(path: Path) -> Verification | None:
    """The verdict on the trace read whole first; None for a file with no complete record."""
    try:
        trace = read_trace(path)
    except TraceIncomplete:
        return None
    return verify_trace(trace, canonical=True)


def test_a_whole_trace_streamed_or_held_gives_one_verdict(recorded: Path) -> None:
    streamed = verify_trace(recorded, canonical=True)
    assert streamed == _held(recorded)
    assert streamed.exit_code == 0 and streamed.matches and streamed.mass_sum is not None
    assert streamed.records == len(recorded.read_bytes().splitlines())
    assert streamed.canonical == canonical_hash(read_trace(recorded))
    assert verify_trace(recorded).canonical is None  # the hash is computed when asked for
    steps: list[TickStep] = []
    verify_trace(recorded, on_step=steps.append)
    assert [(s.timeline, s.tick, s.digest) for s in steps] == [
        (s.timeline, s.tick, s.digest) for s in replay(recorded).steps
    ]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cut=st.floats(0.0, 1.0))
def test_every_prefix_gets_the_verdict_of_the_trace_read_whole(
    recorded: Path, tmp_path: Path, cut: float
) -> None:
    data = recorded.read_bytes()
    prefix = tmp_path / "prefix.jsonl"
    prefix.write_bytes(data[: max(1, int(len(data) * cut))])
    streamed = verify_trace(prefix, canonical=True)
    held = _held(prefix)
    if held is None:  # only a torn first line: nothing checked, exit 3
        assert streamed.head is None and streamed.torn_line == 1 and streamed.exit_code == 3
    else:
        assert streamed == held
        assert streamed.exit_code == (0 if prefix.read_bytes() == data else 3)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(at=st.floats(0.0, 1.0), byte=st.integers(0, 255))
def test_any_edit_is_refused_streamed_as_held(
    recorded: Path, tmp_path: Path, at: float, byte: int
) -> None:
    data = bytearray(recorded.read_bytes())
    i = min(len(data) - 2, int(len(data) * at))  # not the final newline: that is a cut
    if data[i] == byte or data[i] == ord("\n") or byte == ord("\n"):
        return  # no edit, or one that splits or joins lines (covered by the reader's tests)
    data[i] = byte
    edited = tmp_path / "edited.jsonl"
    edited.write_bytes(bytes(data))
    with pytest.raises(TraceError):
        verify_trace(edited)
    with pytest.raises(TraceError):
        read_trace(edited).validate()
        verify_trace(read_trace(edited))


def test_a_direct_trace_streamed_or_held_gives_one_verdict(tmp_path: Path) -> None:
    from tests.support import invoke

    made = invoke("forecast", DEMO_CARD, "--model", "offline", "--out", tmp_path, "--json")
    assert made.code == 0, made.err
    (trace,) = tmp_path.glob("*.jsonl")
    streamed = verify_trace(trace, canonical=True)
    assert streamed == _held(trace) and streamed.exit_code == 0 and streamed.matches
    assert streamed.canonical == canonical_hash(read_trace(trace))


@pytest.mark.parametrize("damage", ["renamed_key", "missing_actors", "wrong_type"])
def test_an_unreadable_initial_state_is_a_trace_error_naming_its_line(
    recorded: Path, tmp_path: Path, damage: str
) -> None:
    from tests.support import forge

    def edit(records: list[dict[str, Any]]) -> None:
        state = next(r for r in records if r["type"] == "world_initialized")["data"]["state"]
        if damage == "renamed_key":
            actor = state["actors"][0]
            actor[" tance"] = actor.pop("stance")
        elif damage == "missing_actors":
            del state["actors"]
        else:
            state["hazard"] = "high"

    forged = tmp_path / "forged.jsonl"
    forge(recorded, forged, edit)  # chain and seal recomputed: only replay can tell
    line = next(
        i + 1
        for i, raw in enumerate(forged.read_bytes().splitlines())
        if b'"type":"world_initialized"' in raw
    )
    with pytest.raises(TraceError, match="initial state cannot be read") as caught:
        verify_trace(forged)
    assert caught.value.line == line
