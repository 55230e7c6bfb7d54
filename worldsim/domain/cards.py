"""Scenario cards and their private labels (DESIGN §4.1).

A card is the public scenario; it never carries the answer. A label is the private resolution,
kept in its own file and read only by scoring.
"""

from __future__ import annotations

import functools
import hashlib
import math
import sys
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictInt,
    TypeAdapter,
    field_validator,
    model_serializer,
    model_validator,
)

from worldsim.domain import bounds
from worldsim.domain.files import load_model
from worldsim.domain.jsonbytes import canonical_ascii_bytes

__all__ = [
    "ACTOR_SEEDS",
    "ActorSeed",
    "Card",
    "CohortSeed",
    "Endpoint",
    "EventSeed",
    "EvidenceDatabase",
    "EvidenceDoc",
    "HypothesisSeed",
    "Provenance",
    "RelationSeed",
    "Seeds",
    "UtcDatetime",
    "card_hash",
    "load_card",
    "parse_utc",
    "public_card_hash",
    "utc_iso",
]

#: Keys that would carry a resolution; a card holding any of them is rejected.
RESOLUTION_KEYS = frozenset(
    {"outcome", "resolution", "label", "labels", "resolved", "resolved_at", "answer", "result"}
)


def parse_utc(value: object) -> datetime:
    """Read an ISO date or datetime as an aware UTC datetime within the documented date range.

    A bare date is read as UTC midnight; a datetime without a timezone is refused, because its
    meaning would depend on the machine that reads it. Dates outside
    [``bounds.EARLIEST_DATE``, ``bounds.LATEST_DATE``] are refused, so arithmetic on them (time
    zones, tick dates) never overflows.
    """
    parsed = _parse_aware(value)
    try:
        moment = parsed.astimezone(UTC)
    except OverflowError:
        moment = None
    if moment is None or not bounds.EARLIEST_DATE <= moment <= bounds.LATEST_DATE:
        raise ValueError(
            f"date {_shown(value)} is outside the supported range "
            f"{bounds.EARLIEST_DATE.date()} to {bounds.LATEST_DATE.date()}"
        )
    return moment


@functools.lru_cache(maxsize=4096)
def utc_iso(moment: datetime) -> str:
    """An aware datetime as ISO text in UTC with a ``Z`` (``2027-01-04T00:00:00Z``).

    Remembered: a run renders the same few document dates and cut-offs for every agent.
    """
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _shown(value: object) -> str:
    text = value.isoformat() if isinstance(value, date) else str(value)
    return repr(text if len(text) <= 40 else text[:40] + "…")


def _parse_aware(value: object) -> datetime:
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, date):
        return datetime.combine(value, time(0), tzinfo=UTC)
    elif isinstance(value, str):
        text = value.strip()
        if len(text) == 10:
            try:
                return datetime.combine(date.fromisoformat(text), time(0), tzinfo=UTC)
            except ValueError:
                raise ValueError(f"not an ISO date: {_shown(value)}") from None
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"not an ISO date or datetime: {_shown(value)}") from None
    else:
        raise ValueError(f"expected an ISO date or datetime, got {type(value).__name__}")
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise ValueError(f"datetime {_shown(value)} has no timezone; add 'Z' or an offset")
    return parsed


UtcDatetime = Annotated[datetime, BeforeValidator(parse_utc)]

