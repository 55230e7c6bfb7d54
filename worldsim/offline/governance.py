"""The offline governance reviewer: proposals and events → pressure, hazard, ledger, forks.

Pressure relaxes toward the card's prior every tick and takes the tick's mean push and events on
top, so a stance restated every tick counts once and old news fades unless renewed. The hazard
decides when the question resolves; the outcome is kept as the endpoint distribution of that tick
(the realization coin flip is integrated, not drawn). docs/offline-model.md is the specification.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from worldsim.domain.outputs import GovernanceOutput
from worldsim.world.build import prior_pressure
from worldsim.world.columns import ColumnVerdict, EvidenceColumns, TickProposals
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
    proposes forks at hypotheses. It reads the tick's proposals as columns and answers with a
    :class:`ColumnVerdict` (:meth:`verdict`), or, for a role that asks one request with the
    reviewer's schema, the same verdict as a ``GovernanceOutput`` (:meth:`answer`); the role
    checks either against the world like any reply."""

    name = "governance"
    phase = "review"

    async def answer(self, ctx: ReviewContext) -> GovernanceOutput:
        verdict = self.verdict(ctx)
        proposals = _tick_proposals(ctx)
        agents, indexes = proposals.column("agent"), proposals.column("index")
        data = verdict.rest.model_dump()
        data["accepted"] = [f"{agents[i]}#{indexes[i]}" for i in np.flatnonzero(verdict.accepted)]
        data["rejected"] = [
            {"proposal": f"{agents[i]}#{indexes[i]}", "reason": reason}
            for i, reason in verdict.rejected.items()
        ]
        ev = verdict.evidence
        data["ledger"] = [
            {"endpoint": e, "evidence": k, "ref": r, "note": n}
            for e, k, r, n in zip(ev.endpoints, ev.kinds, ev.refs, ev.notes, strict=True)
        ]
        return GovernanceOutput.model_validate(data)

    def verdict(self, ctx: ReviewContext) -> ColumnVerdict:
        """The tick's review, read from the columns of its proposals (docs/offline-model.md,
        step 5 on): the pushes summed in canonical order, as one proposal at a time would."""
        state = ctx.state
        proposals = _tick_proposals(ctx)
        endpoint_of = proposals.column("endpoint")
        endpoints = {ep.id: ep for ep in state.endpoints}
        settled = {key for key, row in state.ledger.items() if row.status != "open"}
        # per endpoint named: rejected with this reason, else None (accepted)
        verdicts: dict[str | None, str | None] = {}
        for name in set(endpoint_of):
            ep = endpoints.get(name) if name is not None else None
            if ep is None:
                verdicts[name] = "no known endpoint"
            elif ep.id in settled:
                verdicts[name] = f"'{ep.id}' is settled"[:200]
            else:
                verdicts[name] = None
        accepted = np.array([verdicts[e] is None for e in endpoint_of], dtype=bool)
        rejected = {i: verdicts[endpoint_of[i]] or "" for i in np.flatnonzero(~accepted).tolist()}
        push = np.array(proposals.column("direction")) * np.array(proposals.column("magnitude"))
        push_on = dict.fromkeys((ep.id for ep in state.scored), 0.0)
        for name, pushed, ok in zip(endpoint_of, push.tolist(), accepted.tolist(), strict=True):
            if ok and name in push_on:
                push_on[name] += pushed
        evidence = _evidence(ctx, proposals, endpoint_of, push, accepted)

        # The push is averaged over every agent of the world (one sitting the tick out pushes
        # 0), so the number of agents does not scale how far the world can move.
        agents = max(1, _world_size(state, proposals.column("agent")))
        prior = prior_pressure(ctx.card)
        pressure: dict[str, float] = {}
        for ep in state.scored:
            kept = MEMORY * (state.pressure[ep.id] - prior[ep.id])
            pushed = (1.0 - MEMORY) * KAPPA * push_on[ep.id] / agents
            pressure[ep.id] = prior[ep.id] + kept + pushed
        for ev in ctx.observations:
            for endpoint, shift in ev.pressure:
                pressure[endpoint] += shift
        return ColumnVerdict(
            accepted, rejected, evidence, self._rest(ctx, pressure, int(accepted.sum()))
        )

    def _rest(self, ctx: ReviewContext, pressure: dict[str, float], taken: int) -> Any:
        """Pressure shifts, the hazard's draw, forced values or branch candidates: the review
        beyond its decisions on proposals and its evidence."""
        state = ctx.state
        endpoints = {ep.id: ep for ep in state.endpoints}
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
            reason = f"{taken} proposals accepted; {len(branches)} branch candidates"

        return GovernanceOutput.model_validate(
            {
                "pressure": shifts,
                "decision": "terminate" if resolves else "fork" if branches else "continue",
                "reason": reason[:400],
                "branches": branches,
                "forced_p_yes": forced_p_yes,
                "forced_probs": forced_probs,
            }
        )


def _tick_proposals(ctx: ReviewContext) -> TickProposals:
    proposals = ctx.proposals
    return proposals if isinstance(proposals, TickProposals) else TickProposals(None, proposals)


def _evidence(
    ctx: ReviewContext,
    proposals: TickProposals,
    endpoint_of: list[str | None],
    push: npt.NDArray[np.float64],
    accepted: npt.NDArray[np.bool_],
) -> EvidenceColumns:
    """The ledger entries of the accepted proposals that push hard enough, in canonical order:
    *supports* or *contradicts* their endpoint, citing ``timeline/tick/agent/index``."""
    rows = np.flatnonzero(accepted & (np.abs(push) >= EVIDENCE_FLOOR)).tolist()
    if not rows:
        return EvidenceColumns()
    agents, summaries = proposals.column("agent"), proposals.column("summary")
    indexes = proposals.column("index")
    signs = (push > 0).tolist()
    where = f"{ctx.timeline}/{ctx.tick}/"
    return EvidenceColumns(
        endpoints=[endpoint_of[i] or "" for i in rows],
        kinds=["supports" if signs[i] else "contradicts" for i in rows],
        refs=[f"{where}{agents[i]}/{indexes[i]}"[:120] for i in rows],
        notes=[summaries[i][:200] for i in rows],
    )


def _world_size(state: WorldState, proposers: list[str]) -> int:
    """The number of agents in the world: actors, cohorts and any other agent that proposed."""
    actors = state.actors
    cohorts = set(state.cohorts.ids)
    size = len(actors) + sum(1 for c in cohorts if c not in actors)
    others = {a for a in proposers if a not in actors and a not in cohorts}
    return size + len(others)


def _shift(now: float, then: float) -> float:
    """The shift from pressure ``now`` to ``then`` (kept within ±50), as a reply states it."""
    return max(-50.0, min(50.0, max(-50.0, min(50.0, then)) - now))
