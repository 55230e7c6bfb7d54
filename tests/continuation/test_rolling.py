"""Rolling studies: a method with ``rolling: true`` chains its forecast dates in time order per
(card, method, seed), each job continuing the one before it; ``score`` sets it beside the same
method restarted at every date."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.study.conftest import write_manifest
from tests.support import ROOT, invoke, kill_job
from worldsim.domain.errors import ConfigError
from worldsim.study.experiment import Experiment
from worldsim.study.manifest import load_study
from worldsim.study.outputs import read_lock
from worldsim.trace.reader import read_trace

CARD = str(ROOT / "scenarios" / "harbour-toll.yaml")
LABELS = ROOT / "scenarios" / "labels"
METHODS: list[dict[str, Any]] = [
    {"label": "restart", "run": {"policy": "branching", "model": "offline", "ticks": 6}},
    {
        "label": "rolling",
        "rolling": True,
        "run": {"policy": "branching", "model": "offline", "ticks": 6},
    },
]


def _study(folder: Path) -> Path:
    return write_manifest(
        folder, cards=[CARD], seeds=[0], forecast_dates=["late", "early", "mid"], methods=METHODS
    )


@pytest.fixture(scope="module")
def rolled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("rolling")
    out = folder / "study"
    rows = Experiment.from_yaml(_study(folder)).run_sync(out, fsync=False)
    assert [r.status for r in rows] == ["complete"] * 6
    return out


def _parent_of(trace: Path) -> str | None:
    ref = read_trace(trace).started.parent
    return None if ref is None else Path(ref.path).name


def test_a_rolling_method_chains_its_dates_in_time_order(rolled: Path) -> None:
    traces = rolled / "traces" / "harbour-toll"
    assert _parent_of(traces / "rolling" / "early__s0.jsonl") is None
    assert _parent_of(traces / "rolling" / "mid__s0.jsonl") == "early__s0.jsonl"
    assert _parent_of(traces / "rolling" / "late__s0.jsonl") == "mid__s0.jsonl"
    for date in ("early", "mid", "late"):
        assert _parent_of(traces / "restart" / f"{date}__s0.jsonl") is None
    lock = read_lock(rolled)
    assert lock is not None
    links = {j["trace"]: j.get("continues") for j in lock["jobs"]}
    assert links["traces/harbour-toll/rolling/late__s0.jsonl"].endswith("rolling/mid__s0.jsonl")
    assert links["traces/harbour-toll/restart/late__s0.jsonl"] is None


def test_every_link_verifies_against_the_one_before(rolled: Path) -> None:
    traces = rolled / "traces" / "harbour-toll" / "rolling"
    for later, earlier in (("mid", "early"), ("late", "mid")):
        done = invoke(
            "verify", traces / f"{later}__s0.jsonl", "--parent", traces / f"{earlier}__s0.jsonl"
        )
        assert done.code == 0, done.err


def test_score_sets_rolling_beside_restart_at_each_date(rolled: Path, tmp_path: Path) -> None:
    out = tmp_path / "score.json"
    pair = ("--compare", "restart:rolling")
    scored = invoke("score", rolled, "--labels", LABELS, *pair, "--json", out)
    assert scored.code == 0, scored.err
    doc = json.loads(out.read_text())
    (tables,) = doc["studies"].values()
    by_date = tables["brier_by_date"]
    assert set(by_date) == {"restart", "rolling"}
    assert set(by_date["rolling"]) == set(by_date["restart"]) == {"early", "mid", "late"}
    # the first link of the chain is the same run as the restart at that date
    assert by_date["rolling"]["early"] == pytest.approx(by_date["restart"]["early"], abs=1e-12)
    assert "Brier by forecast date" in scored.out


def test_a_rerun_resumes_mid_chain(rolled: Path, tmp_path: Path) -> None:
    import shutil

    study = tmp_path / "study"
    shutil.copytree(rolled, study)
    late = study / "traces" / "harbour-toll" / "rolling" / "late__s0.jsonl"
    late.unlink()
    manifest = _study(tmp_path)
    result = Experiment.from_yaml(manifest).run_sync(study, fsync=False)
    assert all(r.status == "complete" for r in result)
    assert _parent_of(late) == "mid__s0.jsonl"
    lines = (study / "jobs.jsonl").read_text().splitlines()
    assert sum("late__s0" in line and "rolling" in line for line in lines) == 2


def test_a_forecast_method_cannot_be_rolling(tmp_path: Path) -> None:
    path = write_manifest(
        tmp_path, methods=[{"label": "direct", "forecast": {"model": "offline"}, "rolling": True}]
    )
    with pytest.raises(ConfigError, match="rolling"):
        load_study(path)


def test_a_rolling_study_on_ray_writes_the_traces_the_local_executor_writes(
    rolled: Path, tmp_path: Path
) -> None:
    ray = pytest.importorskip("ray")
    from worldsim.study.ray_executor import RayExecutor
    from worldsim.trace.verify import canonical_hash

    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
    )
    try:
        rows = Experiment.from_yaml(_study(tmp_path)).run_sync(
            tmp_path / "ray", fsync=False, executor=RayExecutor()
        )
    finally:
        ray.shutdown()
    assert [r.status for r in rows] == ["complete"] * 6
    for row in rows:  # the same runs, chained the same way, whichever executor ran them
        here, there = read_trace(tmp_path / "ray" / row.trace), read_trace(rolled / row.trace)
        assert canonical_hash(here) == canonical_hash(there)


def test_a_rerun_resumes_a_continued_job_cut_after_its_reweighting(
    rolled: Path, tmp_path: Path
) -> None:
    import shutil

    from worldsim.trace.verify import canonical_hash

    study = tmp_path / "study"
    shutil.copytree(rolled, study)
    late = study / "traces" / "harbour-toll" / "rolling" / "late__s0.jsonl"
    whole = read_trace(late)
    weighed = whole.first("reweighting")
    assert weighed is not None
    kill_job(study, late, keep=weighed.number + 6)  # cut a few records after it
    result = Experiment.from_yaml(_study(tmp_path)).run_sync(study, fsync=False)
    assert all(r.status == "complete" for r in result)
    resumed = read_trace(late)
    assert resumed.first("run_resumed") is not None  # resumed, not started again
    assert canonical_hash(resumed) == canonical_hash(whole)
