"""Forks and path mass (DESIGN §4.5): which branch candidates become timelines, and how mass
splits between parent and child.

An admitted candidate forks: the child takes ``mass × p`` and half the parent's spare slots, the
parent keeps ``mass × (1 − p)``. A refused one is, under ``on_reject: sample``, drawn in place
with its probability so the path mass stays unbiased.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from worldsim.domain.errors import StateError
from worldsim.domain.policy import BranchPolicy
from worldsim.domain.rng import rng_for
from worldsim.trace.records import ForkData, ForkRejectedData
from worldsim.trace.writer import TraceWriter
from worldsim.world.moves import BranchCandidate
from worldsim.world.state import WorldState, apply_deltas
from worldsim.world.timeline import Timeline, child_id

__all__ = ["ForkBook", "support_margin"]

Notify = Callable[..., None]


@dataclass(eq=False)
class ForkBook:
    """Resolves each tick's branch candidates and keeps the run's forks and refusals."""

    policy: BranchPolicy
    seed: int
    ticks: int
    writer: TraceWriter
    notify: Notify
    forks: list[dict[str, Any]] = field(default_factory=list, init=False)
    """One entry per fork: parent, child, tick, hypothesis, probability (for the report)."""
    rejected: int = field(default=0, init=False)

    def admission(
        self, tl: Timeline, cand: BranchCandidate, k: int, made: int, state: WorldState
    ) -> str | None:
        """Why the policy refuses this candidate, or None when it is admitted."""
        policy = self.policy
        if cand.score < policy.branch_threshold:
            return f"score {cand.score:.3f} below branch_threshold {policy.branch_threshold}"
        endpoint = state.endpoint(cand.endpoint_id)
        if endpoint is None:
            return f"unknown endpoint '{cand.endpoint_id}'"
        if policy.candidate_endpoints_only and endpoint.kind != "scored":
            return f"endpoint '{cand.endpoint_id}' is not a scored endpoint"
        if tl.depth + 1 > policy.max_depth:
            return f"child depth {tl.depth + 1} exceeds max_depth {policy.max_depth}"
        if tl.slots < 2:
            return f"max_active {policy.max_active}: no timeline slot left on this lineage"
        if made >= policy.max_branches_per_tick:
            return f"max_branches_per_tick {policy.max_branches_per_tick} reached"
        remaining = self.ticks - 1 - k
        if remaining < max(1, policy.runway_ticks):
            return f"runway: {remaining} ticks remain, {max(1, policy.runway_ticks)} needed"
        if policy.adaptive is not None:
            margin = support_margin(state)
            if margin > policy.adaptive.max_margin:
                return (
                    f"adaptive: ledger support margin {margin:.3f} above "
                    f"{policy.adaptive.max_margin}"
                )
        return None

    async def branch(
        self,
        tl: Timeline,
        k: int,
        state: WorldState,
        candidates: Sequence[BranchCandidate],
        children: list[Timeline],
    ) -> WorldState:
        """Resolve the tick's branch candidates in order: fork, or sample in place, or drop.

        New children are appended to ``children``; the parent's state after the tick's
        candidates is returned.
        """
        sampler = rng_for(self.seed, "sample", tl.id, k)
        made = 0
        invalid: dict[int, str] = {}
        for j, cand in enumerate(candidates):
            try:
                apply_deltas(state, cand.if_true)
                apply_deltas(state, cand.if_false)
            except StateError as exc:
                invalid[j] = f"invalid deltas: {exc.message}"
        for j, cand in enumerate(candidates):
            if j in invalid:
                self.rejected += 1
                await self.writer.emit(
                    "fork_rejected",
                    ForkRejectedData(
                        index=j,
                        candidate=cand,
                        reason=invalid[j],
                        sampled=False,
                        came_true=None,
                        deltas=[],
                    ),
                    tl=tl.id,
                    tick=k,
                )
                continue
            reason = self.admission(tl, cand, k, made, state)
            if reason is None:
                made += 1
                state = await self._fork(tl, k, state, candidates, j, invalid, children)
                continue
            self.rejected += 1
            came_true: bool | None = None
            deltas: list[Any] = []
            if self.policy.on_reject == "sample":
                came_true = float(sampler.random()) < cand.probability
                deltas = list(cand.if_true if came_true else cand.if_false)
                state = apply_deltas(state, deltas)
            await self.writer.emit(
                "fork_rejected",
                ForkRejectedData(
                    index=j,
                    candidate=cand,
                    reason=reason,
                    sampled=self.policy.on_reject == "sample",
                    came_true=came_true,
                    deltas=deltas,
                ),
                tl=tl.id,
                tick=k,
            )
            self.notify("fork_rejected", timeline=tl.id, tick=k, reason=reason)
        return state

    async def _fork(
        self,
        tl: Timeline,
        k: int,
        state: WorldState,
        candidates: Sequence[BranchCandidate],
        j: int,
        invalid: dict[int, str],
        children: list[Timeline],
    ) -> WorldState:
        """Fork on candidate ``j``: the child lives it, the parent does not."""
        cand = candidates[j]
        tl.children += 1
        cid = child_id(tl.id, tl.children)
        child_rng = rng_for(self.seed, "sample", cid, k)
        child_deltas = list(cand.if_true)
        if self.policy.on_reject == "sample":
            for n, later in enumerate(candidates[j + 1 :], start=j + 1):
                if n in invalid:
                    continue
                came = float(child_rng.random()) < later.probability
                child_deltas.extend(later.if_true if came else later.if_false)
        child_state = apply_deltas(state, child_deltas)
        mass_before = tl.mass
        mass_child = mass_before * cand.probability
        mass_parent = mass_before * (1.0 - cand.probability)
        spare = tl.slots - 1
        slots_child = (spare + 1) // 2
        tl.slots -= slots_child
        tl.mass = mass_parent
        state = apply_deltas(state, cand.if_false)
        fork = ForkData(
            child=cid,
            parent=tl.id,
            index=j,
            candidate=cand,
            mass_before=mass_before,
            mass_child=mass_child,
            mass_parent=mass_parent,
            depth=tl.depth + 1,
            slots_child=slots_child,
            child_deltas=child_deltas,
            parent_deltas=list(cand.if_false),
        )
        await self.writer.emit("fork", fork, tl=tl.id, tick=k)
        self.forks.append(
            {
                "parent": tl.id,
                "child": cid,
                "tick": k,
                "hypothesis": cand.hypothesis,
                "probability": cand.probability,
            }
        )
        self.notify("fork", parent=tl.id, child=cid, tick=k)
        children.append(Timeline(cid, tl.id, k, tl.depth + 1, mass_child, slots_child, child_state))
        return state


def support_margin(state: WorldState) -> float:
    """|supports − contradicts| / max(1, entries) over the scored endpoints' ledger evidence."""
    supports = contradicts = 0
    for ep in state.scored:
        for ev in state.ledger[ep.id].evidence:
            if (ev.kind == "supports") == (ep.polarity != "no"):
                supports += 1
            else:
                contradicts += 1
    return abs(supports - contradicts) / max(1, supports + contradicts)
