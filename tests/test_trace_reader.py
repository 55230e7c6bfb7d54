"""The one trace reader: JSON read exactly as ``json.loads`` reads it, the effective view
streamed by the rule of trace.effective, and lines passed on as soon as they are known to count."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import DEMO_CARD
from worldsim.domain.cards import load_card
from worldsim.domain.config import RunConfig
from worldsim.domain.errors import TraceError
from worldsim.domain.policy import load_policy
from worldsim.sim.session import run_card
from worldsim.trace.effective import BOUNDARIES, effective_lines, stream_effective, void_lines
from worldsim.trace.reader import (
    TraceLine,
    iter_effective,
    iter_trace,
    parse_line,
    read_trace,
)
from worldsim.trace.verify import verified_lines, verify_trace

# --------------------------------------------------------------------------------------------
# JSON: the fast decoder reads what json.loads reads, value for value


def _exact(value: Any) -> str:
    """A rendering that tells 1 from 1.0 and 0.0 from -0.0 (``==`` does not)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()  # unbounded: numbers past 64 bits stay integers
    | st.integers(min_value=2**63 - 2, max_value=2**64 + 2)
    | st.floats(allow_nan=False)
    | st.text()
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_VALUES)
def test_parse_line_gives_the_values_json_loads_gives(value: Any) -> None:
    raw = json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
    assert _exact(parse_line(raw)) == _exact(json.loads(raw))


def _outcome(fn: Any, raw: bytes) -> str:
    try:
        return "ok " + _exact(fn(raw))
    except (ValueError, RecursionError):
        return "refused"


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=40),
        st.sampled_from(
            [
                b"NaN",
                b"[Infinity, -Infinity]",
                b"1e400",
                b'"\\ud800"',
                b'"\xed\xa0\x80"',
                b"\xef\xbb\xbf{}",
                b'{"a": 1, "a": 2}',
                b"123456789012345678901234567890",
                b'{"a":"\xff"}',
                b"[1,]",
                b"01",
                b" {} ",
            ]
        ),
    )
)
def test_parse_line_accepts_and_refuses_what_json_loads_does(raw: bytes) -> None:
    assert _outcome(parse_line, raw) == _outcome(json.loads, raw)


# --------------------------------------------------------------------------------------------
# the effective view, streamed, against the rule stated plainly


@dataclass(frozen=True)
class Line:
    number: int
    type: str
    tl: str | None


def _void_by_the_rule(segment: Sequence[Line], *, first: bool) -> set[int]:
    """trace.effective's docstring, as a whole-segment computation."""
    if first and not any(line.type == "world_initialized" for line in segment):
        return {
            line.number
            for line in segment
            if line.type not in {"run_started", "run_failed", "run_resumed"}
        }
    last_boundary: dict[str, int] = {}
    for i, line in enumerate(segment):
        if line.tl is not None and line.type in BOUNDARIES:
            last_boundary[line.tl] = i
    world_at = next((i for i, ln in enumerate(segment) if ln.type == "world_initialized"), -1)
    void = set()
    for i, line in enumerate(segment):
        if line.type in {"run_started", "run_failed", "run_resumed"}:
            continue
        if line.tl is None:
            if line.type in {"extraction", "report", "audit"} or (
                line.type == "llm_call" and i > world_at
            ):
                void.add(line.number)
        elif i > last_boundary.get(line.tl, -1):
            void.add(line.number)
    return void


def _effective_by_the_rule(lines: Sequence[Line]) -> list[Line]:
    void: set[int] = set()
    start = 0
    for i, line in enumerate(lines):
        if line.type == "run_resumed":
            void |= _void_by_the_rule(lines[start:i], first=start == 0)
            start = i + 1
    return [line for line in lines if line.number not in void]


