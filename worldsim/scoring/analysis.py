"""The scoring run: inputs → matched table → statistics, with the prereg and the filter applied.

:func:`score` computes everything and writes nothing; :mod:`worldsim.scoring.report` turns its
result into JSON, CSV, Markdown and the printed summary.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from worldsim.domain.cards import load_card, parse_utc
from worldsim.domain.errors import CardError, ConfigError, TraceIncomplete
from worldsim.domain.files import load_mapping, sha256_file
from worldsim.domain.paths import missing_file
from worldsim.scoring.audit import (
    Audit,
    TraceScan,
    audit_table,
    check_auxiliary_labels,
    guards_by_card,
)
from worldsim.scoring.axes import Axes, compute_axes
from worldsim.scoring.calibration import Calibration, calibrate
from worldsim.scoring.hindsight import DEFAULT_DATE_WINDOW_DAYS
from worldsim.scoring.inputs import LineWatcher, LoadedPredictions, load_predictions, read_csv
from worldsim.scoring.labels import LabelSet, load_labels
from worldsim.scoring.metrics import MethodSummary, summarise
from worldsim.scoring.paired import DEFAULT_RESAMPLES, Comparison, Metric, compare
from worldsim.scoring.prereg import Lock, Prereg, verify_lock
from worldsim.scoring.recalibrate import add_recalibrated
from worldsim.scoring.table import (
    Blend,
    Exclusion,
    Forecast,
    MatchedTable,
    add_blends,
    add_uniform,
    aggregate,
    contamination_filter,
    match_labels,
)
from worldsim.world.outcome import DIRECT_RULE

__all__ = [
    "DEFAULT_TIE_EPS",
    "Analysis",
    "ScoreOptions",
    "ScoreResult",
    "label_hashes",
    "load_card_as_of",
    "load_cutoffs",
    "score",
]

DEFAULT_TIE_EPS: tuple[float, ...] = (0.0, 0.0001, 0.001)


@dataclass(frozen=True, slots=True)
class ScoreOptions:
    """What ``worldsim score`` was asked; None means "the default, or the prereg's value"."""

    inputs: tuple[Path, ...]
    labels: Path
    compare: tuple[tuple[str, str], ...] = ()
    tie_eps: tuple[float, ...] | None = None
    n_resamples: int | None = None
    seed: int | None = None
    level: float | None = None
    blends: tuple[Blend, ...] = ()
    recalibrate: tuple[str, ...] = ()
    """Methods to add cross-validated Platt recalibrations of (``METHOD+platt``)."""
    uniform: bool = False
    cutoffs: Path | None = None
    cards: Path | None = None
    prereg_lock: Path | None = None
    allow_unlabelled: bool = False
    n_bins: int = 10
    hindsight: Path | None = None
    date_window_days: float | None = DEFAULT_DATE_WINDOW_DAYS
    split_versions: bool = False
    """Score each forecast date / card content of a card id as its own unit instead of failing."""
    heads: Mapping[Path, str] | None = None
    """The head each of some traces must have (a study's, as its job log recorded them)."""


@dataclass(frozen=True, slots=True)
class Analysis:
    """Every statistic over one matched table."""

    table: MatchedTable
    summaries: Mapping[str, MethodSummary]
    calibration: Mapping[str, Calibration]
    comparisons: tuple[Comparison, ...]


@dataclass(frozen=True, slots=True)
class ScoreResult:
    """Everything a report needs."""

    loaded: LoadedPredictions
    labels: LabelSet
    analysis: Analysis
    filtered: Analysis | None
    exclusions: tuple[Exclusion, ...]
    tie_eps: tuple[float, ...]
    metric: Metric
    blends: tuple[Blend, ...]
    lock: Lock | None = None
    lock_path: Path | None = None
    prereg: Prereg | None = None
    rule_mismatches: tuple[str, ...] = field(default=())
    axes: Axes | None = None
    audit: Audit = field(default_factory=lambda: Audit(units=()))


def score(options: ScoreOptions) -> ScoreResult:
    """Run the whole analysis; raises a worldsim error on any bad input, writes nothing."""
    lock: Lock | None = None
    prereg: Prereg | None = None
    if options.prereg_lock is not None:
        fixed = {
            "--tie-eps": options.tie_eps,
            "--bootstrap": options.n_resamples,
            "--seed": options.seed,
            "--level": options.level,
        }
        for flag, value in fixed.items():
            if value is not None:
                raise ConfigError(f"{flag} is fixed by the prereg; drop it", field=flag)
        lock, prereg = verify_lock(options.prereg_lock, options.inputs)

    if prereg is not None:
        tie_eps = prereg.tie_eps
        n_resamples, seed, level = (
            prereg.bootstrap.n_resamples,
            prereg.bootstrap.seed,
            prereg.bootstrap.level,
        )
        metric: Metric = prereg.primary_metric
        pairs = _unique([*prereg.pairs(), *options.compare])
        blends = _unique_blends([*prereg.blend_objects(), *options.blends])
        recalibrate = list(dict.fromkeys([*prereg.recalibrate, *options.recalibrate]))
    else:
        tie_eps = options.tie_eps if options.tie_eps is not None else DEFAULT_TIE_EPS
        n_resamples = options.n_resamples if options.n_resamples is not None else DEFAULT_RESAMPLES
        seed = options.seed if options.seed is not None else 0
        level = options.level if options.level is not None else 0.95
        metric = "brier"
        pairs = _unique(list(options.compare))
        blends = _unique_blends(list(options.blends))
        recalibrate = list(dict.fromkeys(options.recalibrate))
    _check_settings(tie_eps, n_resamples, level)
    window = options.date_window_days
    if window is not None and not (math.isfinite(window) and window >= 0):
        raise ConfigError(
            "the date window must be a finite number of days, zero or more", field="--date-window"
        )

    labels = load_labels(options.labels)
    scans: dict[str, TraceScan] = {}
    guard_for = guards_by_card(labels)

    def watch(trace: Path) -> LineWatcher:
        scan = scans[str(trace)] = TraceScan(guard_for)
        return scan.see

    # each trace read once, verified and audited
    loaded = load_predictions(options.inputs, watch=watch, heads=options.heads)
    if not loaded.rows:
        why = "; ".join(loaded.warnings[:3]) + (" ..." if len(loaded.warnings) > 3 else "")
        # every input a cut-off trace: exit 3, as `verify` says of each
        error = TraceIncomplete if loaded.warnings else CardError
        raise error(
            "no completed predictions to score" + (f" ({why})" if why else ""),
            file=options.inputs[0],
        )
    check_auxiliary_labels(loaded.rows, labels)
    forecasts = aggregate(loaded.rows, split_versions=options.split_versions)

    def analyse(fcs: Sequence[Forecast], *, filtered: bool) -> Analysis:
        table = match_labels(fcs, labels, allow_unlabelled=options.allow_unlabelled)
        if not table.methods and not filtered:
            raise CardError("no predicted card has a label", file=options.labels)
        usable = blends
        if filtered:
            # The filter may remove a method entirely; what it leaves is compared where possible.
            usable = [b for b in blends if all(m in table.methods for m, _ in b.weights)]
        table = add_blends(table, usable)
        recalibrated = tuple(recalibrate)
        if filtered:
            recalibrated = tuple(m for m in recalibrated if m in table.methods)
        table = add_recalibrated(table, recalibrated)
        if options.uniform and table.methods:
            table = add_uniform(table)
        kept_pairs = pairs
        if filtered:
            kept_pairs = [
                (a, b)
                for a, b in pairs
                if a in table.methods
                and b in table.methods
                and set(table.methods[a]) & set(table.methods[b])
            ]
        return _statistics(
            table, kept_pairs, tie_eps, n_resamples, seed, level, metric, options.n_bins
        )

    analysis = analyse(forecasts, filtered=False)
    filtered: Analysis | None = None
    exclusions: list[Exclusion] = []
    if options.cutoffs is not None:
        cutoffs = load_cutoffs(options.cutoffs)
        card_as_of = load_card_as_of(options.cards) if options.cards is not None else {}
        kept, exclusions = contamination_filter(forecasts, cutoffs, card_as_of)
        filtered = analyse(kept, filtered=True)

    axes: Axes | None = None
    if options.hindsight is not None:
        axes = compute_axes(
            analysis.table,
            analysis.summaries,
            loaded.rows,
            options.hindsight,
            date_window_days=options.date_window_days,
        )

    # the registered rule is the simulated methods': a direct forecast (rule direct/1, one
    # model call) extracts nothing from timelines, so no rule of its own is registered for it
    mismatches: list[str] = []
    if prereg is not None and prereg.extraction_rule is not None:
        for fc in forecasts:
            rule = fc.extraction_rule
            if (
                fc.method in prereg.methods
                and rule not in (None, DIRECT_RULE)
                and rule != prereg.extraction_rule
            ):
                mismatches.append(f"{fc.card_id}/{fc.method}: {rule}")

    return ScoreResult(
        loaded=loaded,
        labels=labels,
        analysis=analysis,
        filtered=filtered,
        exclusions=tuple(exclusions),
        tie_eps=tie_eps,
        metric=metric,
        blends=tuple(blends),
        lock=lock,
        lock_path=options.prereg_lock,
        prereg=prereg,
        rule_mismatches=tuple(mismatches),
        axes=axes,
        audit=audit_table(analysis.table, loaded.rows, labels, scans),
    )


def _statistics(
    table: MatchedTable,
    pairs: Sequence[tuple[str, str]],
    tie_eps: Sequence[float],
    n_resamples: int,
    seed: int,
    level: float,
    metric: Metric,
    n_bins: int,
) -> Analysis:
    summaries: dict[str, MethodSummary] = {}
    calibration: dict[str, Calibration] = {}
    for method, by_card in sorted(table.methods.items()):
        rows = [by_card[c] for c in sorted(by_card)]
        if not rows:
            continue
        summaries[method] = summarise(
            [r.score for r in rows], [r.forecast.unresolved_mass for r in rows]
        )
        binary = [
            (r.forecast.p_yes, 1 if r.outcome == "yes" else 0)
            for r in rows
            if r.forecast.p_yes is not None
        ]
        calibration[method] = calibrate(binary, n_bins=n_bins, level=level)
    comparisons = tuple(
        compare(
            table,
            a,
            b,
            tie_eps=tie_eps,
            n_resamples=n_resamples,
            seed=seed,
            level=level,
            metric=metric,
        )
        for a, b in pairs
    )
    return Analysis(
        table=table, summaries=summaries, calibration=calibration, comparisons=comparisons
    )


def _check_settings(tie_eps: Sequence[float], n_resamples: int, level: float) -> None:
    if not tie_eps or any(e < 0 for e in tie_eps):
        raise ConfigError(
            "tie thresholds must be one or more non-negative numbers", field="--tie-eps"
        )
    if n_resamples < 1:
        raise ConfigError("the number of bootstrap resamples must be positive", field="--bootstrap")
    if not 0.0 < level < 1.0:
        raise ConfigError("the interval level must lie strictly between 0 and 1", field="--level")


def _unique(pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    return list(dict.fromkeys(pairs))


def _unique_blends(blends: Sequence[Blend]) -> list[Blend]:
    out: dict[str, Blend] = {}
    for blend in blends:
        if blend.name in out and out[blend.name] != blend:
            raise ConfigError(
                f"blend '{blend.name}' is declared twice with different weights", field="--blend"
            )
        out[blend.name] = blend
    return list(out.values())


def load_cutoffs(path: Path) -> dict[str, datetime]:
    """Read ``model → knowledge cutoff`` from YAML/JSON (a mapping) or CSV (``model, cutoff``)."""
    raw: dict[str, tuple[object, int | None]] = {}
    if path.suffix.lower() == ".csv":
        if not path.is_file():
            raise missing_file(path, "cutoffs file", CardError)
        for line, row in read_csv(path, ("model", "cutoff"), what="cutoffs file")[1]:
            if "model" not in row or "cutoff" not in row:
                raise CardError("missing value", file=path, field="cutoff", line=line)
            if row["model"] in raw:
                raise CardError(
                    f"duplicate model '{row['model']}'", file=path, field="model", line=line
                )
            raw[row["model"]] = (row["cutoff"], line)
    else:
        raw = {str(k): (v, None) for k, v in load_mapping(path, what="cutoffs file").items()}
    out: dict[str, datetime] = {}
    for model, (value, row_line) in raw.items():
        try:
            out[model] = parse_utc(value)
        except ValueError as exc:
            field = model if row_line is None else "cutoff"
            raise CardError(str(exc), file=path, field=field, line=row_line) from None
    return out


def load_card_as_of(folder: Path) -> dict[str, datetime]:
    """The as-of date of every card in a folder of card files (YAML/JSON)."""
    if not folder.is_dir():
        raise CardError("--cards must be a folder of card files", file=folder)
    out: dict[str, datetime] = {}
    for f in sorted(folder.rglob("*")):
        if f.is_file() and f.suffix.lower() in (".yaml", ".yml", ".json"):
            card = load_card(f)
            out[card.id] = card.as_of
    return out


def label_hashes(labels: LabelSet) -> list[dict[str, str]]:
    """SHA-256 of every label file read."""
    return [{"path": str(f), "sha256": sha256_file(f)} for f in labels.files]
