"""Trace names: runs whose settings differ never share a name, and a run at the defaults keeps
the plain ``<card>__<method>__s<seed>.jsonl``."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import DEMO_CARD, invoke
from worldsim.domain.cards import load_card
from worldsim.domain.config import CONDITIONS, DEFAULT_TICKS, RunConfig
from worldsim.domain.interventions import Intervention
from worldsim.domain.policy import load_policy
from worldsim.sim.plan import trace_name
from worldsim.world.extraction import EXTRACTION_RULES

CARD = load_card(DEMO_CARD)
BASE = RunConfig(card=CARD, policy=load_policy("branching"))

_EVENT = Intervention(id="shock", kind="event", at=CARD.as_of + timedelta(days=3), title="A shock")
_CHANGES: dict[str, st.SearchStrategy[Any]] = {
    "ticks": st.integers(1, 20),
    "extraction_rule": st.sampled_from(sorted(EXTRACTION_RULES)),
    "condition": st.sampled_from(sorted(CONDITIONS)),
    "forecast_date": st.integers(1, 20).map(lambda d: CARD.as_of + timedelta(days=d)),
    "roles": st.sampled_from([{}, {"governance": "governance"}, {"reporter": "reporter"}]),
    "interventions": st.sampled_from([(), (_EVENT,)]),
}
Settings = st.fixed_dictionaries({}, optional=_CHANGES)


def _config(changes: dict[str, Any]) -> RunConfig:
    return BASE.model_copy(update=changes)


def _differs(a: RunConfig, b: RunConfig) -> bool:
    """Whether two runs of the same card, method and seed can give different results."""
    return (
        a.effective_ticks != b.effective_ticks
        or a.extraction_rule != b.extraction_rule
        or a.condition != b.condition
        or (a.forecast_date or CARD.as_of) != (b.forecast_date or CARD.as_of)
        or a.roles != b.roles
        or a.interventions != b.interventions
    )


@settings(max_examples=200, deadline=None)
@given(Settings, Settings)
def test_runs_whose_settings_differ_have_different_names(
    one: dict[str, Any], other: dict[str, Any]
) -> None:
    a, b = _config(one), _config(other)
    assert (trace_name(a) != trace_name(b)) == _differs(a, b)


def test_a_run_at_the_defaults_keeps_the_plain_name() -> None:
    plain = "merger-review__branching__s0.jsonl"
    assert trace_name(BASE) == plain
    assert trace_name(_config({"ticks": DEFAULT_TICKS, "forecast_date": CARD.as_of})) == plain


def test_the_cli_keeps_both_runs_that_differ_in_ticks_and_rule(tmp_path: Path) -> None:
    first = invoke("run", DEMO_CARD, "--out", tmp_path)
    second = invoke(
        "run", DEMO_CARD, "--ticks", "3", "--extraction", "candidate-status-mass/1",
        "--out", tmp_path,
    )  # fmt: skip
    assert first.code == 0 and second.code == 0, second.err
    assert sorted(p.name for p in tmp_path.glob("*.jsonl")) == [
        "merger-review__branching__s0.jsonl",
        "merger-review__branching__ticks3+candidate-status-mass-1__s0.jsonl",
    ]
