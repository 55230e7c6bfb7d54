"""A small synthetic trace in the engine's envelope, and a hindsight graph that fits it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

CARD = {
    "id": "merger-review",
    "as_of": "2026-03-01T00:00:00Z",
    "deadline": "2026-04-01T00:00:00Z",
    "endpoints": [
        {"id": "approve", "title": "approved", "polarity": "yes"},
        {"id": "block", "title": "blocked", "polarity": "no"},
    ],
}

Record = tuple[str, str | None, int | None, dict[str, Any]]

_WRITTEN: list[Record] = [
    ("run_started", None, None, {"card": CARD, "ticks": 2}),
    ("timeline_started", "t0", None, {"parent": None, "fork_tick": None, "depth": 0, "mass": 1.0}),
    (
        "tick_started",
        "t0",
        0,
        {
            "date": "2026-03-01T00:00:00Z",
            "active": ["company-a"],
            "observations": [
                {
                    "id": "ev1",
                    "title": "Regulator R opens phase two review",
                    "description": "An in-depth probe begins.",
                }
            ],
        },
    ),
    (
        "retrieval",
        "t0",
        0,
        {
            "agent": "company-a",
            "timeline": "t0",
            "tick": 0,
            "tool": "search_evidence",
            "query": "remedies",
            "cutoff": "2026-03-01T00:00:00Z",
            "doc_ids": ["d1", "d2"],
            "refused": False,
            "reason": None,
        },
    ),
    (
        "retrieval",
        "t0",
        0,
        {
            "agent": "company-a",
            "timeline": "t0",
            "tick": 0,
            "tool": "open_document",
            "doc_id": "late",
            "cutoff": "2026-03-01T00:00:00Z",
            "doc_ids": [],
            "refused": True,
            "reason": "after_cutoff",
        },
    ),
    (
        "proposal",
        "t0",
        0,
        {
            "agent": "company-a",
            "role": "actor",
            "index": 0,
            "kind": "action",
            "endpoint": "approve",
            "direction": 1,
            "magnitude": 0.4,
            "summary": "Company A offers divestment remedies",
            "deltas": {},
            "cites": ["d2", "d9"],
        },
    ),
    (
        "proposal",
        "t0",
        0,
        {
            "agent": "regulator",
            "role": "actor",
            "index": 0,
            "kind": "action",
            "endpoint": "block",
            "direction": -1,
            "magnitude": 0.2,
            "summary": "Regulator R rejects the remedies",
            "deltas": {},
            "cites": ["d3"],
        },
    ),
    (
        "review",
        "t0",
        0,
        {
            "agent": "governance",
            "accepted": [{"agent": "company-a", "index": 0}],
            "rejected": [{"agent": "regulator", "index": 0, "reason": "early"}],
            "deltas": {},
            "ledger": {},
            "decision": "fork",
            "reason": "",
            "branches": [],
            "forced_p_yes": None,
        },
    ),
    (
        "fork",
        "t0",
        0,
        {
            "child": "t0.1",
            "parent": "t0",
            "index": 0,
            "candidate": {
                "hypothesis": "Regulator R blocks the merger",
                "hypothesis_id": "h1",
                "endpoint_id": "block",
                "probability": 0.4,
                "score": 0.9,
            },
            "mass_before": 1.0,
            "mass_child": 0.4,
            "mass_parent": 0.6,
        },
    ),
    (
        "tick_committed",
        "t0",
        0,
        {"digest": "x", "mass": 0.6, "ledger": {}, "pressure": {}, "p_yes_now": 0.7},
    ),
    ("timeline_started", "t0.1", None, {"parent": "t0", "fork_tick": 0, "depth": 1, "mass": 0.4}),
    ("tick_started", "t0", 1, {"date": "2026-03-16T00:00:00Z", "observations": [], "active": []}),
    (
        "tick_started",
        "t0.1",
        1,
        {"date": "2026-03-16T00:00:00Z", "observations": [], "active": ["regulator"]},
    ),
    (
        "proposal",
        "t0.1",
        1,
        {
            "agent": "regulator",
            "role": "actor",
            "index": 0,
            "kind": "action",
            "endpoint": "block",
            "direction": -1,
            "magnitude": 0.8,
            "summary": "Regulator R sues to block the deal",
            "deltas": {},
            "cites": [],
        },
    ),
    (
        "review",
        "t0.1",
        1,
        {
            "agent": "governance",
            "accepted": [{"agent": "regulator", "index": 0}],
            "rejected": [],
            "deltas": {},
            "ledger": {},
            "decision": "continue",
            "reason": "",
            "branches": [],
            "forced_p_yes": None,
        },
    ),
    (
        "tick_committed",
        "t0",
        1,
        {"digest": "y", "mass": 0.6, "ledger": {}, "pressure": {}, "p_yes_now": 0.8},
    ),
    (
        "tick_committed",
        "t0.1",
        1,
        {"digest": "z", "mass": 0.4, "ledger": {}, "pressure": {}, "p_yes_now": 0.1},
    ),
    (
        "timeline_ended",
        "t0",
        None,
        {
            "status": "deadline",
            "settlement": "yes",
            "forced_p_yes": None,
            "mass": 0.6,
            "end_tick": 1,
        },
    ),
    (
        "timeline_ended",
        "t0.1",
        None,
        {
            "status": "deadline",
            "settlement": "no",
            "forced_p_yes": None,
            "mass": 0.4,
            "end_tick": 1,
        },
    ),
]


def _per_tick(records: list[Record]) -> list[Record]:
    """The records above as a trace holds them: a tick's proposals in one ``proposals`` record
    and its accesses in one ``retrievals`` record (each access without the place and cut-off
    the record gives)."""
    out: list[Record] = []
    for kind, tl, tick, data in records:
        last = out[-1] if out else None
        if kind == "proposal":
            if last is None or last[0] != "proposals" or last[1:3] != (tl, tick):
                out.append(("proposals", tl, tick, {"proposals": []}))
            out[-1][3]["proposals"].append(data)
        elif kind == "retrieval":
            if last is None or last[0] != "retrievals" or last[1:3] != (tl, tick):
                out.append(("retrievals", tl, tick, {"cutoff": data["cutoff"], "accesses": []}))
            place = ("timeline", "tick", "cutoff")
            out[-1][3]["accesses"].append({k: v for k, v in data.items() if k not in place})
        else:
            out.append((kind, tl, tick, data))
    return out


RECORDS = _per_tick(_WRITTEN)


def write_trace(
    path: Path,
    records: list[tuple[str, str | None, int | None, dict[str, Any]]],
    *,
    torn: bool = True,
) -> Path:
    prev = hashlib.sha256(b"run-1").hexdigest()
    lines: list[str] = []
    for seq, (kind, tl, tick, data) in enumerate(records):
        line = json.dumps(
            {
                "v": 2,
                "seq": seq,
                "ts": "2026-11-01T00:00:00Z",
                "run": "run-1",
                "type": kind,
                "tl": tl,
                "tick": tick,
                "prev": prev,
                "data": data,
            }
        )
        prev = hashlib.sha256(line.encode()).hexdigest()
        lines.append(line + "\n")
    if torn:
        lines.append('{"v": 2, "seq": 99, "type": "run_compl')
    path.write_text("".join(lines), encoding="utf-8")
    return path


@pytest.fixture
def trace_path(tmp_path: Path) -> Path:
    return write_trace(tmp_path / "run.jsonl", RECORDS)


@pytest.fixture
def graph_path(tmp_path: Path) -> Path:
    """The synthetic records' forecast graph, as `worldsim hindsight forecast-graph` writes it."""
    from worldsim.trace.forecast import RecordView, extract_forecast

    views = [RecordView(kind, tl, tick, data, run="run-1") for kind, tl, tick, data in RECORDS]
    path = tmp_path / "forecast.json"
    path.write_text(extract_forecast(views).model_dump_json(indent=2))
    return path


