"""A Python role that fails or answers wrongly, in any phase: one line naming the role (exit 2),
a RoleError from the library, and a trace that resumes once the role is fixed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.support import ROOT, invoke
from worldsim.domain.cards import load_card
from worldsim.domain.config import RunConfig
from worldsim.domain.contracts import Model
from worldsim.domain.errors import RoleError
from worldsim.domain.policy import load_policy
from worldsim.offline.reporter import OfflineReporter
from worldsim.roles.registry import get_role, register_role
from worldsim.sim.resuming import resume_run
from worldsim.sim.session import run_card
from worldsim.trace.reader import read_trace
from worldsim.trace.verify import canonical_hash
from worldsim.world.moves import Proposal, Report
from worldsim.world.views import InitContext, ReportContext, ReviewContext, TickBatch, TickContext

CARD = ROOT / "scenarios" / "merger-review.yaml"

FIXED: set[str] = set()
"""The roles of this module that behave (a user's fix), by name; the others fail."""


@register_role("broken_reviewer", phase="review")
class _BrokenReviewer:
    """Answers a dict where a Review is due."""

    def __init__(self, model: Model, seed: int) -> None:
        self.fixed = get_role("governance").build(model, seed=seed)

    async def review(self, ctx: ReviewContext) -> Any:
        if "broken_reviewer" in FIXED:
            return await self.fixed.review(ctx)
        return {"accepted": "everything"}


@register_role("raising_reporter", phase="report")
class _RaisingReporter:
    """Raises once the extraction is written."""

    async def report(self, ctx: ReportContext) -> Report:
        if "raising_reporter" in FIXED:
            return await OfflineReporter().report(ctx)
        raise ValueError("reporter exploded")


@register_role("empty_init", phase="init")
class _EmptyInit:
    """Builds no world at all."""

    def __init__(self, model: Model, seed: int) -> None:
        self.fixed = get_role("initializer").build(model, seed=seed)

    async def initialize(self, ctx: InitContext) -> Any:
        if "empty_init" in FIXED:
            return await self.fixed.initialize(ctx)
        return None


@register_role("batch_raiser", phase="tick")
class _BatchRaiser:
    """Decides a tick's agents at once, and fails at it."""

    async def act(self, ctx: TickContext) -> Sequence[Proposal]:
        return []

    async def act_batch(self, batch: TickBatch) -> Mapping[str, Sequence[Proposal]]:
        if "batch_raiser" in FIXED:
            return {}
        raise KeyError("batch broke")


@register_role("mixed_bag", phase="tick")
class _MixedBag:
    async def act(self, ctx: TickContext) -> Any:
        return [Proposal(agent=ctx.agent, summary="fine"), "x", 42]


@register_role("overreacher", phase="tick")
class _Overreacher:
    async def act(self, ctx: TickContext) -> Sequence[Proposal]:
        return [Proposal(agent=ctx.agent, summary="all in", magnitude=5.0)]


FAILURES = [
    ("broken_reviewer", "role 'broken_reviewer': review returned dict, not a Review"),
    ("raising_reporter", "role 'raising_reporter': report raised ValueError: reporter exploded"),
    ("empty_init", "role 'empty_init': initialize returned None, not a WorldState"),
    ("batch_raiser", "role 'batch_raiser': act_batch raised KeyError: 'batch broke'"),
    ("mixed_bag", "role 'mixed_bag': act returned a list holding str, not Proposal"),
    (
        "overreacher",
        "role 'overreacher': act raised ValidationError: Proposal field 'magnitude': "
        "Input should be less than or equal to 1",
    ),
]


@pytest.mark.parametrize(("role", "says"), FAILURES)
def test_a_failing_role_in_any_phase_is_one_line_naming_it_and_a_resumable_trace(
    tmp_path: Path, role: str, says: str
) -> None:
    done = invoke("run", CARD, "--role", role, "--out", tmp_path)
    assert done.code == 2 and "Traceback" not in done.err
    (trace,) = tmp_path.glob("*.jsonl")
    assert done.err.strip().splitlines()[-1] == (
        f"error: {says}; the run can be resumed with `worldsim run --resume {trace}` once "
        "the role is fixed"
    )
    failed = read_trace(trace).terminal
    assert failed is not None and failed.type == "run_failed"
    assert failed.data.error == says
    assert failed.data.kind == "RoleError" and failed.data.resumable


@pytest.mark.parametrize(
    "role", ["broken_reviewer", "raising_reporter", "empty_init", "batch_raiser"]
)
def test_a_run_a_role_failed_raises_a_role_error_and_resumes_once_the_role_is_fixed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, role: str
) -> None:
    """From the library too the failure is a RoleError naming the role; the resumed run is
    the run the fixed role makes from the start (the same canonical hash)."""
    config = RunConfig(
        card=load_card(CARD), policy=load_policy("branching"), ticks=3, extra_roles=(role,)
    )
    with pytest.raises(RoleError, match=f"^role '{role}': "):
        anyio.run(lambda: run_card(config, tmp_path / "failed", fsync=False))
    (trace,) = (tmp_path / "failed").glob("*.jsonl")
    monkeypatch.setattr(f"{__name__}.FIXED", {role})
    resumed = anyio.run(lambda: resume_run(trace, fsync=False))
    clean = anyio.run(lambda: run_card(config, tmp_path / "clean", fsync=False))
    assert read_trace(resumed.trace).complete
    assert canonical_hash(resumed.trace) == canonical_hash(clean.trace)


def test_a_continued_run_a_role_failed_says_how_it_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A role that fails in a continued run's ticks (after its news was weighed) ends it with
    the same line as a run's: the resume that goes on once the role is fixed."""
    from tests.continuation.test_continue import CUT, NEWS_CARD
    from worldsim.domain.cards import parse_utc
    from worldsim.sim.continuation import continued_name

    monkeypatch.setattr(f"{__name__}.FIXED", {"batch_raiser"})
    parent = invoke("run", NEWS_CARD, "--role", "batch_raiser", "--out", tmp_path)
    assert parent.code == 0, parent.err
    (trace,) = tmp_path.glob("*.jsonl")
    monkeypatch.setattr(f"{__name__}.FIXED", set())
    failed = invoke("run", "--continue", trace, "--as-of", CUT)
    child = trace.parent / continued_name(trace.name, parse_utc(CUT))
    assert failed.code == 2, failed.err
    assert failed.err.strip().splitlines()[-1] == (
        "error: role 'batch_raiser': act_batch raised KeyError: 'batch broke'; the run can be "
        f"resumed with `worldsim run --resume {child}` once the role is fixed"
    )
    monkeypatch.setattr(f"{__name__}.FIXED", {"batch_raiser"})
    resumed = invoke("run", "--resume", child)
    assert resumed.code == 0, resumed.err
    assert read_trace(child).complete
