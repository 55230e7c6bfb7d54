"""The backward pipeline: a hindsight graph for a resolved card, built by two roles under the
quality gates (``worldsim build hindsight``).

1. **Evidence.** The documents about the card up to its resolution: the evidence store
   searched for the question and each outcome with the cut-off at the end of the resolution
   day (the label's ``resolved_at``, else the card's deadline), the up to ``MAX_DOCUMENTS``
   best hits that share at least ``MIN_SHARED_WORDS`` content words with the question and
   outcomes (`worldsim.build.text.content_words`), in date order.
2. **Hindsight role** (``hindsight``, ``HindsightOutput``): a causal explanation of how the
   question resolved, from those documents.
3. **Graph-builder role** (``graph_builder``, ``GraphEditsOutput``): edits of a graph that
   starts with the outcome event alone (propose event, add edge, record impact, delete event or
   edge; `worldsim.build.graph.WorkingGraph`), made as tool calls answered at once (on a model
   route) or listed in the answer. After each round the gates are checked; what
   failed, and the edits that could not apply, are the next round's feedback, up to the
   policy's ``iterations``.
4. **Result.** The graph with ``graph_built: true``, or, if the gates still fail, with
   ``graph_built: false`` and ``failed_gates`` (scoring leaves such a graph out), and its
   ``construction``: roles, prompt versions, route, rounds and whether the offline rules built
   it. Key events are, as for any graph, the top five by magnitude × confidence.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from worldsim.build.calls import BuildLog, ask, role_version
from worldsim.build.graph import (
    GRAPH_TOOLS,
    OUTCOME_ID,
    WorkingGraph,
    gate_failures,
    tool_handler,
)
from worldsim.build.policy import QualityPolicy
from worldsim.build.text import content_words
from worldsim.domain.cards import Card, Endpoint, EvidenceDatabase, utc_iso
from worldsim.domain.contracts import Model
from worldsim.domain.errors import ConfigError
from worldsim.domain.labels import Label
from worldsim.domain.outputs import GraphEditsOutput, HindsightOutput
from worldsim.gateway.store import EvidenceStore, memory_store, open_store
from worldsim.models.routes import parse_route
from worldsim.offline.build import OFFLINE_NOTE
from worldsim.scoring.hindsight.graph import HindsightEvent, HindsightGraph

__all__ = [
    "MAX_DOCUMENTS",
    "build_hindsight",
    "check_resolution",
    "outcome_endpoint",
    "resolution_cutoff",
]

ROLES = ("hindsight", "graph_builder")
MAX_DOCUMENTS = 60
MIN_SHARED_WORDS = 2
SNIPPET_CHARS = 400


def resolution_cutoff(card: Card, label: Label) -> datetime:
    """The end of the resolution day: documents published before it are hindsight evidence."""
    when = label.resolved_at or card.deadline
    return when.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)


@contextlib.asynccontextmanager
async def _store(
    card: Card, db: Path | None, card_path: Path | None
) -> AsyncIterator[EvidenceStore]:
    """``db``, else the card's own evidence (its database, read against the card's folder, or
    its inline documents)."""
    evidence = card.evidence
    if db is None and isinstance(evidence, EvidenceDatabase):
        db = Path(evidence.database)
        if not db.is_absolute() and card_path is not None:
            db = card_path.parent / db
    if db is not None:
        async with open_store(db) as store:
            yield store
    elif isinstance(evidence, tuple) and evidence:
        async with memory_store(evidence) as store:
            yield store
    else:
        raise ConfigError(
            "no documents to build from: give --db, or a card with evidence", field="db"
        )


async def _documents(card: Card, store: EvidenceStore, cutoff: datetime) -> list[dict[str, Any]]:
    queries = [card.question, *(ep.title for ep in card.endpoints)]
    topic = content_words(" ".join(queries))
    found: dict[str, Any] = {}
    for query in queries:
        for hit in await store.search(query, before=cutoff, k=MAX_DOCUMENTS):
            found.setdefault(hit.id, hit)
    docs: list[dict[str, Any]] = []
    for doc_id in found:
        doc = await store.get(doc_id)
        if doc is None:  # pragma: no cover - a search hit is a stored document
            continue
        if len(topic & content_words(f"{doc.title} {doc.text}")) < MIN_SHARED_WORDS:
            continue  # matched on a common word only: another topic
        if len(docs) == MAX_DOCUMENTS:
            break
        docs.append(
            {
                "id": doc.id,
                "published_at": utc_iso(doc.published_at),
                "title": doc.title,
                "snippet": doc.text[:SNIPPET_CHARS],
                "stance": doc.stance,
            }
        )
    return sorted(docs, key=lambda d: (d["published_at"], d["id"]))


def outcome_endpoint(card: Card, outcome: str) -> Endpoint:
    """The endpoint a label's ``outcome`` names (its id, or its polarity on a binary card);
    a ConfigError (field ``outcome``) if none does."""
    for ep in card.endpoints:
        if outcome in (ep.id, ep.polarity):
            return ep
    names = sorted(
        {ep.id for ep in card.endpoints} | {ep.polarity or ep.id for ep in card.endpoints}
    )
    raise ConfigError(
        f"outcome {outcome!r} of card '{card.id}' is none of its endpoints ({', '.join(names)})",
        field="outcome",
    )


def check_resolution(card: Card, label: Label) -> None:
    """A ConfigError (field ``resolved_at``) when the label says the card resolved before its
    ``as_of``: there is no hindsight of a question that closed before it was asked."""
    if label.resolved_at is not None and label.resolved_at < card.as_of:
        raise ConfigError(
            f"resolved_at {utc_iso(label.resolved_at)} is before the as_of of card "
            f"'{card.id}' ({utc_iso(card.as_of)})",
            field="resolved_at",
        )


async def build_hindsight(
    card: Card,
    label: Label,
    models: Mapping[str, Model],
    policy: QualityPolicy,
    log: BuildLog,
    *,
    db: Path | None = None,
    card_path: Path | None = None,
    seed: int = 0,
) -> HindsightGraph:
    """The hindsight graph of ``card`` resolved as ``label``; see the module's doc. ``models``
    holds the model of each role (``hindsight``, ``graph_builder``)."""
    gates = policy.graph
    outcome_title = outcome_endpoint(card, label.outcome).title
    check_resolution(card, label)
    cutoff = resolution_cutoff(card, label)
    routes = {name: model.route for name, model in models.items()}
    versions = {name: role_version(name) for name in ROLES}
    offline = all(parse_route(route).is_offline for route in routes.values())
    log.start(
        "hindsight",
        {name: (versions[name], routes[name]) for name in ROLES},
        card_id=card.id,
        label_outcome=label.outcome,
        cutoff=cutoff.isoformat(),
        gates=gates.model_dump(),
        offline_rules=offline,
    )
    async with _store(card, db, card_path) as store:
        documents = await _documents(card, store, cutoff)
    if not documents:
        raise ConfigError(
            f"no document on card '{card.id}''s topic was published before "
            f"{cutoff.isoformat().replace('+00:00', 'Z')} (the end of its resolution day): "
            "a hindsight graph explains the outcome from documents",
            field="db",
        )
    log.add("documents", cutoff=cutoff.isoformat(), ids=[d["id"] for d in documents])
    common: dict[str, Any] = {
        "card": card,
        "outcome": label.outcome,
        "outcome_title": outcome_title,
        "resolved_at": label.resolved_at.isoformat() if label.resolved_at else None,
        "documents": documents,
        "outcome_event": OUTCOME_ID,
        "gates": gates,
    }
    explained = await ask(
        models["hindsight"], "hindsight", HindsightOutput, card, common, log, seed=seed
    )
    working = WorkingGraph(
        outcome=HindsightEvent(
            id=OUTCOME_ID,
            title=f"Resolved: {outcome_title}",
            date=label.resolved_at,
            type="outcome",
            is_outcome=True,
        ),
        sources=frozenset(d["id"] for d in documents),
    )
    feedback: list[str] = []
    failed: list[str] = []
    rounds = 0
    for rounds in range(1, gates.iterations + 1):
        variables = {
            **common,
            "explanation": explained.explanation,
            "feedback": feedback,
            **working.summary(),
        }
        tool_calls: list[dict[str, Any]] = []
        edits = await ask(
            models["graph_builder"],
            "graph_builder",
            GraphEditsOutput,
            card,
            variables,
            log,
            seed=seed,
            index=rounds,
            tools=GRAPH_TOOLS,
            tool_handler=tool_handler(working, tool_calls),
        )
        refused = [
            f"tool {c['tool']}: {c['refused']}" for c in tool_calls if "refused" in c
        ] + working.apply_all(edits.edits)
        draft, weak = working.graph(gates, card_id=card.id, question=card.question)
        failed = gate_failures(draft, gates)
        log.add(
            "round",
            index=rounds,
            tool_calls=tool_calls,
            edits=len(edits.edits),
            refused=refused,
            weak_edges_left_out=weak,
            failed_gates=failed,
            note=edits.note,
        )
        if not failed:
            break
        feedback = [*failed, *refused]
    construction = {
        "roles": versions,
        "routes": routes,
        "rounds": rounds,
        "offline_rules": offline,
        "explanation": explained.explanation,
        "cutoff": utc_iso(cutoff),
        "note": OFFLINE_NOTE if offline else None,
    }
    graph, _ = working.graph(
        gates,
        card_id=card.id,
        question=card.question,
        graph_built=not failed,
        failed_gates=tuple(failed),
        construction=construction,
    )
    log.add("build_completed", graph_built=not failed, failed_gates=failed, rounds=rounds)
    return graph
