"""The score-time audit: what labels know, searched for in what traces record.

A run never opens label files (DESIGN §4.1), so a label's ``masked_entities`` are checked here:
every string of every effective record of every scored trace is scanned with the run's own
:class:`~worldsim.models.leakage.LeakageGuard` (case-insensitive, named by the SHA-256 of the
case-folded entity, never by the name). A forecast that leaks is flagged — tagged and counted —
not excluded: the entities come from the labels, and dropping forecasts for what labels say
would choose the scored set after looking at them.

Auxiliary endpoints are mechanism claims, audited and never scored (DESIGN glossary). Per
trace, each auxiliary endpoint's final probability is read from the ledger of the leaves the
extraction weighed: realized counts 1, eliminated 0, still open 0.5, weighted by leaf mass.
Where a label gives an auxiliary outcome, its Brier score is reported in a table of its own.
Prediction tables carry no text and no ledger: their audit is n/a.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.table import Table

from worldsim.domain.errors import CardError
from worldsim.models.leakage import LeakageGuard, fingerprint
from worldsim.scoring.inputs import PredictionRow
from worldsim.scoring.labels import LabelSet
from worldsim.scoring.table import Forecast, MatchedTable
from worldsim.trace.reader import TraceLine

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "LEAKAGE_POLICY",
    "Audit",
    "TraceAudit",
    "TraceScan",
    "UnitAudit",
    "audit_json",
    "audit_table",
    "check_auxiliary_labels",
    "guards_by_card",
    "print_audit",
    "record_strings",
]

#: The value of a ledger status in an auxiliary endpoint's probability.
_STATUS_VALUE = {"realized": 1.0, "eliminated": 0.0, "open": 0.5}


@dataclass(frozen=True, slots=True)
class TraceAudit:
    """One trace: occurrences per masked-entity fingerprint, auxiliary endpoint probabilities."""

    source: str
    leakage: Mapping[str, int]
    auxiliary: Mapping[str, float]


@dataclass(frozen=True, slots=True)
class UnitAudit:
    """One method's forecast of one unit: its traces' audit summed (leakage) and averaged."""

    unit: str
    card_id: str
    method: str
    n_traces: int
    """0 when the forecast came from a prediction table: no text, the audit is n/a."""
    leakage: Mapping[str, int] | None
    """Fingerprint → occurrences over the traces; every masked entity listed. None if n/a."""
    auxiliary: Mapping[str, float] = field(default_factory=dict)
    auxiliary_outcomes: Mapping[str, str] = field(default_factory=dict)

    @property
    def occurrences(self) -> int:
        return sum(self.leakage.values()) if self.leakage else 0

    @property
    def auxiliary_brier(self) -> dict[str, float]:
        """Brier score of each auxiliary endpoint with a labelled outcome: audit only."""
        return {
            ep: (p - (1.0 if self.auxiliary_outcomes[ep] == "yes" else 0.0)) ** 2
            for ep, p in sorted(self.auxiliary.items())
            if ep in self.auxiliary_outcomes
        }


@dataclass(frozen=True, slots=True)
class Audit:
    """The audit of every scored forecast that came from inputs (blends and references have
    none of their own)."""

    units: tuple[UnitAudit, ...]

    @property
    def leaked(self) -> dict[tuple[str, str], UnitAudit]:
        """(method, unit) → its audit, for forecasts where a masked entity occurs."""
        return {(u.method, u.unit): u for u in self.units if u.occurrences}

    def auxiliary_brier(self) -> dict[str, tuple[float, int]]:
        """Per method: the mean auxiliary Brier score over (unit, endpoint) pairs, and their n."""
        by_method: dict[str, list[float]] = {}
        for u in self.units:
            by_method.setdefault(u.method, []).extend(u.auxiliary_brier.values())
        return {m: (math.fsum(v) / len(v), len(v)) for m, v in sorted(by_method.items()) if v}


def record_strings(value: Any) -> Iterator[str]:
    """Every string in a parsed JSON value, keys included, depth first, without recursion."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            for key, inner in item.items():
                yield key
                stack.append(inner)
        elif isinstance(item, list):
            stack.extend(item)


#: The record types the audit reads beyond the leakage scan (the rest are parsed only when
#: a masked entity may occur in them).
_AUDITED_TYPES = frozenset({"tick_committed", "fork", "extraction"})


