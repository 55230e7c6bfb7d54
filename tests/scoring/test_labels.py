"""Labels are read from CSV, JSONL, a YAML or JSON list, one mapping, or a folder of files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.scoring.conftest import Runner, write_csv
from worldsim.domain.errors import CardError
from worldsim.scoring.labels import load_labels

EXPECTED = {"A": "yes", "B": "no", "C": "yes", "D": "no", "M": "red"}


def _csv(tmp_path: Path) -> Path:
    return write_csv(
        tmp_path / "labels.csv",
        ["card_id", "outcome", "resolved_at", "sources"],
        [
            ("A", "yes", "2025-03-01", "https://a;https://b"),
            ("B", "0", "", ""),
            ("C", "TRUE", "", ""),
            ("D", "false", "", ""),
            ("M", "red", "", ""),
        ],
    )


def _jsonl(tmp_path: Path) -> Path:
    p = tmp_path / "labels.jsonl"
    rows = [
        {
            "card_id": "A",
            "outcome": True,
            "sources": ["https://a", "https://b"],
            "resolved_at": "2025-03-01",
        },
        {"card_id": "B", "outcome": 0},
        {"card_id": "C", "outcome": 1},
        {"card_id": "D", "outcome": "no"},
        {"card_id": "M", "outcome": "red"},
    ]
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return p


def _yaml_list(tmp_path: Path) -> Path:
    p = tmp_path / "labels.yaml"
    p.write_text(
        "- {card_id: A, outcome: yes, resolved_at: '2025-03-01', sources: [https://a, https://b]}\n"
        "- {card_id: B, outcome: no}\n- {card_id: C, outcome: 'true'}\n"
        "- {card_id: D, outcome: 0}\n- {card_id: M, outcome: red}\n"
    )
    return p


def _json_list(tmp_path: Path) -> Path:
    p = tmp_path / "labels.json"
    p.write_text(
        json.dumps(
            [
                {
                    "card_id": "A",
                    "outcome": "yes",
                    "resolved_at": "2025-03-01",
                    "sources": ["https://a", "https://b"],
                },
                {"card_id": "B", "outcome": "no"},
                {"card_id": "C", "outcome": "yes"},
                {"card_id": "D", "outcome": "no"},
                {"card_id": "M", "outcome": "red"},
            ]
        )
    )
    return p


def _folder(tmp_path: Path) -> Path:
    d = tmp_path / "labels"
    d.mkdir()
    (d / "a.yaml").write_text(
        "card_id: A\noutcome: yes\nresolved_at: '2025-03-01'\n"
        "sources: [https://a, https://b]\nmasked_entities: [Acme]\n"
    )
    (d / "b.yaml").write_text("card_id: B\noutcome: no\n")
    (d / "c.json").write_text('{"card_id": "C", "outcome": "yes"}')
    (d / "d.yml").write_text("card_id: D\noutcome: false\n")
    (d / "m.yaml").write_text("card_id: M\noutcome: red\n")
    (d / "README.md").write_text("not a label")
    return d


@pytest.mark.parametrize("make", [_csv, _jsonl, _yaml_list, _json_list, _folder])
def test_every_label_format_reads_the_same_outcomes(make: object, tmp_path: Path) -> None:
    assert callable(make)
    labels = load_labels(make(tmp_path))
    assert {k: e.outcome for k, e in labels.entries.items()} == EXPECTED
    a = labels.entries["A"].label
    assert a.sources == ("https://a", "https://b")
    assert a.resolved_at is not None and a.resolved_at.isoformat() == "2025-03-01T00:00:00+00:00"


def test_folder_label_that_is_invalid_names_its_file(tmp_path: Path) -> None:
    d = _folder(tmp_path)
    (d / "bad.yaml").write_text("card_id: X\noutcome: yes\nsurprise: 1\n")
    with pytest.raises(CardError) as info:
        load_labels(d)
    assert info.value.file == str(d / "bad.yaml") and info.value.field == "surprise"


def test_single_mapping_file_is_one_label(tmp_path: Path) -> None:
    p = tmp_path / "one.yaml"
    p.write_text("card_id: A\noutcome: yes\n")
    assert set(load_labels(p).entries) == {"A"}


def test_score_accepts_a_label_folder(run: Runner, tmp_path: Path) -> None:
    preds = write_csv(
        tmp_path / "p.csv", ["card_id", "method", "p_yes"], [("A", "m", "0.9"), ("B", "m", "0.2")]
    )
    out = tmp_path / "s.json"
    result = run("score", preds, "--labels", _folder(tmp_path), "--json", out)
    assert result.code == 0, result.err
    doc = json.loads(out.read_text())
    assert doc["methods"]["m"]["brier"] == pytest.approx((0.01 + 0.04) / 2)
    assert len(doc["labels"]) == 5
    assert doc["coverage"]["labels_without_predictions"] == ["C", "D", "M"]
