"""The live display's content, rendered into a recording terminal with a hand-driven clock:
jobs done / running / failed / total, per-route requests, tokens and cost against the budget,
and the ETA. No timing: the clock is a list the test advances."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from tests.study.conftest import write_manifest
from worldsim.study.jobs import Job, expand_jobs
from worldsim.study.manifest import load_study
from worldsim.study.outputs import PredictionRow, job_plan, row_for
from worldsim.study.progress import StudyProgress
from worldsim.study.runner import run_study


def _text(progress: StudyProgress) -> str:
    console = Console(force_terminal=True, record=True, width=160, color_system=None)
    console.print(progress.render())
    return console.export_text()


def _jobs(manifest: Path) -> list[Job]:
    return expand_jobs(load_study(manifest))


def _finished(job: Job, calls: int, tokens: int, cost: float, status: str) -> PredictionRow:
    row = row_for(job_plan(job), None, 1.0, None)
    return replace(row, calls=calls, tokens=tokens, cost_usd=cost, status=status)  # type: ignore[arg-type]


def test_the_display_counts_jobs_routes_spend_and_eta(manifest: Path) -> None:
    jobs = _jobs(manifest)
    now = [100.0]
    progress = StudyProgress("small-study", total=len(jobs), budget_usd=5, clock=lambda: now[0])
    text = _text(progress)
    assert f"0/{len(jobs)} done" in text and "ETA …" in text
    for job in jobs[:3]:
        progress.job_started(job, "run")
    now[0] += 30.0
    progress.job_finished(_finished(jobs[0], 4, 1200, 0.25, "complete"), 3, len(jobs))
    now[0] += 30.0
    progress.job_finished(_finished(jobs[1], 2, 300, 0.5, "failed"), 4, len(jobs))
    text = _text(progress)
    # two kept earlier (done started at 3), two finished here in 60 s: one per 30 s, 12 left
    assert f"4/{len(jobs)} done · 1 running · 1 failed" in text
    assert "$0.7500 of $5 budget" in text
    assert "elapsed 1:00 · ETA 6:00" in text
    route = next(line for line in text.splitlines() if line.startswith("offline"))
    assert route.split() == ["offline", "2", "6", "1500", "$0.7500"]
    running = jobs[2]
    assert f"{running.card_id} · {running.method} · {running.date_name} · s{running.seed}" in text


def test_a_job_the_budget_skipped_counts_as_failed_but_asked_nothing(manifest: Path) -> None:
    job = _jobs(manifest)[0]
    progress = StudyProgress("s", total=1, budget_usd=1)
    progress.job_finished(_finished(job, 0, 0, 0.0, "failed"), 1, 1)
    assert progress.failed == 1 and progress.routes == {}
    assert "1/1 done · 0 running · 1 failed" in _text(progress)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 50), st.integers(0, 10**6), st.floats(0, 2), st.booleans()),
        min_size=1,
        max_size=8,
    )
)
def test_the_route_tallies_add_up_to_the_finished_rows(
    finishes: list[tuple[int, int, float, bool]],
) -> None:
    jobs = _jobs(write_manifest(_tmp(), seeds=list(range(8))))
    progress = StudyProgress("s", total=len(jobs))
    rows = []
    for i, (calls, tokens, cost, failed) in enumerate(finishes):
        progress.job_started(jobs[i], "run")
        rows.append(_finished(jobs[i], calls, tokens, cost, "failed" if failed else "complete"))
    for i, row in enumerate(rows):
        progress.job_finished(row, i + 1, len(jobs))
        assert len(progress.running) == len(rows) - i - 1
    tallies = progress.routes.values()
    assert sum(t.requests for t in tallies) == sum(r.calls for r in rows)
    assert sum(t.tokens for t in tallies) == sum(r.tokens for r in rows)
    assert sum(t.jobs for t in tallies) == len(rows)
    assert progress.failed == sum(r.status == "failed" for r in rows)


def _tmp() -> Path:
    import tempfile

    return Path(tempfile.mkdtemp(prefix="worldsim-progress-"))


def test_driven_by_a_real_study_the_display_ends_with_its_rows(
    manifest: Path, tmp_path: Path
) -> None:
    study = load_study(manifest)
    progress = StudyProgress(study.name, total=0)
    result = anyio.run(lambda: run_study(study, tmp_path / "out", observer=progress, fsync=False))
    assert progress.done == progress.total == len(result.rows)
    assert progress.running == {}
    tallies = progress.routes.values()
    assert sum(t.requests for t in tallies) == sum(r.calls for r in result.rows)
    assert sum(t.jobs for t in tallies) == len(result.rows)
    assert f"{len(result.rows)}/{len(result.rows)} done · 0 running · 0 failed" in _text(progress)
