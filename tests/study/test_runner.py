"""Running a study: a batch row is the single run of the same job; a finished study does
nothing again; a killed study finishes on the same command with the same predictions; a
resumed job pays for none of its calls again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from tests.study.conftest import CARDS, priced_manifest, write_manifest
from tests.support import kill_job
from worldsim.domain.config import RetrySettings
from worldsim.sim.session import run_card
from worldsim.study.experiment import Experiment
from worldsim.study.journal import read_journal
from worldsim.study.outputs import job_plan
from worldsim.testing import StubServer
from worldsim.trace.reader import read_trace
from worldsim.trace.verify import canonical_hash

WORLDSIM = [sys.executable, "-c", "from worldsim.cli import main; main()"]
KEEP = (
    "card_id",
    "method",
    "condition",
    "forecast_date",
    "as_of",
    "seed",
    "p_yes",
    "p_options",
    "unresolved_mass",
    "status",
    "canonical_hash",
)


def _batch(manifest: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """``worldsim batch MANIFEST --out OUT`` in a process of its own."""
    return subprocess.run(
        [*WORLDSIM, "batch", str(manifest), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _rows(out: Path) -> list[dict[str, object]]:
    lines = (out / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    return [{k: json.loads(line)[k] for k in KEEP} for line in lines]


def test_a_batch_row_equals_the_single_run_of_the_same_job(manifest: Path, tmp_path: Path) -> None:
    experiment = Experiment.from_yaml(manifest)
    rows = experiment.run_sync(tmp_path / "study", fsync=False)
    jobs = experiment.jobs()
    assert len(rows) == len(jobs) == 2 * 2 * 2 * 2
    assert all(r.status == "complete" for r in rows)
    moved = next(
        i for i, j in enumerate(jobs) if j.date_name == "mid" and j.config.kind != "direct"
    )
    job, row = jobs[moved], rows[moved]
    single = anyio.run(lambda: run_card(job.config, tmp_path / "single", fsync=False))
    assert single.p_yes == row.p_yes
    assert canonical_hash(read_trace(single.trace)) == row.canonical_hash
    trace = read_trace(tmp_path / "study" / row.trace)
    assert trace.head == row.head
    assert trace.started.forecast_date == row.as_of
    assert trace.started.card["as_of"] != row.as_of  # the card is recorded as it is
    lock = json.loads((tmp_path / "study" / "experiment.lock.json").read_text())
    assert lock["jobs"][moved] == job_plan(job)
    assert read_journal(tmp_path / "study")[row.trace].head == row.head


def test_a_finished_study_does_nothing_and_says_so(manifest: Path, tmp_path: Path) -> None:
    out = tmp_path / "study"
    first = _batch(manifest, out)
    assert first.returncode == 0, first.stderr
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    again = _batch(manifest, out)
    assert again.returncode == 0, again.stderr
    assert "nothing to do" in again.stdout
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()} == before


def test_a_torn_last_line_of_the_job_log_is_cut_by_the_next_batch_and_reads_ever_after(
    manifest: Path, tmp_path: Path
) -> None:
    out = tmp_path / "study"
    experiment = Experiment.from_yaml(manifest)
    experiment.run_sync(out, fsync=False)
    log = out / "jobs.jsonl"
    whole = log.read_bytes()
    log.write_bytes(whole + b'{"trace": "traces/mer')  # a study killed mid-append
    assert len(read_journal(out)) == len(experiment.jobs())  # the torn line is left out
    for _ in range(2):  # a rerun, then another: each reads the log it left
        experiment.run_sync(out, fsync=False)
        assert log.read_bytes() == whole
        assert len(read_journal(out)) == len(experiment.jobs())


def test_another_manifest_into_the_same_folder_is_refused_unless_forced(
    manifest: Path, tmp_path: Path
) -> None:
    out = tmp_path / "study"
    Experiment.from_yaml(manifest).run_sync(out, fsync=False)
    other = write_manifest(tmp_path, seeds=[5])
    from worldsim.domain.errors import ConfigError

    with pytest.raises(ConfigError, match="holds another study"):
        Experiment.from_yaml(other).run_sync(out, fsync=False)
    rows = Experiment.from_yaml(other).run_sync(out, force=True, fsync=False)
    assert {r.seed for r in rows} == {5} and all(r.status == "complete" for r in rows)


def test_a_study_folder_another_batch_is_running_is_refused_at_once(
    manifest: Path, tmp_path: Path
) -> None:
    """Two batches into one folder would run jobs twice and fail on each other's traces: the
    second is refused at once, one line, and writes nothing; a folder it made is removed."""
    from worldsim.domain.paths import held_folder
    from worldsim.study.runner import STUDY_LOCK

    out = tmp_path / "study"
    with held_folder(out, STUDY_LOCK, "held by the test"):
        refused = _batch(manifest, out)
        assert refused.returncode == 2, refused.stderr
        assert refused.stderr == (
            f"error: {out}: another batch is running this study (pid {os.getpid()})\n"
        )
        assert [p.name for p in out.iterdir()] == [STUDY_LOCK]
    assert not out.exists()  # the holder made the folder and put nothing else in it
    rows = Experiment.from_yaml(manifest).run_sync(out, fsync=False)
    assert all(r.status == "complete" for r in rows)
    assert (out / STUDY_LOCK).is_file()  # left behind, unlocked: the next run takes it


def test_a_killed_study_finishes_with_the_predictions_of_an_uninterrupted_one(
    tmp_path: Path,
) -> None:
    path = write_manifest(
        tmp_path,
        seeds=[0, 1, 2, 3, 4, 5],  # jobs enough that the kill after two falls well before the end
        methods=[{"label": "b", "run": {"policy": "branching", "model": "offline", "ticks": 6}}],
        max_parallel_jobs=1,
    )
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    done = _batch(path, whole)
    assert done.returncode == 0, done.stderr
    proc = subprocess.Popen(
        [*WORLDSIM, "batch", str(path), "--out", str(killed)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    log = killed / "jobs.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if log.exists() and log.read_text().count('"complete"') >= 2:
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the study ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    # killed outright: the job log holds the jobs that ended; the tables, written once at the
    # end (or on an interrupt the process lives through), are not there yet
    ended = read_journal(killed)
    assert 2 <= len(ended) < len(_rows(whole))
    assert not (killed / "predictions.jsonl").exists()
    again = _batch(path, killed)
    assert again.returncode == 0, again.stderr
    assert _rows(killed) == _rows(whole)


FAST = RetrySettings(
    max_attempts=3,
    timeout_s=5,
    backoff_initial_s=0.001,
    backoff_max_s=0.01,
    jitter_s=0.001,
    retry_after_cap_s=0.01,
)


def test_a_torn_job_is_resumed_from_the_cache_without_a_single_request(tmp_path: Path) -> None:
    with StubServer(seed=3) as server:
        env = {"STUB_BASE_URL": server.base_url, "STUB_API_KEY": "stub-key"}
        path = write_manifest(
            tmp_path,
            cards=[CARDS[0]],
            seeds=[0],
            forecast_dates=["card"],
            methods=[
                {
                    "label": "stub",
                    "run": {
                        "policy": "no_branch",
                        "model": "stub/test-model",
                        "ticks": 2,
                        "retry": FAST.model_dump(),
                    },
                }
            ],
        )
        experiment = Experiment.from_yaml(path, environ=env)
        out = tmp_path / "study"
        (first,) = experiment.run_sync(out, fsync=False)
        paid = server.request_count
        assert first.status == "complete" and paid > 0
        trace = out / first.trace
        lines = trace.read_bytes().splitlines()
        cut = next(i for i, ln in enumerate(lines) if b'"tick_committed"' in ln)
        kill_job(out, trace, keep=cut + 1)  # killed after its first tick
        (resumed,) = experiment.run_sync(out, fsync=False)
        assert server.request_count == paid  # nothing paid twice
        assert resumed.status == "complete"
        assert resumed.canonical_hash == first.canonical_hash
        assert resumed.p_yes == first.p_yes


def test_a_finished_jobs_trace_cut_short_since_is_refused_not_resumed(
    manifest: Path, tmp_path: Path
) -> None:
    """Cut after the job log recorded its head, the trace is another one: whatever its records
    say (a forged extraction, say), a resume would anchor them."""
    out = tmp_path / "study"
    assert _batch(manifest, out).returncode == 0
    trace = next(out.glob("traces/*/branching/card__s0.jsonl"))
    data = trace.read_bytes()
    trace.write_bytes(data[: len(data) - 40])
    again = _batch(manifest, out)
    assert again.returncode == 1, again.stderr
    assert f"{trace}: trace differs from the one the study recorded" in again.stderr
    assert trace.read_bytes() == data[: len(data) - 40]  # left as found


def _score_study(out: Path) -> subprocess.CompletedProcess[str]:
    """``worldsim score OUT`` against the demo cards' labels, on a wide terminal."""
    labels = Path(CARDS[0]).parent / "labels"
    return subprocess.run(
        [*WORLDSIM, "score", str(out), "--labels", str(labels), "--bootstrap", "100"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "COLUMNS": "400"},
    )


