"""``score --attribution``: each fork's and each piece of news's contribution to p_yes."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from tests.continuation.test_continue import NEWS_CARD, _Assessor, _continue, _parent
from tests.support import ROOT, forge, invoke
from worldsim.domain.errors import ConfigError
from worldsim.scoring.attribution import attribute
from worldsim.trace.reader import read_trace
from worldsim.world.particles import reweighted_value

BINARY = sorted(
    p.stem for p in (ROOT / "scenarios").glob("*.yaml") if p.stem != "award-best-picture"
)


def _adds_up(path: Path) -> None:
    a = attribute(path)
    recorded = read_trace(path).first("extraction")
    assert recorded is not None
    assert a.p_yes == pytest.approx(recorded.data.p_yes, abs=1e-12)
    total = math.fsum([a.start, *(c.amount for c in a.contributions)])
    assert total == pytest.approx(a.p_yes, abs=1e-12)


@pytest.mark.parametrize("card", BINARY)
def test_the_base_and_the_fork_contributions_add_up_to_p_yes(card: str, tmp_path: Path) -> None:
    parent = _parent(tmp_path, ROOT / "scenarios" / f"{card}.yaml")
    _adds_up(parent.trace)
    forks = [line for line in read_trace(parent.trace).lines if line.type == "fork"]
    assert len([c for c in attribute(parent.trace).contributions if c.kind == "fork"]) == len(forks)


def test_news_and_the_runs_after_the_cut_add_up_to_the_continued_p_yes(tmp_path: Path) -> None:
    parent = _parent(tmp_path)
    child = _continue(parent.trace)
    _adds_up(child.trace)
    a = attribute(child.trace)
    news = [line.data.id for line in read_trace(child.trace).lines if line.type == "news"]
    assert sorted(c.what for c in a.contributions if c.kind == "news") == sorted(news)
    assert a.parent_p_yes == pytest.approx(parent.p_yes, abs=1e-12)  # Σ m·v is the parent's


def test_pruning_is_a_contribution_of_its_own(tmp_path: Path) -> None:
    parent = _parent(tmp_path, prune_below=0.05)
    child = _continue(parent.trace, model_source=_Assessor({"t0": 1e-4}))
    _adds_up(child.trace)
    assert [c.kind for c in attribute(child.trace).contributions].count("pruning") == 1


def test_a_continued_run_whose_values_are_not_its_parents_is_refused(tmp_path: Path) -> None:
    """What ``verify --parent`` refuses, the attribution refuses: re-weighted values forged
    (and re-chained) to 0.99 would be reported as the news's effect."""
    from worldsim.domain.errors import TraceError

    parent = _parent(tmp_path, NEWS_CARD)
    child = _continue(parent.trace)

    def edit(records: list[dict[str, Any]]) -> None:
        for record in records:
            if record["type"] == "reweighting":
                rows = record["data"]["rows"]
                for row in rows:
                    row["value"] = 0.99
                weights = [row["posterior"] for row in rows]
                record["data"]["p_yes_reweighted"] = reweighted_value(weights, [0.99] * len(rows))

    forge(child.trace, child.trace, edit)
    with pytest.raises(TraceError, match="not those of their subtrees in the parent"):
        attribute(child.trace)
    shown = invoke("score", "--attribution", child.trace)
    assert shown.code == 1 and "not those of their subtrees" in shown.err


def test_a_multiple_choice_card_is_not_attributed(tmp_path: Path) -> None:
    parent = _parent(tmp_path, ROOT / "scenarios" / "award-best-picture.yaml")
    with pytest.raises(ConfigError, match="binary"):
        attribute(parent.trace)


def test_score_attribution_lists_contributions_largest_first(tmp_path: Path) -> None:
    parent = _parent(tmp_path, NEWS_CARD)
    child = _continue(parent.trace)
    out = tmp_path / "attribution.json"
    shown = invoke("score", "--attribution", child.trace, parent.trace, "--json", out)
    assert shown.code == 0, shown.err
    assert "news lark-" in shown.out and "fork t0." in shown.out
    made = json.loads(out.read_text())
    for entry in made:
        sizes = [abs(c["amount"]) for c in entry["contributions"]]
        assert sizes == sorted(sizes, reverse=True)


def test_a_cut_off_trace_is_skipped_with_a_warning_as_score_skips_it(tmp_path: Path) -> None:
    """Among whole traces it is named and skipped; alone it leaves nothing: exit 3, as
    `verify` says of a trace cut off."""
    whole = _parent(tmp_path, NEWS_CARD).trace
    lines = whole.read_bytes().splitlines(keepends=True)
    cut = tmp_path / "cut" / "cut.jsonl"
    cut.parent.mkdir()
    cut.write_bytes(b"".join(lines[: len(lines) // 2]))
    out = tmp_path / "attribution.json"
    shown = invoke("score", "--attribution", whole, cut, "--json", out)
    assert shown.code == 0, shown.err
    assert shown.err.startswith(f"warning: {cut}: no result:") and "skipped" in shown.err
    assert [entry["trace"] for entry in json.loads(out.read_text())] == [str(whole)]
    alone = invoke("score", "--attribution", cut)
    assert alone.code == 3 and alone.out == ""
    assert (
        alone.err.startswith("error: no completed trace to attribute (") and str(cut) in alone.err
    )
