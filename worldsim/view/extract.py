"""A verified trace as the viewer's data: one JSON-ready mapping, read once, embedded once.

The trace is read once and checked by :func:`worldsim.trace.verify.verify_trace` (the chain, the
seal, every record's schema, every committed digest and the extraction), whose replay gives the
view its ticks, so the view shows what ``worldsim replay`` shows, and only for a trace that
verifies: one that does not is refused as ``verify`` refuses it (:class:`TraceError`, exit 1).
A trace that is sound but cut off (a torn final line, no terminal record, a failed run) is
shown, marked incomplete.

Everything here is data: strings from the trace go into the page as JSON text and are put in the
document as text by the page's script, never as markup.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from worldsim.domain.cards import utc_iso
from worldsim.domain.contracts import lineage
from worldsim.domain.errors import TraceIncomplete
from worldsim.scoring.hindsight.forecast import GRAPH_TYPES, forecast_graph_json_of
from worldsim.scoring.hindsight.pressure import simulated_pressure as pressure_series
from worldsim.trace.forecast import record_views
from worldsim.trace.reader import Trace, TraceLine
from worldsim.trace.records import accesses_of
from worldsim.trace.replay import TickStep
from worldsim.trace.signing import PublicKey
from worldsim.trace.verify import Verification, Verifying
from worldsim.view.lineage import continuation

__all__ = ["PAGE_BY_TIMELINE_BYTES", "Verified", "trace_data", "verified"]

PAGE_BY_TIMELINE_BYTES = 8_000_000
"""Above this size of embedded data the tick view shows one timeline per page (docs/viewer.md)."""

_TOKENS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens")


@dataclass(frozen=True, slots=True)
class Verified:
    """A trace that verifies, read whole for the viewer: the verification, the trace, and
    each replayed tick in the page's form (made as it was replayed, so that the replay's
    objects are let go tick by tick), with what each tick tells of its timeline."""

    verification: Verification
    trace: Trace
    ticks: tuple[dict[str, Any], ...]
    timeline_steps: tuple[_TimelineStep, ...]

    @property
    def head(self) -> str | None:
        return self.verification.head


class _TimelineStep(NamedTuple):
    """What one replayed tick tells of its timeline: its mass, its forks and rejections."""

    timeline: str
    tick: int
    mass: float
    forks: list[dict[str, Any]]
    rejected: list[dict[str, Any]]


def verified(
    path: str | Path, *, expect_head: str | None = None, public_key: PublicKey | None = None
) -> Verified:
    """Verify a trace for viewing; a trace that does not verify, or misses the head or the
    signature it must have, raises verify's TraceError (exit 1); a file with no complete record
    TraceIncomplete (exit 3: nothing to show)."""
    ticks: list[dict[str, Any]] = []
    timeline_steps: list[_TimelineStep] = []

    def shown(step: TickStep) -> None:
        ticks.append(_step(step))
        timeline_steps.append(_timeline_step(step))

    held: list[TraceLine] = []
    reading = Verifying(
        path,
        expect_head=expect_head,
        public_key=public_key,
        canonical=True,
        on_step=shown,
        hold=held,
    )
    for _ in reading:
        pass
    result = reading.result
    if result.head is None:
        raise TraceIncomplete(f"nothing to show: {result.why_incomplete}", file=path)
    trace = Trace(
        path=result.path,
        lines=tuple(held),
        torn_line=result.torn_line,
        end_offset=sum(len(line.raw) + 1 for line in held),
        unterminated=result.unterminated,
    )
    return Verified(result, trace, tuple(ticks), tuple(timeline_steps))


def trace_data(
    checked: Verified,
    *,
    pressure: dict[str, Any] | None = None,
    anchored: bool = False,
) -> dict[str, Any]:
    """The viewer's data for one verified trace (see docs/viewer.md for its shape).

    ``pressure`` is an optional causal pressure series (from a hindsight graph) charted beside
    the simulated one; ``anchored`` says the trace's head was checked against an expected one.
    """
    trace = checked.trace
    effective = trace.effective
    started = trace.started
    card: dict[str, Any] = started.card
    committed = {
        (line.tl, line.tick): line.fields for line in effective if line.type == "tick_committed"
    }
    ticks = sorted(checked.ticks, key=lambda t: (t["tick"], lineage(t["timeline"])))
    return {
        "kind": "trace",
        "page_bytes": PAGE_BY_TIMELINE_BYTES,
        "meta": _meta(trace, started, card),
        "verification": verification(checked, anchored=anchored),
        "endpoints": [
            {k: ep.get(k) for k in ("id", "title", "kind", "polarity")}
            for ep in card.get("endpoints", [])
        ],
        "timelines": _timelines(effective, checked.timeline_steps),
        "ticks": [_committed(t, committed.get((t["timeline"], t["tick"]), {})) for t in ticks],
        "calls": [_call(line) for line in effective if line.type == "llm_call"],
        "documents": _documents(card),
        "retrievals": _retrievals(effective),
        "report": _last(effective, "report"),
        "audit": _last(effective, "audit"),
        "interventions": [line.fields for line in effective if line.type == "intervention"],
        "continuation": continuation(effective, trace.path),
        "forecast_graph": _forecast_graph(effective, trace.path),
        "extraction": _last(effective, "extraction"),
        "pressure": {"simulated": simulated_pressure(effective), **(pressure or {})},
    }


def _retrievals(effective: list[TraceLine]) -> list[dict[str, Any]]:
    """Every gateway access of the run as the page lists it. Only the lines that hold
    accesses are parsed, and each is let go once its rows are made (the page keeps those)."""
    rows: list[dict[str, Any]] = []
    for line in effective:
        if line.type in _ACCESS_TYPES:
            rows += [_access(a) for a in accesses_of(line.type, line.fields, line.tl, line.tick)]
            line.release()
    return rows


_ACCESS_TYPES = frozenset({"retrievals"})

#: An access's fields the page does not show: the cut-off (the run's as-of date, in the meta)
#: and a search's number of results asked for.
_UNSHOWN = frozenset({"cutoff", "k"})
_UNSHOWN_OF_READ = _UNSHOWN | {"doc_ids"}


def _access(access: dict[str, Any]) -> dict[str, Any]:
    """A gateway access as the page lists it: what it shows, without null or false fields (a
    tick's accesses are most of a large page's data), a read without its one-id list."""
    unshown = _UNSHOWN_OF_READ if access.get("tool") == "open_document" else _UNSHOWN
    return {
        key: value
        for key, value in access.items()
        if key not in unshown and value is not None and value is not False
    }


def _forecast_graph(effective: list[TraceLine], path: Path) -> dict[str, Any] | None:
    """The run's forecast graph as scoring reads it (derived from the records and checked
    against the run's digest), as the page lists it: each event's timeline, tick, kind and
    title, and the number of links; ``None`` when the run's condition builds none."""
    views = record_views(effective, GRAPH_TYPES)
    graph = forecast_graph_json_of(views, file=path)
    del views
    for line in effective:  # the records' parses are let go: the page keeps what it lists
        if line.type in GRAPH_TYPES:
            line.release()
    if graph is None:
        return None
    events = [
        {"timeline": e["timeline"], "tick": e["tick"], "kind": e["kind"], "title": e["title"]}
        for e in graph["events"]
    ]
    return {"events": events, "link_count": len(graph["links"])}


