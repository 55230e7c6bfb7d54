"""From prediction rows to the matched table of units: replicates averaged, labels joined.

A unit is one card at one forecast date (:mod:`worldsim.scoring.units`); the table is keyed by
unit id, which is the card id unless a card id was split into versions. Replicates (several
rows of one unit and method with distinct run ids) are averaged and counted. Blends and the
uniform reference are added as methods of their own. The contamination filter removes (model,
card) pairs whose card as-of precedes the model's cutoff.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from worldsim.domain.errors import CardError, ConfigError
from worldsim.scoring.inputs import Kind, PredictionRow
from worldsim.scoring.labels import LabelSet
from worldsim.scoring.metrics import CardScore, binary_scores, multiclass_scores
from worldsim.scoring.provisional import Provisional
from worldsim.scoring.units import unit_suffixes

__all__ = [
    "Blend",
    "Exclusion",
    "Forecast",
    "MatchedTable",
    "ScoredForecast",
    "add_blends",
    "add_uniform",
    "aggregate",
    "contamination_filter",
    "match_labels",
    "score_like",
    "unverified_methods",
]

UNIFORM = "uniform"


@dataclass(frozen=True, slots=True)
class Forecast:
    """One method's forecast of one unit (a card at a forecast date), replicates averaged."""

    card_id: str
    method: str
    kind: Kind
    p_yes: float | None
    p_options: tuple[tuple[str, float], ...] | None
    n_replicates: int = 1
    unresolved_mass: float | None = None
    models: tuple[str, ...] = ()
    prompt_version: str | None = None
    response_id: str | None = None
    run_ids: tuple[str, ...] = ()
    extraction_rule: str | None = None
    as_of: datetime | None = None
    p_yes_raw: float | None = None
    sources: tuple[tuple[str, int | None], ...] = ()
    card_hash: str | None = None
    version: str = ""
    """What the unit id adds to the card id (``@date``, ``#hash``): empty unless split."""
    verified: bool = True
    """Every forecast it is made of was read from a trace that verifies (not from a prediction
    table, which nothing checks)."""

    @property
    def model(self) -> str | None:
        return ";".join(self.models) if self.models else None

    @property
    def unit(self) -> str:
        """The unit id: the key of this forecast in a :class:`MatchedTable`."""
        return self.card_id + self.version


@dataclass(frozen=True, slots=True)
class ScoredForecast:
    """A forecast joined with its label and scored."""

    forecast: Forecast
    outcome: str
    score: CardScore


@dataclass(frozen=True, slots=True)
class MatchedTable:
    """Scored forecasts by method, then by unit id; forecasts of questions still open (their
    labels provisional) apart, by method and unit, for the Brier score alone."""

    methods: Mapping[str, Mapping[str, ScoredForecast]]
    unlabelled: tuple[str, ...] = ()
    provisional: Mapping[str, Mapping[str, Provisional]] = field(default_factory=dict)

    def briers(self) -> dict[str, list[float]]:
        """Each method's Brier scores over its scored (resolved) units."""
        return {m: [sf.score.brier for sf in u.values()] for m, u in self.methods.items()}

    @property
    def units(self) -> list[str]:
        """Every unit id some method forecast, sorted."""
        return sorted({u for by_unit in self.methods.values() for u in by_unit})

    @property
    def card_ids(self) -> list[str]:
        """The distinct card ids behind the units, sorted."""
        return sorted(
            {sf.forecast.card_id for by_unit in self.methods.values() for sf in by_unit.values()}
        )