def test_score_reads_a_study_folder_and_prints_its_tables(manifest: Path, tmp_path: Path) -> None:
    out = tmp_path / "study"
    Experiment.from_yaml(manifest).run_sync(out, fsync=False)
    proc = _score_study(out)
    assert proc.returncode == 0, proc.stderr
    for title in ("per method", "per condition", "per date", "accuracy by forecast date"):
        assert title in proc.stdout
    assert "n_predictions=16" in proc.stdout


def test_score_of_an_unfinished_study_says_how_many_jobs_it_leaves_out(
    manifest: Path, tmp_path: Path
) -> None:
    out = tmp_path / "study"
    Experiment.from_yaml(manifest).run_sync(out, fsync=False)
    log = out / "jobs.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    failed = json.loads(lines[1])
    failed.update(status="failed", error="the run failed", head=None)
    log.write_bytes(lines[0] + (json.dumps(failed) + "\n").encode() + b"".join(lines[2:6]))
    proc = _score_study(out)
    assert proc.returncode == 0, proc.stderr
    total = len(lines)
    said = " ".join(proc.stderr.split())
    assert (
        f"{total - 5} of {total} planned jobs have no result ({total - 6} not run yet, 1 failed)"
        in said
    )
    assert "the scores cover the other 5; finish the study with `worldsim batch MANIFEST" in said
    assert f"`worldsim batch MANIFEST --out {out} --retry-failed`" in said
    assert "n_predictions=5" in proc.stdout


