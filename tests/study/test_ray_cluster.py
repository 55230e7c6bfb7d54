"""`worldsim batch --executor ray --ray-address ADDR` on an existing cluster: a Ray head the
test starts with `ray start --head` (2 CPUs, loopback only), then stops; a study of the
imported ForecastBench-shaped question set writes there the traces `worldsim batch` writes
without Ray."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.study.conftest import write_manifest
from tests.support import ROOT

pytest.importorskip("ray")
WORLDSIM = [sys.executable, "-c", "from worldsim.cli import main; main()"]
HEAD = ["--node-ip-address", "127.0.0.1", "--include-dashboard", "false", "--disable-usage-stats"]
QUESTION_SET = ROOT / "scenarios" / "forecastbench" / "question_set.json"
RAY = shutil.which("ray", path=str(Path(sys.executable).parent))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def cluster() -> Iterator[tuple[str, dict[str, str]]]:
    """A Ray head on 127.0.0.1 and the environment to reach it (a test cluster: no token)."""
    assert RAY is not None, "the ray command is installed with the ray extra"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["RAY_AUTH_MODE"] = "disabled"
    port = _free_port()
    # its own temporary folder (short: Ray's socket paths must fit), so that the head leaves no
    # "current cluster" behind in /tmp/ray for a later ray.init() to find
    temp = tempfile.mkdtemp(prefix="wsray")
    options = [*HEAD, "--temp-dir", temp]
    head = subprocess.Popen(
        [RAY, "start", "--head", "--block", "--num-cpus", "2", "--port", str(port), *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        assert head.stdout is not None
        for line in head.stdout:  # ready once it says it blocks
            if "block forever" in line:
                break
        else:
            pytest.fail("ray start --head ended before it was ready")
        threading.Thread(target=head.stdout.read, daemon=True).start()
        yield f"127.0.0.1:{port}", env
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(3)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait(10)
        shutil.rmtree(temp, ignore_errors=True)


def _batch(manifest: Path, out: Path, env: dict[str, str], *args: str) -> dict[str, str]:
    proc = subprocess.run(
        [*WORLDSIM, "batch", str(manifest), "--out", str(out), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    rows = (out / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    return {r["trace"]: r["canonical_hash"] for r in map(json.loads, rows)}


def test_batch_runs_a_study_on_an_existing_cluster_with_the_local_hashes(
    tmp_path: Path, cluster: tuple[str, dict[str, str]]
) -> None:
    address, env = cluster
    env = {**env, "WORLDSIM_CACHE_DIR": str(tmp_path / "cache")}
    # the shipped ForecastBench-shaped question set, imported, is the study's cards
    imported = subprocess.run(
        [*WORLDSIM, "cards", "import", str(QUESTION_SET), "-o", str(tmp_path / "cards")],
        capture_output=True,
        text=True,
        env=env,
    )
    assert imported.returncode == 0, imported.stderr
    manifest = write_manifest(
        tmp_path, cards=[str(tmp_path / "cards" / "*.yaml")], forecast_dates=["card"]
    )
    on_ray = _batch(manifest, tmp_path / "ray", env, "--executor", "ray", "--ray-address", address)
    local = _batch(manifest, tmp_path / "local", env)
    assert len(on_ray) == 16  # 4 imported cards × 2 methods × 2 seeds
    assert on_ray == local
    first = tmp_path / "ray" / next(iter(on_ray))
    verify = subprocess.run(
        [*WORLDSIM, "verify", str(first)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
