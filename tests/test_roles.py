"""Roles as a plug-in point: a new actor role runs without touching worldsim's code."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

import worldsim.roles.registry as roles_module
from tests.conftest import RunFn
from worldsim.domain.cards import Card
from worldsim.domain.config import ModelConfig, RunConfig
from worldsim.domain.contracts import CallSite, ChatMessage, Model, ModelRequest
from worldsim.domain.errors import RoleError
from worldsim.domain.outputs import ActorOutput
from worldsim.domain.policy import load_policy
from worldsim.offline import OfflineModel
from worldsim.roles.registry import get_role, register_role, registered_roles
from worldsim.sim.plan import role_plan
from worldsim.sim.session import run_card
from worldsim.testing import StubServer
from worldsim.trace.reader import read_trace
from worldsim.world.moves import Proposal
from worldsim.world.views import RoleView, TickContext


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
    mine = [p.data for p in trace.proposals() if p.data.agent == "mm"]
    assert mine and all(p.role == "market_maker" and "quotes" in p.summary for p in mine)
    reviews = [line.record.data for line in trace.of_type("review")]
    assert any(ref.agent == "mm" for r in reviews for ref in r.accepted)
    assert "market_maker" in registered_roles()


def test_decorator_returns_the_class_and_refuses_duplicates() -> None:
    spec = get_role("market_maker", "tick")
    assert spec.factory is MarketMaker and spec.output is None and spec.version == "python"
    assert isinstance(spec.build(OfflineModel(), seed=1), MarketMaker)

    async def act(self: object, ctx: object) -> list[object]:
        return []

    with pytest.raises(RoleError, match=r"already registered .*replace=True\) replaces it"):
        register_role("market_maker", phase="tick")(type("Other", (), {"act": act}))
    # the same class defined again, as a notebook cell run twice defines it, replaces itself
    again = type("MarketMaker", (), {"act": act, "__module__": MarketMaker.__module__})
    again.__qualname__ = MarketMaker.__qualname__
    register_role("market_maker", phase="tick")(again)
    assert get_role("market_maker", "tick").factory is again
    register_role("market_maker", phase="tick")(MarketMaker)
    with pytest.raises(RoleError, match="must define async 'act'"):  # a plain def
        register_role("sync_actor", phase="tick")(type("Sync", (), {"act": lambda s, c: []}))
    with pytest.raises(RoleError, match="must define async 'review'"):
        register_role("broken_reviewer", phase="review")(type("Broken", (), {}))
    with pytest.raises(RoleError, match="runs in phase 'tick'"):
        get_role("market_maker", "review")
    with pytest.raises(RoleError, match="lower-case words"):
        register_role("Market Maker", phase="tick")(MarketMaker)


class Forecaster:
    """Asks its model for an actor's move and pushes a little harder than it was told."""

    phase = "tick"

    def __init__(self, model: Model, seed: int) -> None:
        self.model = model
        self.seed = seed

    async def act(self, ctx: TickContext) -> Sequence[Proposal]:
        request = ModelRequest(
            messages=(ChatMessage("user", f"Propose a move on: {ctx.card.question}"),),
            output_type=ActorOutput,
            site=CallSite(role="forecaster", agent=ctx.agent, timeline=ctx.timeline, tick=ctx.tick),
            prompt_version="forecaster/1",
            seed=self.seed,
            view=RoleView(context=ctx),
        )
        out = (await self.model.request(request)).output
        assert isinstance(out, ActorOutput)
        return [
            Proposal(
                agent=ctx.agent,
                endpoint=m.endpoint,
                direction=m.direction,
                magnitude=min(1.0, m.magnitude * 1.2),
                kind="signal",
                summary=f"forecaster: {m.summary}"[:500],
            )
            for m in out.proposals
        ]


class _EntryPoint:
    def __init__(self, name: str, obj: type) -> None:
        self.name = name
        self.value = f"tests.test_roles:{obj.__name__}"
        self.obj = obj

    def load(self) -> type:
        return self.obj


class OracleReviewer:
    """A reviewer shipped by a third-party package."""

    phase = "review"

    async def review(self, ctx: object) -> object:
        raise AssertionError("not called in this test")


