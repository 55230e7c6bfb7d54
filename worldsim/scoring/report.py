"""Reports of a scoring run: the JSON document, the printed summary, and atomic file writes.

Every aggregate in the JSON can be recomputed from its ``per_card`` rows. Files are written only
after everything was computed, each to a temporary file that is then renamed into place.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from worldsim._io import sha256_file
from worldsim.scoring.analysis import Analysis, ScoreResult, label_hashes
from worldsim.scoring.metrics import CLIP
from worldsim.scoring.paired import Comparison
from worldsim.scoring.per_card import per_card_rows

__all__ = [
    "SCHEMA",
    "coverage",
    "print_summary",
    "statistic_names",
    "to_json",
    "write_files",
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
    covered: set[str] = set()
    if result.prereg is not None:
        p = result.prereg
        metric = p.primary_metric
        for method in {*p.methods, p.baseline, *p.blends}:
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
        "methods": methods,
        "comparisons": [_comparison_json(c) for c in analysis.comparisons],
        "calibration": calibration,
    }


def coverage(result: ScoreResult) -> dict[str, Any]:
    """How many predictions were read, how many met a label, and which ids did not."""
    labelled = set(result.labels.entries)
    rows = result.loaded.rows
    predicted = {r.card_id for r in rows}
    table = result.analysis.table
    all_cards = set(table.card_ids)
    return {
        "n_predictions": len(rows),
        "n_matched": sum(1 for r in rows if r.card_id in labelled),
        "unmatched_card_ids": sorted(predicted - labelled),
        "labels_without_predictions": sorted(labelled - predicted),
        "skipped_traces": list(result.loaded.warnings),
        "missing_by_method": {
            m: sorted(all_cards - set(by_card))
            for m, by_card in sorted(table.methods.items())
            if all_cards - set(by_card)
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
        "clip": list(CLIP),
        "metric": result.metric,
        "tie_eps": list(result.tie_eps),
        "blends": {b.name: dict(b.weights) for b in result.blends},
        "methods": main["methods"],
        "comparisons": main["comparisons"],
        "calibration": main["calibration"],
        "coverage": coverage(result),
        "contamination": contamination,
        "per_card": per_card_rows(result),
        "labels": label_hashes(result.labels),
        "prereg": prereg,
        "exploratory": exploratory,
    }


# --------------------------------------------------------------------------------------------
# printed summary


def _fmt(x: float | None, digits: int = 4) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def print_summary(result: ScoreResult, doc: Mapping[str, Any], console: Console) -> None:
    """The human-readable summary: coverage, methods, comparisons, filter and prereg status."""
    cov = doc["coverage"]
    console.print(
        f"coverage: n_predictions={cov['n_predictions']} n_matched={cov['n_matched']} "
        f"cards={doc['n_cards']}"
        + (f" unmatched={','.join(cov['unmatched_card_ids'])}" if cov["unmatched_card_ids"] else "")
        + (
            f" labels_without_predictions={len(cov['labels_without_predictions'])}"
            if cov["labels_without_predictions"]
            else ""
        ),
        highlight=False,
    )
    _print_analysis(doc, console, title="Scores")
    if doc["contamination"] is not None:
        c = doc["contamination"]
        console.print(f"contamination filter: {len(c['excluded'])} forecast(s) excluded")
        _print_analysis(c, console, title="Scores after the contamination filter")
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


def _print_analysis(doc: Mapping[str, Any], console: Console, *, title: str) -> None:
    table = Table(title=title, title_justify="left")
    for col in ("method", "n", "runs", "Brier", "log", "accuracy", "ECE", "unresolved"):
        table.add_column(col, justify="left" if col == "method" else "right")
    for name, m in doc["methods"].items():
        table.add_row(
            name,
            str(m["n"]),
            str(m["n_runs"]),
            _fmt(m["brier"]),
            _fmt(m["log"]),
            _fmt(m["accuracy"], 3),
            _fmt(m["ece"]),
            _fmt(m["mean_unresolved_mass"], 3),
        )
    console.print(table)
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
            comp_table.add_row(
                f"{c['baseline']} → {c['method']}" if first else "",
                str(c["n"]) if first else "",
                _fmt(c["mean_delta"]) if first else "",
                f"[{lo:.4f}, {hi:.4f}]" if first else "",
                f"{s['eps']:g}",
                f"{s['wins']}/{s['losses']}/{s['ties']}",
                f"{s['p_value']:.4g}",
            )
    console.print(comp_table)


# --------------------------------------------------------------------------------------------
# files


def write_files(files: Mapping[Path, bytes]) -> None:
    """Write each file through a temporary sibling and an atomic rename."""
    for path, content in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(content)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
