"""Roles as a plug-in point: a new actor role runs without touching worldsim's code."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Sequence

import pytest

import worldsim.roles.registry as roles_module
from tests.conftest import RunFn
from worldsim.domain.cards import Card
from worldsim.domain.errors import RoleError
from worldsim.roles.registry import Proposal, TickContext, get_role, register_role, registered_roles
from worldsim.trace.reader import read_trace


@register_role("market_maker", phase="tick")
class MarketMaker:
    """Quotes the current implied probability and leans against the crowd."""

    name = "market_maker"
    phase = "tick"

    async def act(self, ctx: TickContext) -> Sequence[Proposal]:
        p = ctx.state.probabilities()["cleared"]
        return [
            Proposal(
                agent=ctx.agent,
                endpoint="cleared",
                direction=0.5 - p,
                magnitude=0.8,
                kind="signal",
                summary=f"quotes {p:.2f}, leans against the crowd",
            ),
        ]


def test_a_plugged_in_actor_role_runs_in_the_scheduler(demo_card: Card, run: RunFn) -> None:
    data = demo_card.model_dump(mode="json")
    data["seeds"]["actors"].append(
        {
            "id": "mm",
            "name": "Market Maker",
            "role": "market_maker",
            "stance": 0.0,
            "influence": 0.8,
            "activity": 1.0,
        }
    )
    result = run(Card.model_validate(data), "branching", 1)
    trace = read_trace(result.trace)
    mine = [
        line.record.data for line in trace.of_type("proposal") if line.record.data.agent == "mm"
    ]
    assert mine and all(p.role == "market_maker" and "quotes" in p.summary for p in mine)
    reviews = [line.record.data for line in trace.of_type("review")]
    assert any(ref.agent == "mm" for r in reviews for ref in r.accepted)
    assert "market_maker" in registered_roles()


def test_decorator_returns_the_class_and_refuses_duplicates() -> None:
    assert get_role("market_maker", "tick").__class__ is MarketMaker
    with pytest.raises(RoleError, match="already registered"):
        register_role("market_maker", phase="tick")(type("Other", (), {"act": lambda s, c: []}))
    with pytest.raises(RoleError, match="must define async 'review'"):
        register_role("broken_reviewer", phase="review")(type("Broken", (), {}))
    with pytest.raises(RoleError, match="runs in phase 'tick'"):
        get_role("market_maker", "review")


class _EntryPoint:
    name = "oracle_reviewer"
    value = "tests.test_roles:OracleReviewer"

    def load(self) -> type:
        return OracleReviewer


class OracleReviewer:
    """A reviewer shipped by a third-party package."""

    phase = "review"

    async def review(self, ctx: object) -> object:
        raise AssertionError("not called in this test")


def test_entry_point_roles_are_discovered(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.metadata.entry_points

    def fake(**kwargs: object) -> object:
        if kwargs.get("group") == "worldsim.roles":
            return [_EntryPoint()]
        return real(**kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.metadata, "entry_points", fake)
    monkeypatch.setattr(roles_module, "_ENTRY_POINTS_LOADED", False)
    found = registered_roles()
    assert found["oracle_reviewer"].phase == "review"
    assert found["oracle_reviewer"].source.endswith("OracleReviewer")
    roles_module._REGISTRY.pop("oracle_reviewer")
