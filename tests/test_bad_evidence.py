"""A bad evidence database stops a run before it writes anything: no trace, log or cache."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
import yaml

from tests.support import DEMO_CARD
from worldsim.domain.cards import load_card
from worldsim.domain.errors import ConfigError
from worldsim.gateway import check_evidence, open_store, read_articles

WORLDSIM = [sys.executable, "-c", "from worldsim.cli import main; main()"]
# A remote route, so that a run would open its response cache; nothing is ever sent to it.
ENV = {**os.environ, "STUB_API_KEY": "k", "STUB_BASE_URL": "http://127.0.0.1:9/v1"}


def _not_sqlite(db: Path) -> None:
    db.write_text("id,title\n1,not a database\n")


def _other_schema(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE articles (id TEXT, body TEXT)")


def _old_version(db: Path) -> None:
    async def build() -> None:
        async with open_store(db, create=True):
            pass

    anyio.run(build)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA user_version = 7")


BAD = {
    "missing": (None, "evidence database not found"),
    "not sqlite": (_not_sqlite, "cannot read evidence database: file is not a database"),
    "other schema": (_other_schema, "not a worldsim evidence database"),
    "old version": (_old_version, "evidence database has schema version 7, expected 1"),
}


def _card(tmp_path: Path, database: str) -> Path:
    data = yaml.safe_load(DEMO_CARD.read_text())
    data["evidence"] = {"database": database}
    card = tmp_path / "card.yaml"
    card.write_text(yaml.safe_dump(data))
    return card


@pytest.mark.parametrize("kind", list(BAD))
def test_a_bad_evidence_database_is_one_line_and_nothing_is_written(
    tmp_path: Path, kind: str
) -> None:
    make, problem = BAD[kind]
    db = tmp_path / "evidence.sqlite"
    if make is not None:
        make(db)
    before = db.read_bytes() if db.exists() else None
    card = _card(tmp_path, "evidence.sqlite")
    out = tmp_path / "traces"
    proc = subprocess.run(
        [*WORLDSIM, "run", str(card), "--model", "stub/m", "--out", str(out)],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"error: {card}: field 'evidence.database': {problem}: {db}"
    ]
    assert not out.exists()  # no trace, no cache
    assert (db.read_bytes() if db.exists() else None) == before  # opened read-only


def test_a_good_database_passes_the_check_untouched(tmp_path: Path) -> None:
    db = tmp_path / "evidence.sqlite"
    articles = tmp_path / "a.jsonl"
    articles.write_text(
        '{"id": "x", "published_at": "2026-09-01T00:00:00Z", "title": "t", "text": "merger"}\n'
    )

    async def scenario() -> None:
        async with open_store(db, create=True) as store:
            await store.add(read_articles(articles))
        before = db.read_bytes()
        card = load_card(_card(tmp_path, "evidence.sqlite"))
        await check_evidence(card, card_path=tmp_path / "card.yaml")
        assert db.read_bytes() == before
        db.unlink()
        with pytest.raises(ConfigError, match="evidence database not found"):
            await check_evidence(card, card_path=tmp_path / "card.yaml")

    anyio.run(scenario)


def test_resume_checks_the_database_before_touching_the_trace(tmp_path: Path) -> None:
    db = tmp_path / "evidence.sqlite"
    articles = tmp_path / "a.jsonl"
    articles.write_text(
        '{"id": "x", "published_at": "2026-09-01T00:00:00Z", "title": "t", "text": "merger"}\n'
    )

    async def ingest() -> None:
        async with open_store(db, create=True) as store:
            await store.add(read_articles(articles))

    anyio.run(ingest)
    card = _card(tmp_path, "evidence.sqlite")
    out = tmp_path / "traces"
    run = [*WORLDSIM, "run", str(card), "--ticks", "4", "--out", str(out)]
    assert subprocess.run(run, capture_output=True, timeout=120, check=False).returncode == 0
    trace = out / "merger-review__branching__ticks4__s0.jsonl"
    blob = trace.read_bytes()
    trace.write_bytes(blob[: len(blob) * 3 // 4])  # a crash late in the run, a torn tail
    cut = trace.read_bytes()
    _not_sqlite(db)
    proc = subprocess.run(
        [*WORLDSIM, "run", "--resume", str(trace)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"error: {card}: field 'evidence.database': "
        f"cannot read evidence database: file is not a database: {db}"
    ]
    assert trace.read_bytes() == cut
