"""Interventions: a method's "what if" changes to the world, recorded in the trace, shown by
replay, and measured by `score --effect` as a paired difference in p_yes, with no labels."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from tests.support import DEMO_CARD, ROOT, invoke
from worldsim.domain.cards import load_card
from worldsim.domain.config import RunConfig
from worldsim.domain.errors import ConfigError
from worldsim.domain.policy import load_policy
from worldsim.scoring.effects import paired_effect
from worldsim.sim.session import run_card
from worldsim.trace.reader import read_trace
from worldsim.trace.replay import TickStep, replay_steps
from worldsim.trace.verify import verify_trace

SHOCK = {
    "id": "veto",
    "kind": "event",
    "at": "2027-02-20T00:00:00Z",
    "title": "The minister announces a veto",
    "pressure": -0.9,
}


def _config(*interventions: dict[str, Any]) -> RunConfig:
    return RunConfig.from_dict(
        {
            "card": load_card(DEMO_CARD),
            "policy": load_policy("no_branch"),
            "seed": 1,
            "ticks": 4,
            "interventions": list(interventions),
        }
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"at": "2026-01-01T00:00:00Z"}, "outside the run"),
        ({"kind": "hypothesis", "hypothesis": "nonesuch", "pressure": 0}, "no hypothesis 'non"),
        ({"title": None}, "an event needs a title"),
        ({"kind": "variable", "variable": "tariff_rate", "pressure": 0}, "`variable` and `value`"),
        # a field the kind does not read was ignored, yet named another run
        ({"kind": "hypothesis", "hypothesis": "remedies"}, "a hypothesis takes no `pressure`"),
        ({"kind": "variable", "variable": "x", "value": 1}, "a variable takes no `pressure`"),
        ({"value": 2}, "an event takes no `value`"),
        ({"kind": "variable", "variable": "x", "value": float("inf"), "pressure": 0}, "not a fin"),
        ({"kind": "variable", "variable": "x", "value": [1, 2], "pressure": 0}, "not a list"),
        ({"pressure": {"deadline_extended": 0.5}}, "'deadline_extended', which is not a scored"),
        ({"pressure": {"ghost": 0.5}}, "pushes 'ghost', which is not a scored endpoint"),
        ({"pressure": {"cleared": 100.0}}, "pressure 100.0 on 'cleared' is outside ±50"),
        ({"pressure": -1e9}, "outside ±50"),
    ],
)
def test_a_bad_intervention_is_refused_before_the_run(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as bad:
        _config({**SHOCK, **change})
    assert bad.value.field is not None and bad.value.field.startswith("interventions.0")
    with pytest.raises(ConfigError, match="given twice") as twice:
        _config(SHOCK, SHOCK)
    assert twice.value.field == "interventions.1"


def test_an_event_intervention_is_recorded_and_reaches_the_world(tmp_path: Path) -> None:
    forced = {
        "id": "forced",
        "kind": "hypothesis",
        "at": "2027-02-01T00:00:00Z",
        "hypothesis": "remedies_accepted",
    }
    result = anyio.run(lambda: run_card(_config(SHOCK, forced), tmp_path, fsync=False))
    trace = read_trace(result.trace)
    records = [line.data for line in trace.of_type("intervention")]
    assert [(r.id, r.applied, r.tick) for r in records] == [("veto", True, 2), ("forced", True, 1)]
    assert records[1].pressure == [("cleared", 1.6)] and records[1].title.endswith("(forced)")
    delivered = {
        (line.tick, obs["id"])
        for line in trace.of_type("tick_started")
        for obs in line.fields.get("observations") or ()
    }
    assert {(2, "intervention:veto"), (1, "intervention:forced")} <= delivered
    assert verify_trace(result.trace).exit_code == 0
    shown = invoke("replay", result.trace)
    assert shown.code == 0 and "intervention veto (event)" in shown.out


def test_a_variable_intervention_sets_the_variable_from_its_tick_on(tmp_path: Path) -> None:
    setting = {
        "id": "rate",
        "kind": "variable",
        "at": "2027-02-01T00:00:00Z",
        "variable": "review_phase",
        "value": "phase 2",
    }
    result = anyio.run(lambda: run_card(_config(setting), tmp_path, fsync=False))
    trace = read_trace(result.trace)
    (record,) = [line.data for line in trace.of_type("intervention")]
    assert (record.applied, record.tick, record.variable, record.value) == (
        True,
        1,
        "review_phase",
        "phase 2",
    )
    assert record.title == "review_phase set to phase 2"
    steps = [s for s in replay_steps(trace) if isinstance(s, TickStep)]
    seen = {step.tick: step.state.variables.get("review_phase") for step in steps}
    assert seen == {0: None, 1: "phase 2", 2: "phase 2", 3: "phase 2"}
    assert verify_trace(result.trace).exit_code == 0
    shown = invoke("replay", result.trace, "--tick", "1")
    assert shown.code == 0 and "set    review_phase = 'phase 2'" in shown.out


def test_a_study_measures_the_intervention_without_labels(tmp_path: Path) -> None:
    cards = [str(ROOT / "scenarios" / f"{c}.yaml") for c in ("merger-review", "central-bank-march")]
    run = {"policy": "no_branch", "ticks": 4, "model": "offline"}
    manifest = tmp_path / "study.yaml"
    manifest.write_text(
        yaml.safe_dump(
            {
                "name": "what-if",
                "cards": cards,
                "seeds": [0, 1, 2],
                "methods": [
                    {"label": "control", "run": run},
                    {"label": "veto", "run": {**run, "interventions": [SHOCK]}},
                ],
            }
        ),
        encoding="utf-8",
    )
    study = tmp_path / "study"
    assert invoke("batch", manifest, "--out", study).code == 0
    report = tmp_path / "effects.json"
    done = invoke("score", study, "--effect", "control:veto", "--json", report)
    assert done.code == 0, done.err
    assert "paired effect on p_yes" in done.out
    (effect,) = json.loads(report.read_text(encoding="utf-8"))["effects"]
    assert effect["n_pairs"] == 6
    assert effect["low"] <= effect["mean_diff"] <= effect["high"] < 0  # a veto lowers p_yes
    assert (effect["n_resamples"], effect["seed"]) == (10_000, 0)  # score's one default
    told = tmp_path / "told.json"
    again = invoke(
        "score", study, "--effect", "control:veto", "--bootstrap", "10000", "--json", told
    )
    assert again.code == 0, again.err
    assert json.loads(told.read_text(encoding="utf-8"))["effects"] == [effect]

    assert invoke("score", study, "--effect", "control:nope").code == 2
    bare = invoke("score", study)
    assert bare.code == 2 and "--labels" in bare.err

    # a trace replaced or missing stops the effect, as it stops a scored study
    replaced, other = sorted((study / "traces").rglob("*.jsonl"))[:2]
    shutil.copyfile(other, replaced)
    refused = invoke("score", study, "--effect", "control:veto")
    assert refused.code == 1 and str(replaced) in refused.err and "differs from" in refused.err
    replaced.unlink()
    missing = invoke("score", study, "--effect", "control:veto")
    assert missing.code == 2 and f"{replaced}: trace not found" in missing.err


@given(
    st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=1, max_size=30),
    st.integers(0, 100),
)
def test_the_interval_holds_the_mean(pairs: list[tuple[float, float]], seed: int) -> None:
    rows = []
    for i, (a, b) in enumerate(pairs):
        for method, p in (("a", a), ("b", b)):
            rows.append(
                {
                    "method": method,
                    "status": "complete",
                    "p_yes": p,
                    "card_id": f"c{i}",
                    "forecast_date": "card",
                    "seed": 0,
                }
            )
    effect = paired_effect(rows, "a", "b", n_resamples=200, seed=seed)
    assert effect.n_pairs == len(pairs)
    assert effect.low - 1e-12 <= effect.mean_diff <= effect.high + 1e-12


def test_a_study_refuses_an_intervention_before_a_jobs_forecast_date(tmp_path: Path) -> None:
    """A run from that date is refused it; the study ran the job with it unapplied."""
    manifest = tmp_path / "study.yaml"
    manifest.write_text(
        yaml.safe_dump(
            {
                "name": "late",
                "cards": [str(DEMO_CARD)],
                "forecast_dates": ["card", "late"],  # late: after the veto of 2027-02-20
                "methods": [{"label": "veto", "run": {"ticks": 4, "interventions": [SHOCK]}}],
            }
        ),
        encoding="utf-8",
    )
    study = tmp_path / "study"
    done = invoke("batch", manifest, "--out", study)
    assert done.code == 2 and not study.exists()
    assert f"{manifest}: field 'methods.0.run.interventions.0'" in done.err
    assert "'veto' at 2027-02-20T00:00:00+00:00 is outside the run [2027-03-" in done.err
    assert "(forecast date late of card 'merger-review')" in done.err
