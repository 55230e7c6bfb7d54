"""``worldsim gateway ingest`` and ``search`` through the command line."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from worldsim.cli import app

runner = CliRunner()


def _article(doc_id: str, published_at: str | None, title: str = "merger news") -> str:
    data: dict[str, object] = {
        "id": doc_id,
        "title": title,
        "text": f"{title} body",
        "url": None,
        "source": "Wire",
    }
    if published_at is not None:
        data["published_at"] = published_at
    return json.dumps(data)


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_ingest_reports_duplicates_and_search_respects_before(tmp_path: Path) -> None:
    articles = _write(
        tmp_path / "a.jsonl",
        [
            _article("d1", "2026-01-01T12:00:00Z"),
            _article("d2", "2026-02-01T00:00:00+02:00"),
            _article("d1", "2026-01-01T12:00:00Z"),
            "",
            _article("d3", "2026-03-01T00:00:00Z"),
        ],
    )
    db = tmp_path / "ev.db"
    first = runner.invoke(app, ["gateway", "ingest", str(articles), "--db", str(db)])
    assert first.exit_code == 0, first.output
    assert "added 3 document(s)" in first.output and "1 duplicate(s)" in first.output
    again = runner.invoke(app, ["gateway", "ingest", str(articles), "--db", str(db)])
    assert "added 0 document(s)" in again.output and "4 duplicate(s)" in again.output

    found = runner.invoke(
        app,
        [
            "gateway",
            "search",
            "merger",
            "--db",
            str(db),
            "--before",
            "2026-03-01T00:00:00Z",
            "-k",
            "10",
            "--json",
        ],
    )
    assert found.exit_code == 0, found.output
    hits = json.loads(found.output)
    assert sorted(h["id"] for h in hits) == ["d1", "d2"]
    assert {h["published_at"] for h in hits} == {"2026-01-01T12:00:00Z", "2026-01-31T22:00:00Z"}


def test_one_bad_line_aborts_the_ingest_and_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "ev.db"
    for bad, message in [
        (_article("x", "2026-01-05T10:00:00"), "line_3:field 'published_at': datetime"),
        (_article("x", None), "line_3:field 'published_at': missing publication date"),
        (_article("x", "2026-01-05"), "line_3:field 'published_at': datetime 2026-01-05 has no"),
        (_article("x", 20260105), "line_3:field 'published_at': expected an ISO datetime"),
        ("{not json", "line_3:malformed JSON"),
        # JSON keeps the last of two ids: which document is this?
        (
            '{"id": "x", "id": "y", "published_at": "2026-01-05T10:00:00Z", "title": "t"}',
            "line_3:duplicate key 'id'",
        ),
    ]:
        articles = _write(
            tmp_path / "a.jsonl",
            [
                _article("ok1", "2026-01-01T00:00:00Z"),
                _article("ok2", "2026-01-02T08:00:00+08:00"),
                bad,
            ],
        )
        result = runner.invoke(app, ["gateway", "ingest", str(articles), "--db", str(db)])
        assert result.exit_code == 2
        expected = message.replace("line_3:", f"{articles}:3: ")
        assert expected in " ".join(result.output.split()), result.output
        assert not db.exists()


def test_search_refuses_a_naive_cutoff_and_a_missing_database(tmp_path: Path) -> None:
    naive = runner.invoke(
        app,
        [
            "gateway",
            "search",
            "x",
            "--db",
            str(tmp_path / "none.db"),
            "--before",
            "2026-03-01T00:00:00",
        ],
    )
    assert naive.exit_code == 2 and "field '--before'" in naive.output
    missing = runner.invoke(
        app, ["gateway", "search", "x", "--db", str(tmp_path / "none.db"), "--before", "2026-03-01"]
    )
    assert missing.exit_code == 2 and "evidence database not found" in missing.output