def verification(checked: Verified, *, anchored: bool = False) -> dict[str, Any]:
    """What the header shows: chain and seal, complete or cut off, head, anchor, signature."""
    result = checked.verification
    trace = checked.trace
    terminal = trace.terminal
    return {
        "chain": "ok",
        "seal": "ok" if terminal is not None else "absent",
        "records": result.records,
        "complete": result.complete and result.torn_line is None,
        "terminal": result.terminal,
        "torn_line": result.torn_line,
        "head": result.head,
        "canonical": result.canonical,
        "extraction_matches": result.matches if result.recorded else None,
        "mass_sum": result.mass_sum,
        "anchor": "head matches --expect-head" if anchored else None,
        "signature": _signature(terminal, result.signature_checked),
    }


def _signature(terminal: TraceLine | None, checked: bool) -> dict[str, Any] | None:
    """The terminal record's signature, if it carries one; ``checked`` when a public key
    confirmed it (``view --public-key``)."""
    if terminal is None:
        return None
    signature = terminal.fields.get("signature")
    if not signature:
        return None
    return {"present": True, "key_id": terminal.fields.get("key_id"), "checked": checked}


def _meta(trace: Trace, started: Any, card: dict[str, Any]) -> dict[str, Any]:
    return {
        "file": trace.path.name,
        "run": trace.run_id,
        "card": card.get("id"),
        "question": card.get("question"),
        "card_kind": card.get("kind", "binary"),
        "as_of": card.get("as_of"),
        "deadline": card.get("deadline"),
        "kind": started.kind,
        "method": started.method,
        "model": started.model,
        "policy": started.policy.get("name"),
        "seed": started.seed,
        "ticks": started.ticks,
        "extraction_rule": started.extraction_rule,
        "routes": started.routes,
        "prompt_versions": started.prompt_versions,
        "worldsim_version": started.worldsim_version,
    }


def _timelines(effective: list[TraceLine], steps: Iterable[_TimelineStep]) -> list[dict[str, Any]]:
    """Every timeline with its parent, fork point, masses and end; forks and rejections."""
    timelines: dict[str, dict[str, Any]] = {}
    for line in effective:
        if line.type == "reweighting":  # a continued run: how the news moved each particle
            for row in line.fields["rows"]:
                if row["timeline"] in timelines:
                    timelines[row["timeline"]]["news"] = {**row, "tick": line.tick}
                    timelines[row["timeline"]]["mass_start"] = row["posterior"]
            continue
        if line.tl is None:
            continue
        if line.type in ("timeline_started", "particle"):  # a particle: carried from its parent
            d = line.fields
            timelines[line.tl] = {
                "id": line.tl,
                "parent": d["parent"],
                "fork_tick": d["fork_tick"],
                "depth": d["depth"],
                "mass_start": d["mass"],
                "forks": [],
                "rejected": [],
                "end": None,
            }
        elif line.type == "timeline_ended" and line.tl in timelines:
            timelines[line.tl]["end"] = line.fields
    for step in steps:
        node = timelines.get(step.timeline)
        if node is None:
            continue
        node["mass"] = step.mass
        node["last_tick"] = step.tick
        node["forks"] += step.forks
        node["rejected"] += step.rejected
    return sorted(timelines.values(), key=lambda t: lineage(t["id"]))


