"""The cohort prompt role: an archetype's action distribution, from which members are sampled.

The model answers for the cohort as a whole (cost grows with cohorts, not people); the cohort
proposes one move and its new attention, trust and sentiment, or, where its members are
simulated one by one, hands every member the archetype's actions in one delta.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from worldsim.domain.outputs import CohortOutput
from worldsim.roles.asking import PromptedRole, tick_view
from worldsim.world.moves import Proposal
from worldsim.world.state import MemberAction, SetCohort, UpdateMembers
from worldsim.world.views import TickContext

__all__ = ["COHORT_SAMPLE", "CohortPrompt"]

#: Members sampled from a cohort's action distribution (cost grows with cohorts, not people).
COHORT_SAMPLE = 50


class CohortPrompt(PromptedRole):
    """``CohortOutput``: an archetype's action distribution; members are sampled from it."""

    async def act(self, ctx: TickContext) -> Sequence[Proposal]:
        table = ctx.state.cohorts
        i = table.index(ctx.agent)
        cohort = {
            "name": table.names[i],
            "size": int(table.size[i]),
            "attention": float(table.attention[i]),
            "trust": float(table.trust[i]),
            "sentiment": float(table.sentiment[i]),
        }
        out: CohortOutput = await self.ask(
            self.site(ctx.agent, ctx.timeline, ctx.tick),
            ctx,
            lambda: tick_view(ctx),
            cohort=cohort,
        )
        shares = _shares(out)
        if table.members and table.members[i] is not None:
            return [_members_move(ctx, out, shares, table.names[i])]
        members = min(COHORT_SAMPLE, int(table.size[i]))
        picks = ctx.rng.choice(len(out.actions), size=members, p=np.array(shares))
        counts = Counter(int(p) for p in picks)
        direction = float(sum(out.actions[k].direction * n for k, n in counts.items()) / members)
        magnitude = float(sum(out.actions[k].magnitude * n for k, n in counts.items()) / members)
        top = max(counts, key=lambda k: (counts[k], -k))
        summary = ", ".join(
            f"{out.actions[k].label} ×{n}" for k, n in sorted(counts.items(), key=lambda kv: -kv[1])
        )
        return [
            Proposal(
                agent=ctx.agent,
                index=0,
                kind="cohort_update",
                endpoint=out.actions[top].endpoint,
                direction=float(np.clip(direction, -1, 1)),
                magnitude=float(np.clip(magnitude, 0, 1)),
                summary=f"{cohort['name']} ({members} sampled): {summary}"[:500],
                deltas=(
                    SetCohort(
                        id=ctx.agent,
                        attention=out.attention,
                        trust=out.trust,
                        sentiment=float(np.clip(direction, -1, 1)),
                    ),
                ),
            )
        ]


def _shares(out: CohortOutput) -> list[float]:
    """The share of members taking each action: the probabilities normalised (equal shares
    when they are all zero)."""
    total = math.fsum(a.probability for a in out.actions)
    if total > 0:
        return [a.probability / total for a in out.actions]
    return [1 / len(out.actions)] * len(out.actions)


def _members_move(
    ctx: TickContext, out: CohortOutput, shares: Sequence[float], name: str
) -> Proposal:
    """A cohort's proposal when its members are simulated: the archetype's actions go to every
    member in one ``update_members`` delta, and the proposal pushes the likeliest action's
    endpoint with the actions' expected direction and magnitude."""
    pairs = list(zip(out.actions, shares, strict=True))
    return Proposal(
        agent=ctx.agent,
        index=0,
        kind="cohort_update",
        endpoint=max(out.actions, key=lambda a: a.probability).endpoint,
        direction=min(1.0, max(-1.0, math.fsum(a.direction * w for a, w in pairs))),
        magnitude=min(1.0, max(0.0, math.fsum(a.magnitude * w for a, w in pairs))),
        summary=f"{name} (all members): {', '.join(f'{a.label} {w:.0%}' for a, w in pairs)}"[:500],
        deltas=(
            UpdateMembers(
                id=ctx.agent,
                actions=tuple(
                    MemberAction(direction=a.direction, magnitude=a.magnitude, probability=w)
                    for a, w in pairs
                ),
                attention=out.attention,
                trust=out.trust,
                draw=int(ctx.rng.integers(2**63)),
            ),
        ),
    )
