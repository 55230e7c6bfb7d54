"""Where a run's world came from is said in the trace (``world_initialized.source``) and in the
audit (``world``): the card's seeds, the generic world (a seedless card on the offline route,
or an initializer that failed), a model's reading of the card, or none for a direct forecast.
It survives a resume and leaves the canonical hash alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from tests.conftest import RunFn
from tests.test_llm_roles import Source, script
from worldsim.domain.cards import Card
from worldsim.domain.config import ModelConfig, RunConfig
from worldsim.domain.contracts import ModelRequest
from worldsim.domain.errors import ModelError
from worldsim.domain.outputs import WorldOutput
from worldsim.domain.policy import load_policy
from worldsim.sim.resuming import resume_run
from worldsim.sim.session import forecast, run_card
from worldsim.trace.reader import Trace, read_trace
from worldsim.trace.verify import canonical_hash


def _sources(trace: Trace) -> tuple[str, str]:
    init = trace.first("world_initialized")
    audit = trace.first("audit")
    assert init is not None and audit is not None
    return init.data.source, audit.data.world


def _seedless(card: Card) -> Card:
    return card.model_copy(update={"seeds": None})


def test_the_offline_route_says_whether_the_world_is_the_cards_or_the_generic_one(
    demo_card: Card, run: RunFn
) -> None:
    assert _sources(read_trace(run(demo_card, ticks=2).trace)) == ("seeds", "seeds")
    assert _sources(read_trace(run(_seedless(demo_card), ticks=2).trace)) == (
        "generic",
        "generic",
    )


def _scripted(card: Card, out: Path, fn: Any) -> Trace:
    config = RunConfig(
        card=card,
        policy=load_policy("branching"),
        seed=1,
        ticks=2,
        models=ModelConfig(model="scripted/model", cache="off"),
    )
    result = anyio.run(
        lambda: run_card(config, out, fsync=False, overwrite=True, model_source=Source(fn))
    )
    return read_trace(result.trace)


def test_a_model_initializer_builds_the_world_and_a_failed_one_falls_back(
    demo_card: Card, tmp_path: Path
) -> None:
    assert _sources(_scripted(_seedless(demo_card), tmp_path / "a", script)) == ("model", "model")

    def failing(request: ModelRequest) -> dict[str, Any]:
        if request.output_type is WorldOutput:
            raise ModelError("the initializer's reply was unusable")
        return script(request)

    seedless = _scripted(_seedless(demo_card), tmp_path / "b", failing)
    assert _sources(seedless) == ("generic", "generic")
    seeded = _scripted(demo_card, tmp_path / "c", failing)
    assert _sources(seeded) == ("seeds", "seeds")


def test_a_resumed_run_keeps_its_world_source_and_the_hash_ignores_it(
    demo_card: Card, run: RunFn, tmp_path: Path
) -> None:
    whole = read_trace(run(_seedless(demo_card), ticks=3).trace)
    cut = tmp_path / "cut.jsonl"
    lines = whole.path.read_bytes().splitlines(keepends=True)
    init = whole.first("world_initialized")
    assert init is not None
    cut.write_bytes(b"".join(lines[: init.number + 3]))
    anyio.run(lambda: resume_run(cut, fsync=False))
    resumed = read_trace(cut)
    assert _sources(resumed) == ("generic", "generic")
    assert canonical_hash(resumed) == canonical_hash(whole)


def test_a_direct_forecast_has_no_world(demo_card: Card, tmp_path: Path) -> None:
    config = RunConfig(
        card=demo_card,
        policy=load_policy("branching"),
        kind="direct",
        method="direct",
        models=ModelConfig(model="offline", cache="off"),
    )
    result = anyio.run(lambda: forecast(config, tmp_path, fsync=False))
    audit = read_trace(result.trace).first("audit")
    assert audit is not None and audit.data.world == "none"


def test_seeds_that_give_only_a_prior_get_the_generic_world_around_it(
    demo_card: Card, run: RunFn, tmp_path: Path
) -> None:
    """A card whose seeds hold a base rate and its source but no world runs in the generic
    world started at that prior; the audit names the prior's source, and the offline direct
    forecast is the prior itself."""
    from worldsim.domain.cards import Seeds
    from worldsim.world.build import prior_pressure

    source = "the market's freeze value (the market price at 2025-10-16)"
    card = demo_card.model_copy(
        update={"seeds": Seeds(base_rate=0.42, prior_source=source), "evidence": None}
    )
    trace = read_trace(run(card, ticks=2).trace)
    assert _sources(trace) == ("generic", "generic")
    init = trace.first("world_initialized")
    assert init is not None
    state = init.data.state
    assert {a["id"] for a in state["actors"]} == {"decision_maker", "proponents", "opponents"}
    pressure = prior_pressure(card)
    assert state["pressure"] == pressure
    audit = trace.first("audit")
    assert audit is not None and audit.data.prior == source
    config = RunConfig(card=card, policy=load_policy("no_branch"), seed=0)
    direct = anyio.run(lambda: forecast(config, tmp_path, fsync=False))
    assert direct.p_yes == 0.42
    direct_audit = read_trace(direct.trace).first("audit")
    assert direct_audit is not None and direct_audit.data.prior == source
    plain = _seedless(demo_card).model_copy(update={"evidence": None})
    audit_plain = read_trace(run(plain, ticks=2).trace).first("audit")
    assert audit_plain is not None and audit_plain.data.prior == "none given: 0.5"
