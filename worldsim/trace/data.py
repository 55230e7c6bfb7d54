"""The data of each trace record type (DESIGN §4.8): what a line's ``data`` holds.

:mod:`worldsim.trace.records` wraps each in its envelope model and the one union every line is
validated against, and re-exports these names.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import datetime
from operator import itemgetter
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    field_serializer,
    model_serializer,
)
from pydantic_core.core_schema import SerializerFunctionWrapHandler

from worldsim.domain.cards import UtcDatetime, utc_iso
from worldsim.domain.jsonbytes import (
    canonical_bytes,
    compact_bytes,
    floats_in,
    raw_json,
)
from worldsim.gateway.access import ACCESS_DEFAULTS, Access, Calls
from worldsim.gateway.access import RetrievalRecord as RetrievalData
from worldsim.trace.lineage import (
    ParentRef,
)
from worldsim.trace.tickbytes import Kept, KeptProposals, access_rows, proposal_rows
from worldsim.world.build import WorldSource
from worldsim.world.columns import MoveColumns, TickProposals
from worldsim.world.moves import PROPOSALS, BranchCandidate, Claim, Proposal, Review
from worldsim.world.state import Delta

KeyId = Annotated[
    str,
    Field(
        pattern=r"^([0-9a-f]{64})?$",
        description="SHA-256 (hex) of the raw Ed25519 public key that signed the seal",
    ),
]


Signature = Annotated[
    str,
    Field(
        pattern=r"^([0-9a-f]{128})?$",
        description="Ed25519 signature (hex) of 'worldsim.trace-seal/1 ' + the seal",
    ),
]


class Payload(NamedTuple):
    """A record's JSON ``data`` as its maker built it, with every float it holds (for the
    writer's ``emit(type_, data, floats=floats)``, which then need not look for them)."""

    data: dict[str, Any]
    floats: list[float]


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RunStartedData(_Data):
    worldsim_version: str
    git_revision: str | None
    card_hash: str
    card: dict[str, Any]
    method: str
    model: str
    policy: dict[str, Any]
    routes: dict[str, str]
    prompt_versions: dict[str, str]
    seed: int
    ticks: int
    extraction_rule: str
    kind: Literal["multiverse", "direct"] = "multiverse"
    card_path: str | None = None
    role_overrides: dict[str, str] = Field(default_factory=dict)
    extra_roles: list[str] = Field(default_factory=list)
    config: dict[str, Any] = Field(
        description=(
            "the run's settings (RunConfig) as one value: card, policy, seed, ticks, extraction "
            "rule, method, roles and model settings; no secrets"
        ),
    )
    forecast_date: str | None = Field(
        None,
        description=(
            "the simulated today when it differs from the card's as_of (the card is recorded "
            "unchanged): the world's first tick, the prompts' date and the gateway cut-off"
        ),
    )
    condition: str | None = Field(
        None,
        description=(
            "the agent condition when it is not the default search_graph: vanilla, "
            "causal_simulation, search or near_resolution"
        ),
    )
    signed_by: str = Field(
        "",
        pattern=r"^([0-9a-f]{64})?$",
        description=(
            "the id of the key the run's final record is to be signed with (a resumed run "
            "must be resumed with that key); empty when the run is not signed"
        ),
    )
    parent: ParentRef | None = Field(
        None,
        description=(
            "a continued run's parent (worldsim run --continue): its run id, path, head, "
            "canonical hash and the cut tick; absent for a run started from its card"
        ),
    )

    @model_serializer(mode="wrap")
    def _parent_when_set(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """``parent`` is written only by a continued run."""
        data: dict[str, Any] = handler(self)
        if data.get("parent", 0) is None:
            del data["parent"]
        return data


class WorldInitializedData(_Data):
    state: dict[str, Any]
    digest: str
    problems: list[str] = Field(default_factory=list)
    source: WorldSource


class TimelineStartedData(_Data):
    parent: str | None
    fork_tick: int | None
    depth: int
    mass: float
    slots: int
    digest: str


class Observation(_Data):
    id: str
    title: str
    description: str = ""


class TickStartedData(_Data):
    date: str
    observations: list[Observation]
    active: list[str]


class ProposalData(Proposal):
    role: str
    unretrieved_citations: list[str] = Field(
        default_factory=list, description="cited documents this agent never retrieved"
    )


class ProposalsData(_Data):
    """The proposals of one timeline's tick, in canonical order (agent id, then index), written
    as one record once the tick's agents have acted; the record's ``tl`` and ``tick`` say
    where."""

    proposals: tuple[ProposalData, ...]

    @staticmethod
    def payload(
        proposals: Sequence[Proposal], roles: Sequence[str], unretrieved: Sequence[list[str]]
    ) -> Payload:
        """The record's ``data`` for validated proposals (dumped together, not validated
        again), each with its agent's role and the documents it cited but never retrieved."""
        items: list[dict[str, Any]] = PROPOSALS.dump_python(list(proposals), mode="json")
        floats: list[float] = []
        for item, role, ids in zip(items, roles, unretrieved, strict=True):
            item["role"] = role
            item["unretrieved_citations"] = ids
            floats += (item["direction"], item["magnitude"])
            if item["deltas"]:
                floats.extend(floats_in(item["deltas"]))
        return Payload({"proposals": items}, floats)

    @staticmethod
    def payload_of(
        proposals: TickProposals, roles: Sequence[str], unretrieved: Sequence[list[str]]
    ) -> Payload:
        """:meth:`payload` for a tick's proposals held as columns (and objects): the same
        record, each column row a struct msgspec writes as the standard library would
        (:func:`proposal_rows`), with the columns the forecast graph keeps."""
        cols = proposals.columns
        if cols is None:
            return ProposalsData.payload(proposals.objects(), roles, unretrieved)
        rows: list[Any] = []
        at = 0
        for part in proposals.segments():
            if isinstance(part, tuple):
                start, stop = part
                n = stop - start
                moves = MoveColumns(
                    cols.agents[start:stop],
                    cols.endpoints[start:stop],
                    cols.direction[start:stop],
                    cols.magnitude[start:stop],
                    cols.summaries[start:stop],
                    cols.cites[start:stop],
                    cols.kind,
                )
                rows += proposal_rows(moves, roles[at : at + n], unretrieved[at : at + n])
            else:
                n = 1
                made = ProposalsData.payload([part], roles[at : at + 1], unretrieved[at : at + 1])
                rows.append(raw_json(compact_bytes(made.data["proposals"][0], made.floats)))
            at += n
        kept = KeptProposals.from_columns(
            *(proposals.column(name) for name in ("agent", "index", "summary", "cites"))
        )
        return Payload(Kept.of({"proposals": rows}, kept), [])


def proposals_of(type_: str, data: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The proposals a record's JSON ``data`` holds: a tick's for a ``proposals`` record, none
    for any other type (nor for items that are not objects)."""
    items = data.get("proposals") if type_ == "proposals" else None
    if not isinstance(items, list):
        return []
    return [item for item in items if type(item) is dict or isinstance(item, Mapping)]


_FLOAT_FREE = ("accepted", "rejected", "ledger")
"""A review's parts that hold no float (proposal references, reasons, ledger evidence): the
bulk of a tick's review, left out of the walk for its floats."""


class ReviewData(Review):
    agent: str = "governance"

    @staticmethod
    def payload(review: Review) -> Payload:
        """The record's ``data`` for a validated review, in its JSON form."""
        data = {**review.model_dump(mode="json"), "agent": "governance"}
        rest = [value for key, value in data.items() if key not in _FLOAT_FREE]
        return Payload(data, list(floats_in(rest)))


class ForkData(_Data):
    child: str
    parent: str
    index: int
    candidate: BranchCandidate
    mass_before: float
    mass_child: float
    mass_parent: float
    depth: int
    slots_child: int
    child_deltas: list[Delta]
    parent_deltas: list[Delta]


class ForkRejectedData(_Data):
    index: int
    candidate: BranchCandidate
    reason: str
    sampled: bool
    came_true: bool | None
    deltas: list[Delta]


class TickCommittedData(_Data):
    digest: str
    mass: float
    status: str
    ledger: dict[str, str]
    pressure: dict[str, float]
    p_yes_now: float | None
    reason: str = ""
    forced_p_yes: float | None = None
    forced_probs: dict[str, float] | None = None


class TimelineEndedData(_Data):
    status: Literal["settled", "terminated", "deadline"]
    settlement: str
    forced_p_yes: float | None
    forced_probs: dict[str, float] | None
    mass: float
    end_tick: int
    reason: str = ""


class ReportData(_Data):
    agent: str = "reporter"
    summary: str
    claims: list[Claim]


class AuditData(_Data):
    initialization_valid: bool
    initialization_problems: list[str]
    endpoint_hygiene: bool
    endpoint_problems: list[str]
    mass_sum: float
    mass_conserved: bool
    unresolved_mass: float
    extraction_rule: str
    report_grounding: Literal["grounded", "ungrounded", "not-checked"]
    ungrounded_refs: list[str]
    leakage: Literal["clean", "findings", "not-checked"]
    leakage_findings: list[dict[str, Any]] = Field(default_factory=list)
    world: WorldSource
    """Where the initial world came from (`WorldSource`): ``generic`` says the run's world
    is the documented generic one, not the card's."""
    prior: str = ""
    """Where the card's prior came from (its seeds' ``prior_source``, its base rates, or none:
    0.5): the offline world starts there and the offline direct forecast is it."""


class InterventionData(_Data):
    """A change made to the world before it ran (``RunConfig.interventions``): applied as a
    scheduled event at ``tick``, or not applied, with the reason."""

    id: str
    kind: Literal["event", "hypothesis", "variable"]
    at: str
    tick: int
    applied: bool
    reason: str | None = None
    title: str | None = None
    pressure: list[tuple[str, float]] = Field(default_factory=list)
    variable: str | None = None
    value: bool | int | float | str | None = None


class RunResumedData(_Data):
    """A resume marker: records of ticks left uncommitted before it are void."""

    after_seq: int
    reason: str
    voided: int


class RunCompletedData(_Data):
    status: Literal["complete"] = "complete"
    timelines: int
    forks: int
    forks_rejected: int
    p_yes: float | None
    seal: str = ""
    key_id: KeyId = ""
    signature: Signature = ""


class RunFailedData(_Data):
    error: str
    kind: str
    resumable: bool
    seal: str = ""
    key_id: KeyId = ""
    signature: Signature = ""


_ACCESS_JSON_DEFAULTS = {**ACCESS_DEFAULTS, "doc_ids": []}


class RetrievalsData(_Data):
    """The gateway accesses made in one timeline's tick, written once the tick's agents have
    acted: by agent, each agent's in the order it made them. The record's ``tl`` and ``tick``
    are where they were made; ``cutoff`` is the gateway's."""

    cutoff: AwareDatetime
    accesses: tuple[Access, ...]

    @field_serializer("cutoff", when_used="json")
    def _utc(self, value: datetime) -> str:
        return utc_iso(value)

    @staticmethod
    def payload(logged: Sequence[Calls]) -> Payload:
        """The record's ``data`` for the accesses ``logged`` (made at one timeline, tick and
        cut-off, each in its JSON form already, in call order): by agent, each agent's in call
        order. An access holds no float."""
        merged = access_rows(logged)
        if merged is not None:  # an offline tick's: made from the batches' columns
            return Payload({"cutoff": utc_iso(logged[0].cutoff), "accesses": merged}, [])
        accesses = [access for calls in logged for access in calls.accesses]
        accesses.sort(key=itemgetter("agent"))  # stable: call order
        return Payload({"cutoff": utc_iso(logged[0].cutoff), "accesses": accesses}, [])

    def records(self, tl: str | None, tick: int | None) -> list[RetrievalData]:
        """The accesses as logged records (a record's ``tl`` and ``tick`` given)."""
        return [
            RetrievalData(**a.model_dump(), timeline=tl, tick=tick, cutoff=self.cutoff)
            for a in self.accesses
        ]


def accesses_of(
    type_: str, data: Mapping[str, Any], tl: str | None, tick: int | None
) -> list[dict[str, Any]]:
    """The gateway accesses a record's JSON ``data`` holds, each in the gateway's logged form
    (agent, timeline, tick, tool, ..., cutoff): a tick's for a ``retrievals`` record, none for
    any other type."""
    if type_ != "retrievals":
        return []
    where = {"timeline": tl, "tick": tick, "cutoff": data.get("cutoff")}
    filled = _ACCESS_JSON_DEFAULTS
    return [{**filled, **access, **where} for access in data.get("accesses", [])]


class ForecastEvent(BaseModel):
    """A simulated event (or, from a plain list, any forecast event with an id and title)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str = Field(min_length=1)
    title: str
    description: str = ""
    date: UtcDatetime | None = None
    timeline: str | None = None
    tick: int | None = None
    mass: float | None = Field(None, ge=0.0, le=1.0 + 1e-9)
    kind: Literal["observation", "proposal", "branch"] | None = None


class ForecastLink(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str
    target: str
    relation: Literal["cites", "informs"]


class ForecastGraph(BaseModel):
    """The forecast-time causal graph of a run (`worldsim.trace.forecast.extract_forecast`
    derives it from the run's records)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run: str | None = None
    card_id: str | None = None
    as_of: UtcDatetime | None = None
    events: tuple[ForecastEvent, ...] = ()
    links: tuple[ForecastLink, ...] = ()

    def digest(self) -> str:
        """SHA-256 (hex) of the graph's canonical JSON: what a ``forecast_graph`` record holds."""
        return forecast_digest(self.model_dump(mode="json"))


def forecast_digest(graph: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of a forecast graph in its JSON form (whose floats
    are its events' masses, and ticks should one be written as a float)."""
    floats = [
        value
        for event in graph["events"]
        for value in (event["mass"], event["tick"])
        if isinstance(value, float)
    ]
    return hashlib.sha256(canonical_bytes(graph, floats)).hexdigest()


class ForecastGraphData(_Data):
    """The data of a ``forecast_graph`` record: the run's forecast graph, named by its digest
    and sizes; scoring derives the graph from the run's records and checks it against them."""

    run: str | None = None
    card_id: str | None = None
    as_of: UtcDatetime | None = None
    digest: str = Field(
        pattern=r"^[0-9a-f]{64}$",
        description="SHA-256 of the canonical JSON of the graph the run's records give",
    )
    event_count: int = Field(ge=0)
    link_count: int = Field(ge=0)

    @classmethod
    def of(cls, graph: Mapping[str, Any]) -> ForecastGraphData:
        """The record of a graph in its JSON form (``ForecastGraph.model_dump(mode="json")``,
        or the same made without the objects): its digest and sizes."""
        return cls(
            run=graph["run"],
            card_id=graph["card_id"],
            as_of=graph["as_of"],
            digest=forecast_digest(graph),
            event_count=len(graph["events"]),
            link_count=len(graph["links"]),
        )
