"""Reading prediction inputs: completed traces and prediction tables, one row per forecast.

A trace (JSONL envelope records, DESIGN §4.8) gives one row for its card and method label, with
the card's hash and as-of (the forecast date). A prediction table (CSV or JSONL) gives one row
per line with ``card_id, method, p_yes`` and optional metadata. Folders are read recursively.
Incomplete traces are skipped and reported.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from worldsim.domain.cards import parse_utc
from worldsim.domain.errors import CardError, TraceIncomplete
from worldsim.domain.files import check_size, csv_rows, files_in, read_jsonl
from worldsim.domain.forecastbench import round_key
from worldsim.trace.reader import TraceLine, looks_like_trace
from worldsim.trace.verify import verified_lines

__all__ = [
    "LineWatcher",
    "LoadedPredictions",
    "PredictionRow",
    "input_files",
    "load_predictions",
    "read_csv",
    "refuse_duplicates",
    "rows_from_table",
    "rows_from_trace",
]

Kind = Literal["binary", "multiple_choice"]

#: Table columns with a fixed meaning; any other ``p_<option>`` column is an option probability.
_META_COLUMNS = (
    "unresolved_mass",
    "model",
    "prompt_version",
    "response_id",
    "run_id",
    "extraction_rule",
    "as_of",
    "card_hash",
    "p_yes_raw",
)
_RESERVED = frozenset({"card_id", "method", "p_yes", "p_options", *_META_COLUMNS})
_TABLE_SUFFIXES = frozenset({".csv", ".jsonl"})
_TOLERANCE = 1e-6


@dataclass(frozen=True, slots=True)
class PredictionRow:
    """One forecast of one card by one method, as read from one input."""

    card_id: str
    method: str
    kind: Kind
    p_yes: float | None
    p_options: tuple[tuple[str, float], ...] | None
    source: str
    line: int | None = None
    unresolved_mass: float | None = None
    model: str | None = None
    prompt_version: str | None = None
    response_id: str | None = None
    run_id: str | None = None
    extraction_rule: str | None = None
    as_of: datetime | None = None
    """The forecast date: the as-of of the card the run simulated (a table's ``as_of``)."""
    p_yes_raw: float | None = None
    card_hash: str | None = None
    """SHA-256 of the card's canonical JSON (a trace's ``card_hash``, a table's column)."""
    auxiliary_endpoints: tuple[str, ...] = ()
    """The ids of the card's auxiliary endpoints (traces only: tables carry no card)."""
    trace: bool = False
    """True when the row was read from a trace (``source`` is then the trace file)."""
    card_round: str | None = None
    """The ForecastBench round the card was imported from (`round_key` of its provenance);
    None for a table or a card of no round."""


@dataclass(frozen=True, slots=True)
class LoadedPredictions:
    """Every row read, the files they came from, and one warning per skipped trace."""

    rows: tuple[PredictionRow, ...]
    files: tuple[Path, ...]
    warnings: tuple[str, ...] = field(default=())


def input_files(paths: Iterable[str | Path]) -> list[Path]:
    """Expand files and folders (recursively) into the prediction files they hold, sorted."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            out.extend(
                files_in(p, _TABLE_SUFFIXES, "folder holds no .jsonl or .csv prediction files")
            )
        elif p.is_file():
            if p.suffix.lower() not in _TABLE_SUFFIXES:
                raise CardError(
                    "prediction input must be a .jsonl trace or a .csv/.jsonl table", file=p
                )
            out.append(p)
        else:
            raise CardError("prediction input not found", file=p)
    return out


LineWatcher = Callable[[TraceLine], None]
"""Sees each effective line of a trace as :func:`rows_from_trace` reads it."""


def load_predictions(
    paths: Iterable[str | Path],
    *,
    watch: Callable[[Path], LineWatcher] | None = None,
    heads: Mapping[Path, str] | None = None,
) -> LoadedPredictions:
    """Read every prediction input. A trace is read through ``verify``'s own pass: one it
    refuses is refused here (TraceError, exit 1); one that holds no result (cut off, or a
    failed run) is skipped with a warning saying why. Duplicate rows are refused
    (`refuse_duplicates`).

    ``watch(trace)`` gives what also sees each of that trace's lines in the same pass (the
    score-time audit reads them there, so that a trace is read once); ``heads`` the head a
    trace must have (a study's traces, the heads its job log recorded)."""
    files = input_files(paths)
    rows: list[PredictionRow] = []
    warnings: list[str] = []
    for f in files:
        if f.suffix.lower() == ".jsonl" and (f.stat().st_size == 0 or looks_like_trace(f)):
            try:
                seen = watch(f) if watch is not None else None
                expect = heads.get(f) if heads is not None else None
                rows.append(rows_from_trace(f, seen, expect_head=expect))
            except TraceIncomplete as exc:
                warnings.append(f"{f}: {exc.message}; skipped")
        else:
            rows.extend(rows_from_table(f))
    refuse_duplicates(rows)
    return LoadedPredictions(rows=tuple(rows), files=tuple(files), warnings=tuple(warnings))


def refuse_duplicates(rows: Iterable[PredictionRow]) -> None:
    """Refuse two rows of one card, method and run id (two rows without a run id included; a
    trace given twice is one): a `CardError` naming the second and where the first is."""
    seen: dict[tuple[str, str, str | None], PredictionRow] = {}
    for row in rows:
        key = (row.card_id, row.method, row.run_id)
        first = seen.setdefault(key, row)
        if first is not row:
            where = first.source if first.line is None else f"{first.source}:{first.line}"
            raise CardError(
                f"duplicate prediction for card '{row.card_id}', method '{row.method}', "
                f"run id {row.run_id!r} (first in {where})",
                file=row.source,
                field="run_id",
                line=row.line,
            )


# --------------------------------------------------------------------------------------------
# traces


def rows_from_trace(
    path: Path, watch: LineWatcher | None = None, *, expect_head: str | None = None
) -> PredictionRow:
    """The forecast a completed trace gives for its card and method.

    The trace is read through ``verify``'s pass (:func:`worldsim.trace.verify.verified_lines`):
    one that does not verify raises its TraceError, one that holds no result TraceIncomplete; a
    resumed run counts only its effective records, and ``watch`` sees each of them. With
    ``expect_head``, a trace with another head is refused as ``verify --expect-head`` refuses it.
    """
    started: TraceLine | None = None
    extraction: TraceLine | None = None
    for line in verified_lines(path, expect_head=expect_head):
        if watch is not None:
            watch(line)
        if line.type == "run_started" and started is None:
            started = line
        elif line.type == "extraction":
            extraction = line
    assert started is not None and extraction is not None  # a verified, complete trace
    head = started.fields
    ext = extraction.fields
    card = head["card"]
    card_id = _text(card.get("id"), path, "data.card.id")
    kind: Kind = "binary" if card.get("kind", "binary") == "binary" else "multiple_choice"
    # a run moved to another forecast date knew what was known then, not at the card's as_of
    moment = head.get("forecast_date") or card["as_of"]
    p_yes: float | None = None
    p_options: tuple[tuple[str, float], ...] | None = None
    if kind == "binary":
        p_yes = _probability(ext.get("p_yes"), path, None, "data.p_yes")
    else:
        p_options = _options(ext.get("p_options"), path, None, "data.p_options")
    return PredictionRow(
        card_id=card_id,
        method=_text(head.get("method"), path, "data.method"),
        kind=kind,
        p_yes=p_yes,
        p_options=p_options,
        source=str(path),
        unresolved_mass=ext["unresolved_mass"],
        model=_model_route(head.get("routes")),
        prompt_version=_prompt_version(head.get("prompt_versions")),
        run_id=started.run,
        extraction_rule=str(ext["rule"]),
        as_of=parse_utc(moment),
        p_yes_raw=ext.get("p_yes_raw"),
        card_hash=head["card_hash"],
        auxiliary_endpoints=_auxiliary_ids(card.get("endpoints"), path),
        trace=True,
        card_round=_card_round(card.get("provenance")),
    )


def _card_round(provenance: object) -> str | None:
    if not isinstance(provenance, dict):
        return None
    return round_key(provenance.get("forecast_due_date"), provenance.get("question_set"))


def _auxiliary_ids(endpoints: object, path: Path) -> tuple[str, ...]:
    if endpoints is None:
        return ()
    if not isinstance(endpoints, list):
        raise CardError("card endpoints are not a list", file=path, field="data.card.endpoints")
    return tuple(
        str(ep.get("id"))
        for ep in endpoints
        if isinstance(ep, dict) and ep.get("kind") == "auxiliary"
    )


def _model_route(routes: object) -> str | None:
    """The governance route, else the single distinct route, else all routes joined."""
    if not isinstance(routes, dict) or not routes:
        return None
    if "governance" in routes:
        return str(routes["governance"])
    distinct = sorted({str(v) for v in routes.values()})
    return distinct[0] if len(distinct) == 1 else ";".join(distinct)


def _prompt_version(versions: object) -> str | None:
    if not isinstance(versions, dict) or not versions:
        return None
    if "governance" in versions:
        return str(versions["governance"])
    return ";".join(f"{k}={v}" for k, v in sorted(versions.items()))


# --------------------------------------------------------------------------------------------
# tables


def rows_from_table(path: Path) -> list[PredictionRow]:
    """Read a CSV or JSONL prediction table; every bad cell raises naming the file and line."""
    rows = list(_csv_records(path) if path.suffix.lower() == ".csv" else _jsonl_records(path))
    if not rows:
        raise CardError("prediction table holds no rows", file=path)
    return [_table_row(record, path, line) for line, record in rows]


def read_csv(
    path: Path, required: Sequence[str], *, what: str = "table"
) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """The header and the rows (line number, non-empty cells) of a CSV file.

    Quoting is read strictly; a row with more cells than the header, a missing required
    column or a malformed line raises :class:`CardError` naming the file and line. A UTF-8
    byte-order mark (as spreadsheets write) is skipped; the size limit of every input applies.
    """
    rows: list[tuple[int, dict[str, str]]] = []
    check_size(path, what)
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            header, records = csv_rows(fh, path, strict=True)
            for column in required:
                if column not in header:
                    raise CardError("missing column", file=path, field=column, line=1)
            for line, record in records:
                if None in record:
                    raise CardError("row has more cells than the header", file=path, line=line)
                cells = {k: v.strip() for k, v in record.items() if k is not None and v}
                rows.append((line, {k: v for k, v in cells.items() if v}))
    except (OSError, UnicodeDecodeError) as exc:
        raise CardError(f"cannot read {what}: {exc}", file=path) from None
    return header, rows


def _csv_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    header, rows = read_csv(path, ("card_id", "method"))
    if "p_yes" not in header and not any(_is_option_column(c) for c in header):
        raise CardError("missing column", file=path, field="p_yes", line=1)
    yield from rows


def _jsonl_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, record in read_jsonl(path, what="table"):
        yield number, {k: v for k, v in record.items() if v is not None}


def _is_option_column(name: str) -> bool:
    return name.startswith("p_") and name not in _RESERVED


def _table_row(record: dict[str, Any], path: Path, line: int) -> PredictionRow:
    for column in ("card_id", "method"):
        if column not in record:
            raise CardError("missing value", file=path, field=column, line=line)
    card_id = _text(record["card_id"], path, "card_id", line)
    method = _text(record["method"], path, "method", line)
    option_cells = {k[2:]: v for k, v in record.items() if _is_option_column(k)}
    p_yes: float | None = None
    p_options: tuple[tuple[str, float], ...] | None = None
    if "p_yes" in record:
        p_yes = _probability(record["p_yes"], path, line, "p_yes")
        kind: Kind = "binary"
    elif "p_options" in record:
        p_options = _options(record["p_options"], path, line, "p_options")
        kind = "multiple_choice"
    elif option_cells:
        p_options = _options(option_cells, path, line, "p_<option>")
        kind = "multiple_choice"
    else:
        raise CardError("missing value", file=path, field="p_yes", line=line)
    as_of: datetime | None = None
    if "as_of" in record:
        try:
            as_of = parse_utc(record["as_of"])
        except ValueError as exc:
            raise CardError(str(exc), file=path, field="as_of", line=line) from None

    def meta(name: str) -> str | None:
        value = record.get(name)
        return None if value is None else str(value)

    return PredictionRow(
        card_id=card_id,
        method=method,
        kind=kind,
        p_yes=p_yes,
        p_options=p_options,
        source=str(path),
        line=line,
        unresolved_mass=_optional_probability(
            record.get("unresolved_mass"), path, line, "unresolved_mass"
        ),
        model=meta("model"),
        prompt_version=meta("prompt_version"),
        response_id=meta("response_id"),
        run_id=meta("run_id"),
        extraction_rule=meta("extraction_rule"),
        as_of=as_of,
        p_yes_raw=_optional_probability(record.get("p_yes_raw"), path, line, "p_yes_raw"),
        card_hash=meta("card_hash"),
    )


# --------------------------------------------------------------------------------------------
# cells


def _text(value: object, path: Path, name: str, line: int | None = None) -> str:
    if value is None or (isinstance(value, str) and not value.strip()):
        raise CardError("missing value", file=path, field=name, line=line)
    if not isinstance(value, str | int):
        raise CardError(
            f"expected text, got {type(value).__name__}", file=path, field=name, line=line
        )
    return str(value).strip()


def _probability(value: object, path: Path, line: int | None, name: str) -> float:
    if value is None:
        raise CardError("missing probability", file=path, field=name, line=line)
    if isinstance(value, bool):
        raise CardError(
            "probability must be a number, got a boolean", file=path, field=name, line=line
        )
    try:
        p = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise CardError(f"not a number: {value!r}", file=path, field=name, line=line) from None
    if not math.isfinite(p) or not 0.0 <= p <= 1.0:
        raise CardError(
            f"probability {value!r} is outside [0, 1]", file=path, field=name, line=line
        )
    return p


def _optional_probability(value: object, path: Path, line: int | None, name: str) -> float | None:
    return None if value is None else _probability(value, path, line, name)


def _options(
    value: object, path: Path, line: int | None, name: str
) -> tuple[tuple[str, float], ...]:
    if not isinstance(value, dict) or len(value) < 2:
        raise CardError(
            "expected a mapping of at least two options", file=path, field=name, line=line
        )
    out = tuple(sorted((str(k), _probability(v, path, line, f"p_{k}")) for k, v in value.items()))
    total = sum(p for _, p in out)
    if abs(total - 1.0) > _TOLERANCE:
        raise CardError(
            f"option probabilities sum to {total:.6g}, not 1", file=path, field=name, line=line
        )
    return out
