"""Runs with evidence: retrievals are traced by the tool and nothing from the future leaks."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from tests.conftest import RunFn
from worldsim.domain.cards import Card
from worldsim.gateway import open_store, read_articles
from worldsim.trace.reader import read_trace

FUTURE_TOKEN = "zqxfuturetoken"


def _articles(path: Path) -> Path:
    rows = [
        {
            "id": "d-early",
            "published_at": "2027-01-02T09:00:00Z",
            "title": "Regulator R hints at clearance of the merger",
            "text": "Officials signal remedies may suffice for the merger of Company A.",
            "source": "wire",
            "stance": 0.8,
        },
        {
            "id": "d-critics",
            "published_at": "2026-12-20T12:00:00Z",
            "title": "Rival Supplier C attacks the merger",
            "text": "Customers fear higher prices after the merger.",
            "source": "paper",
            "stance": -0.6,
        },
        {
            "id": "d-at-cutoff",
            "published_at": "2027-01-04T00:00:00Z",
            "title": f"Merger news at the cutoff {FUTURE_TOKEN}",
            "text": f"Regulator R merger {FUTURE_TOKEN}",
            "stance": 1,
        },
        {
            "id": f"d-{FUTURE_TOKEN}",
            "published_at": "2027-02-01T00:00:00Z",
            "title": f"Regulator R clears the merger {FUTURE_TOKEN}",
            "text": f"The merger is cleared {FUTURE_TOKEN}",
            "stance": 1.0,
        },
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def _card_with_database(demo_card: Card, tmp_path: Path) -> Card:
    db = tmp_path / "evidence.sqlite"

    async def ingest() -> None:
        articles = read_articles(_articles(tmp_path / "articles.jsonl"))
        async with open_store(db, create=True) as store:
            await store.add(articles)

    anyio.run(ingest)
    data = demo_card.model_dump(mode="json")
    data["evidence"] = {"database": str(db)}
    return Card.model_validate(data)


def test_retrievals_are_traced_and_the_future_never_reaches_an_agent(
    demo_card: Card, tmp_path: Path, run: RunFn
) -> None:
    card = _card_with_database(demo_card, tmp_path)
    result = run(card, "branching", 1)
    trace = read_trace(result.trace)
    retrievals = trace.accesses()
    assert retrievals, "agents searched the gateway"
    seen = {doc for r in retrievals for doc in r.doc_ids}
    assert seen == {"d-early", "d-critics"}
    assert all(r.cutoff.isoformat().startswith("2027-01-04") for r in retrievals)
    cited = {c for p in trace.proposals() for c in p.data.cites}
    assert cited == {"d-early", "d-critics"}
    assert all(not p.data.unretrieved_citations for p in trace.proposals())
    assert FUTURE_TOKEN not in result.trace.read_text(encoding="utf-8")


def test_evidence_stance_moves_p_yes(demo_card: Card, tmp_path: Path, run: RunFn) -> None:
    card = _card_with_database(demo_card, tmp_path)
    bare = demo_card.model_copy(update={"evidence": None})
    with_evidence = [run(card, "no_branch", s).p_yes for s in range(12)]
    without = [run(bare, "no_branch", s).p_yes for s in range(12)]
    # The documents lean yes on balance (+0.8, −0.6): never lower, and higher somewhere.
    pairs = list(zip(with_evidence, without, strict=True))
    assert all(a is not None and b is not None and a >= b - 1e-12 for a, b in pairs)
    assert any(a is not None and b is not None and a > b for a, b in pairs)


def test_a_missing_evidence_database_is_a_config_error(
    demo_card: Card, run: RunFn, tmp_path: Path
) -> None:
    from worldsim.domain.errors import ConfigError

    data = demo_card.model_dump(mode="json")
    data["evidence"] = {"database": str(tmp_path / "absent.sqlite")}
    with pytest.raises(ConfigError, match="evidence database not found"):
        run(Card.model_validate(data))
