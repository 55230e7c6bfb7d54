"""A study's jobs share one connection limit per route, which adapts to a throttling server
without changing any prediction; its changes are logged in DIR/limits.jsonl."""

from __future__ import annotations

import json
from pathlib import Path

from tests.study.conftest import stub_manifest
from worldsim.study.experiment import Experiment
from worldsim.testing import Faults, StubServer


def test_the_jobs_of_a_study_share_one_limit_per_route(tmp_path: Path) -> None:
    # replies slow enough that the jobs' calls overlap even on a loaded machine
    with StubServer(seed=2, latency_s=0.1) as server:
        env = {"STUB_BASE_URL": server.base_url, "STUB_API_KEY": "k"}
        experiment = Experiment.from_yaml(stub_manifest(tmp_path, max_connections=2), environ=env)
        rows = experiment.run_sync(tmp_path / "study", fsync=False)
        assert all(r.status == "complete" for r in rows)
        # four jobs at once, each with several agents: only the study's limit holds them to 2
        assert server.max_concurrency == 2


def test_a_throttled_study_slows_down_and_predicts_the_same(tmp_path: Path) -> None:
    path = stub_manifest(tmp_path, max_connections=12)
    with StubServer(seed=2, latency_s=0.01, content_by_request=True) as server:
        env = {"STUB_BASE_URL": server.base_url, "STUB_API_KEY": "k"}
        calm = Experiment.from_yaml(path, environ=env).run_sync(
            tmp_path / "calm", fsync=False, cache_dir=tmp_path / "cache-calm"
        )
    faults = Faults(retry_after="0.02")
    with StubServer(
        seed=2,
        latency_s=0.01,
        faults=faults,
        capacity=2,
        capacity_requests=40,
        content_by_request=True,
    ) as server:
        env = {"STUB_BASE_URL": server.base_url, "STUB_API_KEY": "k"}
        busy = Experiment.from_yaml(path, environ=env).run_sync(
            tmp_path / "busy", fsync=False, cache_dir=tmp_path / "cache-busy"
        )
        assert server.fault_counts["rate_limit"] > 0
    assert all(r.status == "complete" for r in busy)
    assert [r.canonical_hash for r in busy] == [r.canonical_hash for r in calm]
    assert [r.p_yes for r in busy] == [r.p_yes for r in calm]
    log = [
        json.loads(line)
        for line in (tmp_path / "busy" / "limits.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert {entry["route"] for entry in log} == {"stub/test-model"}
    # the server's pushes back shrink the limit; on a loaded machine a timeout may shrink it to
    # 1 first, and a push back at 1 changes nothing to log
    assert any(entry["reason"] in ("rate_limit", "timeout") for entry in log)
    assert all(1 <= entry["limit"] <= 12 for entry in log)
