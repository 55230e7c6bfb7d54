"""The forward pipeline: forecasting questions from dated articles and from prediction
markets, checked for quality and temporal validity (``worldsim build questions``).

1. **Clusters.** Articles (a JSONL file as ``worldsim gateway ingest`` reads, or an evidence
   database) are grouped by topic in date order: an article joins the cluster holding its most
   similar article when that similarity (Jaccard of their content words: four letters or more,
   not a stop word) is at least ``CLUSTER_SIMILARITY``, else starts a cluster.
2. **Generator** (role ``question_generator``, ``QuestionsOutput``): questions per cluster, shown
   ``MAX_CLUSTER_ARTICLES`` articles at a time in date order.
   **Markets** (``--markets``, JSON Lines: ``id, question, outcomes, open_date, close_date``,
   optional ``prices`` as ``[[date, p], ...]``, ``description``, ``resolution_criteria``,
   ``source``, ``url``) become questions directly: binary when the outcomes are Yes and No. A
   line with an unknown field, or a date that does not parse or has no time zone, is refused.
3. **Checks.** Every question is scored by the quality role (``question_qa``,
   ``QuestionReviewOutput``) and checked by code: the scores against the policy's thresholds,
   the role's flags (the answer in the question; resolved when it opens), and temporal
   validity — dates that parse, a deadline after ``opens``, provenance articles that exist and
   none published after ``opens``. A question failing any is written to ``rejects.jsonl`` with
   every reason.
4. **Near-duplicates** (token Jaccard of the normalised questions, dates included, at least the
   policy's ``duplicate_similarity``) are merged into the one that opens first: one card, with
   the other's provenance articles that were published by then.
5. **Cards**: one YAML card per question (``as_of`` and ``opens`` its opening date, its
   provenance naming the articles or the market), a market's price history as
   ``<card>.prices.csv`` (``date,price``, for ``worldsim hindsight pressure --market``), and the
   build log ``build.jsonl``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationError, field_validator

from worldsim.build.calls import BuildLog, ask, role_version
from worldsim.build.policy import QualityPolicy
from worldsim.build.text import content_words, jaccard
from worldsim.domain.cards import Card, EvidenceDoc, parse_utc, utc_iso
from worldsim.domain.contracts import Model
from worldsim.domain.errors import CardError
from worldsim.domain.files import first_error, read_jsonl
from worldsim.domain.outputs import QuestionProposal, QuestionReviewOutput, QuestionsOutput
from worldsim.domain.values import FrozenModel
from worldsim.gateway.documents import StoredDocument
from worldsim.interop.questions import binary_endpoints, slug
from worldsim.models.routes import parse_route

__all__ = [
    "CLUSTER_SIMILARITY",
    "Article",
    "Built",
    "Market",
    "build_questions",
    "cluster_articles",
    "read_markets",
    "rejects_jsonl",
]

ROLES = ("question_generator", "question_qa")
CLUSTER_SIMILARITY = 0.15
_FAR = datetime(9999, 1, 1, tzinfo=UTC)
MAX_CLUSTER_ARTICLES = 12
TEXT_CHARS = 600


@dataclass(frozen=True, slots=True)
class Article:
    id: str
    published_at: datetime
    title: str
    text: str = ""
    stance: float | None = None

    @classmethod
    def of(cls, doc: EvidenceDoc | StoredDocument) -> Article:
        """An ingested or stored document as an article."""
        return cls(doc.id, doc.published_at, doc.title, doc.text, doc.stance)

    def as_variable(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "published_at": utc_iso(self.published_at),
            "title": self.title,
            "text": self.text[:TEXT_CHARS],
        }


@dataclass(frozen=True, slots=True)
class Market:
    """A prediction market's question, as read from the markets file."""

    id: str
    proposal: QuestionProposal
    prices: tuple[tuple[str, float], ...] = ()
    source: str | None = None
    url: str | None = None


