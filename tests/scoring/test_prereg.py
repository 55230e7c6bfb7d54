"""Pre-registration: a lock refuses changed inputs and fixes the analysis it names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.scoring.conftest import Runner, write_csv, write_trace
from tests.support import DEMO_CARD, ROOT, invoke
from worldsim.scoring.prereg import load_prereg
from worldsim.trace.reader import read_trace

TEMPLATE = Path(__file__).resolve().parents[2] / "docs" / "prereg-template.yaml"

PREREG = """\
primary_metric: brier
methods: [direct, branching]
baseline: direct
comparisons: ["direct:branching", "direct:Blend"]
tie_eps: [0.0, 0.05]
bootstrap: {n_resamples: 500, seed: 3, level: 0.9}
blends:
  Blend: {direct: 0.5, branching: 0.5}
extraction_rule: path-ledger/1
"""


@pytest.fixture
def study(tmp_path: Path) -> dict[str, Path]:
    traces = tmp_path / "traces"
    traces.mkdir()
    for card, pd, pb in [("A", 0.6, 0.9), ("B", 0.5, 0.2), ("C", 0.7, 0.6)]:
        write_trace(traces / f"{card}_d.jsonl", card_id=card, method="direct", p_yes=pd)
        write_trace(traces / f"{card}_b.jsonl", card_id=card, method="branching", p_yes=pb)
    prereg = tmp_path / "prereg.yaml"
    prereg.write_text(PREREG)
    labels = write_csv(
        tmp_path / "labels.csv", ["card_id", "outcome"], [("A", "yes"), ("B", "no"), ("C", "no")]
    )
    return {
        "traces": traces,
        "prereg": prereg,
        "labels": labels,
        "lock": tmp_path / "locks" / "prereg.lock.json",
    }


def _lock(run: Runner, s: dict[str, Path]) -> None:
    result = run("prereg", "lock", s["prereg"], "--predictions", s["traces"], "-o", s["lock"])
    assert result.code == 0, result.err


def test_template_is_a_valid_prereg() -> None:
    prereg = load_prereg(TEMPLATE)
    assert prereg.baseline == "direct"
    assert ("direct", "Blend") in prereg.pairs()


def test_lock_records_hashes_of_prereg_and_every_prediction_file(
    run: Runner, study: dict[str, Path]
) -> None:
    _lock(run, study)
    lock = json.loads(study["lock"].read_text())
    assert lock["schema"] == "worldsim.prereg-lock/2"
    assert lock["locked_at"].endswith("Z")
    assert lock["prereg"]["path"] == "../prereg.yaml"
    assert "head" not in lock["prereg"]
    assert len(lock["predictions"]) == 6
    assert all(len(f["sha256"]) == 64 for f in lock["predictions"])
    heads = {f["path"]: f["head"] for f in lock["predictions"]}
    for path, head in heads.items():
        assert head == read_trace(study["lock"].parent / path).head


def test_unchanged_inputs_score_under_the_prereg_and_record_the_lock(
    run: Runner, tmp_path: Path, study: dict[str, Path]
) -> None:
    _lock(run, study)
    out = tmp_path / "s.json"
    result = run(
        "score",
        study["traces"],
        "--labels",
        study["labels"],
        "--prereg",
        study["lock"],
        "--compare",
        "branching:direct",
        "--json",
        out,
    )
    assert result.code == 0, result.err
    doc: dict[str, Any] = json.loads(out.read_text())
    pairs = [(c["baseline"], c["method"]) for c in doc["comparisons"]]
    assert pairs == [("direct", "branching"), ("direct", "Blend"), ("branching", "direct")]
    first = doc["comparisons"][0]
    assert first["bootstrap"]["n_resamples"] == 500
    assert first["bootstrap"]["seed"] == 3
    assert first["bootstrap"]["level"] == 0.9
    assert [s["eps"] for s in first["sign_tests"]] == [0.0, 0.05]
    assert "Blend" in doc["methods"]
    p = doc["prereg"]
    assert p["lock"] == str(study["lock"])
    assert len(p["labels"]) == 1 and len(p["labels"][0]["sha256"]) == 64
    assert "brier:direct" in p["statistics"]
    assert "sign_test:direct:branching@0.05" in p["statistics"]
    assert "brier:direct" not in doc["exploratory"]
    assert "log:direct" in doc["exploratory"]
    assert "bootstrap:branching:direct" in doc["exploratory"]  # not pre-registered
    assert "verified" in result.out


def test_changed_prediction_file_after_lock_is_refused(
    run: Runner, tmp_path: Path, study: dict[str, Path]
) -> None:
    _lock(run, study)
    changed = study["traces"] / "B_b.jsonl"
    write_trace(changed, card_id="B", method="branching", p_yes=0.05)
    out = tmp_path / "s.json"
    result = run(
        "score",
        study["traces"],
        "--labels",
        study["labels"],
        "--prereg",
        study["lock"],
        "--json",
        out,
    )
    assert result.code == 2
    assert str(changed) in result.err and "changed since it was locked" in result.err
    assert not out.exists()


def test_added_prediction_file_after_lock_is_refused(run: Runner, study: dict[str, Path]) -> None:
    _lock(run, study)
    extra = write_trace(study["traces"] / "D_b.jsonl", card_id="D", method="branching", p_yes=0.5)
    result = run("score", study["traces"], "--labels", study["labels"], "--prereg", study["lock"])
    assert result.code == 2
    assert str(extra) in result.err and "not covered by the lock" in result.err


def test_changed_prereg_after_lock_is_refused(run: Runner, study: dict[str, Path]) -> None:
    _lock(run, study)
    study["prereg"].write_text(PREREG.replace("seed: 3", "seed: 4"))
    result = run("score", study["traces"], "--labels", study["labels"], "--prereg", study["lock"])
    assert result.code == 2
    assert "prereg.yaml" in result.err and "prereg changed" in result.err


def test_bootstrap_flags_cannot_override_a_prereg(run: Runner, study: dict[str, Path]) -> None:
    _lock(run, study)
    result = run(
        "score",
        study["traces"],
        "--labels",
        study["labels"],
        "--prereg",
        study["lock"],
        "--seed",
        "9",
    )
    assert result.code == 2
    assert "--seed" in result.err


def test_invalid_prereg_cannot_be_locked(run: Runner, study: dict[str, Path]) -> None:
    study["prereg"].write_text(
        PREREG.replace("{direct: 0.5, branching: 0.5}", "{direct: 0.7, branching: 0.5}")
    )
    result = run(
        "prereg", "lock", study["prereg"], "--predictions", study["traces"], "-o", study["lock"]
    )
    assert result.code == 2
    assert "weights sum to 1.2" in result.err and "prereg.yaml" in result.err
    assert not study["lock"].exists()


def test_a_negative_bootstrap_seed_is_refused_at_lock_and_on_the_command_line(
    run: Runner, study: dict[str, Path]
) -> None:
    study["prereg"].write_text(PREREG.replace("seed: 3", "seed: -7"))
    locked = run(
        "prereg", "lock", study["prereg"], "--predictions", study["traces"], "-o", study["lock"]
    )
    assert locked.code == 2 and "bootstrap.seed" in locked.err and "prereg.yaml" in locked.err
    assert not study["lock"].exists()
    typed = run("score", study["traces"], "--labels", study["labels"], "--seed", "-1")
    assert typed.code == 2 and "--seed" in typed.err and "Traceback" not in typed.err


def test_no_prereg_means_every_statistic_is_exploratory(
    run: Runner, tmp_path: Path, study: dict[str, Path]
) -> None:
    out = tmp_path / "s.json"
    result = run(
        "score",
        study["traces"],
        "--labels",
        study["labels"],
        "--compare",
        "direct:branching",
        "--bootstrap",
        "200",
        "--json",
        out,
    )
    assert result.code == 0, result.err
    doc = json.loads(out.read_text())
    assert doc["prereg"] is None
    assert "brier:direct" in doc["exploratory"]
    assert "sign_test:direct:branching@0.001" in doc["exploratory"]


def test_lock_covers_every_file_in_a_folder_and_takes_several_inputs(
    run: Runner, tmp_path: Path, study: dict[str, Path]
) -> None:
    notes = study["traces"] / "notes.txt"
    notes.write_text("seeds used: 1-3\n")
    extra = write_csv(tmp_path / "extra.csv", ["card_id", "method", "p_yes"], [("A", "x", "0.5")])
    result = run(
        "prereg",
        "lock",
        study["prereg"],
        "--predictions",
        study["traces"],
        extra,
        "-o",
        study["lock"],
    )
    assert result.code == 0, result.err
    paths = [f["path"] for f in json.loads(study["lock"].read_text())["predictions"]]
    assert "../traces/notes.txt" in paths and "../extra.csv" in paths and len(paths) == 8
    notes.write_text("seeds used: 1-4\n")
    refused = run(
        "score", study["traces"], extra, "--labels", study["labels"], "--prereg", study["lock"]
    )
    assert refused.code == 2 and str(notes) in refused.err


@pytest.fixture(scope="module")
def three_methods(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo card forecast by the template's three methods: direct (rule direct/1), and
    no_branch and branching simulations (rule path-ledger/1), offline."""
    traces = tmp_path_factory.mktemp("three") / "traces"
    made = [
        invoke("forecast", DEMO_CARD, "--model", "offline", "--out", traces),
        invoke("run", DEMO_CARD, "--policy", "no_branch", "--ticks", "3", "--out", traces),
        invoke("run", DEMO_CARD, "--policy", "branching", "--ticks", "3", "--out", traces),
    ]
    assert all(m.code == 0 for m in made), [m.err for m in made]
    return traces


