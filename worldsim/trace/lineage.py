"""The records of a continued run (docs/concepts.md): its parent, its particles, its news, each
particle's likelihood of the news, and the re-weighting that follows.

A continued run (``worldsim run --continue PARENT --as-of DATE``) starts from its parent's
timelines as they stood at the end of the tick before DATE's tick (the *particles*). Its
``run_started`` names the parent (:class:`ParentRef`); one ``particle`` record per particle
carries its lineage, its mass then and its state (so the trace replays alone); one ``news``
record per document published between the parent's cut-off and DATE; one ``likelihood`` record
per particle (the assessor's judgement of every document); one ``reweighting`` record with the
arithmetic `verify` checks. The models join the trace's one record union
(:mod:`worldsim.trace.records`).
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from worldsim.domain.cards import utc_iso
from worldsim.domain.values import FrozenModel

__all__ = [
    "DocumentLikelihood",
    "LikelihoodData",
    "NewsData",
    "ParentRef",
    "ParticleData",
    "ReweightRow",
    "ReweightingData",
    "news_data",
]


class ParentRef(FrozenModel):
    """The run a continued run continues, and where it was cut."""

    run: str = Field(description="the parent's run id")
    path: str = Field(description="the parent trace's path as given")
    head: str = Field(pattern=r"^[0-9a-f]{64}$", description="the parent trace's head")
    canonical: str = Field(
        pattern=r"^[0-9a-f]{64}$",
        description="the parent's canonical hash (the continued run's canonical hash covers it)",
    )
    tick: int = Field(ge=0, description="the cut tick j, the tick that holds as_of")
    as_of: str = Field(description="the continued run's today and its gateway cut-off")
    origin: str = Field(description="the calendar's origin: the parent's tick 0 date")
    since: str = Field(description="the parent's cut-off: news is published in [since, as_of)")


class ParticleData(FrozenModel):
    """One timeline of the parent as it stood at the end of tick j−1, with the mass it held."""

    parent: str | None
    fork_tick: int | None
    depth: int
    mass: float = Field(description="the prior mass: the parent's at the end of tick j−1")
    slots: int
    children: int = Field(description="forks this timeline made in the parent (ids not reused)")
    status: Literal["running", "settled", "terminated"]
    settlement: str | None = None
    forced_p_yes: float | None = None
    forced_probs: dict[str, float] | None = None
    end_tick: int | None = None
    reason: str = ""
    digest: str
    state: dict[str, Any]


class NewsData(FrozenModel):
    """One document published in [the parent's cut-off, as_of), in date-then-id order."""

    id: str
    published_at: str
    title: str
    stance: float | None
    source: str | None = None
    text_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


def news_data(
    id: str,
    published_at: datetime,
    title: str,
    text: str,
    stance: float | None,
    source: str | None,
) -> NewsData:
    """A document of news as the trace records it: its text by hash (the card holds it)."""
    return NewsData(
        id=id,
        published_at=utc_iso(published_at),
        title=title,
        stance=stance,
        source=source,
        text_sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
    )


class DocumentLikelihood(FrozenModel):
    doc_id: str
    raw: float = Field(description="the assessor's likelihood, as it gave it")
    used: float = Field(description="the likelihood used: raw, raised to at least epsilon")
    reason: str = ""
    cites: list[str] = Field(default_factory=list)


class LikelihoodData(FrozenModel):
    """How likely the news is under one particle: per document, and their product."""

    documents: list[DocumentLikelihood]
    likelihood: float = Field(description="the product of the used likelihoods, in news order")
    epsilon: float


class ReweightRow(FrozenModel):
    timeline: str
    prior: float
    likelihood: float
    posterior: float
    pruned: bool
    value: float | None = Field(
        None,
        description="the parent's outcome value of this particle's subtree (binary cards)",
    )


class ReweightingData(FrozenModel):
    """New mass w = m·L / Σ m·L; a particle whose w falls below ``prune_below`` keeps mass 0
    (pruned) and the others share its mass in proportion; ``effective_paths`` is 1/Σw²."""

    rows: list[ReweightRow]
    evidence: float = Field(description="Σ m·L over the particles")
    prune_below: float
    effective_paths: float
    p_yes_reweighted: float | None = Field(
        None,
        description="Σ w·v: the parent's futures re-weighted by the news, without new simulation",
    )