@dataclass
class Built:
    """What a build made: the cards, the rejected questions and the merges."""

    cards: list[Card] = field(default_factory=list)
    rejects: list[dict[str, Any]] = field(default_factory=list)
    merged: list[dict[str, Any]] = field(default_factory=list)
    prices: dict[str, tuple[tuple[str, float], ...]] = field(default_factory=dict)


def cluster_articles(articles: Sequence[Article]) -> list[list[Article]]:
    """Articles grouped by topic, in date order (see the module's doc)."""
    clusters: list[list[tuple[Article, frozenset[str]]]] = []
    for article in sorted(articles, key=lambda a: (a.published_at, a.id)):
        words = content_words(f"{article.title} {article.text}")
        best, score = None, 0.0
        for cluster in clusters:
            s = max(jaccard(words, other) for _, other in cluster)
            if s > score:
                best, score = cluster, s
        if best is not None and score >= CLUSTER_SIMILARITY:
            best.append((article, words))
        else:
            clusters.append([(article, words)])
    return [[a for a, _ in cluster] for cluster in clusters]


_Text = Annotated[str, Field(min_length=1, pattern=r"\S")]
"""Text with something in it besides white space."""


class _MarketLine(FrozenModel):
    """One line of a markets file (see the module's doc): an undeclared field is refused."""

    id: _Text
    question: _Text
    outcomes: tuple[_Text, ...] = Field(("Yes", "No"), min_length=2)
    open_date: _Text
    close_date: _Text
    prices: tuple[tuple[_Text, Annotated[float, Field(strict=True, ge=0.0, le=1.0)]], ...] = ()
    description: str | None = None
    resolution_criteria: str | None = None
    source: str | None = None
    url: str | None = None

    @field_validator("open_date", "close_date")
    @classmethod
    def _moment(cls, text: str) -> str:
        parse_utc(text)  # its ValueError says what is wrong: not a date, or no time zone
        return text

    @field_validator("prices")
    @classmethod
    def _dated(cls, prices: tuple[tuple[str, float], ...]) -> tuple[tuple[str, float], ...]:
        for i, (date, _) in enumerate(prices):
            try:
                parse_utc(date)
            except ValueError as exc:
                raise ValueError(f"prices.{i}: {date!r} is not a date: {exc}") from None
        return prices


def read_markets(path: Path) -> list[Market]:
    """The markets file (see the module's doc); a bad line is a `CardError` naming it."""
    markets: list[Market] = []
    for number, row in read_jsonl(path, what="markets file"):
        try:
            line = _MarketLine.model_validate(row)
            binary = [o.strip().lower() for o in line.outcomes] == ["yes", "no"]
            proposal = QuestionProposal(
                question=line.question.strip(),
                kind="binary" if binary else "multiple_choice",
                outcomes=[] if binary else list(line.outcomes),
                resolution_criteria=line.resolution_criteria or line.description or "",
                opens=line.open_date,
                deadline=line.close_date,
            )
        except ValidationError as exc:
            name, message = first_error(exc)
            raise CardError(message, file=path, line=number, field=name) from None
        markets.append(
            Market(
                id=line.id.strip(),
                proposal=proposal,
                prices=tuple(line.prices),
                source=line.source,
                url=line.url,
            )
        )
    return markets


def _date(text: str) -> datetime | None:
    return _dated(text)[0]


def _dated(text: str) -> tuple[datetime | None, str]:
    """The moment ``text`` names, or ``None`` and what is wrong with it."""
    try:
        return parse_utc(text), ""
    except (ValueError, TypeError) as exc:
        return None, str(exc)