@pytest.fixture
def plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Two roles installed as a package would install them: entry points ``worldsim.roles``."""
    real = importlib.metadata.entry_points
    found = [_EntryPoint("oracle_reviewer", OracleReviewer), _EntryPoint("forecaster", Forecaster)]

    def fake(**kwargs: object) -> object:
        if kwargs.get("group") == "worldsim.roles":
            return found
        return real(**kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.metadata, "entry_points", fake)
    monkeypatch.setattr(roles_module, "_ENTRY_POINTS", None)
    yield
    roles_module._ENTRY_POINTS = None


@pytest.mark.usefixtures("plugins")
def test_entry_point_roles_are_discovered() -> None:
    found = registered_roles()
    assert found["oracle_reviewer"].phase == "review"
    assert found["oracle_reviewer"].source.endswith("(tests.test_roles:OracleReviewer)")
    assert found["forecaster"].phase == "tick"


def _reviewed(trace_path: Path, agent: str) -> tuple[list[Any], list[Any]]:
    trace = read_trace(trace_path)
    proposals = [p.data for p in trace.proposals() if p.data.agent == agent]
    decided = [
        ref
        for line in trace.of_type("review")
        for ref in (*line.record.data.accepted, *line.record.data.rejected)
        if ref.agent == agent
    ]
    return proposals, decided


@pytest.mark.usefixtures("plugins")
def test_an_entry_point_role_acts_with_its_model_offline(demo_card: Card, run: RunFn) -> None:
    result = run(demo_card, "no_branch", 2, ticks=3, extra_roles=("forecaster",))
    trace = read_trace(result.trace)
    assert trace.started.extra_roles == ["forecaster"]
    assert trace.started.routes["forecaster"] == "offline"
    world = trace.first("world_initialized")
    assert world is not None
    added = [a for a in world.data.state["actors"] if a["id"] == "forecaster"]
    assert added and added[0]["role"] == "forecaster" and added[0]["activity"] == 1.0
    proposals, decided = _reviewed(result.trace, "forecaster")
    # the added role acts on every tick (activity 1) and governance decides each proposal
    assert all(p.role == "forecaster" and p.summary.startswith("forecaster:") for p in proposals)
    assert len(proposals) >= 3 and len(decided) == len(proposals)


@pytest.mark.usefixtures("plugins")
def test_an_entry_point_role_acts_with_its_model_on_a_server(
    demo_card: Card, tmp_path: Path
) -> None:
    with StubServer(seed=8) as server:
        config = RunConfig(
            card=demo_card,
            policy=load_policy("no_branch"),
            seed=1,
            ticks=2,
            extra_roles=("forecaster",),
            models=ModelConfig(
                model="offline",
                role_models=("forecaster=stub/test-model",),
                cache="off",
            ),
        )
        env = {"STUB_API_KEY": "k", "STUB_BASE_URL": server.base_url}
        result = anyio.run(lambda: run_card(config, tmp_path, fsync=False, environ=env))
        assert server.request_count >= 2
    trace = read_trace(result.trace)
    calls = [line.record.data for line in trace.of_type("llm_call")]
    assert calls and {c.role for c in calls} == {"forecaster"}
    assert trace.started.routes["forecaster"] == "stub/test-model"
    proposals, decided = _reviewed(result.trace, "forecaster")
    assert proposals and len(decided) == len(proposals)


def test_a_card_or_policy_roles_list_adds_roles_to_a_library_run(
    demo_card: Card, run: RunFn
) -> None:
    card = Card.model_validate({**demo_card.model_dump(mode="json"), "roles": ["market_maker"]})
    result = run(card, "no_branch", 3, ticks=2)
    trace = read_trace(result.trace)
    assert trace.started.extra_roles == ["market_maker"]
    proposals, decided = _reviewed(result.trace, "market_maker")
    assert len(proposals) == 2 and len(decided) == len(proposals)
    policy = load_policy("no_branch").model_copy(update={"roles": ("market_maker",)})
    again = read_trace(run(demo_card, policy, 3, ticks=2).trace)
    assert again.started.extra_roles == ["market_maker"]


def test_a_run_plan_reads_the_prompt_folders_once(
    demo_card: Card, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every slot and tick role of a plan is looked up in one reading of the registry, not
    one per role (each reading lists the prompt folders and checks every file)."""
    readings: list[int] = []
    listed = roles_module.known_prompt_roles

    def counted() -> dict[str, tuple[Path, bool]]:
        readings.append(1)
        return listed()

    monkeypatch.setattr(roles_module, "known_prompt_roles", counted)
    config = RunConfig(card=demo_card, policy=load_policy("branching"))
    plan = role_plan(config)
    assert {"initializer", "governance", "reporter"} <= set(plan)
    assert sum(key.startswith("tick:") for key in plan) >= 2
    assert plan["tick:actor"] == get_role("actor", "tick")
    assert len(readings) == 2  # the plan's one, and get_role's own just above


@register_role("raiser", phase="tick")
class _Raiser:
    async def act(self, ctx: TickContext) -> Sequence[Proposal]:
        raise ValueError("boom from my role")


@register_role("dict_returner", phase="tick")
class _DictReturner:
    async def act(self, ctx: TickContext) -> Any:
        return {"agent": ctx.agent}


@register_role("thief", phase="tick")
class _Thief:
    async def act(self, ctx: TickContext) -> Sequence[Proposal]:
        return [Proposal(agent="regulator", summary="not mine to make")]


@pytest.mark.parametrize(
    ("role", "says"),
    [
        ("raiser", "role 'raiser': act raised ValueError: boom from my role"),
        ("dict_returner", "role 'dict_returner': act returned dict, not a list of Proposal"),
        ("thief", "role 'thief': act proposed for agent 'regulator' when asked for agent"),
    ],
)
def test_a_python_role_that_fails_or_answers_wrongly_is_one_line_naming_it(
    tmp_path: Path, role: str, says: str
) -> None:
    from tests.support import ROOT, invoke

    done = invoke(
        "run", ROOT / "scenarios" / "merger-review.yaml", "--role", role, "--out", tmp_path
    )
    assert done.code == 2 and "Traceback" not in done.err
    assert done.err.strip().splitlines()[-1].startswith(f"error: {says}")


@register_role("needs_colour", phase="tick")
class _NeedsColour:
    def __init__(self, colour: str) -> None:
        self.colour = colour

    async def act(self, ctx: TickContext) -> Sequence[Proposal]:
        return []


def test_a_role_that_cannot_be_built_is_one_line_and_leaves_no_trace(tmp_path: Path) -> None:
    from tests.support import ROOT, invoke

    card = ROOT / "scenarios" / "merger-review.yaml"
    done = invoke("run", card, "--role", "needs_colour", "--out", tmp_path)
    assert done.code == 2 and "Traceback" not in done.err
    (line,) = done.err.strip().splitlines()
    assert line.startswith("error: role 'needs_colour' (python tests.test_roles._NeedsColour)")
    assert "building it raised TypeError" in line and "'colour'" in line
    assert "--resume" not in line  # no run began: there is nothing to resume
    assert list(tmp_path.iterdir()) == []  # no empty trace left to block the next run
