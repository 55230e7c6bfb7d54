"""The offline governance reviewer: proposals and events → pressure, hazard, ledger, forks.

Pressure relaxes toward the card's prior every tick and takes the tick's mean push and events on
top, so a stance restated every tick counts once and old news fades unless renewed. The hazard
decides when the question resolves; the outcome is kept as the endpoint distribution of that tick
(the realization coin flip is integrated, not drawn). docs/offline-model.md is the specification.
"""

from __future__ import annotations

import math
from typing import Any

from worldsim.domain.outputs import GovernanceOutput
from worldsim.world.build import prior_pressure
from worldsim.world.state import WorldState
from worldsim.world.views import ReviewContext

__all__ = ["OfflineGovernance", "branch_score"]

#: Log-odds a push of full strength from every agent, renewed every tick, holds the pressure at.
KAPPA = 1.0
#: Share of the pressure's departure from the prior that survives into the next tick.
MEMORY = 0.5
#: Smallest |direction × magnitude| that enters the ledger as evidence.
EVIDENCE_FLOOR = 0.1


def branch_score(probability: float, impact: float) -> float:
    """How much a hypothesis deserves its own timeline: consequential and uncertain."""
    return min(1.0, abs(impact)) * (0.5 + 2.0 * probability * (1.0 - probability))


def _softmax(state: WorldState, pressure: dict[str, float]) -> dict[str, float]:
    ids = [ep.id for ep in state.scored]
    top = max(pressure[i] for i in ids)
    weights = {i: math.exp(pressure[i] - top) for i in ids}
    total = sum(weights.values())
    return {i: w / total for i, w in weights.items()}


class OfflineGovernance:
    """Accepts valid proposals, moves pressure, ends a timeline when the question resolves,
    proposes forks at hypotheses: answered as a model answers the reviewer's role (a
    ``GovernanceOutput``, which the role checks against the world like any reply)."""

    name = "governance"
    phase = "review"

    async def answer(self, ctx: ReviewContext) -> GovernanceOutput:
        state = ctx.state
        push_on = dict.fromkeys((ep.id for ep in state.scored), 0.0)
        accepted: list[str] = []
        rejected: list[dict[str, str]] = []
        ledger: list[dict[str, str]] = []

        endpoints = {ep.id: ep for ep in state.endpoints}
        settled = {key for key, row in state.ledger.items() if row.status != "open"}
        where = f"{ctx.timeline}/{ctx.tick}/"
        for p in ctx.proposals:
            ep = endpoints.get(p.endpoint) if p.endpoint is not None else None
            if ep is None:
                rejected.append({"proposal": f"{p.agent}#{p.index}", "reason": "no known endpoint"})
                continue
            if ep.id in settled:
                reason = f"'{ep.id}' is settled"[:200]
                rejected.append({"proposal": f"{p.agent}#{p.index}", "reason": reason})
                continue
            accepted.append(f"{p.agent}#{p.index}")
            push = p.direction * p.magnitude
            if ep.kind == "scored":
                push_on[ep.id] += push
            if abs(push) >= EVIDENCE_FLOOR:
                ledger.append(
                    {
                        "endpoint": ep.id,
                        "evidence": "supports" if push > 0 else "contradicts",
                        "ref": f"{where}{p.agent}/{p.index}"[:120],
                        "note": p.summary[:200],
                    }
                )

        # The push is averaged over every agent of the world (one sitting the tick out pushes 0),
        # so the number of agents does not scale how far the world can move.
        world = {*state.actors.keys(), *state.cohorts.ids, *(p.agent for p in ctx.proposals)}
        agents = max(1, len(world))
        prior = prior_pressure(ctx.card)
        pressure: dict[str, float] = {}
        for ep in state.scored:
            kept = MEMORY * (state.pressure[ep.id] - prior[ep.id])
            pushed = (1.0 - MEMORY) * KAPPA * push_on[ep.id] / agents
            pressure[ep.id] = prior[ep.id] + kept + pushed
        for ev in ctx.observations:
            for endpoint, shift in ev.pressure:
                pressure[endpoint] += shift

        # each endpoint's new pressure, as the shift from where it stands
        shifts = [
            {"endpoint": ep.id, "by": _shift(state.pressure[ep.id], pressure[ep.id])}
            for ep in state.scored
            if pressure[ep.id] != state.pressure[ep.id]
        ]

        # One uniform per tick, whatever the state: does the question resolve in this tick?
        probs = _softmax(state, pressure)
        draw = float(ctx.rng.random())
        resolves = draw < state.hazard and not ctx.is_last_tick

        forced_p_yes: float | None = None
        forced_probs: list[dict[str, Any]] | None = None
        branches: list[dict[str, Any]] = []
        if resolves or ctx.is_last_tick:
            # The outcome drawn at resolution would be endpoint k with probability probs[k]; its
            # expectation is kept instead of a draw, so a timeline's value varies only with its
            # world, never with a coin flip.
            forced_probs = [{"endpoint": k, "p": v} for k, v in probs.items()]
            yes = next((ep.id for ep in state.scored if ep.polarity == "yes"), None)
            forced_p_yes = probs[yes] if yes is not None else None
            if resolves:
                reason = (
                    f"the question resolves (draw {draw:.4f} under hazard {state.hazard:.3f}); "
                    "its outcome is kept as the endpoint distribution"
                )
            else:
                reason = "deadline reached unresolved; forced value from the endpoint pressure"
        else:
            for hyp in sorted(state.hypotheses.values(), key=lambda h: h.id):
                if hyp.status != "open" or not hyp.start_tick <= ctx.tick <= hyp.end_tick:
                    continue
                target = endpoints.get(hyp.endpoint)
                scored = target is not None and target.kind == "scored"
                branches.append(
                    {
                        "hypothesis": hyp.title[:200],
                        "hypothesis_id": hyp.id,
                        "endpoint_id": hyp.endpoint,
                        "probability": hyp.probability,
                        "score": branch_score(hyp.probability, hyp.impact),
                        "impact": hyp.impact if scored else 0.0,
                    }
                )
            reason = f"{len(accepted)} proposals accepted; {len(branches)} branch candidates"

        return GovernanceOutput.model_validate(
            {
                "accepted": accepted,
                "rejected": rejected,
                "pressure": shifts,
                "ledger": ledger,
                "decision": "terminate" if resolves else "fork" if branches else "continue",
                "reason": reason[:400],
                "branches": branches,
                "forced_p_yes": forced_p_yes,
                "forced_probs": forced_probs,
            }
        )


def _shift(now: float, then: float) -> float:
    """The shift from pressure ``now`` to ``then`` (kept within ±50), as a reply states it."""
    return max(-50.0, min(50.0, max(-50.0, min(50.0, then)) - now))
