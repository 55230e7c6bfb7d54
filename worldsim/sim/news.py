"""News re-weights a continued run's particles (docs/concepts.md).

The news is the card's documents published in [the parent's cut-off, the continued run's
date), by date then id, at most the policy's ``max_news``, read through the Temporal Gateway
cut off at that date. The assessor (a prompt role of phase ``news``, ``agents/assessor.md``)
judges, once per particle, every document's likelihood under what that particle holds; a
likelihood below ``EPSILON`` is raised to it, and the particle's likelihood is their product.
The re-weighting itself is :func:`worldsim.world.particles.reweigh`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from worldsim.domain.cards import Card, utc_iso
from worldsim.domain.contracts import CallSite, ChatMessage, Model, ModelRequest
from worldsim.domain.errors import ModelError
from worldsim.domain.outputs import AssessmentOutput, NewsLikelihood
from worldsim.gateway.documents import StoredDocument
from worldsim.roles.prompts import PromptRole
from worldsim.sim.particles import Particle
from worldsim.trace.lineage import DocumentLikelihood, LikelihoodData, NewsData, news_data
from worldsim.world.particles import likelihood_product
from worldsim.world.views import NewsContext, NewsItem, RoleView

__all__ = ["EPSILON", "assess", "news_items", "news_record"]

EPSILON = 1e-6
"""The least likelihood a document may have under a particle: no single document, however
unlikely an assessor finds it, sets a particle's mass to exactly zero (pruning does that)."""


def news_items(docs: Sequence[StoredDocument]) -> tuple[NewsItem, ...]:
    return tuple(
        NewsItem(
            id=d.id,
            published_at=d.published_at,
            title=d.title,
            text=d.text,
            stance=d.stance,
            source=d.source,
        )
        for d in docs
    )


def news_record(item: NewsItem) -> NewsData:
    """A document of news as the trace records it: its text by hash (the card holds it)."""
    return news_data(item.id, item.published_at, item.title, item.text, item.stance, item.source)


def _variables(context: NewsContext, particle: Particle) -> dict[str, object]:
    state = context.state
    probs = state.probabilities()
    data = particle.data
    forks = (
        [f"{particle.id} was forked from {data.parent} at tick {data.fork_tick}"]
        if data.parent is not None
        else []
    )
    return {
        "card": context.card,
        "date": utc_iso(context.date),
        "tick": context.tick - 1,
        "timeline": context.timeline,
        "endpoints": [
            {
                "id": ep.id,
                "title": ep.title,
                "p": probs[ep.id],
                "status": state.ledger[ep.id].status,
            }
            for ep in state.scored
        ],
        "forks": forks,
        "events": [ev.title for ev in state.events if ev.tick < context.tick],
        "news": [
            {
                "id": n.id,
                "published_at": utc_iso(n.published_at),
                "title": n.title,
                "text": n.text[:4000],
            }
            for n in context.news
        ],
    }


async def assess(
    role: PromptRole,
    model: Model,
    *,
    card: Card,
    particle: Particle,
    news: tuple[NewsItem, ...],
    tick: int,
    date: datetime,
    strength: float,
    seed: int,
) -> LikelihoodData:
    """One assessor call for one particle: every document's likelihood, and their product. A
    document the reply does not judge keeps likelihood 1, said in its reason."""
    context = NewsContext(
        card=card,
        timeline=particle.id,
        tick=tick,
        date=date,
        state=particle.state,
        news=news,
        strength=strength,
    )

    def messages() -> tuple[ChatMessage, ...]:
        system, user = role.render(**_variables(context, particle))
        return (ChatMessage("system", system), ChatMessage("user", user))

    request = ModelRequest(
        messages=messages,
        view=RoleView(context=context),
        output_type=AssessmentOutput,
        site=CallSite(role=role.name, agent=role.name, timeline=particle.id, tick=tick),
        prompt_version=role.version,
        temperature=role.meta.temperature,
        seed=seed,
        max_tokens=role.meta.max_tokens,
    )
    output = (await model.request(request)).output
    if not isinstance(output, AssessmentOutput):
        raise ModelError(f"{model.route}: the assessor's reply is not an AssessmentOutput")
    judged: dict[str, NewsLikelihood] = {}
    for judgement in output.likelihoods:
        judged.setdefault(judgement.doc_id, judgement)
    documents = []
    for item in news:
        row = judged.get(item.id)
        if row is None:
            documents.append(
                DocumentLikelihood(
                    doc_id=item.id, raw=1.0, used=1.0, reason="not judged by the assessor"
                )
            )
            continue
        documents.append(
            DocumentLikelihood(
                doc_id=item.id,
                raw=row.likelihood,
                used=max(EPSILON, row.likelihood),
                reason=row.reason,
                cites=list(row.cites),
            )
        )
    return LikelihoodData(
        documents=documents,
        likelihood=likelihood_product([d.used for d in documents]),
        epsilon=EPSILON,
    )
