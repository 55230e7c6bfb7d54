"""One writer per trace: a second writer, a second --force or a resume fails at once, exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from tests.support import DEMO_CARD
from worldsim.domain.errors import ConfigError, TraceError
from worldsim.sim.resuming import resume_run
from worldsim.trace.verify import verify_trace
from worldsim.trace.writer import TraceLock, TraceWriter

# `worldsim run` with one pause: whoever takes the trace's lock holds it until the test lets it
# go, so the two runs overlap however fast a run is (a race left to timing lost it once runs
# took less than a process's start-up).
GATED_RUN = """\
import os, time
from pathlib import Path
from worldsim.trace import writer

take = writer.TraceLock.take
go = Path(os.environ["GATE"])


def gated(path, how):
    lock = take(path, how)
    while not go.exists():
        time.sleep(0.01)
    return lock


writer.TraceLock.take = staticmethod(gated)
from worldsim.cli import main

main()
"""


def test_a_second_writer_is_refused_and_the_first_file_is_untouched(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"

    async def scenario() -> None:
        first = await TraceWriter.create(path, "run-1", fsync=False)
        await first.emit("note", {"n": 1})
        before = path.read_bytes()
        for overwrite in (False, True):
            with pytest.raises(ConfigError) as info:
                await TraceWriter.create(path, "run-2", fsync=False, overwrite=overwrite)
            assert path.read_bytes() == before
        assert str(info.value) == f"{path}: another run is writing this trace (pid {os.getpid()})"
        with pytest.raises(ConfigError, match="another run is writing this trace"):
            await TraceWriter.append_to(path, "run-1", seq=1, prev=first.prev, keep_bytes=0)
        assert path.read_bytes() == before
        await first.emit("note", {"n": 2})
        await first.aclose()
        # released on close: the file left behind blocks nobody
        second = await TraceWriter.create(path, "run-2", fsync=False, overwrite=True)
        assert path.read_bytes() == b""
        await second.aclose()

    anyio.run(scenario)


def test_a_lock_dies_with_its_process(tmp_path: Path) -> None:
    """A writer killed while holding the lock leaves nothing that blocks the next one."""
    path = tmp_path / "t.jsonl"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from worldsim.trace.writer import TraceLock\n"
            f"lock = TraceLock.take({str(path)!r}, 'new'); print('held', flush=True)\n"
            "time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(ConfigError, match=rf"\(pid {holder.pid}\)"):
            TraceLock.take(path, "replace")
    finally:
        holder.kill()
        holder.wait(timeout=30)
    lock = TraceLock.take(path, "existing")
    assert lock.held
    lock.release()
    lock.release()  # twice is harmless
    assert not lock.held


def test_resume_locks_the_trace_before_reading_it(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"")
    lock = TraceLock.take(path, "existing")
    try:
        with pytest.raises(ConfigError, match="another run is writing this trace"):
            anyio.run(lambda: resume_run(path, fsync=False))
    finally:
        lock.release()
    with pytest.raises(TraceError, match="trace not found"):
        anyio.run(lambda: resume_run(tmp_path / "absent.jsonl", fsync=False))


@pytest.mark.parametrize("attempt", range(3))
def test_two_forced_runs_racing_for_one_trace_leave_one_sound_trace(
    tmp_path: Path, attempt: int
) -> None:
    """Two `worldsim run --force` started together: one writes the trace, which verifies;
    the other exits 2 at once with one line, without touching it."""
    out = tmp_path / "traces"
    trace = out / "merger-review__branching__s0.jsonl"
    out.mkdir()
    trace.write_text("an older trace that --force replaces\n")
    go = tmp_path / "go"
    args = [sys.executable, "-c", GATED_RUN, "run", str(DEMO_CARD), "--out", str(out)]
    procs = [
        subprocess.Popen(
            [*args, "--force", "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "GATE": str(go)},
        )
        for _ in range(2)
    ]
    try:
        # the one refused exits while the other holds the lock at the gate
        deadline = time.monotonic() + 120
        while all(p.poll() is None for p in procs) and time.monotonic() < deadline:
            time.sleep(0.02)
        refused_first = [p.returncode for p in procs].count(2)
    finally:
        go.touch()
    results = [(p, *p.communicate(timeout=300)) for p in procs]
    assert refused_first == 1, [err for _, _, err in results]
    codes = sorted(p.returncode for p, _, _ in results)
    assert codes == [0, 2], [err for _, _, err in results]
    ((winner, stdout, _),) = [r for r in results if r[0].returncode == 0]
    ((loser, _, stderr),) = [r for r in results if r[0].returncode == 2]
    assert stderr.splitlines() == [
        f"error: {trace}: another run is writing this trace (pid {winner.pid})"
    ]
    verdict = verify_trace(trace)
    assert verdict.exit_code == 0
    assert json.loads(stdout)["run_id"] == json.loads(trace.read_text().split("\n")[0])["run"]
    assert loser.pid != winner.pid


def test_an_existing_trace_is_refused_naming_the_flag_and_the_keyword(tmp_path: Path) -> None:
    """The refusal reaches command-line and library users alike: it names both ways to
    replace the trace."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"kept\n")
    with pytest.raises(ConfigError) as refused:
        TraceLock.take(path, "new")
    assert refused.value.message == (
        "trace already exists (--force replaces it; overwrite=True in Python)"
    )
    assert path.read_bytes() == b"kept\n"
