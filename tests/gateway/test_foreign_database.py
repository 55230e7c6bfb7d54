"""`gateway ingest` never writes into someone else's SQLite database: a file holding tables that
are not the evidence store's is refused, one line naming it, its bytes unchanged; a new file
(or an empty one) is still created as an evidence database."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import ROOT, invoke

ARTICLES = ROOT / "scenarios" / "corpus" / "articles.jsonl"


def _foreign(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE x (a)")
        conn.execute("CREATE VIEW y AS SELECT a FROM x")


def _ours_and_foreign(db: Path) -> None:
    assert invoke("gateway", "ingest", ARTICLES, "--db", db).code == 0
    _foreign(db)


@pytest.mark.parametrize("make", [_foreign, _ours_and_foreign], ids=["foreign", "shared"])
def test_ingest_refuses_a_database_holding_other_tables(
    tmp_path: Path, make: Callable[[Path], None]
) -> None:
    db = tmp_path / "o.sqlite"
    make(db)
    before = db.read_bytes()
    done = invoke("gateway", "ingest", ARTICLES, "--db", db)
    assert done.code == 2 and "Traceback" not in done.err
    assert done.err.strip() == (
        f"error: {db}: not a worldsim evidence database: it holds other tables (x, y)"
    )
    assert "added" not in done.out
    assert db.read_bytes() == before


def test_search_refuses_a_foreign_database_too(tmp_path: Path) -> None:
    db = tmp_path / "o.sqlite"
    _foreign(db)
    done = invoke("gateway", "search", "merger", "--db", db, "--before", "2027-01-01")
    assert done.code == 2 and done.err.strip() == f"error: {db}: not a worldsim evidence database"


@pytest.mark.parametrize("empty", [False, True], ids=["new", "empty"])
def test_ingest_creates_a_new_or_empty_file(tmp_path: Path, empty: bool) -> None:
    db = tmp_path / "evidence.sqlite"
    if empty:
        db.write_bytes(b"")
    done = invoke("gateway", "ingest", ARTICLES, "--db", db)
    assert done.code == 0, done.err
    assert done.out.startswith(f"added 34 document(s) to {db}")
    again = invoke("gateway", "ingest", ARTICLES, "--db", db)
    assert again.code == 0 and "added 0 document(s)" in again.out
