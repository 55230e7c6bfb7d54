"""A study's score tables with the hindsight axes: KER only where the condition builds the
forecast-time graph, SrcP only where it retrieved, "—" elsewhere; the JSON report and the
accuracy-by-date figure carry the same figures."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.study.conftest import CARDS, write_manifest
from worldsim.scoring.axes import TraceAxes
from worldsim.scoring.labels import load_labels
from worldsim.scoring.study_tables import accuracy_by_date_plot, study_tables
from worldsim.study.experiment import Experiment
from worldsim.study.folder import check_jobs, open_study, read_verified, usable_rows

WORLDSIM = [sys.executable, "-c", "from worldsim.cli import main; main()"]
LABELS = Path(CARDS[0]).parent / "labels"
HINDSIGHT = Path(CARDS[0]).parent / "hindsight"
METHODS = [
    {"label": c, "run": {"policy": "no_branch", "model": "offline", "ticks": 3, "condition": c}}
    for c in ("vanilla", "causal_simulation", "search", "search_graph")
] + [{"label": "direct", "forecast": {"model": "offline"}}]


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("conditions")
    path = write_manifest(
        folder, cards=[CARDS[0]], seeds=[0], forecast_dates=["card", "mid"], methods=METHODS
    )
    out = folder / "study"
    rows = Experiment.from_yaml(path).run_sync(out, fsync=False)
    assert all(r.status == "complete" for r in rows)
    return out


def _rows(study: Path) -> list[dict[str, object]]:
    """The study's jobs as the tables take them: from their verified traces."""
    folder = open_study(study)
    assert folder is not None
    return usable_rows(folder, list(check_jobs(folder, read_verified)))


def _axes(source: Path, ker: float, srcp: float) -> TraceAxes:
    return TraceAxes(str(source), None, ker, ker, 4, 2, srcp, 3, 2)


def test_each_axis_is_kept_only_where_the_condition_defines_it(study: Path) -> None:
    # every trace is given both figures: the tables must drop those the condition lacks
    rows = _rows(study)
    axes = {Path(str(r["trace"])): _axes(Path(str(r["trace"])), 0.5, 0.25) for r in rows}
    tables = study_tables(rows, load_labels(LABELS), axes)
    by_condition = tables.axes_by("condition")
    defined = {name: (m.ker is not None, m.srcp is not None) for name, m in by_condition.items()}
    assert defined == {
        "vanilla": (False, False),
        "causal_simulation": (True, False),
        "search": (False, True),
        "search_graph": (True, True),
        "direct": (False, False),
    }
    assert by_condition["search_graph"].ker == pytest.approx(0.5)
    assert by_condition["search_graph"].ker_n == 2  # two dates: two units
    by_date = tables.axes_by("forecast_date")
    # a date pools the units that define each axis: two graph and two retrieval conditions
    assert by_date["mid"].ker_n == 2 and by_date["mid"].srcp_n == 2
    doc = tables.to_json()
    assert doc["by_condition"]["vanilla"]["ker"] is None
    assert doc["by_condition"]["search"]["srcp"] == pytest.approx(0.25)


def test_without_hindsight_the_tables_have_no_axes(study: Path) -> None:
    tables = study_tables(_rows(study), load_labels(LABELS))
    assert not tables.hindsight
    assert "ker" not in tables.to_json()["by_condition"]["search_graph"]
    assert all(m.ker is None and m.srcp is None for m in tables.axes_by("method").values())


def test_the_accuracy_curve_file_holds_each_method_at_each_date(study: Path) -> None:
    pytest.importorskip("matplotlib")
    tables = study_tables(_rows(study), load_labels(LABELS))
    files = accuracy_by_date_plot(tables)
    assert files["accuracy_by_date.png"].startswith(b"\x89PNG")
    rows = list(csv.DictReader(io.StringIO(files["accuracy_by_date.csv"].decode())))
    assert {(r["method"], r["forecast_date"]) for r in rows} == {
        (m["label"], d) for m in METHODS for d in ("card", "mid")
    }
    curves = tables.accuracy_by_date()
    for r in rows:
        assert float(r["accuracy"]) == curves[r["method"]][r["forecast_date"]]


def test_score_with_hindsight_prints_and_writes_the_condition_table(
    study: Path, tmp_path: Path
) -> None:
    report = tmp_path / "score.json"
    proc = subprocess.run(
        [
            *WORLDSIM,
            "score",
            str(study),
            "--labels",
            str(LABELS),
            "--hindsight",
            str(HINDSIGHT),
            "--bootstrap",
            "50",
            "--json",
            str(report),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert proc.returncode == 0, proc.stderr
    section = proc.stdout[proc.stdout.index("per condition") :]
    header = section.splitlines()[2]
    assert "KER" in header and "SrcP" in header
    vanilla = next(line for line in section.splitlines() if "vanilla" in line)
    assert vanilla.count("—") == 2
    table = json.loads(report.read_text())["studies"][str(study)]["by_condition"]
    assert table["vanilla"]["ker"] is None and table["vanilla"]["srcp"] is None
    assert table["causal_simulation"]["ker"] is not None
    assert table["causal_simulation"]["srcp"] is None
    assert table["search_graph"]["ker"] is not None and table["search_graph"]["srcp"] is not None
