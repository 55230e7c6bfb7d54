"""The offline model's answers for the benchmark builder's roles: rules, not reading.

They are honest about what they can do. The hindsight explanation lists the retrieved
documents in date order. The graph builder proposes one event per retrieved document (its
title, date and id as the source), chains them in date order into
the outcome with fixed strength 0.5 and confidence 0.7, and records each event's impact from its
document's ``stance`` (toward yes; none: neutral). Asked again with the quality gates' feedback,
it has nothing more to add: its graph stands or falls on how many dated documents there are.
Every output says it came from these rules.

For questions, the generator turns each sentence that schedules something for a later date into
a binary question, and the quality role scores a question's form (see the functions' docs); a
market's question counts as backed by its market.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

from worldsim.domain.outputs import (
    GraphEdit,
    GraphEditsOutput,
    HindsightOutput,
    QuestionProposal,
    QuestionReviewOutput,
    QuestionsOutput,
)
from worldsim.world.views import RoleView

__all__ = [
    "OFFLINE_NOTE",
    "offline_graph_edits",
    "offline_hindsight",
    "offline_question_review",
    "offline_questions",
]

OFFLINE_NOTE = "offline rules: events from dated document titles, chained in date order"
STRENGTH = 0.5
CONFIDENCE = 0.7


def _documents(view: RoleView) -> list[dict[str, Any]]:
    docs = [d for d in view.variables.get("documents", ()) if isinstance(d, dict)]
    return sorted(docs, key=lambda d: (str(d.get("published_at", "")), str(d.get("id", ""))))


async def offline_hindsight(view: RoleView) -> HindsightOutput:
    docs = _documents(view)
    lines = [f"{str(d.get('published_at', ''))[:10]}: {d.get('title', '')}" for d in docs]
    text = "Offline rules, no reading: the retrieved documents in date order. " + "; ".join(lines)
    return HindsightOutput(explanation=text[:4000], sources=[str(d["id"]) for d in docs][:60])


def _event_id(doc_id: str) -> str:
    return "ev_" + re.sub(r"[^A-Za-z0-9_]", "_", doc_id)[:70]


async def offline_graph_edits(view: RoleView) -> GraphEditsOutput:
    outcome = str(view.variables.get("outcome_event", "outcome"))
    if any(e.get("id") != outcome for e in view.variables.get("graph_events", ())):
        # a later round: the rules have nothing to add
        return GraphEditsOutput(edits=[], note=OFFLINE_NOTE + "; nothing more to add")
    docs = _documents(view)
    edits: list[GraphEdit] = []
    ids: list[str] = []
    for d in docs:
        eid = _event_id(str(d["id"]))
        ids.append(eid)
        edits.append(
            GraphEdit(
                op="propose_event",
                id=eid,
                title=str(d.get("title", ""))[:300] or eid,
                date=str(d.get("published_at", ""))[:40],
                source_ids=[str(d["id"])],
            )
        )
        stance = d.get("stance")
        if isinstance(stance, int | float) and abs(stance) > 0.2:
            direction = "positive" if stance > 0 else "negative"
            magnitude = min(1.0, abs(float(stance)))
        else:
            direction, magnitude = "neutral", 0.2
        edits.append(
            GraphEdit(
                op="record_impact",
                event=eid,
                direction=direction,
                magnitude=magnitude,
                confidence=CONFIDENCE,
            )
        )
    for source, target in zip(ids, [*ids[1:], outcome], strict=True):
        edits.append(
            GraphEdit(
                op="add_edge",
                source=source,
                target=target,
                relation="causes",
                strength=STRENGTH,
                confidence=CONFIDENCE,
            )
        )
    return GraphEditsOutput(edits=edits, note=OFFLINE_NOTE)


# -- the forward pipeline's rules

_SCHEDULED = re.compile(
    r"(?P<subject>[A-Z][^.;:!?]{2,120}?)\s+"
    r"(?:will|is expected to|is scheduled to|are expected to|are scheduled to|plans to|plan to)\s+"
    r"(?P<predicate>[^.;:!?]{3,200}?)\s+(?:on|by|before)\s+"
    r"(?P<date>\d{4}-\d{2}-\d{2})"
)
_GIVEAWAY = re.compile(r"\b(already|has been|have been|was|were|had)\b", re.IGNORECASE)


def _next_day(text: str) -> str:
    """The day after an article's date, at midnight UTC: the question's earliest forecastable
    moment, when a run's gateway (cut off strictly before it) shows the article."""
    day = datetime.fromisoformat(text[:10]).date() + timedelta(days=1)
    return f"{day.isoformat()}T00:00:00Z"


async def offline_questions(view: RoleView) -> QuestionsOutput:
    """A binary question from every sentence that schedules something for a later date
    ("X will Y on 2027-03-15" → "Will X Y by 2027-03-15?"), opening the day after the article
    (a subject that reports speech, "A said B will ...", keeps only B)."""
    proposals: list[QuestionProposal] = []
    seen: set[str] = set()
    for doc in _documents(view):
        published = str(doc.get("published_at", ""))[:10]
        text = f"{doc.get('title', '')}. {doc.get('text', '')}"
        for match in _SCHEDULED.finditer(text):
            when = match["date"]
            if when <= published:
                continue  # not in the future of the article
            subject = match["subject"].strip().rpartition(" said ")[2]
            subject = subject[0].lower() + subject[1:] if subject[:4] == "The " else subject
            question = f"Will {subject} {match['predicate'].strip()} by {when}?"
            if question in seen:
                continue
            seen.add(question)
            proposals.append(
                QuestionProposal(
                    question=question[:400],
                    domain=str(view.variables.get("domain", ""))[:80],
                    resolution_criteria=(
                        f"Resolves yes if {subject} {match['predicate'].strip()} on or before "
                        f"{when}, as reported by a dated article; otherwise no."
                    )[:1000],
                    opens=_next_day(published),
                    deadline=when,
                    provenance=[str(doc["id"])],
                )
            )
    return QuestionsOutput(questions=proposals[:10])


async def offline_question_review(view: RoleView) -> QuestionReviewOutput:
    """Scores from the question's form: a question mark and a length of 6 to 40 words (clarity),
    a deadline and resolution criteria (measurability), articles behind it and a deadline
    after it opens (answerability); past-tense giveaways flag an answer in the question."""
    q = view.variables.get("proposal")
    assert isinstance(q, dict)
    text = str(q.get("question", ""))
    words = len(text.split())
    clarity = (0.5 if text.endswith("?") else 0.0) + (0.5 if 6 <= words <= 40 else 0.0)
    measurability = (0.5 if q.get("deadline") else 0.0) + (
        0.5 if q.get("resolution_criteria") else 0.0
    )
    backed = bool(q.get("provenance")) or bool(view.variables.get("market"))
    answerability = (0.5 if backed else 0.0) + (
        0.5 if str(q.get("deadline", "")) > str(q.get("opens", "")) else 0.0
    )
    return QuestionReviewOutput(
        clarity=clarity,
        measurability=measurability,
        answerability=answerability,
        answer_in_question=bool(_GIVEAWAY.search(text)),
        resolved_at_opens=False,
        notes="offline rules: scored from the question's form, not its meaning",
    )
