"""Large records written by the writer's thread: the same file, in order, and the same failures."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import threading
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worldsim.domain.errors import TraceError
from worldsim.trace import writer as writer_module
from worldsim.trace.writer import TraceWriter, genesis_hash

LARGE = 400  # a record this long or longer goes to the writer's thread in these tests


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def _chained(path: Path, run_id: str) -> bool:
    raw = path.read_bytes().splitlines()
    chain = [genesis_hash(run_id), *(hashlib.sha256(line).hexdigest() for line in raw[:-1])]
    return [json.loads(line)["prev"] for line in raw] == chain


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    sizes=st.lists(st.sampled_from([0, 10, 600, 5000]), min_size=1, max_size=12),
    durable=st.lists(st.booleans(), min_size=12, max_size=12),
)
def test_records_large_and_small_land_in_their_order_and_chained(
    sizes: list[int], durable: list[bool], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writer_module, "LATER_BYTES", LARGE)
    path = tmp_path / f"t{len(list(tmp_path.iterdir()))}.jsonl"

    async def go() -> None:
        writer = await TraceWriter.create(path, "r1")
        for n, size in enumerate(sizes):
            await writer.emit("note", {"n": n, "pad": "x" * size}, durable=durable[n])
            if durable[n]:  # once flushed, a record is on disk with everything before it
                await writer.flush()
                assert len(path.read_bytes().splitlines()) == n + 1
        await writer.aclose()

    anyio.run(go)
    lines = _lines(path)
    assert [line["data"]["n"] for line in lines] == list(range(len(sizes)))  # type: ignore[index]
    assert [len(line["data"]["pad"]) for line in lines] == sizes  # type: ignore[index]
    assert _chained(path, "r1")


def _failing_write(limit: int) -> object:
    """``os.write`` as a full disk answers it for a buffer over ``limit`` bytes."""
    real = os.write

    def write(fd: int, data: memoryview) -> int:
        if len(data) > limit:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    return write


def test_a_large_records_failed_write_is_raised_once_seen_and_the_file_cut_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writer_module, "LATER_BYTES", LARGE)
    monkeypatch.setattr(writer_module.os, "write", _failing_write(2000))
    path = tmp_path / "t.jsonl"
    raised: list[str] = []

    async def go() -> None:
        writer = await TraceWriter.create(path, "r1", fsync=False)
        await writer.emit("note", {"n": 0, "pad": ""})
        await writer.emit("note", {"n": 1, "pad": "x" * 600})  # written by the thread
        await writer.emit("note", {"n": 2, "pad": "x" * 5000})  # fails in the thread
        with pytest.raises(TraceError) as caught:
            await writer.flush()  # waits for the thread, which failed
        raised.append(str(caught.value))
        for n in (3, 4):  # every later call: the same failure
            with pytest.raises(TraceError) as caught:
                await writer.emit("note", {"n": n}, durable=True)
            raised.append(str(caught.value))
        assert writer.failure is not None
        await writer.aclose()  # closing a writer whose failure was raised raises nothing more

    anyio.run(go)
    assert raised == [raised[0]] * 3 and "No space left on device" in raised[0]
    assert [line["data"]["n"] for line in _lines(path)] == [0, 1]  # type: ignore[index]
    assert _chained(path, "r1")


def test_a_failed_write_no_call_raised_is_raised_by_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writer_module, "LATER_BYTES", LARGE)
    monkeypatch.setattr(writer_module.os, "write", _failing_write(2000))
    path = tmp_path / "t.jsonl"

    async def go() -> None:
        writer = await TraceWriter.create(path, "r1")
        await writer.emit("note", {"n": 0, "pad": "x" * 5000}, durable=True)  # fails
        with pytest.raises(TraceError, match="No space left on device"):
            await writer.aclose()

    anyio.run(go)
    assert path.read_bytes() == b""


def _held_writes(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Large records to the thread, at most 3,000 bytes waiting, and every write held until
    the returned event is set."""
    monkeypatch.setattr(writer_module, "LATER_BYTES", LARGE)
    monkeypatch.setattr(writer_module, "PENDING_BYTES", 3000)
    gate = threading.Event()
    real = os.write

    def held_write(fd: int, data: memoryview) -> int:
        gate.wait(timeout=30)
        return real(fd, data)

    monkeypatch.setattr(writer_module.os, "write", held_write)
    return gate


def test_the_run_waits_once_the_writers_thread_holds_enough(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At most ``PENDING_BYTES`` wait for the thread: the next record waits for room."""
    gate = _held_writes(monkeypatch)
    path = tmp_path / "t.jsonl"
    emitted: list[int] = []

    async def go() -> None:
        writer = await TraceWriter.create(path, "r1", fsync=False)

        async def emit(n: int) -> None:
            await writer.emit("note", {"n": n, "pad": "x" * 2000})
            emitted.append(n)

        async with anyio.create_task_group() as tg:
            await emit(0)
            await emit(1)  # 4 kB wait for the thread now: the next record must wait
            tg.start_soon(emit, 2)
            await anyio.sleep(0.3)
            assert emitted == [0, 1]
            gate.set()
        await writer.aclose()

    anyio.run(go)
    assert emitted == [0, 1, 2]
    assert [line["data"]["n"] for line in _lines(path)] == [0, 1, 2]  # type: ignore[index]
    assert _chained(path, "r1")


def test_tasks_emitting_at_once_while_the_thread_is_full_keep_one_chain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record that waits for room is chained only once it has it: several tasks emitting
    together each get the next ``seq`` and the last line's hash."""
    gate = _held_writes(monkeypatch)
    path = tmp_path / "t.jsonl"

    async def go() -> None:
        writer = await TraceWriter.create(path, "r1", fsync=False)

        async def emit(task: int) -> None:
            for n in range(3):
                await writer.emit("note", {"task": task, "n": n, "pad": "x" * 2000})

        async with anyio.create_task_group() as tg:
            for task in range(4):
                tg.start_soon(emit, task)
            await anyio.sleep(0.2)  # every task is waiting for room by now
            gate.set()
        await writer.aclose()

    anyio.run(go)
    lines = _lines(path)
    assert [line["seq"] for line in lines] == list(range(12))
    assert sorted((line["data"]["task"], line["data"]["n"]) for line in lines) == [  # type: ignore[index]
        (task, n) for task in range(4) for n in range(3)
    ]
    assert _chained(path, "r1")