class TraceScan:
    """A trace's audit, taken as its effective lines stream past: the masked entities of its
    card's label counted in every string of every record (``guard_for(card_id)`` gives the
    guard, None when the label masks nothing), and the ledgers its auxiliary endpoints are read
    from (a leaf's ledger is its timeline's last committed one, else its parent's at the fork).

    Each string is matched on its own (a record's strings are scanned joined by a character no
    masked entity holds, so no occurrence spans two); a line is parsed for the scan only when
    an entity may occur in its text (`LeakageGuard.may_occur_in`).
    """

    def __init__(self, guard_for: Callable[[str], LeakageGuard | None]) -> None:
        self._guard_for = guard_for
        self._guard: LeakageGuard | None = None
        self._counts: Counter[str] = Counter()
        self._ledgers: dict[str, Mapping[str, Any]] = {}
        self._leaves: list[Any] = []

    def see(self, line: TraceLine) -> None:
        kind = line.type
        if kind == "run_started":
            card = line.fields.get("card")
            card_id = card.get("id") if isinstance(card, dict) else None
            self._guard = self._guard_for(card_id if isinstance(card_id, str) else "")
        if self._guard is not None and self._guard.may_occur_in(line.raw):
            self._counts.update(self._guard.scan_each(record_strings(line.fields)))
        if kind not in _AUDITED_TYPES:
            return
        data = line.fields
        if kind == "tick_committed" and line.tl is not None:
            ledger = data.get("ledger")
            self._ledgers[line.tl] = ledger if isinstance(ledger, dict) else {}
        elif kind == "fork" and line.tl is not None:
            self._ledgers.setdefault(str(data.get("child")), self._ledgers.get(line.tl, {}))
        elif kind == "extraction":
            found = data.get("leaves")
            self._leaves = found if isinstance(found, list) else []

    def audit(self, source: str, auxiliary: Sequence[str]) -> TraceAudit:
        """The audit of the trace at ``source`` whose card has the ``auxiliary`` endpoints."""
        return TraceAudit(
            source=source,
            leakage=dict(self._counts),
            auxiliary=_auxiliary(self._leaves, self._ledgers, auxiliary) if auxiliary else {},
        )


def _auxiliary(
    leaves: Sequence[Any], ledgers: Mapping[str, Mapping[str, Any]], endpoints: Sequence[str]
) -> dict[str, float]:
    weighted = [
        (str(leaf.get("timeline")), float(leaf.get("mass") or 0.0))
        for leaf in leaves
        if isinstance(leaf, dict)
    ]
    total = math.fsum(mass for _, mass in weighted)
    if total <= 0:
        return {}  # a direct trace: no timelines, no ledger
    out: dict[str, float] = {}
    for ep in endpoints:
        values = (
            mass * _STATUS_VALUE.get(str(ledgers.get(tl, {}).get(ep, "open")), 0.5)
            for tl, mass in weighted
        )
        out[ep] = min(1.0, math.fsum(values) / total)
    return out


def check_auxiliary_labels(rows: Sequence[PredictionRow], labels: LabelSet) -> None:
    """Every auxiliary outcome a label gives must name an auxiliary endpoint of its card.

    The card's endpoints are known from its traces; a card forecast only in tables is not
    checked (nothing of it is audited).
    """
    known: dict[str, set[str]] = {}
    for row in rows:
        if row.trace:
            known.setdefault(row.card_id, set()).update(row.auxiliary_endpoints)
    for card_id, endpoints in sorted(known.items()):
        entry = labels.entries.get(card_id)
        if entry is None:
            continue
        for ep in entry.label.auxiliary:
            if ep not in endpoints:
                listed = ", ".join(sorted(endpoints)) or "none"
                raise CardError(
                    f"'{ep}' is not an auxiliary endpoint of card '{card_id}' "
                    f"(its auxiliary endpoints: {listed})",
                    file=entry.file,
                    field=f"auxiliary.{ep}",
                    line=entry.line,
                )


def audit_table(
    table: MatchedTable,
    rows: Sequence[PredictionRow],
    labels: LabelSet,
    scans: Mapping[str, TraceScan],
) -> Audit:
    """Audit every forecast of ``table`` that was read from inputs, from the scans taken of
    its traces as they were read (by source)."""
    by_source = {row.source: row for row in rows if row.trace}
    units: list[UnitAudit] = []
    for method, by_unit in sorted(table.methods.items()):
        for _, sf in sorted(by_unit.items()):
            fc = sf.forecast
            if not fc.sources:
                continue  # a blend or the reference: its components are audited
            entry = labels.entries.get(fc.card_id)
            entities = entry.label.masked_entities if entry is not None else ()
            traces = [
                scans[row.source].audit(row.source, row.auxiliary_endpoints)
                for row in (by_source.get(source) for source, _ in fc.sources)
                if row is not None
            ]
            outcomes = dict(entry.label.auxiliary) if entry is not None else {}
            units.append(_unit_audit(fc, method, entities, traces, outcomes))
    return Audit(units=tuple(units))


def guards_by_card(labels: LabelSet) -> Callable[[str], LeakageGuard | None]:
    """The guard of each card's label (None for a card whose label masks nothing, or that has
    no label), made once per card."""
    made: dict[str, LeakageGuard | None] = {}

    def guard_for(card_id: str) -> LeakageGuard | None:
        if card_id not in made:
            entry = labels.entries.get(card_id)
            entities = entry.label.masked_entities if entry is not None else ()
            made[card_id] = LeakageGuard.from_strings(entities) if entities else None
        return made[card_id]

    return guard_for