def _problems(
    proposal: QuestionProposal,
    review: QuestionReviewOutput,
    articles: Mapping[str, Article],
    policy: QualityPolicy,
) -> list[str]:
    """Every reason the question is not kept (empty: kept)."""
    gates = policy.questions
    problems: list[str] = []
    for axis, floor in (
        ("clarity", gates.min_clarity),
        ("measurability", gates.min_measurability),
        ("answerability", gates.min_answerability),
    ):
        score = getattr(review, axis)
        if score < floor:
            problems.append(f"{axis} {score:.2f} is below {floor:.2f}")
    if review.answer_in_question:
        problems.append("the question gives its answer away")
    if review.resolved_at_opens:
        problems.append("temporal validity: already resolved when it opens")
    (opens, opens_fault), (deadline, deadline_fault) = (
        _dated(proposal.opens),
        _dated(proposal.deadline),
    )
    if opens is None:
        problems.append(f"opens: {opens_fault}")
    if deadline is None:
        problems.append(f"deadline: {deadline_fault}")
    if opens is not None and deadline is not None and deadline <= opens:
        problems.append("temporal validity: it resolves at or before it opens")
    for doc_id in proposal.provenance:
        article = articles.get(doc_id)
        if article is None:
            problems.append(f"provenance names an unknown article '{doc_id}'")
        elif opens is not None and article.published_at > opens:
            problems.append(
                f"temporal validity: provenance article '{doc_id}' is dated "
                f"{article.published_at.date().isoformat()}, after it opens "
                f"({opens.date().isoformat()})"
            )
    if proposal.kind == "multiple_choice" and len(proposal.outcomes) < 2:
        problems.append("a multiple-choice question needs two or more outcomes")
    return problems


def _card(
    proposal: QuestionProposal,
    articles: Mapping[str, Article],
    *,
    source_file: str,
    source: str,
    evidence_db: str | None,
    url: str | None = None,
    question_id: str | None = None,
) -> Card:
    opens = proposal.opens
    qid = question_id or slug(opens[:10], _short(proposal.question))
    titles = [
        f"{articles[a].published_at.date()}: {articles[a].title}" for a in proposal.provenance
    ]
    context = proposal.resolution_criteria
    if titles:
        context += "\n\nFrom: " + "; ".join(titles)
    endpoints = (
        binary_endpoints(proposal.question)
        if proposal.kind == "binary"
        else [
            {"id": slug(o.lower()) or f"o{i}", "title": o, "kind": "scored"}
            for i, o in enumerate(proposal.outcomes)
        ]
    )
    data: dict[str, Any] = {
        "id": slug(qid),
        "question": proposal.question,
        "kind": proposal.kind,
        "as_of": opens,
        "opens": opens,
        "deadline": proposal.deadline,
        "endpoints": endpoints,
        "context": context.strip()[:4000],
        "domain": proposal.domain or None,
        "provenance": {
            "source_file": source_file,
            "question_id": qid,
            "source": source,
            "url": url,
            "articles": list(proposal.provenance),
        },
    }
    if evidence_db is not None:
        data["evidence"] = {"database": evidence_db}
    return Card.model_validate({k: v for k, v in data.items() if v is not None})


def _short(question: str) -> str:
    skip = {"will", "the", "a", "an", "by", "of", "on", "in", "to"}
    words = [w for w in re.findall(r"[a-z]+", question.lower()) if w not in skip]
    return "-".join(words[:8])


