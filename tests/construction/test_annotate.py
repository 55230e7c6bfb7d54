"""The annotation sheet: one row per event with the five checks; applying a filled sheet drops
the rejected events with their edges and impacts and records why; bad cells are refused naming
line and column; the score report shows how much of the graphs people checked."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from tests.support import DEMO_CARD, ROOT, invoke
from worldsim.build.annotate import CHECKS
from worldsim.scoring.hindsight.graph import load_hindsight

GRAPH = ROOT / "scenarios" / "hindsight" / "merger-review.json"


def _sheet(tmp_path: Path) -> tuple[Path, list[dict[str, str]]]:
    sheet = tmp_path / "sheet.csv"
    done = invoke("build", "annotate", GRAPH, "-o", sheet)
    assert done.code == 0, done.err
    with sheet.open(newline="", encoding="utf-8") as fh:
        return sheet, list(csv.DictReader(fh))


def _write(sheet: Path, rows: list[dict[str, str]]) -> None:
    with sheet.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_a_filled_sheet_drops_the_rejected_events_and_says_why(tmp_path: Path) -> None:
    graph = load_hindsight(GRAPH)
    sheet, rows = _sheet(tmp_path)
    assert [r["event_id"] for r in rows] == [e.id for e in graph.events if not e.is_outcome]
    assert all(r[c] == "" for r in rows for c in CHECKS)
    victim = next(
        r["event_id"] for r in rows if any(e.source == r["event_id"] for e in graph.edges)
    )
    for row in rows[:3] + [r for r in rows if r["event_id"] == victim]:
        row.update(dict.fromkeys(CHECKS, "yes"))
    for row in rows:
        if row["event_id"] == victim:
            row.update(factual="no", date_ok="No", notes="no source says so")
    _write(sheet, rows)
    out = tmp_path / "hindsight" / "merger-review.json"
    done = invoke("build", "apply-annotations", GRAPH, sheet, "-o", out)
    assert done.code == 0, done.err
    assert f"dropped {victim}: failed factual, date_ok" in done.out
    kept = load_hindsight(out)
    assert victim not in {e.id for e in kept.events}
    assert all(victim not in (e.source, e.target) for e in kept.edges)
    assert all(i.event != victim for i in kept.impacts)
    note = kept.annotation
    assert note is not None and note.events == len(rows)
    assert note.checked == len({r["event_id"] for r in rows[:3]} | {victim})
    assert [(r.event, r.failed, r.notes) for r in note.rejected] == [
        (victim, ("factual", "date_ok"), "no source says so")
    ]
    # the score report says how much of the graphs people checked
    run = invoke("run", DEMO_CARD, "--out", tmp_path / "runs", "--ticks", "2")
    assert run.code == 0, run.err
    report = tmp_path / "score.json"
    scored = invoke(
        "score",
        *sorted((tmp_path / "runs").glob("*.jsonl")),
        "--labels",
        ROOT / "scenarios" / "labels",
        "--hindsight",
        out.parent,
        "--json",
        report,
    )
    assert scored.code == 0, scored.err
    (entry,) = json.loads(report.read_text(encoding="utf-8"))["axes"]["graphs"]
    assert entry["annotation"] == {"events": len(rows), "checked": note.checked, "rejected": 1}
    assert f"annotation: {note.checked} of {len(rows)} event(s) checked" in scored.out


def test_bad_cells_and_unknown_events_are_refused_naming_line_and_column(tmp_path: Path) -> None:
    sheet, rows = _sheet(tmp_path)
    rows[1]["source_support"] = "maybe"
    _write(sheet, rows)
    out = tmp_path / "out.json"
    bad = invoke("build", "apply-annotations", GRAPH, sheet, "-o", out)
    assert bad.code == 2 and "sheet.csv:3: field 'source_support'" in bad.err
    rows[1]["source_support"] = ""
    rows[0]["event_id"] = "nonesuch"
    _write(sheet, rows)
    bad = invoke("build", "apply-annotations", GRAPH, sheet, "-o", out)
    assert bad.code == 2 and "no event 'nonesuch'" in bad.err
    assert not out.exists()
    again = invoke("build", "annotate", GRAPH, "-o", sheet)
    assert again.code == 2
    assert again.err.strip() == f"error: {sheet}: exists; use --force to replace it"


def test_an_event_on_two_rows_is_refused_naming_the_later_line(tmp_path: Path) -> None:
    sheet, rows = _sheet(tmp_path)
    for row in rows:
        row.update(dict.fromkeys(CHECKS, "yes"))
    copy = {**rows[0], "causal_relevance": "no"}
    _write(sheet, [*rows, copy])
    out = tmp_path / "out.json"
    bad = invoke("build", "apply-annotations", GRAPH, sheet, "-o", out)
    assert bad.code == 2, bad.out
    line = len(rows) + 2
    assert bad.err.strip() == (
        f"error: {sheet}:{line}: field 'event_id': event '{rows[0]['event_id']}' is on line 2 "
        "already"
    )
    assert not out.exists()
