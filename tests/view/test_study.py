"""The study page: a small offline study (2 cards × 2 methods × 1 date × 2 seeds) in headless
Chromium — every job's row, sorting and filtering through the fragment, job pages that exist,
scores equal to ``worldsim score --json``, a tampered trace flagged, two studies paired."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.study.conftest import write_manifest
from tests.support import ROOT
from tests.view.browser import dump_dom, main_text, page_errors
from worldsim.domain.errors import ConfigError
from worldsim.study.experiment import Experiment
from worldsim.view.build import default_output, files_folder, write_study_view, write_views
from worldsim.view.study import paired_data, view_segments

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

LABELS = ROOT / "scenarios" / "labels"
WORLDSIM = [sys.executable, "-c", "from worldsim.cli import main; main()"]


def _study(folder: Path, **changes: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    manifest = write_manifest(folder, forecast_dates=["card"], **changes)
    out = folder / "study"
    Experiment.from_yaml(manifest).run_sync(out, fsync=False)
    return out


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _study(tmp_path_factory.mktemp("study"))


@pytest.fixture(scope="module")
def page(study: Path) -> Path:
    return write_study_view(study, study.parent / "view" / "study.html", labels=LABELS)


def _rows(dom: str) -> list[str]:
    return re.findall(r'<tr data-job="([^"]+)"', dom)


def _jobs(study: Path) -> list[dict[str, object]]:
    lines = (study / "predictions.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_every_job_has_a_row_and_a_page_that_exists(study: Path, page: Path) -> None:
    dom = dump_dom(page)
    assert page_errors(dom) == ""
    jobs = _jobs(study)
    assert len(jobs) == 8
    expected = [f"{j['card_id']}|{j['method']}|{j['forecast_date']}|{j['seed']}" for j in jobs]
    assert _rows(dom) == expected
    links = re.findall(r'<a class="job-link" href="([^"]+)"', dom)
    assert len(links) == 8
    for href in links:
        target = page.parent / unquote(href)
        assert target.is_file() and files_folder(page) in target.parents
        assert "matches the study's job log" in target.read_text()
    assert dom.count('data-check="ok"') == 8


def test_the_fragment_filters_and_sorts_the_rows(study: Path, page: Path) -> None:
    jobs = _jobs(study)
    dom = dump_dom(page, "method=branching&card=merger-review&sort=p_yes&dir=desc")
    assert page_errors(dom) == ""
    chosen = [j for j in jobs if j["method"] == "branching" and j["card_id"] == "merger-review"]
    chosen.sort(key=lambda j: -float(j["p_yes"]))  # type: ignore[arg-type]
    assert _rows(dom) == [f"{j['card_id']}|branching|card|{j['seed']}" for j in chosen]
    assert "2 of 8 jobs" in main_text(dom)
    dom = dump_dom(page, "sort=seed&dir=asc&method=direct")
    assert [r.split("|")[3] for r in _rows(dom)] == ["0", "0", "1", "1"]
    assert {r.split("|")[1] for r in _rows(dom)} == {"direct"}


def test_the_scores_are_those_of_worldsim_score(study: Path, page: Path, tmp_path: Path) -> None:
    report = tmp_path / "score.json"
    args = ["--labels", str(LABELS), "--compare", "branching:direct", "--json", str(report)]
    subprocess.run(
        [*WORLDSIM, "score", str(study), *args],
        check=True,
        capture_output=True,
        timeout=300,
    )
    expected = json.loads(report.read_text())
    data = json.loads(
        re.search(
            r'<script type="application/json" id="data">(.*?)</script>', page.read_text()
        ).group(1)  # type: ignore[union-attr]
    )
    scores = data["scores"]
    assert scores["methods"] == expected["methods"]
    assert scores["comparisons"] == expected["comparisons"]
    assert scores["calibration"] == expected["calibration"]
    dom = dump_dom(page)
    text = main_text(dom)
    for name, m in expected["methods"].items():
        assert f"{name} {m['n']} {m['brier']:.4f} {m['log']:.4f}" in text
    (comparison,) = expected["comparisons"]
    lo, hi = comparison["bootstrap"]["ci"]
    assert f"{comparison['mean_delta']:.4f} {lo:.4f} {hi:.4f}" in text
    assert 'id="forest"' in dom and 'id="reliability"' in dom
    assert dom.count('class="study-table"') == 3


def test_a_tampered_trace_is_flagged_and_left_out(study: Path, tmp_path: Path) -> None:
    copy = tmp_path / "study"
    shutil.copytree(study, copy)
    jobs = _jobs(copy)
    trace = copy / str(jobs[0]["trace"])
    lines = trace.read_bytes().splitlines(keepends=True)
    digit = re.search(rb"\d", lines[1])
    assert digit is not None
    changed = b"1" if digit.group() != b"1" else b"2"
    lines[1] = lines[1][: digit.start()] + changed + lines[1][digit.end() :]  # line 2 breaks
    trace.write_bytes(b"".join(lines))
    appended = copy / str(jobs[2]["trace"])  # sound, but no longer the lock's head
    appended.write_bytes(b"".join(appended.read_bytes().splitlines(keepends=True)[:-1]))
    out = write_study_view(copy, tmp_path / "tampered.html", labels=LABELS)
    dom = dump_dom(out)
    assert page_errors(dom) == ""
    checks = dict(re.findall(r'<tr data-job="([^"]+)" data-check="([a-z]+)"', dom))
    key = lambda j: f"{j['card_id']}|{j['method']}|{j['forecast_date']}|{j['seed']}"  # noqa: E731
    assert checks.pop(key(jobs[0])) == "invalid"
    assert checks.pop(key(jobs[2])) == "anchor"
    assert set(checks.values()) == {"ok"}
    assert 'data-status="flagged"' in dom and "2 flagged" in dom
    pages = [p.relative_to(files_folder(out)) for p in files_folder(out).rglob("*.html")]
    assert len(pages) == 7  # the trace that does not verify has none
    assert Path(*view_segments(jobs[0])) not in pages
    data = json.loads(
        re.search(r'id="data">(.*?)</script>', out.read_text()).group(1)  # type: ignore[union-attr]
    )
    assert data["scores"]["coverage"]["n_predictions"] == 6
    assert data["scores"]["tables"] is None


def test_two_studies_show_paired_differences(study: Path, tmp_path: Path) -> None:
    other = _study(tmp_path / "b", seeds=[1, 2])
    out, _ = write_views([study, other], tmp_path / "pair.html")
    dom = dump_dom(out)
    assert page_errors(dom) == ""
    a = {(j["card_id"], j["method"], j["seed"]): j["p_yes"] for j in _jobs(study)}
    b = {(j["card_id"], j["method"], j["seed"]): j["p_yes"] for j in _jobs(other)}
    both = sorted(a.keys() & b.keys())
    assert len(both) == 4  # seed 1 only
    rows = re.findall(r'<tr data-pair="([^"]+)">.*?<td class="num diff">([^<]+)</td>', dom)
    assert sorted(r for r, _ in rows) == sorted(f"{c}|{m}|card|{s}" for c, m, s in both)
    for pair, diff in rows:
        card, method, _, seed = pair.split("|")
        k = (card, method, int(seed))
        assert diff == f"{b[k] - a[k]:.4f}"  # type: ignore[operator]
    assert "4 jobs paired" in dom and "4 only in A, 4 only in B" in dom


def test_bad_study_inputs_are_refused(study: Path, tmp_path: Path, demo_trace: Path) -> None:
    with pytest.raises(ConfigError, match=r"no experiment\.lock\.json"):
        write_views([tmp_path], None)
    with pytest.raises(ConfigError, match="not one of each"):
        write_views([study, demo_trace], None)
    with pytest.raises(ConfigError, match="--labels applies to a study"):
        write_views([demo_trace], tmp_path / "x.html", labels=LABELS)
    missing = tmp_path / "nolabels"
    proc = subprocess.run(
        [*WORLDSIM, "view", str(study), "-o", str(tmp_path / "s.html"), "--labels", str(missing)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert not (tmp_path / "s.html").exists() and not files_folder(tmp_path / "s.html").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_trace_path_outside_traces_is_refused() -> None:
    with pytest.raises(ConfigError, match="not under traces/"):
        view_segments({"trace": "traces/../../etc/x.jsonl"})
    assert view_segments({"trace": "traces/c/m/card__s0.jsonl"}) == ["c", "m", "card__s0.html"]


_JOB = st.fixed_dictionaries(
    {
        "card_id": st.sampled_from(["c1", "c2"]),
        "method": st.sampled_from(["m1", "m2"]),
        "forecast_date": st.sampled_from(["card", "mid"]),
        "seed": st.integers(0, 2),
        "p_yes": st.one_of(st.none(), st.floats(0, 1)),
        "check": st.sampled_from(["ok", "ok", "anchor", "invalid"]),
    }
)


@given(st.lists(_JOB, max_size=12), st.lists(_JOB, max_size=12))
def test_pairs_are_the_checked_jobs_both_studies_hold(
    a: list[dict[str, object]], b: list[dict[str, object]]
) -> None:
    def keyed(jobs: list[dict[str, object]]) -> dict[tuple[object, ...], dict[str, object]]:
        return {(j["card_id"], j["method"], j["forecast_date"], j["seed"]): j for j in jobs}

    ka, kb = keyed(a), keyed(b)
    data = paired_data((Path("a"), list(ka.values())), (Path("b"), list(kb.values())))
    good = {
        k
        for k in ka.keys() & kb.keys()
        if all(x[k]["check"] == "ok" and x[k]["p_yes"] is not None for x in (ka, kb))
    }
    got = {(p["card_id"], p["method"], p["forecast_date"], p["seed"]): p for p in data["pairs"]}
    assert set(got) == good
    for k, p in got.items():
        assert p["diff"] == pytest.approx(kb[k]["p_yes"] - ka[k]["p_yes"])  # type: ignore[operator]
    assert data["unpaired"] == {"a": len(ka.keys() - kb.keys()), "b": len(kb.keys() - ka.keys())}
    assert data["excluded"] + len(good) == len(ka.keys() & kb.keys())
    assert sum(c["n"] for c in data["cards"]) == len(good)


def test_the_default_page_is_named_after_the_folder(
    study: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert default_output([study]) == study.with_name("study.html")
    monkeypatch.chdir(study)
    assert default_output([Path(".")]) == study.with_name("study.html")
    # a folder named as given is kept as given: relative stays relative, as for a trace
    monkeypatch.chdir(study.parent)
    assert default_output([Path(study.name)]) == Path("study.html")
    monkeypatch.chdir(study / "traces")
    assert default_output([Path("..")]) == study.with_name("study.html")


def test_score_and_view_check_each_job_alike(study: Path, tmp_path: Path) -> None:
    """``score`` and ``view`` check a study's jobs through one function: on a study whose log
    and traces were damaged in three ways, each job gets the same state and row from both."""
    from worldsim.study.folder import check_jobs as score_checks
    from worldsim.study.folder import open_study, read_verified
    from worldsim.trace.reader import trace_head
    from worldsim.view.study import check_jobs as view_checks

    copy = tmp_path / "study"
    shutil.copytree(study, copy)
    log = copy / "jobs.jsonl"
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    cut = copy / logged[1]["trace"]  # cut before its end, the log given the cut head
    cut.write_bytes(b"".join(cut.read_bytes().splitlines(keepends=True)[:-2]))
    logged[1]["head"] = trace_head(cut)
    logged[2].update(status="failed", error="killed")  # the log says failed; the trace is whole
    failed = copy / logged[4]["trace"]  # a run that failed part way: its log says so
    failed.write_bytes(b"".join(failed.read_bytes().splitlines(keepends=True)[:5]))
    logged[4].update(status="failed", error="killed", head=trace_head(failed))
    missing = copy / logged[3]["trace"]
    missing.unlink()
    log.write_text("".join(json.dumps(d) + "\n" for d in logged))
    folder = open_study(copy)
    assert folder is not None
    by_score = list(score_checks(folder, read_verified))
    by_view = list(view_checks(folder))
    assert [(c.state, c.row, c.verified) for c in by_score] == [
        (c.state, c.row, c.verified) for c in by_view
    ]
    states = {c.row.trace: c.state for c in by_view}
    assert states.pop(logged[1]["trace"]) == "invalid"
    assert states.pop(logged[2]["trace"]) == "invalid"
    assert states.pop(logged[3]["trace"]) == "absent"
    assert states.pop(logged[4]["trace"]) == "failed"
    assert set(states.values()) == {"ok"}
    notes = {c.row.trace: c.note for c in by_view}
    assert notes[logged[1]["trace"]].startswith("the job log says complete; ")
    assert notes[logged[2]["trace"]] == "the job log says failed; its trace is complete"
    ended = next(c for c in by_view if c.state == "failed")
    assert ended.verified and ended.read is not None  # its page can still be shown
    assert ended.row.status == "failed" and ended.row.p_yes is None
