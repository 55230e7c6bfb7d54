"""The viewer in a real browser (headless Chromium): its script runs without errors, the tree
shows every timeline, the fragment steps to a tick, hostile text stays text, big traces page.

Each test is one or a few browser launches (a second or two each); the DOM is read after the
page's script ran (``--dump-dom``).
"""

from __future__ import annotations

import html
import os
import re
import shutil
from pathlib import Path

import pytest

from tests.support import ROOT
from tests.view.browser import dump_dom, main_text, page_errors, screenshot, without_scripts
from tests.view.conftest import HOSTILE
from worldsim.trace.reader import read_trace
from worldsim.trace.records import accesses_of
from worldsim.view.build import Page, build_page, trace_page, write_view

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def demo_view(demo_trace: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Page, Path]:
    page = trace_page(demo_trace)
    return page, write_view(page, tmp_path_factory.mktemp("view") / "demo.html")


def test_the_tree_shows_every_timeline_and_the_forecast(demo_view: tuple[Page, Path]) -> None:
    page, path = demo_view
    dom = dump_dom(path)
    assert page_errors(dom) == ""
    labels = set(re.findall(r"<text [^>]*>(t0[.0-9]*)</text>", dom))
    assert labels == {t["id"] for t in page.data["timelines"]} and len(labels) == 4
    assert f"p_yes {page.data['extraction']['p_yes']:.4f}" in main_text(dom)
    assert 'data-status="ok"' in dom and "complete" in dom
    assert "Content-Security-Policy" in dom


@pytest.mark.parametrize("tick", [0, 3])
def test_stepping_to_a_tick_shows_that_ticks_proposals(
    demo_view: tuple[Page, Path], tick: int
) -> None:
    page, path = demo_view
    dom = dump_dom(path, f"view=ticks&tick={tick}")
    assert page_errors(dom) == ""
    steps = [s for s in page.data["ticks"] if s["tick"] == tick]
    shown = re.findall(r'data-timeline="([^"]+)" data-tick="(\d+)"', dom)
    assert shown == [(s["timeline"], str(tick)) for s in steps]
    assert dom.count('<li class="proposal">') == sum(len(s["proposals"]) for s in steps)
    text = main_text(dom)
    for step in steps:
        for p in step["proposals"]:
            assert html.escape(p["summary"], quote=False) in text
    assert f"tick {tick}" in text


def test_hostile_text_is_shown_as_text_and_runs_nothing(
    hostile_trace: Path, tmp_path: Path
) -> None:
    page = trace_page(hostile_trace)
    path = write_view(page, tmp_path / "hostile.html")
    # a reply is JSON text, so its quotes are escaped there: look for a part without quotes
    shown = html.escape(HOSTILE.split("<img")[0], quote=False)
    actor = next(i for i, c in enumerate(page.data["calls"]) if c["role"] == "actor")
    for fragment in ("view=ticks&tick=1", f"view=calls&call={actor}", "view=evidence"):
        dom = dump_dom(path, fragment)
        assert page_errors(dom) == "", fragment
        assert re.search(r"<title>([^<]*)</title>", dom).group(1) == html.escape(page.title)  # type: ignore[union-attr]
        assert "pwned" not in dom.split("<body", 1)[0]
        assert shown in dom, fragment  # the text is on the page, escaped by the serializer
        elements = without_scripts(dom)
        # no element was made of the text: no image, no link (the tabs are anchors without href)
        assert re.search(r"<img\b|<a\b[^>]*\bhref", elements) is None
        assert elements.count("<script") == 3  # the error box's, the data, the viewer's


def test_other_views_run_without_script_errors(demo_view: tuple[Page, Path]) -> None:
    _, path = demo_view
    for fragment in ("view=calls", "view=evidence", "view=charts&ep=not_cleared"):
        dom = dump_dom(path, fragment)
        assert page_errors(dom) == "", fragment
    assert "<path " in dom and "not_cleared" in dom  # the last one drew its chart


def test_a_direct_trace_shows_its_forecast_and_its_call(direct_trace: Path, tmp_path: Path) -> None:
    page = trace_page(direct_trace)
    assert page.data["timelines"] == [] and len(page.data["calls"]) == 1
    path = write_view(page, tmp_path / "direct.html")
    for fragment in ("", "view=ticks", "view=calls&call=0", "view=charts"):
        dom = dump_dom(path, fragment)
        assert page_errors(dom) == "", fragment
    assert "pwned" not in dom.split("<body", 1)[0]
    assert "p_yes 0.3700" in main_text(dump_dom(path))


