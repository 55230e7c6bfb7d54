"""The trace: chain, seal, torn lines, replay and the published schema (DESIGN §4.8)."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import RunFn
from tests.support import DEMO_CARD, ROOT
from worldsim.domain.cards import load_card
from worldsim.domain.errors import TraceError
from worldsim.trace.reader import read_trace
from worldsim.trace.schema import render_markdown
from worldsim.trace.verify import replay, verify_trace
from worldsim.trace.writer import TraceWriter, genesis_hash, utc_stamp


@pytest.fixture(scope="module")
def trace_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    import anyio

    from worldsim.domain.config import RunConfig
    from worldsim.domain.policy import load_policy
    from worldsim.sim.session import run_card

    out = tmp_path_factory.mktemp("golden")
    config = RunConfig(card=load_card(DEMO_CARD), policy=load_policy("branching"), seed=0, ticks=5)
    result = anyio.run(lambda: run_card(config, out, fsync=False))
    assert result.timelines > 1
    return result.trace.read_bytes()


def test_a_stamp_is_the_time_now_in_utc_to_the_microsecond() -> None:
    before = datetime.now(UTC)
    stamps = [utc_stamp() for _ in range(3)]
    after = datetime.now(UTC)
    for stamp in stamps:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", stamp)
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        assert before - timedelta(milliseconds=1) <= when <= after + timedelta(milliseconds=1)
    assert stamps == sorted(stamps)


def test_every_line_is_one_envelope_chained_to_the_last(trace_bytes: bytes, tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(trace_bytes)
    lines = trace_bytes.rstrip(b"\n").split(b"\n")
    first = json.loads(lines[0])
    assert list(first) == ["v", "seq", "ts", "run", "type", "tl", "tick", "prev", "data"]
    assert first["type"] == "run_started"
    assert json.loads(lines[-1])["type"] == "run_completed"
    types = {json.loads(line)["type"] for line in lines}
    assert {
        "world_initialized",
        "timeline_started",
        "tick_started",
        "proposals",
        "review",
        "fork",
        "fork_rejected",
        "tick_committed",
        "timeline_ended",
        "extraction",
        "report",
        "audit",
    } <= types
    result = verify_trace(path)
    assert result.exit_code == 0 and result.complete and result.torn_line is None


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_changing_any_single_byte_fails_verification(
    trace_bytes: bytes, tmp_path: Path, data: st.DataObject
) -> None:
    pos = data.draw(st.integers(0, len(trace_bytes) - 1), label="position")
    new = data.draw(st.integers(0, 255).filter(lambda b: b != trace_bytes[pos]), label="byte")
    mutated = bytearray(trace_bytes)
    mutated[pos] = new
    path = tmp_path / "mutated.jsonl"
    path.write_bytes(bytes(mutated))
    try:
        result = verify_trace(path)
    except TraceError:
        return
    assert result.exit_code != 0, f"byte {pos} changed to {new} went unnoticed"


def test_a_torn_final_line_is_reported_not_fatal(trace_bytes: bytes, tmp_path: Path) -> None:
    lines = trace_bytes.split(b"\n")
    cut = b"\n".join(lines[:40]) + b"\n" + lines[40][: len(lines[40]) // 2]
    path = tmp_path / "torn.jsonl"
    path.write_bytes(cut)
    trace = read_trace(path)
    assert trace.torn_line == 41 and len(trace.lines) == 40
    result = verify_trace(path)
    assert result.torn_line == 41 and not result.complete and result.exit_code == 3
    assert replay(trace).recorded is None  # replays what is there, nothing to compare yet


def test_damage_before_the_last_line_names_the_line(trace_bytes: bytes, tmp_path: Path) -> None:
    lines = trace_bytes.split(b"\n")
    lines[10] = lines[10].replace(b'"seq":10', b'"seq":11')
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(TraceError) as info:
        read_trace(path)
    assert info.value.line == 11


def test_replay_rebuilds_every_tick_and_reproduces_p_yes(
    trace_bytes: bytes, tmp_path: Path
) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(trace_bytes)
    result = replay(path)
    committed = list(read_trace(path).of_type("tick_committed"))
    assert len(result.steps) == len(committed)
    assert [s.digest for s in result.steps] == [c.record.data.digest for c in committed]
    assert result.matches and result.recorded is not None
    assert result.recomputed is not None and result.recomputed.p_yes == result.recorded.p_yes


def test_a_consistent_but_false_extraction_is_caught(trace_bytes: bytes, tmp_path: Path) -> None:
    """Rewrite p_yes and re-chain every line: the chain holds, replay still catches it."""
    import hashlib

    from worldsim.trace.writer import genesis_hash, seal_line

    out: list[bytes] = []
    prev = None
    for raw in trace_bytes.rstrip(b"\n").split(b"\n"):
        obj = json.loads(raw)
        if prev is None:
            prev = genesis_hash(obj["run"])
        obj["prev"] = prev
        if obj["type"] == "extraction":
            obj["data"]["p_yes"] = 0.123
        if obj["type"] == "run_completed":
            obj["data"]["seal"] = ""
        line = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
        if obj["type"] == "run_completed":
            line = seal_line(line)
        out.append(line)
        prev = hashlib.sha256(line).hexdigest()
    path = tmp_path / "forged.jsonl"
    path.write_bytes(b"\n".join(out) + b"\n")
    read_trace(path)  # the chain is intact
    with pytest.raises(TraceError, match="recomputed extraction"):
        verify_trace(path)


def test_published_schema_matches_the_models() -> None:
    assert (ROOT / "docs" / "trace-format.md").read_text(encoding="utf-8") == render_markdown()


def test_run_with_a_bad_policy_leaves_no_trace(tmp_path: Path, run: RunFn) -> None:
    from worldsim.domain.errors import RoleError

    data = load_card(DEMO_CARD).model_dump(mode="json")
    data["seeds"]["actors"][0]["role"] = "no_such_role"
    from worldsim.domain.cards import Card

    with pytest.raises(RoleError, match="unknown role 'no_such_role'"):
        run(Card.model_validate(data))
    assert not any(tmp_path.rglob("*.jsonl"))


def test_each_record_is_chained_to_the_one_before_and_handed_to_the_tap(tmp_path: Path) -> None:
    import anyio

    tapped: list[tuple[str, str | None, int | None, dict[str, object]]] = []

    async def go() -> None:
        writer = await TraceWriter.create(tmp_path / "t.jsonl", "r1", fsync=False)
        writer.tap = lambda *record: tapped.append(record)
        await writer.emit("note", {"n": 0})
        for n in (1, 2, 3):
            await writer.emit("note", {"n": n}, tl="t0", tick=2)
        await writer.emit("note", {"n": 4})
        assert writer.seq == 5
        await writer.aclose()

    anyio.run(go)
    lines = [json.loads(line) for line in (tmp_path / "t.jsonl").read_bytes().splitlines()]
    assert [line["seq"] for line in lines] == [0, 1, 2, 3, 4]
    assert [line["data"]["n"] for line in lines] == [0, 1, 2, 3, 4]
    assert [(line["tl"], line["tick"]) for line in lines[1:4]] == [("t0", 2)] * 3
    assert [(t, tl, tick, data["n"]) for t, tl, tick, data in tapped] == [
        ("note", None, None, 0),
        ("note", "t0", 2, 1),
        ("note", "t0", 2, 2),
        ("note", "t0", 2, 3),
        ("note", None, None, 4),
    ]
    raw = (tmp_path / "t.jsonl").read_bytes().splitlines()
    chain = [genesis_hash("r1"), *(hashlib.sha256(line).hexdigest() for line in raw[:-1])]
    assert [line["prev"] for line in lines] == chain
