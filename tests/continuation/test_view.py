"""The viewer's data for a continued run: the forecast's path across dates and, on the tree,
which timeline the news re-weighted or pruned."""

from __future__ import annotations

import re
from pathlib import Path

from tests.continuation.test_continue import _Assessor, _continue, _parent
from worldsim.trace.reader import read_trace
from worldsim.view.build import trace_page
from worldsim.view.extract import trace_data, verified


def test_the_view_follows_the_forecast_across_dates(tmp_path: Path) -> None:
    parent = _parent(tmp_path)
    mid = _continue(parent.trace, "2027-02-10")
    late = _continue(mid.trace, "2027-03-20")
    data = trace_data(verified(late.trace))
    cont = data["continuation"]
    assert [step["file"] for step in cont["path"]] == [
        parent.trace.name,
        mid.trace.name,
        late.trace.name,
    ]
    assert [step["p_yes"] for step in cont["path"]] == [parent.p_yes, mid.p_yes, late.p_yes]
    dates = [step["date"] for step in cont["path"]]
    assert dates == sorted(dates) and dates[-1] == "2027-03-20T00:00:00Z"
    particles = {line.tl for line in read_trace(late.trace).lines if line.type == "particle"}
    marked = {t["id"] for t in data["timelines"] if "news" in t}
    assert marked == particles
    assert trace_page(late.trace).data["continuation"] is not None


def test_another_run_of_the_parents_name_is_passed_over_not_refused(tmp_path: Path) -> None:
    """The continued trace copied into a folder where the same card was run again: that run
    is not its parent (another head); the page is written, the path starting at the child. At
    the recorded path the real parent is still found, whatever sits beside the child."""
    parent = _parent(tmp_path / "runs")
    child = _continue(parent.trace)
    alone = tmp_path / "alone"
    alone.mkdir()
    copy = alone / child.trace.name
    copy.write_bytes(child.trace.read_bytes())
    _parent(alone)  # the same run again, beside the copy: another head
    cont = trace_data(verified(copy))["continuation"]
    assert [step["file"] for step in cont["path"]] == [parent.trace.name, copy.name]
    (tmp_path / "runs").rename(tmp_path / "moved")  # the recorded parent is gone
    assert (alone / parent.trace.name).exists()
    cont = trace_data(verified(copy))["continuation"]
    assert [step["file"] for step in cont["path"]] == [copy.name]


def test_the_tree_marks_a_pruned_timeline(tmp_path: Path) -> None:
    parent = _parent(tmp_path, prune_below=0.05)
    child = _continue(parent.trace, model_source=_Assessor({"t0": 1e-4}))
    data = trace_data(verified(child.trace))
    news = {t["id"]: t["news"] for t in data["timelines"] if "news" in t}
    assert news["t0"]["pruned"] and news["t0"]["posterior"] == 0.0
    assert not any(n["pruned"] for tl, n in news.items() if tl != "t0")


def test_a_plain_run_has_no_continuation(tmp_path: Path) -> None:
    parent = _parent(tmp_path)
    data = trace_data(verified(parent.trace))
    assert data["continuation"] is None
    assert not any("news" in t for t in data["timelines"])


def test_a_continued_run_page_shows_its_news_in_a_browser(tmp_path: Path) -> None:
    from tests.view.browser import dump_dom, main_text, page_errors
    from worldsim.view.build import write_view

    parent = _parent(tmp_path)
    child = _continue(parent.trace)
    path = write_view(trace_page(child.trace), tmp_path / "view.html")
    dom = dump_dom(path)  # skipped, saying how to install it, without chromium
    assert page_errors(dom) == ""
    text = main_text(dom)
    assert "Carried forward from run" in text and "lark-02" in text
    assert len(re.findall(r'class="news"', dom)) == len(
        [line for line in read_trace(child.trace).lines if line.type == "particle"]
    )
