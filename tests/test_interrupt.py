"""Ctrl-C (or SIGTERM) during `run` and `batch`: one line saying what is unfinished and how to
finish it, exit 130 (143), and that way of finishing works."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import DEMO_CARD, ROOT
from worldsim.testing import StubServer
from worldsim.trace.reader import read_trace
from worldsim.trace.verify import verify_trace

WORLDSIM = [sys.executable, "-c", "from worldsim.cli import main; main()"]


def _default_sigint() -> None:
    """SIGINT as a terminal's Ctrl-C delivers it: a test worker may ignore it, and a child
    inherits that (Python then makes no KeyboardInterrupt of it)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _ignore_sigint() -> None:
    """SIGINT as a background job of a shell script has it: ignored."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _interrupt(
    proc: subprocess.Popen[str], ready: object, sig: int = signal.SIGINT
) -> tuple[int, str]:
    """``sig`` to ``proc`` once ``ready()`` holds; its exit status and standard error."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not ready():  # type: ignore[operator]
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.01)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err


@pytest.mark.parametrize(
    ("sig", "preexec", "code", "said"),
    [
        (signal.SIGINT, _default_sigint, 130, "interrupted"),
        (signal.SIGTERM, _default_sigint, 143, "terminated"),
        (signal.SIGTERM, _ignore_sigint, -signal.SIGTERM, None),
    ],
    ids=["ctrl-c", "sigterm", "sigterm-ignoring-ctrl-c"],
)
def test_an_interrupted_run_names_its_trace_and_the_resume_that_finishes_it(
    tmp_path: Path, sig: int, preexec: object, code: int, said: str | None
) -> None:
    # the server answers 6 requests, then holds the rest: the interrupt falls mid-run
    with StubServer(seed=8, hold_after=6) as server:
        env = {**os.environ, "STUB_API_KEY": "k", "STUB_BASE_URL": server.base_url}
        args = [str(DEMO_CARD), "--model", "stub/test-model", "--seed", "2", "--ticks", "4"]
        proc = subprocess.Popen(
            [*WORLDSIM, "run", *args, "--replicates", "2", "--out", str(tmp_path)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=preexec,  # type: ignore[arg-type]
        )
        exit_code, err = _interrupt(proc, lambda: server.request_count > 6, sig)
        trace = tmp_path / "merger-review__branching__stub-test-model__ticks4__s2.jsonl"
        assert exit_code == code, err
        if said is not None:
            assert err.splitlines() == [
                f"error: {said}: {trace} is unfinished; `worldsim run --resume {trace}` "
                "finishes it; 0 of 2 runs finished; seed 3 not started (the same command with "
                "`--seed 3 --replicates 1` runs it)"
            ]
            # the held calls were in flight: each request the server read is in a trace
            received = server.request_count
            calls = [c for t in tmp_path.glob("*.jsonl") for c in read_trace(t).of_type("llm_call")]
            assert sum(c.record.data.attempts for c in calls) >= received > 6
        else:  # ended at once, as a kill ends it
            assert "Traceback" not in err
        server.release()
        resumed = subprocess.run(
            [*WORLDSIM, "run", "--resume", str(trace), "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert resumed.returncode == 0, resumed.stderr
    assert verify_trace(trace).exit_code == 0


@pytest.mark.parametrize(
    ("sig", "code", "said"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")],
    ids=["ctrl-c", "sigterm"],
)
def test_an_interrupted_forecast_records_its_call_and_says_how_to_start_over(
    tmp_path: Path, sig: int, code: int, said: str
) -> None:
    """It exited without a word, its call (sent, perhaps paid) missing from the trace."""
    out = str(tmp_path)
    with StubServer(seed=8, hold_after=0) as server:
        env = {**os.environ, "STUB_API_KEY": "k", "STUB_BASE_URL": server.base_url}
        proc = subprocess.Popen(
            [*WORLDSIM, "forecast", str(DEMO_CARD), "--model", "stub/test-model", "--out", out],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=_default_sigint,
        )
        exit_code, err = _interrupt(proc, lambda: server.request_count > 0, sig)
        server.release()
    trace = next(tmp_path.glob("*.jsonl"))
    assert exit_code == code, err
    assert err.splitlines() == [
        f"error: {said}: the forecast's trace {trace} is cut off: run it again with --force "
        "(it never resumes)"
    ]
    calls = read_trace(trace).of_type("llm_call")
    assert [c.data.error.split(":")[0] for c in calls if c.data.error] == ["cancelled"]
    assert verify_trace(trace).exit_code == 3


@pytest.mark.parametrize(
    ("sig", "code", "said"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")],
    ids=["ctrl-c", "sigterm"],
)
def test_an_interrupted_study_says_the_same_command_finishes_it(
    tmp_path: Path, sig: int, code: int, said: str
) -> None:
    out = tmp_path / "study"
    command = [*WORLDSIM, "batch", str(ROOT / "scenarios/studies/demo-study.yaml"), "--out"]
    proc = subprocess.Popen(
        [*command, str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_sigint,
    )
    jobs = out / "jobs.jsonl"
    exit_code, err = _interrupt(proc, lambda: jobs.exists() and jobs.stat().st_size > 0, sig)
    assert exit_code == code
    assert err.splitlines()[-1] == (
        f"error: {said}: the study in {out} is unfinished; the same `worldsim batch` "
        "command finishes it (complete traces are kept, torn ones resumed)"
    )
    done = len(jobs.read_text(encoding="utf-8").splitlines())
    table = (out / "predictions.csv").read_text(encoding="utf-8").splitlines()
    assert len(table) == 1 + 126  # written on the way out: every job, finished or pending
    assert sum(1 for row in table if ",complete," in row) == done
    finished = subprocess.run(
        [*command, str(out), "--json"], capture_output=True, text=True, timeout=300, check=False
    )
    assert finished.returncode == 0, finished.stderr
    assert len(jobs.read_text(encoding="utf-8").splitlines()) == 126


def test_a_run_that_completed_as_the_interrupt_came_is_counted_finished(tmp_path: Path) -> None:
    """Ctrl-C between a run's last record and its return: that run is finished, not to be
    resumed (a resume would refuse it); the next seed is the one named."""
    from tests.support import DEMO_CARD
    from worldsim.cli.stopped import runs_left as _left
    from worldsim.domain.cards import load_card
    from worldsim.domain.config import RunConfig
    from worldsim.domain.policy import load_policy
    from worldsim.sim.session import run_card

    first = RunConfig(card=load_card(DEMO_CARD), policy=load_policy("branching"), seed=4, ticks=2)
    configs = [first.model_copy(update={"seed": s}) for s in (4, 5, 6)]
    import anyio

    done = anyio.run(lambda: run_card(configs[0], tmp_path, fsync=False)).trace
    assert _left(tmp_path, configs[:1], 0) == f"every run finished; its trace is in {tmp_path}"
    assert _left(tmp_path, configs, 0) == (
        "no trace was written for seed 5; 1 of 3 runs finished; seed 6 not started (the same "
        "command with `--seed 6 --replicates 1` runs it)"
    )
    cut = done.with_name(done.name.replace("__s4", "__s5"))
    cut.write_bytes(b"".join(done.read_bytes().splitlines(keepends=True)[:3]))
    assert _left(tmp_path, configs, 1).startswith(f"{cut} is unfinished; `worldsim run --resume")