_TYPES = [
    "run_started",
    "world_initialized",
    "timeline_started",
    "tick_started",
    "retrievals",
    "llm_call",
    "proposals",
    "review",
    "fork",
    "tick_committed",
    "timeline_ended",
    "extraction",
    "report",
    "audit",
    "run_failed",
    "run_resumed",
    "run_completed",
]
_LINES = st.lists(
    st.tuples(st.sampled_from(_TYPES), st.sampled_from([None, None, "t0", "t0.1", "t0.2"])),
    max_size=60,
).map(lambda pairs: [Line(n, kind, tl) for n, (kind, tl) in enumerate(pairs, start=1)])


@settings(max_examples=1000, deadline=None)
@given(_LINES)
def test_streamed_effective_view_follows_the_rule(lines: list[Line]) -> None:
    assert effective_lines(lines) == _effective_by_the_rule(lines)


@settings(max_examples=500, deadline=None)
@given(_LINES, st.booleans())
def test_void_lines_follows_the_rule(lines: list[Line], first: bool) -> None:
    assert void_lines(lines, first=first) == _void_by_the_rule(lines, first=first)


# --------------------------------------------------------------------------------------------
# a real run read through the reader


@pytest.fixture(scope="module")
def trace_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("reader")
    config = RunConfig(card=load_card(DEMO_CARD), policy=load_policy("branching"), seed=3)
    return anyio.run(lambda: run_card(config, out, fsync=False)).trace


def test_each_line_keeps_its_bytes_and_envelope(trace_path: Path) -> None:
    raws = trace_path.read_bytes().splitlines()
    lines = list(iter_trace(trace_path))
    assert [line.raw for line in lines] == raws
    for line, raw in zip(lines, raws, strict=True):
        obj = json.loads(raw)
        assert (line.type, line.tl, line.tick, line.run) == (
            obj["type"],
            obj["tl"],
            obj["tick"],
            obj["run"],
        )
        assert line.obj == obj and line.fields == obj["data"]
        assert line.record.seq == obj["seq"]


def test_a_run_without_resumes_is_all_effective(trace_path: Path) -> None:
    everything = [line.raw for line in read_trace(trace_path).lines]
    assert [line.raw for line in iter_effective(trace_path)] == everything


def test_lines_are_passed_on_while_the_trace_is_still_being_read(trace_path: Path) -> None:
    """A line waits at most until its timeline's next boundary; only the run's results wait
    for the end of the trace."""
    source = list(iter_trace(trace_path))
    read = 0

    def feed() -> Iterator[TraceLine]:
        nonlocal read
        for line in source:
            read += 1
            yield line

    read_when_passed = {line.number: read for line in stream_effective(feed())}
    assert sorted(read_when_passed) == [line.number for line in source]
    boundary_after: dict[int, int] = {}
    next_boundary: dict[str, int] = {}
    for line in reversed(source):
        if line.tl is not None:
            if line.type in BOUNDARIES:
                next_boundary[line.tl] = line.number
            boundary_after[line.number] = next_boundary.get(line.tl, len(source))
    longest_wait = max(boundary_after[n] - n for n in boundary_after)
    assert 0 < longest_wait < len(source) // 4
    last_commit = max(line.number for line in source if line.type == "tick_committed")
    for number in range(1, last_commit + 1):
        assert read_when_passed[number] - number <= longest_wait


def test_damage_is_raised_where_the_reader_reaches_it(trace_path: Path, tmp_path: Path) -> None:
    lines = trace_path.read_bytes().splitlines(keepends=True)
    k = len(lines) * 2 // 3
    lines[k - 1] = lines[k - 1].replace(b'"tick":', b'"tick" :', 1)  # line k: the chain breaks
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_bytes(b"".join(lines))
    seen: list[int] = []
    with pytest.raises(TraceError) as info:
        seen.extend(line.number for line in iter_effective(damaged))
    assert info.value.line == k + 1 and "hash chain broken" in info.value.message
    assert len(seen) > k // 2 and max(seen) < k + 1  # what came before was passed on first
    with pytest.raises(TraceError) as refused:  # verify's pass also checks each line's form
        list(verified_lines(damaged))
    with pytest.raises(TraceError) as verified:
        verify_trace(damaged)
    assert str(refused.value) == str(verified.value)