@pytest.fixture(scope="session")
def engine_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real trace: a branching offline run of the demo card."""
    import anyio

    from worldsim.domain.cards import load_card
    from worldsim.domain.config import RunConfig
    from worldsim.domain.policy import load_policy
    from worldsim.sim.session import run_card

    root = Path(__file__).resolve().parents[2]
    card = load_card(root / "scenarios" / "merger-review.yaml")
    config = RunConfig(card=card, policy=load_policy("branching"), seed=6, ticks=4)
    out = tmp_path_factory.mktemp("engine")
    return anyio.run(lambda: run_card(config, out, fsync=False)).trace


HINDSIGHT: dict[str, Any] = {
    "card_id": "merger-review",
    "events": [
        {
            "id": "h1",
            "title": "Regulator R opens a phase two review",
            "description": "In-depth probe of the merger",
            "date": "2026-03-02",
            "type": "regulatory",
            "source_ids": ["d2"],
        },
        {
            "id": "h2",
            "title": "Company A offers divestment remedies",
            "description": "Company A proposes to sell a unit",
            "date": "2026-03-05",
            "type": "corporate",
            "source_ids": ["d3", "d7"],
        },
        {
            "id": "h3",
            "title": "Regulator R approves the merger with conditions",
            "date": "2026-03-30",
            "type": "outcome",
            "is_outcome": True,
        },
    ],
    "edges": [
        {
            "source": "h1",
            "target": "h2",
            "relation": "triggers",
            "strength": 0.7,
            "confidence": 0.8,
        },
        {"source": "h2", "target": "h3", "relation": "enables", "strength": 0.8, "confidence": 0.7},
    ],
    "impacts": [
        {"event": "h1", "direction": "negative", "magnitude": 0.4, "confidence": 0.5},
        {"event": "h2", "direction": "positive", "magnitude": 0.6, "confidence": 0.5},
        {"event": "h2", "direction": "mixed", "magnitude": 0.9, "confidence": 0.9},
        {"event": "h3", "direction": "positive", "magnitude": 1.0, "confidence": 1.0},
    ],
}


@pytest.fixture
def hindsight_path(tmp_path: Path) -> Path:
    path = tmp_path / "merger-review.json"
    path.write_text(json.dumps(HINDSIGHT), encoding="utf-8")
    return path
