"""A study killed with SIGKILL mid-way against a model server, then run again with the same
command, ends with the predictions of an uninterrupted study and pays for no call twice: every
call the killed run had stored is answered from the cache, and only the others are asked."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from tests.study.conftest import CARDS, write_manifest
from worldsim.testing import StubServer

WORLDSIM = [sys.executable, "-c", "from worldsim.cli import main; main()"]
KEEP = ("card_id", "method", "seed", "p_yes", "status", "canonical_hash")


def _rows(out: Path) -> list[dict[str, object]]:
    lines = (out / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    return [{k: json.loads(line)[k] for k in KEEP} for line in lines]


def _stored(cache: Path) -> int:
    """The replies the cache holds (none while it is still being made)."""
    if not (cache / "responses.sqlite").exists():
        return 0
    try:
        with sqlite3.connect(cache / "responses.sqlite") as db:
            return int(db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):  # the cache is being made
            return 0
        raise


def test_a_killed_study_pays_for_no_call_twice(tmp_path: Path) -> None:
    path = write_manifest(
        tmp_path,
        cards=[CARDS[0]],
        seeds=[0, 1, 2, 3],
        forecast_dates=["card"],
        methods=[
            {
                "label": "stub",
                "run": {"policy": "no_branch", "model": "stub/test-model", "ticks": 3},
            }
        ],
        max_parallel_jobs=1,
    )

    def batch(server: StubServer, out: Path, cache: Path) -> subprocess.Popen[str]:
        env = {
            **os.environ,
            "STUB_BASE_URL": server.base_url,
            "STUB_API_KEY": "k",
            "WORLDSIM_CACHE_DIR": str(cache),
        }
        return subprocess.Popen(
            [*WORLDSIM, "batch", str(path), "--out", str(out)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

    # two servers that answer alike: each invents its replies from the requests alone
    with StubServer(seed=5, content_by_request=True) as server:
        whole = batch(server, tmp_path / "whole", tmp_path / "cache-whole")
        assert whole.wait(timeout=300) == 0, whole.stderr.read() if whole.stderr else ""
        needed = server.request_count

    # the second server answers half the calls, then holds the rest: the kill falls mid-study,
    # with some calls stored and the rest not yet answered, however fast the study runs
    held = needed // 2
    with StubServer(seed=5, content_by_request=True, hold_after=held) as server:
        killed_out, cache = tmp_path / "killed", tmp_path / "cache-killed"
        proc = batch(server, killed_out, cache)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if server.request_count > held and _stored(cache) == held:
                break
            time.sleep(0.01)
        assert proc.poll() is None, "the study ended before it could be killed"
        assert _stored(cache) == held, "the answered calls were not all stored in time"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        # what the killed process had sent may still be arriving: read the count once it settles
        settled = -1
        while settled != server.request_count:
            settled = server.request_count
            time.sleep(0.3)
        server.release()
        stored = _stored(cache)
        before = server.request_count
        assert 0 < stored < needed

        again = batch(server, killed_out, cache)
        assert again.wait(timeout=300) == 0, again.stderr.read() if again.stderr else ""
        asked = server.request_count - before
    assert asked == needed - stored  # nothing that was stored is asked again
    assert _rows(killed_out) == _rows(tmp_path / "whole")