@dataclass(frozen=True, slots=True)
class Blend:
    """A named fixed-weight mixture of methods; weights are positive and sum to one."""

    name: str
    weights: tuple[tuple[str, float], ...]

    @classmethod
    def parse(cls, text: str) -> Blend:
        """Read ``NAME=METHOD:W,METHOD:W``; weights that do not sum to 1 are rejected."""
        name, sep, spec = text.partition("=")
        if not sep or not name.strip() or not spec.strip():
            raise ConfigError(f"blend {text!r} is not NAME=METHOD:W,METHOD:W", field="--blend")
        weights: list[tuple[str, float]] = []
        for part in spec.split(","):
            method, colon, w = part.strip().rpartition(":")
            if not colon or not method:
                raise ConfigError(f"blend part {part!r} is not METHOD:W", field="--blend")
            try:
                weight = float(w)
            except ValueError:
                raise ConfigError(f"blend weight {w!r} is not a number", field="--blend") from None
            weights.append((method.strip(), weight))
        return cls.of(name.strip(), weights)

    @classmethod
    def of(cls, name: str, weights: Sequence[tuple[str, float]], field: str = "--blend") -> Blend:
        methods = [m for m, _ in weights]
        if len(weights) < 2 or len(set(methods)) != len(methods):
            raise ConfigError(f"blend '{name}' needs two or more distinct methods", field=field)
        for method, w in weights:
            if not math.isfinite(w) or w <= 0:
                raise ConfigError(
                    f"blend '{name}': weight of '{method}' must be positive", field=field
                )
        total = math.fsum(w for _, w in weights)
        if abs(total - 1.0) > 1e-9:
            raise ConfigError(f"blend '{name}': weights sum to {total:.6g}, not 1", field=field)
        return cls(name=name, weights=tuple(weights))


@dataclass(frozen=True, slots=True)
class Exclusion:
    """A forecast the contamination filter removed, and why."""

    card_id: str
    method: str
    model: str
    as_of: datetime
    cutoff: datetime


def aggregate(rows: Sequence[PredictionRow], *, split_versions: bool = False) -> list[Forecast]:
    """Average replicates per (unit, method); refuse inconsistent kinds (duplicate run ids are
    refused where the rows are read, by `load_predictions`).

    A card id forecast at several dates or from several card contents is an error unless
    ``split_versions`` (see :mod:`worldsim.scoring.units`).
    """
    groups: dict[tuple[str, str], list[PredictionRow]] = defaultdict(list)
    kinds: dict[str, tuple[Kind, frozenset[str] | None, PredictionRow]] = {}
    for row, suffix in zip(rows, unit_suffixes(rows, split=split_versions), strict=True):
        unit = row.card_id + suffix
        options = frozenset(k for k, _ in row.p_options) if row.p_options else None
        known = kinds.setdefault(unit, (row.kind, options, row))
        if (known[0], known[1]) != (row.kind, options):
            raise CardError(
                f"card '{unit}' is predicted as {row.kind} here and as {known[0]} "
                f"(or with other options) in {known[2].source}",
                file=row.source,
                field="p_yes" if row.kind == "binary" else "p_options",
                line=row.line,
            )
        groups[(unit, row.method)].append(row)
    return [
        _average(group, unit[len(group[0].card_id) :])
        for (unit, _), group in sorted(groups.items())
    ]