def test_one_budget_is_shared_by_every_job_and_continued_on_a_rerun(tmp_path: Path) -> None:
    cap = 0.5
    with StubServer(seed=3) as server:
        env = {"STUB_BASE_URL": server.base_url, "STUB_API_KEY": "stub-key"}
        path = priced_manifest(tmp_path, cap, FAST.model_dump())
        experiment = Experiment.from_yaml(path, environ=env)
        rows = experiment.run_sync(tmp_path / "study", fsync=False)
        complete = [r for r in rows if r.status == "complete"]
        # each run alone could spend the whole cap; together they stay under it
        assert 0 < len(complete) < len(rows)
        assert sum(r.cost_usd for r in rows) <= cap
        assert all("budget" in (r.error or "") for r in rows if r.status != "complete")
        refused = [r.error or "" for r in rows if r.status != "complete"]
        assert all("`worldsim batch --retry-failed`" in e for e in refused), refused
        assert not any("--max-cost-usd" in e for e in refused)
        asked = server.request_count
        again = experiment.run_sync(tmp_path / "study", retry_failed=True, fsync=False)
        assert server.request_count == asked  # the spend is continued: nothing more is asked
        assert [r.status for r in again] == [r.status for r in rows]
        # a larger budget in the manifest is the same study: the failed jobs go on
        larger = priced_manifest(tmp_path, 100.0, FAST.model_dump())
        more = Experiment.from_yaml(larger, environ=env)
        finished = more.run_sync(tmp_path / "study", retry_failed=True, fsync=False)
        assert all(r.status == "complete" for r in finished)
        kept = {r.trace: r.canonical_hash for r in complete}
        assert {r.trace: r.canonical_hash for r in finished if r.trace in kept} == kept
