"""A study against a provider that over-reports usage: the job whose reply lied stops with the
anomaly recorded, every other job on that route stops at its next call on it (nothing more is
sent there), and jobs on other routes go on; with or without a cost cap."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.study.conftest import on_route_and_offline
from worldsim.study.experiment import Experiment
from worldsim.study.outputs import PredictionRow
from worldsim.testing import StubServer
from worldsim.trace.reader import read_trace

LIE = 10**7
JOBS = 4


def check_stopped_on_route(rows: list[PredictionRow], folder: Path) -> None:
    """Every job on the stub route failed, resumable, naming the route and the excess; one
    call (the lie) records the anomaly, charged its reservation; the offline jobs completed."""
    on_route = [r for r in rows if r.method == "stub"]
    assert len(on_route) == JOBS and all(r.status == "failed" for r in on_route)
    for row in on_route:
        assert "stub/test-model" in (row.error or "") and "excess $" in (row.error or "")
    assert all(r.status == "complete" for r in rows if r.method == "offline")
    anomalies = []
    for row in on_route:
        trace = read_trace(folder / row.trace)
        assert trace.terminal is not None and trace.terminal.type == "run_failed"
        assert trace.terminal.data.kind == "ProviderAnomaly" and trace.terminal.data.resumable
        anomalies += [c.data for c in trace.of_type("llm_call") if c.data.anomaly is not None]
    assert len(anomalies) == 1 and anomalies[0].anomaly is not None
    assert anomalies[0].cost_usd == pytest.approx(anomalies[0].anomaly.reserved_usd)
    assert sum(r.cost_usd for r in on_route) < 0.05


@pytest.mark.parametrize("cap", [1.0, None], ids=["capped", "uncapped"])
def test_a_lie_in_one_job_stops_every_job_on_its_route(tmp_path: Path, cap: float | None) -> None:
    path = on_route_and_offline(tmp_path, JOBS, cap)
    # one request at a time on the route; the fifth lies, when each of the four jobs on the
    # route has sent one and all of them are running
    with StubServer(seed=3, content_by_request=True, over_report=LIE, over_report_from=4) as s:
        env = {"STUB_BASE_URL": s.base_url, "STUB_API_KEY": "k"}
        rows = Experiment.from_yaml(path, environ=env).run_sync(tmp_path / "study", fsync=False)
        assert s.request_count == 5  # nothing was sent to the route after the lie
    check_stopped_on_route(rows, tmp_path / "study")