async def build_questions(
    articles: Sequence[Article],
    markets: Sequence[Market],
    models: Mapping[str, Model],
    policy: QualityPolicy,
    log: BuildLog,
    *,
    source_file: str,
    evidence_db: str | None = None,
    seed: int = 0,
) -> Built:
    """Questions from ``articles`` and ``markets``; see the module's doc. ``models`` holds the
    model of each role (``question_generator``, ``question_qa``)."""
    routes = {name: model.route for name, model in models.items()}
    offline = parse_route(routes["question_generator"]).is_offline
    log.start(
        "questions",
        {name: (role_version(name), routes[name]) for name in ROLES},
        source_file=source_file,
        articles=len(articles),
        markets=len(markets),
        gates=policy.questions.model_dump(),
        offline_rules=offline,
    )
    by_id = {a.id: a for a in articles}
    candidates: list[tuple[QuestionProposal, str, Market | None]] = []
    windows = [
        (c, cluster[start : start + MAX_CLUSTER_ARTICLES])
        for c, cluster in enumerate(cluster_articles(articles))
        for start in range(0, len(cluster), MAX_CLUSTER_ARTICLES)
    ]
    for n, (c, cluster) in enumerate(windows):
        variables = {
            "cluster": c,
            "domain": "",
            "documents": [a.as_variable() for a in cluster],
        }
        out = await ask(
            models["question_generator"],
            "question_generator",
            QuestionsOutput,
            None,
            variables,
            log,
            seed=seed,
            index=n,
        )
        log.add(
            "cluster",
            index=n,
            cluster=c,
            articles=[a.id for a in cluster],
            proposed=len(out.questions),
        )
        generator = "offline rules" if offline else f"model {routes['question_generator']}"
        candidates.extend(
            (q, f"worldsim build questions · {generator}", None) for q in out.questions
        )
    candidates.extend((m.proposal, m.source or "market", m) for m in markets)
    built = Built()
    kept: list[tuple[QuestionProposal, str, Market | None, frozenset[str]]] = []
    for i, (proposal, source, market) in enumerate(candidates):
        docs = [by_id[a].as_variable() for a in proposal.provenance if a in by_id]
        review = await ask(
            models["question_qa"],
            "question_qa",
            QuestionReviewOutput,
            None,
            {
                "proposal": proposal.model_dump(mode="json"),
                "documents": docs,
                "market": market is not None,
            },
            log,
            seed=seed,
            index=i,
        )
        problems = _problems(proposal, review, by_id, policy)
        scores = review.model_dump(include={"clarity", "measurability", "answerability"})
        if problems:
            built.rejects.append(
                {
                    "question": proposal.question,
                    "source": source,
                    "reasons": problems,
                    "scores": scores,
                }
            )
            log.add("rejected", index=i, question=proposal.question, reasons=problems)
            continue
        words = content_words(proposal.question) | frozenset(
            re.findall(r"\d{4}-\d{2}-\d{2}", proposal.question)
        )
        twin_at = next(
            (
                j
                for j, k in enumerate(kept)
                if jaccard(words, k[3]) >= policy.questions.duplicate_similarity
            ),
            None,
        )
        if twin_at is not None:
            old, new = kept[twin_at], (proposal, source, market, words)
            if (_date(new[0].opens) or _FAR) < (_date(old[0].opens) or _FAR):
                first, later = new, old
            else:
                first, later = old, new
            opens = _date(first[0].opens) or _FAR
            # the later one's articles join only if they were out when the kept one opens
            extra = [
                a for a in later[0].provenance if a in by_id and by_id[a].published_at <= opens
            ]
            merged = list(dict.fromkeys([*first[0].provenance, *extra]))
            kept[twin_at] = (first[0].model_copy(update={"provenance": merged}), *first[1:])
            entry = {"question": later[0].question, "into": first[0].question}
            built.merged.append(entry)
            log.add("merged", index=i, **entry)
            continue
        kept.append((proposal, source, market, words))
        log.add("kept", index=i, question=proposal.question, scores=scores)
    ids: set[str] = set()
    for proposal, source, market, _ in kept:
        try:
            card = _card(
                proposal,
                by_id,
                source_file=source_file,
                source=source,
                evidence_db=evidence_db,
                url=market.url if market else None,
                question_id=slug(market.source or "market", market.id) if market else None,
            )
        except ValidationError as exc:
            name, message = first_error(exc)
            reason = f"does not make a valid card: field '{name}': {message}"
            built.rejects.append(
                {"question": proposal.question, "source": source, "reasons": [reason]}
            )
            log.add("rejected", question=proposal.question, reasons=[reason])
            continue
        if card.id in ids:
            card = card.model_copy(update={"id": slug(card.id[:110], str(len(ids)))})
        ids.add(card.id)
        built.cards.append(card)
        if market is not None and market.prices:
            built.prices[card.id] = market.prices
    log.add(
        "build_completed",
        cards=[c.id for c in built.cards],
        rejected=len(built.rejects),
        merged=len(built.merged),
    )
    return built


def rejects_jsonl(built: Built) -> bytes:
    """``rejects.jsonl``: one object per refused question (question, source, reasons, scores)."""
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in built.rejects).encode()
