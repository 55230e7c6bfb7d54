"""Faults while writing a trace: one line, no traceback, and a trace that verifies and resumes."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import DEMO_CARD
from worldsim.trace.reader import read_trace
from worldsim.trace.verify import verify_trace

WORLDSIM = [sys.executable, "-c", "from worldsim.cli import main; main()"]
RUN = ["run", str(DEMO_CARD), "--seed", "3", "--ticks", "6"]
TRACE_NAME = "merger-review__branching__ticks6__s3.jsonl"


def cli(*args: str, limit: int | None = None) -> subprocess.CompletedProcess[str]:
    def limited() -> None:
        # what a full disk or a file-size quota does: the write fails with EFBIG
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        assert limit is not None
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(
        [*WORLDSIM, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        preexec_fn=limited if limit is not None else None,
    )


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An uninterrupted run of the same card, policy and seed."""
    out = tmp_path_factory.mktemp("whole")
    assert cli(*RUN, "--out", str(out)).returncode == 0
    return out / TRACE_NAME


def _after_init(trace: Path) -> int:
    """Where the world is written: a run cut before it starts again rather than resumes."""
    lines = read_trace(trace).lines
    init = next(line for line in lines if line.type == "world_initialized")
    return sum(len(line.raw) + 1 for line in lines[: init.number])


@pytest.mark.parametrize("share", [0.0, 0.4, 0.95])
def test_a_full_disk_is_one_line_and_the_trace_resumes_to_the_same_hash(
    whole: Path, tmp_path: Path, share: float
) -> None:
    full = verify_trace(whole, canonical=True)
    start = _after_init(whole)
    limit = start + int((whole.stat().st_size - start) * share) + 1
    proc = cli(*RUN, "--out", str(tmp_path), limit=limit)
    trace = tmp_path / TRACE_NAME
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.splitlines() == [f"error: {trace}: cannot write the trace: File too large"]
    # cut back to its last whole record: nothing torn, nothing sealed, resumable
    written = trace.read_bytes()
    assert 0 < len(written) <= limit and written.endswith(b"\n")
    assert read_trace(trace).terminal is None

    proc = subprocess.run(
        [*WORLDSIM, "verify", str(trace)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 3, proc.stderr

    proc = cli("run", "--resume", str(trace), "--json")
    assert proc.returncode == 0, proc.stderr
    verdict = verify_trace(trace, canonical=True)
    assert verdict.exit_code == 0
    assert verdict.canonical == full.canonical


def test_the_resume_itself_may_hit_the_limit_and_resume_again(whole: Path, tmp_path: Path) -> None:
    start, size = _after_init(whole), whole.stat().st_size
    third = (size - start) // 3
    assert cli(*RUN, "--out", str(tmp_path), limit=start + third).returncode == 1
    trace = tmp_path / TRACE_NAME
    proc = cli("run", "--resume", str(trace), limit=start + 2 * third)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "cannot write the trace: File too large" in proc.stderr
    assert cli("run", "--resume", str(trace)).returncode == 0
    assert (
        verify_trace(trace, canonical=True).canonical
        == verify_trace(whole, canonical=True).canonical
    )


def _drop_dac_override() -> None:
    """Let a root process meet file permissions like anyone else: no CAP_DAC_OVERRIDE (1) or
    CAP_DAC_READ_SEARCH (2) after exec (the suite may run as root, which ignores them)."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    for cap in (1, 2):
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl")


def test_a_read_only_output_folder_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    out = tmp_path / "traces"
    out.mkdir()
    out.chmod(0o555)
    try:
        proc = subprocess.run(
            [*WORLDSIM, *RUN, "--out", str(out)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            preexec_fn=_drop_dac_override,
        )
    finally:
        out.chmod(0o755)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"error: {out / TRACE_NAME}: cannot write the trace: Permission denied"
    ]
    assert list(out.iterdir()) == []


def test_a_failed_route_is_one_line_not_logs_that_say_it_again(tmp_path: Path) -> None:
    """A run its route fails ends with one line naming the route and the error; the library
    raises it and logs nothing that repeats it (only the documented shrink of a connection
    limit, a warning of its own)."""
    from worldsim.testing import Faults, StubServer

    config = tmp_path / "run.yaml"
    config.write_text(
        f"card: {DEMO_CARD}\nmodels:\n  model: stub/test-model\n  retry: {{max_attempts: 1}}\n",
        encoding="utf-8",
    )
    with StubServer(seed=8, faults=Faults(server_error=1.0)) as server:
        env = {**os.environ, "STUB_API_KEY": "k", "STUB_BASE_URL": server.base_url}
        proc = subprocess.run(
            [*WORLDSIM, "run", "--config", str(config), "--out", str(tmp_path / "out")],
            env={**env, "WORLDSIM_CACHE_DIR": str(tmp_path / "cache")},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert proc.returncode == 1
    lines = [ln for ln in proc.stderr.splitlines() if '"event": "connection limit"' not in ln]
    assert lines == [
        "error: stub/test-model: gave up after 1 attempts; last error server_error: Error code: "
        "500 - The server had an error while processing"
    ]
