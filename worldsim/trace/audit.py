"""The audit vector (DESIGN §2): per run, the checks that make its numbers trustworthy."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet

from worldsim.domain.cards import Card
from worldsim.domain.contracts import EXPECTED, lineage
from worldsim.models.leakage import LeakageGuard
from worldsim.trace.records import AuditData, ExtractionData
from worldsim.world.build import WorldSource, prior_of
from worldsim.world.moves import Claim, TimelineSummary
from worldsim.world.state import WorldState

__all__ = ["MASS_TOLERANCE", "audit_run", "check_world", "endpoint_problems", "ground_claims"]

MASS_TOLERANCE = 1e-9


def check_world(state: WorldState) -> list[str]:
    """Initialization validity: everything the world refers to exists and is well formed."""
    problems: list[str] = []
    agents = set(state.actors.keys()) | set(state.cohorts.ids)
    for edge in state.edges:
        for end in (edge.source, edge.target):
            if end not in agents:
                problems.append(f"edge {edge.source}->{edge.target}: unknown agent '{end}'")
    ids = {ep.id for ep in state.endpoints}
    for _, hyp in sorted(state.hypotheses.items()):
        if hyp.endpoint not in ids:
            problems.append(f"hypothesis '{hyp.id}': unknown endpoint '{hyp.endpoint}'")
    for ep in state.scored:
        if ep.id not in state.pressure:
            problems.append(f"scored endpoint '{ep.id}' has no pressure")
    if len(state.scored) < 2:
        problems.append("fewer than two scored endpoints")
    return problems


def endpoint_problems(card: Card, timelines: Sequence[TimelineSummary]) -> list[str]:
    """Endpoint hygiene: scored endpoints are the card's, settlements name only scored outcomes."""
    problems: list[str] = []
    scored = card.scored_endpoints
    if card.kind == "binary":
        allowed = {"yes", "no", EXPECTED, "unresolved"}
        if sorted(ep.polarity or "" for ep in scored) != ["no", "yes"]:
            problems.append("binary card without one yes and one no scored endpoint")
    else:
        allowed = {ep.id for ep in scored} | {EXPECTED, "unresolved"}
    for ep in card.endpoints:
        if ep.kind == "auxiliary" and ep.polarity is not None:
            problems.append(f"auxiliary endpoint '{ep.id}' carries a polarity")
    for tl in timelines:
        if tl.settlement not in allowed:
            problems.append(f"timeline {tl.id} settled on '{tl.settlement}', not a scored outcome")
    return problems


def ground_claims(
    claims: Iterable[Claim],
    timelines: Sequence[TimelineSummary],
    proposals: AbstractSet[tuple[str, int, str]],
    endpoint_ids: set[str],
    documents: AbstractSet[str] | None = None,
) -> list[str]:
    """Every reference a claim makes that does not resolve against the run."""
    by_id = {tl.id: tl for tl in timelines}
    bad: list[str] = []
    for n, claim in enumerate(claims):
        if not claim.refs:
            bad.append(f"claim {n}: no reference")
        for ref in claim.refs:
            label = f"claim {n}"
            if ref.timeline is not None:
                tl = by_id.get(ref.timeline)
                if tl is None:
                    bad.append(f"{label}: unknown timeline {ref.timeline}")
                    continue
                first = tl.fork_tick if tl.fork_tick is not None else 0
                if ref.tick is not None and not first <= ref.tick <= tl.end_tick:
                    bad.append(f"{label}: timeline {ref.timeline} has no tick {ref.tick}")
                if ref.agent is not None and (ref.timeline, ref.tick, ref.agent) not in proposals:
                    bad.append(f"{label}: no proposal by {ref.agent} at {ref.timeline}/{ref.tick}")
            if ref.ledger is not None and ref.ledger not in endpoint_ids:
                bad.append(f"{label}: unknown endpoint {ref.ledger}")
            if ref.document is not None and (documents is None or ref.document not in documents):
                bad.append(f"{label}: document {ref.document} was never retrieved")
    return bad


def audit_run(
    *,
    card: Card,
    init_problems: list[str],
    world_source: WorldSource,
    timelines: Sequence[TimelineSummary],
    extraction: ExtractionData,
    claims: Sequence[Claim],
    proposals: AbstractSet[tuple[str, int, str]],
    documents: AbstractSet[str] | None = None,
    report_failed: str | None = None,
    leakage: LeakageGuard | None = None,
) -> AuditData:
    endpoint_bad = endpoint_problems(card, timelines)
    mass_sum = 0.0
    for tl in sorted(timelines, key=lambda t: lineage(t.id)):
        mass_sum += tl.mass
    ungrounded = ground_claims(
        claims, timelines, proposals, {ep.id for ep in card.endpoints}, documents
    )
    if report_failed is not None:
        ungrounded = [report_failed, *ungrounded]
    findings = [f.model_dump(mode="json") for f in leakage.findings] if leakage else []
    return AuditData(
        initialization_valid=not init_problems,
        initialization_problems=init_problems,
        endpoint_hygiene=not endpoint_bad,
        endpoint_problems=endpoint_bad,
        mass_sum=mass_sum,
        mass_conserved=abs(mass_sum - 1.0) <= MASS_TOLERANCE,
        unresolved_mass=extraction.unresolved_mass,
        extraction_rule=extraction.rule,
        report_grounding="grounded" if not ungrounded else "ungrounded",
        ungrounded_refs=ungrounded,
        leakage="not-checked" if leakage is None else ("findings" if findings else "clean"),
        leakage_findings=findings,
        world=world_source,
        prior=prior_of(card),
    )