def _average(group: Sequence[PredictionRow], version: str) -> Forecast:
    first = group[0]
    n = len(group)

    def mean(values: Sequence[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return math.fsum(known) / len(known) if known else None

    def single(values: Sequence[str | None]) -> str | None:
        distinct = sorted({v for v in values if v is not None})
        return ";".join(distinct) if distinct else None

    p_options = None
    if first.p_options is not None:
        sums: dict[str, float] = defaultdict(float)
        for row in group:
            for k, p in row.p_options or ():
                sums[k] += p
        p_options = tuple(sorted((k, s / n) for k, s in sums.items()))
    as_ofs = {r.as_of for r in group if r.as_of is not None}
    hashes = {r.card_hash for r in group if r.card_hash is not None}
    return Forecast(
        card_id=first.card_id,
        method=first.method,
        kind=first.kind,
        p_yes=mean([r.p_yes for r in group]),
        p_options=p_options,
        n_replicates=n,
        unresolved_mass=mean([r.unresolved_mass for r in group]),
        models=tuple(sorted({r.model for r in group if r.model is not None})),
        prompt_version=single([r.prompt_version for r in group]),
        response_id=single([r.response_id for r in group]),
        run_ids=tuple(sorted(r.run_id for r in group if r.run_id is not None)),
        extraction_rule=single([r.extraction_rule for r in group]),
        as_of=min(as_ofs) if as_ofs else None,
        p_yes_raw=mean([r.p_yes_raw for r in group]),
        sources=tuple((r.source, r.line) for r in group),
        card_hash=hashes.pop() if len(hashes) == 1 else None,
        version=version,
        verified=all(r.trace for r in group),
    )


def unverified_methods(table: MatchedTable) -> list[str]:
    """The methods with any forecast not read from a verified trace (a prediction table's)."""
    return sorted(
        name
        for name, by_unit in table.methods.items()
        if any(not sf.forecast.verified for sf in by_unit.values())
    )


def match_labels(
    forecasts: Sequence[Forecast], labels: LabelSet, *, allow_unlabelled: bool = False
) -> MatchedTable:
    """Join forecasts with labels and score them.

    A forecast for a card without a label is an error naming the prediction input, unless
    ``allow_unlabelled``, in which case its card id is reported as unmatched.
    """
    methods: dict[str, dict[str, ScoredForecast]] = defaultdict(dict)
    provisional: dict[str, dict[str, Provisional]] = defaultdict(dict)
    unlabelled: set[str] = set()
    for fc in forecasts:
        entry = labels.entries.get(fc.card_id)
        if entry is None:
            if allow_unlabelled:
                unlabelled.add(fc.card_id)
                continue
            raise CardError(
                f"no label for predicted card '{fc.card_id}' in {_label_place(labels)}",
                file=fc.sources[0][0],
                field="card_id",
                line=fc.sources[0][1],
            )
        if entry.label.provisional:
            if fc.kind != "binary" or entry.label.value is None:
                raise entry.refuse(
                    f"card '{fc.card_id}' is not binary: a provisional label scores a binary "
                    "forecast only"
                )
            assert fc.p_yes is not None
            provisional[fc.method][fc.unit] = Provisional(fc.p_yes, entry.label.value)
            continue
        outcome = entry.outcome
        if fc.kind == "binary":
            if outcome not in ("yes", "no"):
                raise entry.refuse(
                    f"outcome {outcome!r} of binary card '{fc.card_id}' is not "
                    "yes/no, 1/0 or true/false"
                )
            assert fc.p_yes is not None
            score = binary_scores(fc.p_yes, 1 if outcome == "yes" else 0)
        else:
            assert fc.p_options is not None
            options = [k for k, _ in fc.p_options]
            if outcome not in options:
                raise entry.refuse(
                    f"outcome {outcome!r} of card '{fc.card_id}' is not one of its options "
                    f"{', '.join(options)}"
                )
            score = multiclass_scores(fc.p_options, outcome)
        methods[fc.method][fc.unit] = ScoredForecast(forecast=fc, outcome=outcome, score=score)
    return MatchedTable(
        methods=dict(methods),
        unlabelled=tuple(sorted(unlabelled)),
        provisional=dict(provisional),
    )


def _label_place(labels: LabelSet) -> str:
    if len(labels.files) == 1:
        return str(labels.files[0])
    return f"{labels.files[0].parent} ({len(labels.files)} label files)"


def add_blends(table: MatchedTable, blends: Sequence[Blend]) -> MatchedTable:
    """Add each blend as a method over the units all its components forecast."""
    methods = dict(table.methods)
    for blend in blends:
        if blend.name in methods:
            raise ConfigError(f"blend name '{blend.name}' is already a method", field="--blend")
        for method, _ in blend.weights:
            if method not in methods:
                raise ConfigError(
                    f"blend '{blend.name}': unknown method '{method}'", field="--blend"
                )
        units = set.intersection(*(set(methods[m]) for m, _ in blend.weights))
        rows: dict[str, ScoredForecast] = {}
        for unit in sorted(units):
            parts = [(methods[m][unit], w) for m, w in blend.weights]
            rows[unit] = score_like(parts[0][0], _mix(blend.name, parts))
        methods[blend.name] = rows
    return replace(table, methods=methods)


def _mix(name: str, parts: Sequence[tuple[ScoredForecast, float]]) -> Forecast:
    base = parts[0][0].forecast
    p_yes = p_options = None
    if base.kind == "binary":
        p_yes = math.fsum(w * (sf.forecast.p_yes or 0.0) for sf, w in parts)
    else:
        sums: dict[str, float] = defaultdict(float)
        for sf, w in parts:
            for k, p in sf.forecast.p_options or ():
                sums[k] += w * p
        p_options = tuple(sorted(sums.items()))
    unresolved = [sf.forecast.unresolved_mass for sf, _ in parts]
    mass = (
        math.fsum(w * u for (_, w), u in zip(parts, unresolved, strict=True) if u is not None)
        if all(u is not None for u in unresolved)
        else None
    )
    models = tuple(sorted({m for sf, _ in parts for m in sf.forecast.models}))
    as_ofs = [sf.forecast.as_of for sf, _ in parts if sf.forecast.as_of is not None]
    return Forecast(
        card_id=base.card_id,
        method=name,
        kind=base.kind,
        p_yes=p_yes,
        p_options=p_options,
        unresolved_mass=mass,
        models=models,
        extraction_rule="blend:" + ",".join(f"{sf.forecast.method}:{w:g}" for sf, w in parts),
        as_of=min(as_ofs) if as_ofs else None,
        card_hash=base.card_hash,
        version=base.version,
        verified=all(sf.forecast.verified for sf, _ in parts),
    )


def score_like(template: ScoredForecast, fc: Forecast) -> ScoredForecast:
    if fc.kind == "binary":
        assert fc.p_yes is not None
        score = binary_scores(fc.p_yes, 1 if template.outcome == "yes" else 0)
    else:
        assert fc.p_options is not None
        score = multiclass_scores(fc.p_options, template.outcome)
    return ScoredForecast(forecast=fc, outcome=template.outcome, score=score)


def add_uniform(table: MatchedTable) -> MatchedTable:
    """Add the reference method ``uniform``: 0.5 on binary cards, 1/K on K options."""
    if UNIFORM in table.methods:
        raise ConfigError("a method named 'uniform' already exists", field="--uniform")
    rows: dict[str, ScoredForecast] = {}
    for unit in table.units:
        template = next(by_unit[unit] for by_unit in table.methods.values() if unit in by_unit)
        src = template.forecast
        if src.kind == "binary":
            fc = Forecast(
                card_id=src.card_id, method=UNIFORM, kind="binary", p_yes=0.5, p_options=None
            )
        else:
            options = [k for k, _ in src.p_options or ()]
            share = 1.0 / len(options)
            fc = Forecast(
                card_id=src.card_id,
                method=UNIFORM,
                kind="multiple_choice",
                p_yes=None,
                p_options=tuple((k, share) for k in options),
            )
        same_unit = replace(fc, as_of=src.as_of, card_hash=src.card_hash, version=src.version)
        rows[unit] = score_like(template, same_unit)
    return replace(table, methods={**table.methods, UNIFORM: rows})


def contamination_filter(
    forecasts: Sequence[Forecast],
    cutoffs: Mapping[str, datetime],
    card_as_of: Mapping[str, datetime],
) -> tuple[list[Forecast], list[Exclusion]]:
    """Drop forecasts from a model whose knowledge cutoff is after the card's as-of.

    The as-of comes from the forecast itself (a trace's card or an ``as_of`` column), else from
    ``card_as_of`` (the ``--cards`` folder). Models without a listed cutoff are kept. A forecast
    whose model has a cutoff but whose card has no known as-of is an error.
    """
    kept: list[Forecast] = []
    excluded: list[Exclusion] = []
    for fc in forecasts:
        hits = [m for m in fc.models if m in cutoffs]
        if not hits:
            kept.append(fc)
            continue
        as_of = fc.as_of or card_as_of.get(fc.card_id)
        if as_of is None:
            raise CardError(
                f"card '{fc.card_id}' has no known as-of for the contamination filter; "
                "add an as_of column or pass --cards",
                file=fc.sources[0][0] if fc.sources else None,
                field="as_of",
                line=fc.sources[0][1] if fc.sources else None,
            )
        late = [(m, cutoffs[m]) for m in hits if as_of < cutoffs[m]]
        if late:
            model, cutoff = late[0]
            excluded.append(Exclusion(fc.card_id, fc.method, model, as_of, cutoff))
        else:
            kept.append(fc)
    return kept, excluded