def _timeline_step(step: TickStep) -> _TimelineStep:
    forks = [
        {
            "tick": step.tick,
            "child": f.child,
            "hypothesis": f.candidate.hypothesis,
            "endpoint": f.candidate.endpoint_id,
            "probability": f.candidate.probability,
            "mass_child": f.mass_child,
        }
        for f in step.forks
    ]
    rejected = [
        {
            "tick": step.tick,
            "hypothesis": r.candidate.hypothesis,
            "endpoint": r.candidate.endpoint_id,
            "probability": r.candidate.probability,
            "reason": r.reason,
            "came_true": r.came_true,
        }
        for r in step.rejected
    ]
    return _TimelineStep(step.timeline, step.tick, step.mass, forks, rejected)


def _committed(tick: dict[str, Any], committed: dict[str, Any]) -> dict[str, Any]:
    """A tick in the page's form with what its commit recorded: the p_yes then, and why."""
    return {**tick, "p_yes_now": committed.get("p_yes_now"), "reason": committed.get("reason", "")}


def _step(step: TickStep) -> dict[str, Any]:
    """One timeline's tick: what ``worldsim replay`` prints for it, plus the review's detail
    (its commit's p_yes and reason are added from its record, :func:`_committed`)."""
    out = step.as_json()
    review = step.review
    accepted = set(out.pop("accepted"))
    out["proposals"] = [
        {
            "agent": p.agent,
            "index": p.index,
            "role": getattr(p, "role", None),
            "kind": p.kind,
            "endpoint": p.endpoint,
            "direction": p.direction,
            "magnitude": p.magnitude,
            "summary": p.summary,
            "cites": list(p.cites),
            "unretrieved": list(getattr(p, "unretrieved_citations", [])),
            "accepted": f"{p.agent}#{p.index}" in accepted,
        }
        for p in step.proposals
    ]
    out["observations"] = [{"id": o.id, "title": o.title} for o in step.observations]
    out["review"] = (
        {
            "agent": review.agent,
            "decision": review.decision,
            "reason": review.reason,
            "ledger": [u.model_dump(mode="json", exclude_none=True) for u in review.ledger],
            "deltas": len(review.deltas),
        }
        if review is not None
        else None
    )
    out["probs"] = step.state.probabilities()
    return out


def _call(line: TraceLine) -> dict[str, Any]:
    """One model call, as the call list shows it: its prompt (``None`` for a trace from before
    prompts were recorded), reply, tokens, attempts and cost."""
    d = line.fields
    usage = d.get("usage") or {}
    return {
        "role": d.get("role"),
        "agent": d.get("agent"),
        "tl": d.get("timeline"),
        "tick": d.get("tick"),
        "route": f"{d.get('provider')}/{d.get('requested_model')}",
        "resolved": d.get("resolved_model"),
        "prompt_version": d.get("prompt_version"),
        "request_hash": d.get("request_hash"),
        "tokens": [usage.get(k, 0) for k in _TOKENS],
        "latency_s": d.get("latency_s"),
        "attempts": d.get("attempts"),
        "errors": d.get("errors") or [],
        "cache": d.get("cache"),
        "cost_usd": d.get("cost_usd"),
        "finish": d.get("finish_reason"),
        "error": d.get("error"),
        "reply": d.get("reply"),
        "messages": d.get("messages"),
        "tool_calls": d.get("tool_calls") or [],
    }


def _documents(card: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The card's evidence documents by id, with their age in days at the card's cut-off."""
    cutoff = _date(card.get("as_of"))
    docs: dict[str, dict[str, Any]] = {}
    for doc in card.get("evidence") or []:
        published = _date(doc.get("published_at"))
        days = (published - cutoff).total_seconds() / 86400 if published and cutoff else None
        docs[str(doc.get("id"))] = {
            "title": doc.get("title"),
            "published_at": doc.get("published_at"),
            "source": doc.get("source"),
            "days": days,
        }
    return docs


def _last(effective: list[TraceLine], kind: str) -> dict[str, Any] | None:
    return next((line.fields for line in reversed(effective) if line.type == kind), None)


def simulated_pressure(effective: Iterable[TraceLine]) -> list[list[Any]]:
    """``[date, value]`` per tick: the mass-weighted mean ``p_yes_now`` of its timelines.

    The same series as ``worldsim hindsight pressure`` draws (scoring.hindsight.pressure).
    """
    records = record_views(effective, ("tick_started", "tick_committed"))  # all it reads
    return [[utc_iso(p.date), p.value] for p in pressure_series(records)]


def _date(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
