"""From prediction rows to the matched per-card table: replicates averaged, labels joined.

Replicates (several rows of one card and method with distinct run ids) are averaged and
counted. Blends and the uniform reference are added as methods of their own. The
contamination filter removes (model, card) pairs whose card as-of precedes the model's cutoff.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from worldsim.domain.errors import CardError, ConfigError
from worldsim.scoring.inputs import Kind, PredictionRow
from worldsim.scoring.labels import LabelSet
from worldsim.scoring.metrics import CardScore, binary_scores, multiclass_scores

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
]

UNIFORM = "uniform"


@dataclass(frozen=True, slots=True)
class Forecast:
    """One method's forecast of one card, replicates averaged."""

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

    @property
    def model(self) -> str | None:
        return ";".join(self.models) if self.models else None


@dataclass(frozen=True, slots=True)
class ScoredForecast:
    """A forecast joined with its label and scored."""

    forecast: Forecast
    outcome: str
    score: CardScore


@dataclass(frozen=True, slots=True)
class MatchedTable:
    """Scored forecasts by method, then by card id."""

    methods: Mapping[str, Mapping[str, ScoredForecast]]
    unlabelled: tuple[str, ...] = ()

    @property
    def card_ids(self) -> list[str]:
        return sorted({c for by_card in self.methods.values() for c in by_card})


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


def aggregate(rows: Sequence[PredictionRow]) -> list[Forecast]:
    """Average replicates per (card, method); refuse duplicate run ids and inconsistent kinds."""
    seen: dict[tuple[str, str, str | None], PredictionRow] = {}
    groups: dict[tuple[str, str], list[PredictionRow]] = defaultdict(list)
    kinds: dict[str, tuple[Kind, frozenset[str] | None, PredictionRow]] = {}
    for row in rows:
        key = (row.card_id, row.method, row.run_id)
        if key in seen:
            first = seen[key]
            where = first.source if first.line is None else f"{first.source}:{first.line}"
            raise CardError(
                f"duplicate prediction for card '{row.card_id}', method '{row.method}', "
                f"run id {row.run_id!r} (first in {where})",
                file=row.source,
                field="run_id",
                line=row.line,
            )
        seen[key] = row
        options = frozenset(k for k, _ in row.p_options) if row.p_options else None
        known = kinds.setdefault(row.card_id, (row.kind, options, row))
        if (known[0], known[1]) != (row.kind, options):
            raise CardError(
                f"card '{row.card_id}' is predicted as {row.kind} here and as {known[0]} "
                f"(or with other options) in {known[2].source}",
                file=row.source,
                field="p_yes" if row.kind == "binary" else "p_options",
                line=row.line,
            )
        groups[(row.card_id, row.method)].append(row)
    return [_average(group) for _, group in sorted(groups.items())]


def _average(group: Sequence[PredictionRow]) -> Forecast:
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
    )


def match_labels(
    forecasts: Sequence[Forecast], labels: LabelSet, *, allow_unlabelled: bool = False
) -> MatchedTable:
    """Join forecasts with labels and score them.

    A forecast for a card without a label is an error naming the prediction input, unless
    ``allow_unlabelled``, in which case its card id is reported as unmatched.
    """
    methods: dict[str, dict[str, ScoredForecast]] = defaultdict(dict)
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
        outcome = entry.outcome
        if fc.kind == "binary":
            if outcome not in ("yes", "no"):
                raise CardError(
                    f"outcome {outcome!r} of binary card '{fc.card_id}' is not "
                    "yes/no, 1/0 or true/false",
                    file=entry.file,
                    field="outcome",
                    line=entry.line,
                )
            assert fc.p_yes is not None
            score = binary_scores(fc.p_yes, 1 if outcome == "yes" else 0)
        else:
            assert fc.p_options is not None
            options = [k for k, _ in fc.p_options]
            if outcome not in options:
                raise CardError(
                    f"outcome {outcome!r} of card '{fc.card_id}' is not one of its options "
                    f"{', '.join(options)}",
                    file=entry.file,
                    field="outcome",
                    line=entry.line,
                )
            score = multiclass_scores(fc.p_options, outcome)
        methods[fc.method][fc.card_id] = ScoredForecast(forecast=fc, outcome=outcome, score=score)
    return MatchedTable(methods=dict(methods), unlabelled=tuple(sorted(unlabelled)))


def _label_place(labels: LabelSet) -> str:
    if len(labels.files) == 1:
        return str(labels.files[0])
    return f"{labels.files[0].parent} ({len(labels.files)} label files)"


def add_blends(table: MatchedTable, blends: Sequence[Blend]) -> MatchedTable:
    """Add each blend as a method over the cards all its components forecast."""
    methods = dict(table.methods)
    for blend in blends:
        if blend.name in methods:
            raise ConfigError(f"blend name '{blend.name}' is already a method", field="--blend")
        for method, _ in blend.weights:
            if method not in methods:
                raise ConfigError(
                    f"blend '{blend.name}': unknown method '{method}'", field="--blend"
                )
        cards = set.intersection(*(set(methods[m]) for m, _ in blend.weights))
        rows: dict[str, ScoredForecast] = {}
        for card in sorted(cards):
            parts = [(methods[m][card], w) for m, w in blend.weights]
            rows[card] = _score_like(parts[0][0], _mix(blend.name, parts))
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
    )


def _score_like(template: ScoredForecast, fc: Forecast) -> ScoredForecast:
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
    for card in table.card_ids:
        template = next(by_card[card] for by_card in table.methods.values() if card in by_card)
        src = template.forecast
        if src.kind == "binary":
            fc = Forecast(card_id=card, method=UNIFORM, kind="binary", p_yes=0.5, p_options=None)
        else:
            options = [k for k, _ in src.p_options or ()]
            share = 1.0 / len(options)
            fc = Forecast(
                card_id=card,
                method=UNIFORM,
                kind="multiple_choice",
                p_yes=None,
                p_options=tuple((k, share) for k in options),
            )
        rows[card] = _score_like(template, replace(fc, as_of=src.as_of))
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
