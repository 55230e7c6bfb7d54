"""Reports of a scoring run: the JSON document, the printed summary, and atomic file writes.

Every aggregate in the JSON can be recomputed from its ``per_card`` rows. Files are written only
after everything was computed, each to a temporary file that is then renamed into place.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from rich.console import Console
from rich.table import Table

from worldsim.domain.files import sha256_file
from worldsim.scoring.analysis import Analysis, ScoreResult, label_hashes
from worldsim.scoring.audit import audit_json, print_audit
from worldsim.scoring.axes import Axes, AxisMeans
from worldsim.scoring.metrics import CLIP
from worldsim.scoring.paired import Comparison
from worldsim.scoring.per_card import per_card_rows
from worldsim.scoring.provisional import print_provisional, provisional_json
from worldsim.scoring.table import unverified_methods

__all__ = [
    "SCHEMA",
    "axes_json",
    "coverage",
    "figure",
    "print_summary",
    "statistic_names",
    "to_json",
]

SCHEMA = "worldsim.score/1"

# --------------------------------------------------------------------------------------------
# statistics and the JSON document


def statistic_names(result: ScoreResult) -> tuple[list[str], list[str]]:
    """All statistic names of the run, split into (pre-registered, exploratory)."""
    names: list[str] = []
    for method in result.analysis.summaries:
        names += [f"{m}:{method}" for m in ("brier", "log", "accuracy", "ece")]
        names.append(f"reliability:{method}")
    for comp in result.analysis.comparisons:
        pair = f"{comp.baseline}:{comp.method}"
        names += [f"delta_brier:{pair}", f"delta_log:{pair}", f"bootstrap:{pair}"]
        names += [f"sign_test:{pair}@{st.eps:g}" for st in comp.sign_tests]
    if result.filtered is not None:
        names.append("contamination_filtered:*")
    if result.axes is not None:
        # The prereg format has no place for these, so they are always exploratory.
        for method, m in result.axes.methods.items():
            if not m.means.n:
                continue
            names += [f"{m}:{method}" for m in ("srcp", "ker", "mass_weighted_recall")]
            names += [f"srcp_by_correctness:{method}", f"ker_by_correctness:{method}"]
    covered: set[str] = set()
    if result.prereg is not None:
        p = result.prereg
        metric = p.primary_metric
        for method in {*p.methods, p.baseline, *p.blends, *p.recalibrated()}:
            covered.add(f"{metric}:{method}")
        for a, b in p.pairs():
            covered.add(f"delta_{metric}:{a}:{b}")
            covered.add(f"bootstrap:{a}:{b}")
            covered.update(f"sign_test:{a}:{b}@{eps:g}" for eps in p.tie_eps)
    registered = [n for n in names if n in covered]
    return registered, [n for n in names if n not in covered]


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else x


def _comparison_json(comp: Comparison) -> dict[str, Any]:
    return {
        "baseline": comp.baseline,
        "method": comp.method,
        "n": comp.n,
        "metric": comp.metric,
        "mean_delta": comp.mean_delta,
        "mean_delta_brier": comp.mean_delta_brier,
        "mean_delta_log": comp.mean_delta_log,
        "bootstrap": {
            "n_resamples": comp.bootstrap.n_resamples,
            "seed": comp.bootstrap.seed,
            "level": comp.bootstrap.level,
            "ci": [comp.bootstrap.lo, comp.bootstrap.hi],
        },
        "sign_tests": [
            {"eps": s.eps, "wins": s.wins, "losses": s.losses, "ties": s.ties, "p_value": s.p_value}
            for s in comp.sign_tests
        ],
    }


def _analysis_json(analysis: Analysis) -> dict[str, Any]:
    methods: dict[str, Any] = {}
    calibration: dict[str, Any] = {}
    for name, s in analysis.summaries.items():
        cal = analysis.calibration[name]
        runs = sum(sf.forecast.n_replicates for sf in analysis.table.methods[name].values())
        methods[name] = {
            "n": s.n,
            "brier": s.brier,
            "log": s.log,
            "accuracy": s.accuracy,
            "ece": _finite(cal.ece),
            "mean_unresolved_mass": s.mean_unresolved_mass,
            "n_runs": runs,
        }
        calibration[name] = {
            "n": cal.n,
            "level": cal.level,
            "bins": [
                {
                    "lo": b.lo,
                    "hi": b.hi,
                    "count": b.count,
                    "mean_p": b.mean_p,
                    "frequency": b.frequency,
                    "wilson": None if b.wilson_lo is None else [b.wilson_lo, b.wilson_hi],
                }
                for b in cal.bins
            ],
        }
    return {
        "n_cards": len(analysis.table.card_ids),
        "n_units": len(analysis.table.units),
        "methods": methods,
        "comparisons": [_comparison_json(c) for c in analysis.comparisons],
        "calibration": calibration,
        "provisional": provisional_json(analysis.table.provisional, analysis.table.briers()),
    }


def _group_json(group: AxisMeans) -> dict[str, Any]:
    return {
        "n": group.n,
        "ker_mean": group.ker,
        "ker_n": group.ker_n,
        "srcp_mean": group.srcp,
        "srcp_n": group.srcp_n,
    }


def axes_json(axes: Axes) -> dict[str, Any]:
    """The ``axes`` block: outcome, evidence and reasoning per method, and the cards behind it."""
    with_graph = {g.card_id for g in axes.graphs}
    return {
        "hindsight_dir": str(axes.hindsight_dir),
        "date_window_days": axes.date_window_days,
        "graphs": [
            {
                "card_id": g.card_id,
                "path": str(g.path),
                "sha256": g.sha256,
                "warnings": list(g.warnings),
                "annotation": (
                    {
                        "events": g.graph.annotation.events,
                        "checked": g.graph.annotation.checked,
                        "rejected": len(g.graph.annotation.rejected),
                    }
                    if g.graph.annotation is not None
                    else None
                ),
            }
            for g in axes.graphs
        ],
        "coverage": {
            "cards_with_graph": sorted(with_graph),
            "cards_without_graph": list(axes.cards_without_graph),
            "graphs_not_built": [
                {"card_id": card, "failed_gates": list(gates)}
                for card, gates in axes.graphs_not_built
            ],
            "forecasts_without_trace": [
                {"card_id": card, "method": method} for card, method in axes.forecasts_without_trace
            ],
        },
        "methods": {
            name: {
                "n": m.summary.n,
                "n_hindsight": m.means.n,
                "n_traces": m.n_traces,
                "outcome": {
                    "accuracy": m.summary.accuracy,
                    "brier": m.summary.brier,
                    "log": m.summary.log,
                },
                "evidence": {"srcp_mean": m.means.srcp, "n": m.means.srcp_n},
                "reasoning": {
                    "ker_mean": m.means.ker,
                    "n": m.means.ker_n,
                    "mass_weighted_recall_mean": m.mass_weighted_recall_mean,
                },
                "by_correctness": {
                    "correct": _group_json(m.correct),
                    "incorrect": _group_json(m.incorrect),
                },
            }
            for name, m in axes.methods.items()
        },
        "cards": [
            {
                "card_id": c.card_id,
                "method": c.method,
                "graph": str(c.graph.path) if c.graph is not None else None,
                "correct": c.correct,
                "n_traces": len(c.traces),
                "ker": c.means.ker,
                "ker_n": c.means.ker_n,
                "mass_weighted_recall": c.mass_weighted_recall,
                "srcp": c.means.srcp,
                "srcp_n": c.means.srcp_n,
                "traces": [
                    {
                        "source": t.source,
                        "run_id": t.run_id,
                        "ker": t.ker,
                        "mass_weighted_recall": t.mass_weighted_recall,
                        "key_events": t.n_key_events,
                        "matched_key_events": t.n_matched_key_events,
                        "srcp": t.srcp,
                        "accessed": t.n_accessed,
                        "relevant": t.n_relevant,
                    }
                    for t in c.traces
                ],
            }
            for c in axes.cards
        ],
    }


def coverage(result: ScoreResult) -> dict[str, Any]:
    """How many predictions were read, how many met a label, and which ids did not."""
    labelled = set(result.labels.entries)
    rows = result.loaded.rows
    predicted = {r.card_id for r in rows}
    table = result.analysis.table
    all_units = set(table.units)
    return {
        "n_predictions": len(rows),
        "n_matched": sum(1 for r in rows if r.card_id in labelled),
        "unmatched_card_ids": sorted(predicted - labelled),
        "labels_without_predictions": sorted(labelled - predicted),
        "skipped_traces": list(result.loaded.warnings),
        "missing_by_method": {
            m: sorted(all_units - set(by_unit))
            for m, by_unit in sorted(table.methods.items())
            if all_units - set(by_unit)
        },
    }


def to_json(result: ScoreResult) -> dict[str, Any]:
    """The ``worldsim.score/1`` document."""
    main = _analysis_json(result.analysis)
    registered, exploratory = statistic_names(result)
    prereg: dict[str, Any] | None = None
    if result.lock is not None and result.lock_path is not None and result.prereg is not None:
        prereg = {
            "lock": str(result.lock_path),
            "lock_sha256": sha256_file(result.lock_path),
            "locked_at": result.lock.locked_at,
            "prereg": result.lock.prereg.model_dump(),
            "predictions": [f.model_dump() for f in result.lock.predictions],
            "labels": label_hashes(result.labels),
            "settings": result.prereg.model_dump(mode="json"),
            "statistics": registered,
            "extraction_rule_mismatches": list(result.rule_mismatches),
        }
    contamination: dict[str, Any] | None = None
    if result.filtered is not None:
        contamination = {
            "excluded": [
                {
                    "card_id": e.card_id,
                    "method": e.method,
                    "model": e.model,
                    "as_of": e.as_of.isoformat(),
                    "cutoff": e.cutoff.isoformat(),
                }
                for e in result.exclusions
            ],
            **_analysis_json(result.filtered),
        }
    return {
        "schema": SCHEMA,
        "n_cards": main["n_cards"],
        "n_units": main["n_units"],
        "clip": list(CLIP),
        "metric": result.metric,
        "tie_eps": list(result.tie_eps),
        "blends": {b.name: dict(b.weights) for b in result.blends},
        "methods": main["methods"],
        "unverified_methods": unverified_methods(result.analysis.table),
        "comparisons": main["comparisons"],
        "calibration": main["calibration"],
        "provisional": main["provisional"],
        "coverage": coverage(result),
        "contamination": contamination,
        "per_card": per_card_rows(result),
        "labels": label_hashes(result.labels),
        "prereg": prereg,
        "exploratory": exploratory,
        "axes": axes_json(result.axes) if result.axes is not None else None,
        "audit": audit_json(result.audit),
    }


# --------------------------------------------------------------------------------------------
# printed summary


def figure(x: float | None, n: int | None = None, digits: int = 4) -> str:
    """A figure as the printed tables show it: ``—`` for none, then how many it is over."""
    text = "—" if x is None else f"{x:.{digits}f}"
    return text if n is None else f"{text} ({n})"


def print_summary(result: ScoreResult, doc: Mapping[str, Any], console: Console) -> None:
    """The human-readable summary: coverage, methods, comparisons, filter and prereg status."""
    cov = doc["coverage"]
    console.print(
        f"coverage: n_predictions={cov['n_predictions']} n_matched={cov['n_matched']} "
        f"cards={doc['n_cards']}"
        + (f" units={doc['n_units']}" if doc["n_units"] != doc["n_cards"] else "")
        + (f" unmatched={','.join(cov['unmatched_card_ids'])}" if cov["unmatched_card_ids"] else "")
        + (
            f" labels_without_predictions={len(cov['labels_without_predictions'])}"
            if cov["labels_without_predictions"]
            else ""
        ),
        highlight=False,
    )
    unverified = set(doc["unverified_methods"])
    _print_analysis(doc, console, title="Scores", unverified=unverified)
    if unverified:
        console.print(
            "unverified: forecasts read from prediction tables, not from traces that verify: "
            + ", ".join(sorted(unverified)),
            highlight=False,
        )
    if doc["axes"] is not None:
        _print_axes(doc["axes"], console, unverified)
    print_audit(doc["audit"], console)
    if doc["contamination"] is not None:
        c = doc["contamination"]
        console.print(f"contamination filter: {len(c['excluded'])} forecast(s) excluded")
        _print_analysis(
            c, console, title="Scores after the contamination filter", unverified=unverified
        )
    if doc["prereg"] is not None:
        p = doc["prereg"]
        console.print(
            f"prereg: lock {p['lock']} verified (locked {p['locked_at']}); "
            f"{len(p['statistics'])} pre-registered, "
            f"{len(doc['exploratory'])} exploratory statistics",
            highlight=False,
        )
        if p["extraction_rule_mismatches"]:
            console.print(
                f"prereg: {len(p['extraction_rule_mismatches'])} forecast(s) used another "
                f"extraction rule than {p['settings']['extraction_rule']}",
                highlight=False,
            )
    else:
        console.print("prereg: none — every statistic is exploratory", highlight=False)


def _named(name: str, unverified: AbstractSet[str]) -> str:
    """A method as every printed table names it: marked when any of its forecasts came from a
    prediction table rather than a verified trace."""
    return f"{name} (unverified)" if name in unverified else name


def _print_analysis(
    doc: Mapping[str, Any], console: Console, *, title: str, unverified: AbstractSet[str]
) -> None:
    table = Table(title=title, title_justify="left")
    for col in ("method", "n", "runs", "Brier", "log", "accuracy", "ECE", "unresolved"):
        table.add_column(col, justify="left" if col == "method" else "right")
    for name, m in doc["methods"].items():
        table.add_row(
            _named(name, unverified),
            str(m["n"]),
            str(m["n_runs"]),
            figure(m["brier"]),
            figure(m["log"]),
            figure(m["accuracy"], digits=3),
            figure(m["ece"]),
            figure(m["mean_unresolved_mass"], digits=3),
        )
    console.print(table)
    print_provisional(doc, console)
    if not doc["comparisons"]:
        return
    level = doc["comparisons"][0]["bootstrap"]["level"]
    comp_table = Table(
        title=f"Paired comparisons (Δ = loss baseline − loss method; {level:g} bootstrap interval)",
        title_justify="left",
    )
    for col in ("baseline → method", "n", "mean Δ", "interval", "ε", "W/L/T", "p"):
        comp_table.add_column(col, justify="left" if col.startswith("baseline") else "right")
    for c in doc["comparisons"]:
        lo, hi = c["bootstrap"]["ci"]
        for i, s in enumerate(c["sign_tests"]):
            first = i == 0
            pair = f"{_named(c['baseline'], unverified)} → {_named(c['method'], unverified)}"
            comp_table.add_row(
                pair if first else "",
                str(c["n"]) if first else "",
                figure(c["mean_delta"]) if first else "",
                f"[{lo:.4f}, {hi:.4f}]" if first else "",
                f"{s['eps']:g}",
                f"{s['wins']}/{s['losses']}/{s['ties']}",
                f"{s['p_value']:.4g}",
            )
    console.print(comp_table)


def _print_axes(axes: Mapping[str, Any], console: Console, unverified: AbstractSet[str]) -> None:
    cov = axes["coverage"]
    not_built = cov.get("graphs_not_built", [])
    n_cards = len(cov["cards_with_graph"]) + len(cov["cards_without_graph"]) + len(not_built)
    window = axes["date_window_days"]
    line = (
        f"hindsight: graphs for {len(cov['cards_with_graph'])} of {n_cards} card(s) in "
        f"{axes['hindsight_dir']} (KER date window "
        + ("none" if window is None else f"{window:g} days")
        + ")"
    )
    if cov["cards_without_graph"]:
        line += f"; without a graph: {','.join(cov['cards_without_graph'])}"
    if not_built:
        line += "; left out (graph_built false): " + ",".join(g["card_id"] for g in not_built)
    annotated = [g["annotation"] for g in axes["graphs"] if g.get("annotation")]
    if annotated:
        checked = sum(a["checked"] for a in annotated)
        total = sum(a["events"] for a in annotated)
        line += (
            f"; annotation: {checked} of {total} event(s) checked by people in "
            f"{len(annotated)} of {len(axes['graphs'])} graph(s)"
        )
    if cov["forecasts_without_trace"]:
        line += "; forecasts without a trace: " + ",".join(
            f"{f['card_id']}/{f['method']}" for f in cov["forecasts_without_trace"]
        )
    n_warnings = sum(len(g["warnings"]) for g in axes["graphs"])
    if n_warnings:
        line += f"; {n_warnings} graph quality warning(s)"
    console.print(line, highlight=False)
    table = Table(
        title="Three axes (cards: with a graph and a trace / scored; (n): cards averaged)",
        title_justify="left",
    )
    for col in ("method", "cards", "accuracy", "SrcP", "KER", "mass-wtd"):
        table.add_column(col, justify="left" if col == "method" else "right", overflow="fold")
    split = Table(
        title="KER and SrcP by correctness (✓ correct, ✗ incorrect forecasts)",
        title_justify="left",
    )
    for col in ("method", "✓/✗", "SrcP ✓", "SrcP ✗", "KER ✓", "KER ✗"):
        split.add_column(col, justify="left" if col == "method" else "right", overflow="fold")
    for name, m in axes["methods"].items():
        table.add_row(
            _named(name, unverified),
            f"{m['n_hindsight']}/{m['n']}",
            figure(m["outcome"]["accuracy"], digits=3),
            figure(m["evidence"]["srcp_mean"], m["evidence"]["n"], 3),
            figure(m["reasoning"]["ker_mean"], m["reasoning"]["n"], 3),
            figure(m["reasoning"]["mass_weighted_recall_mean"], digits=3),
        )
        ok, bad = m["by_correctness"]["correct"], m["by_correctness"]["incorrect"]
        split.add_row(
            _named(name, unverified),
            f"{ok['n']}/{bad['n']}",
            figure(ok["srcp_mean"], ok["srcp_n"], 3),
            figure(bad["srcp_mean"], bad["srcp_n"], 3),
            figure(ok["ker_mean"], ok["ker_n"], 3),
            figure(bad["ker_mean"], bad["ker_n"], 3),
        )
    console.print(table)
    console.print(split)


# --------------------------------------------------------------------------------------------
# files