def _score_under(prereg: Path, traces: Path, tmp_path: Path) -> tuple[list[str], str]:
    lock = tmp_path / "prereg.lock.json"
    locked = invoke("prereg", "lock", prereg, "--predictions", traces, "-o", lock)
    assert locked.code == 0, locked.err
    out = tmp_path / "s.json"
    labels = ROOT / "scenarios" / "labels"
    scored = invoke("score", traces, "--labels", labels, "--prereg", lock, "--json", out)
    assert scored.code == 0, scored.err
    flagged: list[str] = json.loads(out.read_text())["prereg"]["extraction_rule_mismatches"]
    return flagged, scored.out


def test_the_template_used_as_written_flags_no_extraction_rule(
    three_methods: Path, tmp_path: Path
) -> None:
    flagged, printed = _score_under(TEMPLATE, three_methods, tmp_path)
    assert flagged == []
    assert "another extraction rule" not in printed


def test_simulated_forecasts_under_another_extraction_rule_are_flagged_direct_ones_not(
    three_methods: Path, tmp_path: Path
) -> None:
    prereg = tmp_path / "prereg.yaml"
    prereg.write_text(
        TEMPLATE.read_text().replace(
            "extraction_rule: path-ledger/1", "extraction_rule: candidate-status-mass/1"
        )
    )
    flagged, printed = _score_under(prereg, three_methods, tmp_path)
    assert flagged == [
        "merger-review/branching: path-ledger/1",
        "merger-review/no_branch: path-ledger/1",
    ]
    assert "2 forecast(s) used another extraction rule than candidate-status-mass/1" in printed
