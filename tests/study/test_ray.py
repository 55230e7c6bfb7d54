"""A study on Ray (a local Ray with 2 CPUs that the test starts): the same traces as the local
executor, a torn job resumed there, and the study's budget and connection limit held globally
by one actor however many workers call the server."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.study.conftest import (
    CARDS,
    on_route_and_offline,
    priced_manifest,
    stub_manifest,
    write_manifest,
)
from tests.support import kill_job
from worldsim.domain.config import RetrySettings
from worldsim.domain.errors import ConfigError
from worldsim.study.experiment import Experiment
from worldsim.study.ray_executor import RayExecutor
from worldsim.testing import StubServer
from worldsim.trace.reader import read_trace
from worldsim.trace.verify import canonical_hash

ray = pytest.importorskip("ray")
WORLDSIM = [sys.executable, "-c", "from worldsim.cli import main; main()"]

FAST = RetrySettings(
    max_attempts=40, timeout_s=5, backoff_initial_s=0.001, backoff_max_s=0.01, jitter_s=0.001
)


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    ray.init(
        address="local",  # a new Ray for the tests, whatever else runs on the machine
        num_cpus=2,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
    )
    try:
        yield
    finally:
        ray.shutdown()


def _rows(folder: Path) -> dict[str, tuple[Any, ...]]:
    lines = (folder / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    return {
        r["trace"]: (r["status"], r["p_yes"], r["canonical_hash"], r["head"] is not None)
        for r in map(json.loads, lines)
    }


def test_a_study_on_ray_writes_the_traces_the_local_executor_writes(
    tmp_path: Path, local_ray: None
) -> None:
    path = write_manifest(tmp_path, forecast_dates=["card"])
    local = Experiment.from_yaml(path).run_sync(tmp_path / "local", fsync=False)
    on_ray = Experiment.from_yaml(path).run_sync(
        tmp_path / "ray", fsync=False, executor=RayExecutor()
    )
    assert [r.status for r in on_ray] == ["complete"] * 8
    assert [r.canonical_hash for r in on_ray] == [r.canonical_hash for r in local]
    assert _rows(tmp_path / "ray") == _rows(tmp_path / "local")
    for row in on_ray:  # each trace came back into the study folder, whole
        trace = read_trace(tmp_path / "ray" / row.trace)
        assert trace.complete and canonical_hash(trace) == row.canonical_hash


def test_a_torn_job_is_resumed_on_ray_to_the_same_trace(tmp_path: Path, local_ray: None) -> None:
    path = write_manifest(tmp_path, cards=[CARDS[0]], seeds=[0], forecast_dates=["card"])
    experiment = Experiment.from_yaml(path)
    first = experiment.run_sync(tmp_path / "ray", fsync=False, executor=RayExecutor())
    branching = next(r for r in first if r.method == "branching")
    file = tmp_path / "ray" / branching.trace
    kill_job(tmp_path / "ray", file, keep=len(file.read_bytes().splitlines()) // 2)
    again = experiment.run_sync(tmp_path / "ray", fsync=False, executor=RayExecutor())
    resumed = next(r for r in again if r.method == "branching")
    assert resumed.status == "complete"
    assert resumed.canonical_hash == branching.canonical_hash
    assert read_trace(file).first("run_resumed") is not None


def test_ray_workers_share_the_study_connection_limit(tmp_path: Path, local_ray: None) -> None:
    # replies slow enough that the jobs' calls overlap even on a loaded machine
    with StubServer(seed=2, latency_s=0.1) as server:
        env = {"STUB_BASE_URL": server.base_url, "STUB_API_KEY": "k"}
        experiment = Experiment.from_yaml(stub_manifest(tmp_path, max_connections=2), environ=env)
        rows = experiment.run_sync(
            tmp_path / "study", fsync=False, cache_dir=tmp_path / "cache", executor=RayExecutor()
        )
        assert all(r.status == "complete" for r in rows)
        # two workers, each running jobs with several agents: only the governor holds them to 2
        assert server.max_concurrency == 2
    local = Experiment.from_yaml(stub_manifest(tmp_path, max_connections=2), environ=env)
    again = local.run_sync(tmp_path / "local", fsync=False, cache_dir=tmp_path / "cache")
    assert [r.canonical_hash for r in again] == [r.canonical_hash for r in rows]


def test_ray_workers_share_the_study_budget(tmp_path: Path, local_ray: None) -> None:
    cap = 0.5
    with StubServer(seed=3) as server:
        env = {"STUB_BASE_URL": server.base_url, "STUB_API_KEY": "stub-key"}
        path = priced_manifest(tmp_path, cap, FAST.model_dump())
        experiment = Experiment.from_yaml(path, environ=env)
        rows = experiment.run_sync(
            tmp_path / "study", fsync=False, cache_dir=tmp_path / "cache", executor=RayExecutor()
        )
        complete = [r for r in rows if r.status == "complete"]
        # each run alone could spend the whole cap; together, on two workers, they stay under it
        assert 0 < len(complete) < len(rows)
        assert sum(r.cost_usd for r in rows) <= cap
        assert all("budget" in (r.error or "") for r in rows if r.status != "complete")
        # a failed job's message names the study folder, not the worker's temporary one
        assert not any("worldsim-job-" in (r.error or "") for r in rows)


def test_without_ray_installed_the_executor_says_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    path = write_manifest(tmp_path, forecast_dates=["card"])
    with pytest.raises(ConfigError, match=r"pip install 'worldsim\[ray\]'"):
        Experiment.from_yaml(path).run_sync(tmp_path / "out", executor=RayExecutor())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--executor", "dask"], "--executor must be local or ray"),
        (["--ray-address", "auto"], "--ray-address needs --executor ray"),
    ],
)
def test_batch_refuses_an_unknown_executor(tmp_path: Path, args: list[str], message: str) -> None:
    path = write_manifest(tmp_path, forecast_dates=["card"])
    proc = subprocess.run(
        [*WORLDSIM, "batch", str(path), "--out", str(tmp_path / "out"), *args],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


def test_a_lie_on_one_worker_stops_the_route_on_every_worker(
    tmp_path: Path, local_ray: None
) -> None:
    from tests.study.test_lying_provider import JOBS, LIE, check_stopped_on_route

    path = on_route_and_offline(tmp_path, JOBS, None)
    with StubServer(seed=3, content_by_request=True, over_report=LIE, over_report_from=4) as s:
        env = {"STUB_BASE_URL": s.base_url, "STUB_API_KEY": "k"}
        rows = Experiment.from_yaml(path, environ=env).run_sync(
            tmp_path / "study", fsync=False, cache_dir=tmp_path / "cache", executor=RayExecutor()
        )
        assert s.request_count == 5
    check_stopped_on_route(rows, tmp_path / "study")
