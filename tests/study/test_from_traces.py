"""A study's numbers come from its traces: its predictions tables are derived copies, and an
edit to them changes nothing ``score``, ``view`` or ``export`` shows; a trace that is not the
one the study's job log recorded is named, flagged and left out (``view``) or refused
(``score``, as ``verify --expect-head`` refuses it)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.study.conftest import CARDS, write_manifest
from tests.support import invoke
from worldsim.study.experiment import Experiment
from worldsim.study.journal import read_journal
from worldsim.trace.reader import trace_head

LABELS = Path(CARDS[0]).parent / "labels"


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("from-traces")
    path = write_manifest(folder, seeds=[0, 1], forecast_dates=["card"])
    out = folder / "study"
    rows = Experiment.from_yaml(path).run_sync(out, fsync=False)
    assert all(r.status == "complete" for r in rows)
    return out


def _copy(study: Path, tmp_path: Path) -> Path:
    target = tmp_path / "study"
    shutil.copytree(study, target)
    return target


def _edit_table(study: Path, p_yes: float) -> dict[str, Any]:
    """Set the first job's p_yes in predictions.jsonl; the row as it was."""
    table = study / "predictions.jsonl"
    rows = [json.loads(line) for line in table.read_text().splitlines()]
    first = dict(rows[0])
    rows[0]["p_yes"] = p_yes
    table.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    return first


def _score(study: Path, out: Path) -> dict[str, Any]:
    result = invoke("score", study, "--labels", LABELS, "--json", out)
    assert result.code == 0, result.err
    doc: dict[str, Any] = json.loads(out.read_text())
    return doc


def test_an_edited_predictions_table_changes_no_number_score_shows(
    finished: Path, tmp_path: Path
) -> None:
    study = _copy(finished, tmp_path)
    before = _score(study, tmp_path / "before.json")
    edited = _edit_table(study, 0.999)
    assert edited["p_yes"] != 0.999
    after = _score(study, tmp_path / "after.json")
    assert after["methods"] == before["methods"]
    assert after["studies"] == before["studies"]  # the tables per method, condition and date
    assert after["per_card"] == before["per_card"]
    assert after["unverified_methods"] == []


def test_the_study_page_shows_each_traces_number_and_names_the_edited_table_line(
    finished: Path, tmp_path: Path
) -> None:
    from worldsim.view.build import write_views

    study = _copy(finished, tmp_path)
    edited = _edit_table(study, 0.999)
    out, _ = write_views([study], tmp_path / "study.html", labels=LABELS)
    html = out.read_text()
    start = html.index('<script type="application/json" id="data">') + len(
        '<script type="application/json" id="data">'
    )
    data = json.loads(html[start : html.index("</script>", start)].replace("<\\/", "</"))
    job = next(j for j in data["jobs"] if j["trace"] == edited["trace"])
    assert job["p_yes"] == edited["p_yes"] and job["check"] == "ok"
    (note,) = data["notes"]
    assert "predictions.jsonl:1: p_yes 0.999 differs from its trace's" in note


def test_export_sends_each_traces_number_whatever_the_table_says(
    finished: Path, tmp_path: Path
) -> None:
    study = _copy(finished, tmp_path)
    args = ("export", study, "--method", "direct", "--organization", "lab", "--format", "csv")
    before = invoke(*args, "-o", tmp_path / "before.csv")
    assert before.code == 0, before.err
    _edit_table(study, 0.999)
    after = invoke(*args, "-o", tmp_path / "after.csv")
    assert after.code == 0, after.err
    assert (tmp_path / "before.csv").read_bytes() == (tmp_path / "after.csv").read_bytes()


def test_a_trace_replaced_after_the_study_is_refused_by_score_and_flagged_by_view(
    finished: Path, tmp_path: Path
) -> None:
    from worldsim.view.build import write_views

    study = _copy(finished, tmp_path)
    log = read_journal(study)
    traces = sorted(t for t in log if "/direct/" in t)
    first, second = study / traces[0], study / traces[1]
    shutil.copyfile(second, first)  # a sound trace, of another job
    scored = invoke("score", study, "--labels", LABELS)
    assert scored.code == 1
    assert f"head is {trace_head(first)}, expected {log[traces[0]].head}" in scored.err
    out, _ = write_views([study], tmp_path / "study.html")
    html = out.read_text()
    assert "differs from the job log" in html


def test_two_jobs_traces_swapped_with_their_heads_are_refused_by_score_and_flagged_by_view(
    finished: Path, tmp_path: Path
) -> None:
    """Each trace is sound and has the head its (edited) log line says, but ran the other
    job: its seed is not the one the study planned for that trace."""
    from worldsim.view.build import write_views

    study = _copy(finished, tmp_path)
    log = study / "jobs.jsonl"
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    a, b = sorted(line["trace"] for line in lines if "merger-review/direct/" in line["trace"])
    (study / a).rename(study / "swap")
    (study / b).rename(study / a)
    (study / "swap").rename(study / b)
    heads = {line["trace"]: line["head"] for line in lines}
    for line in lines:
        line["head"] = {a: heads[b], b: heads[a]}.get(line["trace"], line["head"])
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    scored = invoke("score", study, "--labels", LABELS)
    assert scored.code == 1
    assert f"{study / a}: the trace is not its job's: it ran card" in " ".join(scored.err.split())
    assert "seed 1" in scored.err and "seed 0" in scored.err
    args = ("export", study, "--method", "direct", "--organization", "lab", "--format", "csv")
    exported = invoke(*args, "-o", tmp_path / "sub.csv")
    assert exported.code == 1 and "the trace is not its job" in exported.err
    assert not (tmp_path / "sub.csv").exists()
    out, _ = write_views([study], tmp_path / "study.html")
    assert "the trace is not its job" in out.read_text()


def test_the_job_log_records_each_finished_jobs_head_once_per_run(finished: Path) -> None:
    log = read_journal(finished)
    lock = json.loads((finished / "experiment.lock.json").read_text())
    assert sorted(log) == sorted(job["trace"] for job in lock["jobs"])
    for trace, done in log.items():
        assert done.status == "complete" and done.head == trace_head(finished / trace)
    lines = (finished / "jobs.jsonl").read_text().splitlines()
    assert len(lines) == len(log)
