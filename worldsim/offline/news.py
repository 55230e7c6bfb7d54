"""The offline assessor: how likely a piece of news is under what one particle holds.

A continued run's particles are the timelines of its parent as they stood just before the
news; the assessor (phase ``news``) gives each document a likelihood under each particle, and
the particle's new mass is its old mass times the product of its likelihoods, normalised
(docs/concepts.md). Offline, as every role, the answer is a documented rule, not a guess:

    L = (1 + κ·s·(2q − 1)) / (1 + κ)

with ``s`` the document's stance toward yes (in [−1, 1]), ``q`` the particle's yes-probability
(1 or 0 when its ledger has settled the question, else the softmax of its pressure) and ``κ``
the policy's ``news_strength`` in [0, 1]. A document that leans the way the particle leans is
likelier under it; one that leans against it is less likely. A document without a stance, and
every document of a multiple-choice card, gives L = 1 (it says nothing the rule can weigh).
"""

from __future__ import annotations

from worldsim.domain.outputs import AssessmentOutput, NewsLikelihood
from worldsim.world.state import WorldState
from worldsim.world.views import NewsContext, NewsItem, RoleView

__all__ = ["answer_assessment", "offline_assessment", "stance_likelihood", "yes_probability"]


def yes_probability(state: WorldState) -> float | None:
    """A binary particle's yes-probability: its ledger's outcome when settled, else the softmax
    of its pressure (``None`` for a multiple-choice world)."""
    yes = next((ep.id for ep in state.scored if ep.polarity == "yes"), None)
    if yes is None:
        return None
    outcome = state.outcome()
    if outcome in ("yes", "no"):
        return 1.0 if outcome == "yes" else 0.0
    return state.probabilities()[yes]


def stance_likelihood(stance: float | None, q: float | None, strength: float) -> float:
    """The rule's L for one document of stance ``stance`` under a particle of yes-probability
    ``q`` (see the module's doc): in [(1 − κ)/(1 + κ), 1], monotone in their agreement."""
    if stance is None or q is None:
        return 1.0
    return (1.0 + strength * stance * (2.0 * q - 1.0)) / (1.0 + strength)


def _reason(doc: NewsItem, q: float | None, value: float) -> str:
    if doc.stance is None:
        return "the document has no stance toward the question: it does not move this timeline"
    if q is None:
        return "a multiple-choice question: a stance toward yes does not move this timeline"
    toward = "yes" if doc.stance > 0 else "no" if doc.stance < 0 else "neither way"
    return (
        f"the document leans {toward} (stance {doc.stance:+.2f}); this timeline's "
        f"p_yes is {q:.3f}: likelihood {value:.3f}"
    )


def offline_assessment(context: NewsContext) -> AssessmentOutput:
    """Every document's likelihood under the particle of ``context`` by the rule."""
    q = yes_probability(context.state)
    cites = [ep.id for ep in context.state.scored if ep.polarity == "yes"][:1]
    rows = []
    for doc in context.news:
        value = stance_likelihood(doc.stance, q, context.strength)
        rows.append(
            NewsLikelihood(
                doc_id=doc.id,
                likelihood=min(1.0, max(0.0, value)),
                reason=_reason(doc, q, value),
                cites=cites if doc.stance is not None and q is not None else [],
            )
        )
    return AssessmentOutput(likelihoods=rows)


async def answer_assessment(view: RoleView) -> AssessmentOutput:
    """The offline model's answer to an assessor's request (its view holds a NewsContext)."""
    context = view.context
    assert isinstance(context, NewsContext)
    return offline_assessment(context)
