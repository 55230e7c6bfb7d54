"""A trace's result is the one its own settings give: an extraction under another rule than the
run's, or ticks other than the run's, is refused by ``verify`` and so by every reader, however
consistently the rest of the trace was rewritten (re-extracted, re-chained, re-sealed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import ROOT, forge, invoke
from worldsim.domain.errors import TraceError
from worldsim.trace.verify import verify_trace
from worldsim.world.extraction import Leaf, extract

LABELS = ROOT / "scenarios" / "labels"
OTHER_RULE = "candidate-status-mass/1"

Records = list[dict[str, Any]]


def _of(records: Records, type_: str) -> dict[str, Any]:
    return next(r for r in records if r["type"] == type_)


def _extracted_again(rule: str) -> Any:
    """An edit that extracts p_yes again from the recorded leaves under ``rule`` and writes it
    where a run under that rule would: the extraction, the audit and ``run_completed``."""

    def edit(records: Records) -> None:
        leaves = [
            Leaf(r["tl"], d["mass"], d["settlement"], d["forced_p_yes"], d["forced_probs"])
            for r in records
            if r["type"] == "timeline_ended"
            for d in [r["data"]]
        ]
        again = extract(leaves, rule, None).model_dump(mode="json")
        _of(records, "extraction")["data"] = again
        audit = _of(records, "audit")["data"]
        audit.update(
            extraction_rule=rule,
            mass_sum=again["mass_sum"],
            unresolved_mass=again["unresolved_mass"],
        )
        _of(records, "run_completed")["data"]["p_yes"] = again["p_yes"]

    return edit


def _refused(trace: Path) -> str:
    with pytest.raises(TraceError) as caught:
        verify_trace(trace)
    return str(caught.value)


def test_an_extraction_under_another_rule_than_the_runs_is_refused(
    branching_demo_trace: Path, tmp_path: Path
) -> None:
    forged = tmp_path / "other-rule.jsonl"
    forge(branching_demo_trace, forged, _extracted_again(OTHER_RULE))
    recorded = verify_trace(branching_demo_trace).recorded
    written = json.loads(forged.read_bytes().splitlines()[-1])["data"]["p_yes"]
    assert recorded is not None and written != recorded.p_yes  # it would move the score
    message = _refused(forged)
    assert f"extraction rule '{OTHER_RULE}' is not the run's" in message
    assert "run_started.extraction_rule 'path-ledger/1'" in message


def test_score_refuses_an_extraction_under_another_rule_in_verifys_words(
    branching_demo_trace: Path, tmp_path: Path
) -> None:
    forged = tmp_path / "other-rule.jsonl"
    forge(branching_demo_trace, forged, _extracted_again(OTHER_RULE))
    report = tmp_path / "score.json"
    scored = invoke("score", forged, "--labels", LABELS, "--json", report)
    assert scored.code == 1
    assert _refused(forged) in scored.err
    assert len(scored.err.strip().splitlines()) == 1
    assert not report.exists()


def test_a_header_that_names_another_rule_than_its_settings_is_refused(
    branching_demo_trace: Path, tmp_path: Path
) -> None:
    """The header and the settings both rewritten to the rule of the extraction made again is
    the extraction's rule; the settings alone rewritten contradict the header."""

    def settings_only(records: Records) -> None:
        records[0]["data"]["config"]["extraction_rule"] = OTHER_RULE

    forged = tmp_path / "settings.jsonl"
    forge(branching_demo_trace, forged, settings_only)
    assert "config.extraction_rule 'candidate-status-mass/1' is not the run's" in _refused(forged)

    def header_only(records: Records) -> None:
        _extracted_again(OTHER_RULE)(records)
        records[0]["data"]["extraction_rule"] = OTHER_RULE

    forged = tmp_path / "header.jsonl"
    forge(branching_demo_trace, forged, header_only)
    assert "is not the run's extraction_rule 'candidate-status-mass/1'" in _refused(forged)


@pytest.mark.parametrize("where", ["header", "settings", "both"])
@pytest.mark.parametrize("shift", [-1, 1])
def test_ticks_other_than_the_trace_holds_are_refused(
    branching_demo_trace: Path, tmp_path: Path, where: str, shift: int
) -> None:
    held = verify_trace(branching_demo_trace)
    assert held.complete
    ticks: list[Any] = [0, None]

    def edit(records: Records) -> None:
        started = records[0]["data"]
        ticks[:] = started["ticks"], started["config"]["ticks"]
        if where in ("header", "both"):
            started["ticks"] += shift
        if where in ("settings", "both"):
            started["config"]["ticks"] = ticks[0] + shift

    forged = tmp_path / "ticks.jsonl"
    forge(branching_demo_trace, forged, edit)
    message = _refused(forged)
    claimed = ticks[0] + shift
    if where == "settings" or (where == "header" and ticks[1] is not None):
        assert f"config.ticks {ticks[1] if where == 'header' else claimed} is not" in message
    else:  # other ticks spread the run's calendar otherwise: tick 1 is off its date
        assert "tick 1 is dated" in message and "the run's calendar" in message