def _unit_audit(
    fc: Forecast,
    method: str,
    entities: Sequence[str],
    traces: Sequence[TraceAudit],
    outcomes: Mapping[str, str],
) -> UnitAudit:
    if not traces:
        return UnitAudit(fc.unit, fc.card_id, method, 0, None)
    leakage = {fingerprint(e.strip()): 0 for e in entities if e.strip()}
    for t in traces:
        for digest, count in t.leakage.items():
            leakage[digest] = leakage.get(digest, 0) + count
    sums: dict[str, list[float]] = {}
    for t in traces:
        for ep, p in t.auxiliary.items():
            sums.setdefault(ep, []).append(p)
    auxiliary = {ep: math.fsum(ps) / len(ps) for ep, ps in sorted(sums.items())}
    return UnitAudit(
        unit=fc.unit,
        card_id=fc.card_id,
        method=method,
        n_traces=len(traces),
        leakage=dict(sorted(leakage.items())),
        auxiliary=auxiliary,
        auxiliary_outcomes={ep: o for ep, o in outcomes.items() if ep in auxiliary},
    )


# --------------------------------------------------------------------------------------------
# reports

#: What the audit does with a forecast that leaks; stated in the JSON and the printed summary.
LEAKAGE_POLICY = "flagged, not excluded"


def audit_json(audit: Audit) -> dict[str, Any]:
    """The ``audit`` block: masked entities by fingerprint, auxiliary endpoints (audit only)."""
    leakage = [
        {
            "unit": u.unit,
            "card_id": u.card_id,
            "method": u.method,
            "n_traces": u.n_traces,
            "status": "n/a" if u.leakage is None else "leaked" if u.occurrences else "clean",
            "occurrences": None if u.leakage is None else u.occurrences,
            "entities": None if u.leakage is None else dict(u.leakage),
        }
        for u in audit.units
    ]
    auxiliary = [
        {
            "unit": u.unit,
            "card_id": u.card_id,
            "method": u.method,
            "n_traces": u.n_traces,
            "endpoints": {
                ep: {
                    "p": p,
                    "outcome": u.auxiliary_outcomes.get(ep),
                    "brier": u.auxiliary_brier.get(ep),
                }
                for ep, p in u.auxiliary.items()
            },
        }
        for u in audit.units
        if u.auxiliary
    ]
    return {
        "leakage": {
            "policy": LEAKAGE_POLICY,
            "fingerprint": "sha256 of the case-folded entity",
            "forecasts": leakage,
        },
        "auxiliary": {
            "forecasts": auxiliary,
            "brier": {m: {"n": n, "brier": b} for m, (b, n) in audit.auxiliary_brier().items()},
        },
    }


def print_audit(doc: Mapping[str, Any], console: Console) -> None:
    """The audit lines of the summary: leakage counts by fingerprint, auxiliary Brier scores."""
    forecasts = doc["leakage"]["forecasts"]
    leaked = [f for f in forecasts if f["status"] == "leaked"]
    na = sum(1 for f in forecasts if f["status"] == "n/a")
    line = (
        f"leakage audit: masked entities in {len(leaked)} of {len(forecasts) - na} traced "
        f"forecast(s), {sum(f['occurrences'] for f in leaked)} occurrence(s); "
        f"{doc['leakage']['policy']}"
    )
    if na:
        line += f"; n/a for {na} forecast(s) from prediction tables (no text)"
    console.print(line, highlight=False)
    if leaked:
        table = Table(title="Masked entities found (by sha256 fingerprint)", title_justify="left")
        for col in ("unit", "method", "entity sha256", "occurrences"):
            table.add_column(col, justify="right" if col == "occurrences" else "left")
        for f in leaked:
            for digest, count in f["entities"].items():
                if count:
                    table.add_row(f["unit"], f["method"], digest[:16], str(count))
        console.print(table)
    aux = doc["auxiliary"]
    if not aux["forecasts"]:
        return
    n_endpoints = sum(len(f["endpoints"]) for f in aux["forecasts"])
    console.print(
        f"auxiliary endpoints: {n_endpoints} endpoint probabilities over "
        f"{len(aux['forecasts'])} forecast(s); audit only, never scored (JSON: audit.auxiliary)",
        highlight=False,
    )
    if aux["brier"]:
        table = Table(
            title="Auxiliary endpoints against labelled outcomes (audit only, not scored)",
            title_justify="left",
        )
        for col in ("method", "n", "Brier"):
            table.add_column(col, justify="left" if col == "method" else "right")
        for method, b in aux["brier"].items():
            table.add_row(method, str(b["n"]), f"{b['brier']:.4f}")
        console.print(table)