def test_a_big_trace_pages_by_timeline(demo_view: tuple[Page, Path], tmp_path: Path) -> None:
    page, _ = demo_view
    paged = write_view(
        Page(page.kind, page.title, {**page.data, "page_bytes": 0}), tmp_path / "p.html"
    )
    dom = dump_dom(paged, "view=ticks&tick=1&tl=t0.1")
    assert page_errors(dom) == ""
    assert re.findall(r'data-timeline="([^"]+)" data-tick="1"', dom) == ["t0.1"]
    assert "all timelines" not in main_text(dom) and "one timeline per page" in main_text(dom)


def test_the_compare_page_shows_both_runs(demo_trace: Path, run, demo_card, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    other = Path(run(demo_card, "branching", seed=7).trace)
    page = build_page([demo_trace, other])
    dom = dump_dom(write_view(page, tmp_path / "cmp.html"))
    assert page_errors(dom) == ""
    text = main_text(dom)
    assert "First ledger difference" in text and f"tick {page.data['ledger']['tick']}" in text
    for side, tree in zip(page.data["sides"], ("tree-a", "tree-b"), strict=True):
        part = dom.split(f'id="{tree}"', 1)[1]
        for t in side["timelines"]:
            assert f">{t['id']}</text>" in part
    assert dom.count('class="banner') >= 2


def test_a_screenshot_is_written(demo_view: tuple[Page, Path], tmp_path: Path) -> None:
    """Set WORLDSIM_DOCS_SCREENSHOT=1 to refresh docs/img/viewer.png from this test."""
    _, path = demo_view
    png = screenshot(path, tmp_path / "viewer.png", "view=tree")
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1280, 900)
    if os.environ.get("WORLDSIM_DOCS_SCREENSHOT"):
        shutil.copyfile(png, ROOT / "docs" / "img" / "viewer.png")


def test_an_intervention_is_named_at_the_top(tmp_path: Path) -> None:
    import anyio

    from tests.support import DEMO_CARD
    from worldsim.domain.cards import load_card
    from worldsim.domain.config import RunConfig
    from worldsim.domain.policy import load_policy
    from worldsim.sim.session import run_card

    config = RunConfig.from_dict(
        {
            "card": load_card(DEMO_CARD),
            "policy": load_policy("no_branch"),
            "ticks": 4,
            "interventions": [
                {"id": "veto", "kind": "event", "at": "2027-02-20T00:00:00Z", "title": "A veto"}
            ],
        }
    )
    result = anyio.run(lambda: run_card(config, tmp_path, fsync=False))
    page = trace_page(result.trace)
    assert [iv["id"] for iv in page.data["interventions"]] == ["veto"]
    dom = dump_dom(write_view(page, tmp_path / "iv.html"))
    assert page_errors(dom) == ""
    assert "intervention veto (event) at 2027-02-20, tick 2: A veto — applied" in html.unescape(dom)


def test_the_evidence_view_shows_the_forecast_graph(
    demo_view: tuple[Page, Path], tmp_path: Path
) -> None:
    page, path = demo_view
    graph = page.data["forecast_graph"]
    assert graph is not None and graph["events"]  # the demo run's condition builds one
    text = main_text(dump_dom(path, "view=evidence"))
    assert f"Forecast graph ({len(graph['events'])} events, {graph['link_count']} links)" in text
    none = write_view(
        Page(page.kind, page.title, {**page.data, "forecast_graph": None}), tmp_path / "n.html"
    )
    dom = dump_dom(none, "view=evidence")
    assert page_errors(dom) == "" and "KER is not defined" in main_text(dom)


def test_the_evidence_view_lists_every_access_as_the_trace_holds_it(
    demo_view: tuple[Page, Path], demo_trace: Path
) -> None:
    """The page keeps what it shows of each access (the cut-off and a search's k are left in
    the trace, null and false fields left out) and lists them all."""
    page, path = demo_view
    held = [
        access
        for line in read_trace(demo_trace)
        for access in accesses_of(line.type, line.fields, line.tl, line.tick)
    ]
    shown = page.data["retrievals"]
    assert len(shown) == len(held) > 0
    for access, row in zip(held, shown, strict=True):
        assert "cutoff" not in row and "k" not in row
        assert all(value is not None and value is not False for value in row.values())
        for key in ("agent", "tool", "timeline", "tick", "query", "doc_id", "reason"):
            assert row.get(key) == access[key], key
        assert row.get("refused", False) == access["refused"]
        if access["tool"] == "search_evidence":
            assert row["doc_ids"] == access["doc_ids"]
    assert {row["tool"] for row in shown} == {"search_evidence", "open_document"}
    dom = dump_dom(path, "view=evidence")
    assert page_errors(dom) == ""
    assert f"Gateway accesses ({len(held)})" in main_text(dom)
