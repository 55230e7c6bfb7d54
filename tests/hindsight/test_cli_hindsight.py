"""``worldsim hindsight`` commands through the command line."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.hindsight.conftest import HINDSIGHT
from tests.support import ROOT, invoke
from worldsim.cli import app
from worldsim.scoring.hindsight import extract_forecast, simulated_pressure, source_precision
from worldsim.scoring.hindsight.graph import load_hindsight
from worldsim.scoring.hindsight.ker import key_event_recall
from worldsim.scoring.hindsight.pressure import PRESSURE_TYPES
from worldsim.trace.verify import trace_records

runner = CliRunner()


def test_ker_json_contract_on_a_forecast_graph(graph_path: Path, hindsight_path: Path) -> None:
    result = runner.invoke(
        app,
        [
            "hindsight",
            "ker",
            str(graph_path),
            "--hindsight",
            str(hindsight_path),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    # Key events: h2 max(0.6·0.5, 0.9·0.9) = 0.81, h1 0.4·0.5 = 0.2; h3 is the outcome.
    assert data["key_events"] == ["h2", "h1"]
    pairs = {(m["hindsight"], m["forecast"]) for m in data["matches"]}
    assert pairs == {("h1", "t0/0/obs/ev1"), ("h2", "t0/0/company-a/0")}
    assert data["ker"] == 1.0
    assert data["mass_weighted_recall"] == pytest.approx(0.6)
    assert data["date_window_days"] == 7.0


def test_ker_date_window_none_and_plain_event_lists(tmp_path: Path, hindsight_path: Path) -> None:
    events = [
        {
            "id": "f1",
            "title": "Company A offers divestment remedies",
            "description": "",
            "date": "2026-04-30",
        }
    ]
    path = tmp_path / "events.json"
    path.write_text(json.dumps(events))
    args = [
        "hindsight",
        "ker",
        str(path),
        "--hindsight",
        str(hindsight_path),
        "--json",
    ]
    windowed = json.loads(runner.invoke(app, args).stdout)
    assert windowed["matches"] == [] and windowed["ker"] == 0.0
    unbounded = json.loads(runner.invoke(app, [*args, "--date-window", "none"]).stdout)
    assert [m["forecast"] for m in unbounded["matches"]] == ["f1"]
    assert unbounded["ker"] == 0.5
    bad = runner.invoke(app, [*args, "--date-window", "soon"])
    assert bad.exit_code == 2 and "field '--date-window'" in bad.output


def test_forecast_graph_ker_and_sources_commands_on_a_trace(
    tmp_path: Path, engine_trace: Path
) -> None:
    graph_file = ROOT / "scenarios" / "hindsight" / "merger-review.json"
    out = tmp_path / "out" / "forecast.json"
    result = runner.invoke(app, ["hindsight", "forecast-graph", str(engine_trace), "-o", str(out)])
    assert result.exit_code == 0, result.output
    graph = extract_forecast(trace_records(engine_trace))
    assert json.loads(out.read_text()) == graph.model_dump(mode="json") and graph.events
    args = [str(engine_trace), "--hindsight", str(graph_file), "--json"]
    ker = runner.invoke(app, ["hindsight", "ker", *args])
    assert ker.exit_code == 0, ker.output
    expected = key_event_recall(load_hindsight(graph_file), list(graph.events))
    assert json.loads(ker.stdout) == json.loads(expected.model_dump_json())
    sources = runner.invoke(app, ["hindsight", "sources", *args])
    assert sources.exit_code == 0, sources.output
    precision = source_precision(trace_records(engine_trace), load_hindsight(graph_file))
    assert json.loads(sources.stdout)["precision"] == precision.precision is not None


def test_bad_inputs_exit_2_with_one_line(
    tmp_path: Path, hindsight_path: Path, trace_path: Path
) -> None:
    unverified = runner.invoke(
        app, ["hindsight", "forecast-graph", str(trace_path), "-o", str(tmp_path / "f.json")]
    )
    assert unverified.exit_code == 1 and "run.jsonl:1:" in unverified.output  # as verify says
    missing = runner.invoke(
        app,
        ["hindsight", "forecast-graph", str(tmp_path / "no.jsonl"), "-o", str(tmp_path / "f.json")],
    )
    assert missing.exit_code == 2 and "trace not found" in missing.output
    assert not (tmp_path / "f.json").exists()
    broken = tmp_path / "g.json"
    broken.write_text(
        json.dumps(
            {
                "events": [{"id": "a", "title": "A"}],
                "edges": [
                    {
                        "source": "a",
                        "target": "b",
                        "relation": "causes",
                        "strength": 1,
                        "confidence": 1,
                    }
                ],
            }
        )
    )
    result = runner.invoke(
        app,
        ["hindsight", "ker", str(tmp_path / "x.json"), "--hindsight", str(broken)],
    )
    assert result.exit_code == 2 and "edges.0.target: unknown event 'b'" in result.output


def test_validate_command_reports_warnings_and_strict_failures(hindsight_path: Path) -> None:
    ok = runner.invoke(app, ["hindsight", "validate", str(hindsight_path), "--json"])
    assert ok.exit_code == 0 and json.loads(ok.stdout)["warnings"]
    strict = runner.invoke(app, ["hindsight", "validate", str(hindsight_path), "--strict"])
    assert (
        strict.exit_code == 2
        and "events: 2 event(s) besides the outcome; at least 10" in strict.output
    )


def test_pressure_writes_chart_and_csv(
    tmp_path: Path, engine_trace: Path, hindsight_path: Path
) -> None:
    market = tmp_path / "market.csv"
    market.write_text("date,price\n2026-03-01,0.55\n2026-03-20,0.62\n")
    out = tmp_path / "chart"
    result = runner.invoke(
        app,
        [
            "hindsight",
            "pressure",
            str(engine_trace),
            "--hindsight",
            str(hindsight_path),
            "--market",
            str(market),
            "-o",
            str(out),
            "--format",
            "svg",
        ],
    )
    assert result.exit_code == 0, result.output
    assert (out / "pressure.svg").read_text().lstrip().startswith("<?xml")
    rows = list(csv.DictReader((out / "pressure.csv").open()))
    simulated = simulated_pressure(trace_records(engine_trace, PRESSURE_TYPES))
    assert [(r["series"], float(r["value"])) for r in rows] == [
        ("causal", pytest.approx(-0.2)),
        ("causal", pytest.approx(0.1)),
        ("causal", pytest.approx(1.1)),
        ("market", 0.55),
        ("market", 0.62),
        *(("simulated", pytest.approx(p.value)) for p in simulated),
    ]
    assert simulated
    png = runner.invoke(
        app, ["hindsight", "pressure", "--hindsight", str(hindsight_path), "-o", str(out)]
    )
    assert png.exit_code == 0 and (out / "pressure.png").read_bytes()[:4] == b"\x89PNG"


def test_pressure_without_matplotlib_fails_cleanly_and_writes_nothing(
    tmp_path: Path, hindsight_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    out = tmp_path / "chart"
    result = runner.invoke(
        app, ["hindsight", "pressure", "--hindsight", str(hindsight_path), "-o", str(out)]
    )
    assert result.exit_code == 2
    assert "worldsim[plots]" in result.output and len(result.output.strip().splitlines()) == 1
    assert not out.exists()


def test_pressure_rejects_a_bad_market_file(tmp_path: Path, hindsight_path: Path) -> None:
    market = tmp_path / "market.csv"
    market.write_text("date,price\n2026-03-01,0.55\n2026-03-02T10:00:00,0.6\n")
    result = runner.invoke(
        app,
        [
            "hindsight",
            "pressure",
            "--hindsight",
            str(hindsight_path),
            "--market",
            str(market),
            "-o",
            str(tmp_path / "chart"),
        ],
    )
    assert result.exit_code == 2 and "market.csv:3: field 'date'" in result.output
    assert not (tmp_path / "chart").exists()


def test_pressure_charts_a_graph_not_built_with_a_note(tmp_path: Path) -> None:
    data = {**HINDSIGHT, "graph_built": False, "failed_gates": ["sources: 3; at least 20"]}
    graph = tmp_path / "g.json"
    graph.write_text(json.dumps(data), encoding="utf-8")
    done = invoke("hindsight", "pressure", "--hindsight", graph, "-o", tmp_path / "chart")
    assert done.code == 0, done.err
    assert done.err.strip() == (
        f"note: {graph}: graph_built: false, so scoring leaves it out "
        "(failed gate: sources: 3; at least 20); charted all the same"
    )
    assert (tmp_path / "chart" / "pressure.csv").is_file()


@pytest.mark.parametrize("price", ["1.5", "-0.1", "nan", "inf"])
def test_pressure_refuses_a_market_price_outside_the_unit_interval(
    tmp_path: Path, hindsight_path: Path, price: str
) -> None:
    market = tmp_path / "m.csv"
    market.write_text(f"date,price\n2026-03-01,0.5\n2026-03-02,{price}\n", encoding="utf-8")
    out = tmp_path / "chart"
    done = invoke(
        "hindsight", "pressure", "--hindsight", hindsight_path, "--market", market, "-o", out
    )
    assert done.code == 2
    assert done.err.strip() == (
        f"error: {market}:3: field 'price': price '{price}' is outside [0, 1]"
    )
    assert not out.exists()