# Numbers in cards are strict: a boolean or a quoted number is refused where a number belongs
# (YAML reads `yes` as true), and every float is finite (the models forbid inf and nan).
Real = Annotated[float, Field(strict=True)]
Pressure = Annotated[Real, Field(ge=-bounds.MAX_PRESSURE, le=bounds.MAX_PRESSURE)]
Name = Annotated[str, Field(min_length=1, max_length=bounds.MAX_NAME_CHARS)]
Ident = Annotated[Name, Field(pattern=r"^[A-Za-z0-9_.:-]+$")]
Title = Annotated[str, Field(max_length=bounds.MAX_TITLE_CHARS)]
Text = Annotated[str, Field(max_length=bounds.MAX_TEXT_CHARS)]
VariableInt = Annotated[StrictInt, Field(ge=-bounds.MAX_VARIABLE_INT, le=bounds.MAX_VARIABLE_INT)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Endpoint(_Model):
    """A candidate outcome row. Scored endpoints settle the question; auxiliary ones are audited."""

    id: Ident
    title: Title = Field(min_length=1)
    kind: Literal["scored", "auxiliary"] = "scored"
    polarity: Literal["yes", "no"] | None = None
    description: Text = ""


class ActorSeed(_Model):
    id: Ident
    name: Name
    kind: Literal["individual", "institution"] = "institution"
    role: Name = Field("actor", description="the tick role that drives this actor")
    favours: Name | None = Field(None, description="multiple choice: the endpoint it pushes")
    stance: Real = Field(0.0, ge=-1.0, le=1.0, description="lean toward yes (+1) or no (-1)")
    influence: Real = Field(0.5, ge=0.0, le=1.0)
    activity: Real = Field(0.6, ge=0.0, le=1.0, description="chance of acting in a tick")


ACTOR_SEEDS: TypeAdapter[list[ActorSeed]] = TypeAdapter(list[ActorSeed])
"""Many actor seeds validated, or dumped, in one call (a world of 10⁴ actors)."""


class CohortSeed(_Model):
    id: Ident
    name: Name
    role: Name = Field("cohort", description="the tick role that drives this cohort")
    size: StrictInt = Field(1000, ge=1, le=bounds.MAX_COHORT_SIZE)
    attention: Real = Field(0.5, ge=0.0, le=1.0)
    trust: Real = Field(0.5, ge=0.0, le=1.0)
    sentiment: Real = Field(0.0, ge=-1.0, le=1.0)
    members: StrictInt = Field(
        0,
        ge=0,
        le=bounds.MAX_MEMBERS,
        description="members simulated one by one, as arrays (docs/offline-model.md); 0: none",
    )

    @model_serializer(mode="wrap")
    def _without_no_members(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A cohort without members is written as before members existed (same card hash)."""
        data: dict[str, Any] = handler(self)
        if not self.members:
            data.pop("members", None)
        return data


class RelationSeed(_Model):
    """A directed influence edge; its weight is a strength, the source's stance gives direction."""

    source: Name
    target: Name
    weight: Real = Field(0.5, ge=0.0, le=1.0)


class EventSeed(_Model):
    """A scheduled event; ``pressure`` shifts the scored endpoints (a number means toward yes)."""

    id: Ident
    title: Title
    date: UtcDatetime
    description: Text = ""
    pressure: Pressure | dict[Name, Pressure] = 0.0


class HypothesisSeed(_Model):
    """A branch hypothesis: in its window, each tick it comes true with ``probability``."""

    id: Ident
    title: Title
    endpoint: Name
    start: UtcDatetime | None = None
    end: UtcDatetime | None = None
    probability: Real = Field(gt=0.0, lt=1.0)
    impact: Pressure = Field(description="pressure shift on the endpoint if it comes true")


class Seeds(_Model):
    """Structure for the offline model; every field is optional."""

    base_rate: Real | None = Field(None, gt=0.0, lt=1.0)
    prior_source: Text | None = Field(
        None, description="where base_rate (or base_rates) came from; the audit names it"
    )
    base_rates: dict[Name, Real] | None = Field(None, max_length=bounds.MAX_ENDPOINTS)
    hazard: Real = Field(0.2, ge=0.0, le=1.0, description="per-tick chance the question resolves")
    actors: tuple[ActorSeed, ...] = Field((), max_length=bounds.MAX_ACTORS)
    cohorts: tuple[CohortSeed, ...] = Field((), max_length=bounds.MAX_COHORTS)
    relations: tuple[RelationSeed, ...] = Field((), max_length=bounds.MAX_RELATIONS)
    events: tuple[EventSeed, ...] = Field((), max_length=bounds.MAX_EVENTS)
    hypotheses: tuple[HypothesisSeed, ...] = Field((), max_length=bounds.MAX_HYPOTHESES)
    variables: dict[Name, Real | VariableInt | Text | bool] = Field(
        default_factory=dict, max_length=bounds.MAX_VARIABLES
    )
    constraints: tuple[Text, ...] = Field((), max_length=bounds.MAX_CONSTRAINTS)

    @field_validator("actors", mode="before")
    @classmethod
    def _few_enough_actors(cls, value: Any) -> Any:
        """Refuse too many actors before validating each (a card of a million is read in
        seconds; refusing one over the limit should not take longer)."""
        if isinstance(value, list | tuple) and len(value) > bounds.MAX_ACTORS:
            raise ValueError(f"at most {bounds.MAX_ACTORS:,} actors, not {len(value):,}")
        return value

    @field_validator("variables", mode="before")
    @classmethod
    def _numbers_a_float_holds(cls, value: Any) -> Any:
        if isinstance(value, dict):
            for key, item in value.items():
                whole = isinstance(item, int) and not isinstance(item, bool)
                if whole and abs(item) > sys.float_info.max:
                    raise ValueError(
                        f"variable '{str(key)[:80]}' is a whole number beyond what a float "
                        "holds (about ±1.8e308)"
                    )
        return value

    @model_validator(mode="after")
    def _members_fit(self) -> Seeds:
        total = sum(c.members for c in self.cohorts)
        if total > bounds.MAX_MEMBERS:
            raise ValueError(
                f"the cohorts hold {total:,} members in all; at most {bounds.MAX_MEMBERS:,}"
            )
        return self


class EvidenceDoc(_Model):
    """A dated public document; ``stance`` is an optional hint in [-1, 1] toward yes."""

    id: Annotated[str, Field(min_length=1, max_length=bounds.MAX_TITLE_CHARS)]
    published_at: UtcDatetime
    title: Title
    text: Annotated[str, Field(max_length=bounds.MAX_DOCUMENT_CHARS)] = ""
    url: Text | None = None
    source: Title | None = None
    stance: Real | None = Field(None, ge=-1.0, le=1.0)


class EvidenceDatabase(_Model):
    database: Text = Field(min_length=1)


class Provenance(_Model):
    """Where an imported or built card came from (`worldsim cards import`, `worldsim build
    questions`)."""

    source_file: Title = Field(min_length=1, description="the imported file's name")
    question_id: Title = Field(min_length=1)
    source: Title | None = Field(None, description="the question's own source, e.g. a market")
    url: Text | None = None
    articles: tuple[Title, ...] = Field(
        (), max_length=200, description="ids of the articles a built question came from"
    )
    question_set: Title | None = Field(
        None, description="a ForecastBench round: its question set's name (`question_set`)"
    )
    forecast_due_date: date | None = Field(None, description="the round's forecast due date")
    resolution_date: date | None = Field(
        None, description="a data-set question: the resolution date this card asks about"
    )
    market_open: Title | None = Field(None, description="when the market opened, as given")
    market_close: Title | None = Field(None, description="when the market closes, as given")
    freeze_datetime: Title | None = Field(None, description="when the freeze value was taken")
    freeze_value: Title | None = Field(None, description="the question's value at its freeze")
    freeze_value_explanation: Text | None = None


class Card(_Model):
    """The public scenario handed to worldsim."""

    id: str = Field(min_length=1, max_length=120, pattern=r"^[A-Za-z0-9_.-]+$")
    question: str = Field(min_length=1, max_length=bounds.MAX_QUESTION_CHARS)
    kind: Literal["binary", "multiple_choice"] = "binary"
    as_of: UtcDatetime
    deadline: UtcDatetime
    opens: UtcDatetime | None = Field(
        None,
        description="the earliest date the question may be forecast (default: as_of); a "
        "study's forecast window starts here",
    )
    endpoints: tuple[Endpoint, ...] = Field(min_length=2, max_length=bounds.MAX_ENDPOINTS)
    context: str = Field("", max_length=bounds.MAX_CONTEXT_CHARS)
    domain: Title | None = None
    roles: tuple[Name, ...] = Field(
        (), description="roles added to every run of this card (see `worldsim roles`)"
    )
    seeds: Seeds | None = None
    provenance: Provenance | None = None
    evidence: (
        Annotated[tuple[EvidenceDoc, ...], Field(max_length=bounds.MAX_EVIDENCE_DOCS)]
        | EvidenceDatabase
        | None
    ) = None

    @field_validator("id")
    @classmethod
    def _not_a_folder_name(cls, value: str) -> str:
        if value in (".", ".."):
            raise ValueError(f"'{value}' names a folder, not a card: its traces would leave theirs")
        return value

    @model_validator(mode="before")
    @classmethod
    def _no_resolution(cls, data: Any) -> Any:
        if isinstance(data, dict):
            leaked = sorted(RESOLUTION_KEYS & set(data))
            if leaked:
                raise ValueError(
                    f"card carries resolution field '{leaked[0]}'; labels live in label files"
                )
            for i, ep in enumerate(data.get("endpoints") or ()):
                if isinstance(ep, dict) and RESOLUTION_KEYS & set(ep):
                    key = sorted(RESOLUTION_KEYS & set(ep))[0]
                    raise ValueError(f"endpoints.{i} carries resolution field '{key}'")
        return data

    @field_validator("endpoints")
    @classmethod
    def _unique_ids(cls, endpoints: tuple[Endpoint, ...]) -> tuple[Endpoint, ...]:
        seen: set[str] = set()
        for ep in endpoints:
            if ep.id in seen:
                raise ValueError(f"duplicate endpoint id '{ep.id}'")
            seen.add(ep.id)
        return endpoints

    @model_validator(mode="after")
    def _check(self) -> Card:
        if self.as_of >= self.deadline:
            raise ValueError("deadline: must be after as_of")
        if self.opens is not None and not self.as_of <= self.opens < self.deadline:
            raise ValueError("opens: must be on or after as_of and before deadline")
        scored = self.scored_endpoints
        if self.kind == "binary":
            if len(scored) != 2:
                raise ValueError(
                    f"endpoints: a binary card needs exactly two scored endpoints, found "
                    f"{len(scored)}"
                )
            if sorted(ep.polarity or "" for ep in scored) != ["no", "yes"]:
                raise ValueError(
                    "endpoints: a binary card needs one scored endpoint with polarity yes, one no"
                )
        elif len(scored) < 2:
            raise ValueError(
                "endpoints: a multiple-choice card needs at least two scored endpoints"
            )
        if self.seeds is not None:
            self._check_seeds(self.seeds)
        return self

    def _check_seeds(self, seeds: Seeds) -> None:
        endpoint_ids = {ep.id for ep in self.endpoints}
        scored_ids = {ep.id for ep in self.scored_endpoints}
        agents = [a.id for a in seeds.actors] + [c.id for c in seeds.cohorts]
        if len(set(agents)) != len(agents):
            raise ValueError("seeds: actor and cohort ids must be unique")
        known = set(agents)
        for rel in seeds.relations:
            for end in (rel.source, rel.target):
                if end not in known:
                    raise ValueError(f"seeds.relations: unknown actor or cohort '{end}'")
        for actor in seeds.actors:
            if actor.favours is not None and actor.favours not in scored_ids:
                raise ValueError(
                    f"seeds.actors.{actor.id}: unknown scored endpoint '{actor.favours}'"
                )
        for hyp in seeds.hypotheses:
            if hyp.endpoint not in endpoint_ids:
                raise ValueError(f"seeds.hypotheses.{hyp.id}: unknown endpoint '{hyp.endpoint}'")
        for ev in seeds.events:
            if isinstance(ev.pressure, dict):
                for key in ev.pressure:
                    if key not in scored_ids:
                        raise ValueError(f"seeds.events.{ev.id}: unknown scored endpoint '{key}'")
        if seeds.base_rates is not None:
            if set(seeds.base_rates) != scored_ids:
                raise ValueError("seeds.base_rates must give every scored endpoint a rate")
            if any(not (0.0 < v < 1.0) for v in seeds.base_rates.values()):
                raise ValueError("seeds.base_rates must lie strictly between 0 and 1")
            if not math.isclose(sum(seeds.base_rates.values()), 1.0, abs_tol=1e-6):
                raise ValueError("seeds.base_rates must sum to 1")

    @property
    def scored_endpoints(self) -> tuple[Endpoint, ...]:
        return tuple(ep for ep in self.endpoints if ep.kind == "scored")

    @property
    def yes_endpoint(self) -> Endpoint | None:
        return next((ep for ep in self.scored_endpoints if ep.polarity == "yes"), None)

    def public_dict(self) -> dict[str, Any]:
        """The card as JSON-ready data (exactly what agents may see)."""
        return self.model_dump(mode="json", exclude_none=True)


def card_hash(card: Card) -> str:
    """SHA-256 of the card's canonical JSON."""
    return public_card_hash(card.public_dict())


def public_card_hash(public: dict[str, Any]) -> str:
    """:func:`card_hash` of a card's :meth:`~Card.public_dict`: the SHA-256 of
    ``json.dumps(public, sort_keys=True, separators=(",", ":"))`` (non-ASCII escaped)."""
    return hashlib.sha256(canonical_ascii_bytes(public)).hexdigest()


def load_card(path: str | Path) -> Card:
    """Load and validate a card; any problem raises :class:`CardError` naming file and field."""
    return load_model(path, Card, what="card")
