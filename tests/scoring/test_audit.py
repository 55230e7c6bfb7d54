"""The score-time audit: labels' masked entities in trace texts, auxiliary endpoints."""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.scoring.conftest import Runner, write_csv, write_trace
from tests.support import DEMO_CARD, ROOT, invoke
from worldsim.domain.cards import load_card
from worldsim.models.leakage import LeakageGuard
from worldsim.scoring.analysis import ScoreOptions, score
from worldsim.scoring.audit import TraceScan
from worldsim.scoring.report import to_json
from worldsim.trace.reader import TraceLine, read_trace

CARD = ROOT / "scenarios" / "central-bank-march.yaml"
ENTITY = "Finance Ministry"  # in the card's context, so in what the offline run records


def _sha(text: str) -> str:
    return hashlib.sha256(text.casefold().encode()).hexdigest()


def _strings(value: Any) -> Iterator[str]:
    """Every string of a JSON value, keys included: the naive reference walk."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _naive_count(trace: Path, entity: str) -> int:
    lines = trace.read_text(encoding="utf-8").splitlines()
    return sum(
        text.lower().count(entity.lower())
        for line in lines
        for text in _strings(json.loads(line)["data"])
    )


@pytest.fixture(scope="module")
def offline_traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two offline runs of a demo card (the offline model's texts quote the card)."""
    from typer.testing import CliRunner

    from worldsim.cli import app

    out = tmp_path_factory.mktemp("offline")
    result = CliRunner().invoke(
        app,
        [
            "run",
            str(CARD),
            "--out",
            str(out),
            "--ticks",
            "3",
            "--replicates",
            "2",
            "--cache",
            "off",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    return out


def _label(tmp_path: Path, **extra: Any) -> Path:
    label = {"card_id": "central-bank-march", "outcome": "no", **extra}
    path = tmp_path / "label.json"
    path.write_text(json.dumps(label), encoding="utf-8")
    return path


def test_masked_entity_in_a_runs_texts_is_counted_by_fingerprint_only(
    run: Runner, tmp_path: Path, offline_traces: Path
) -> None:
    labels = _label(tmp_path, masked_entities=[ENTITY, "Bank of Ostmark"])
    out = tmp_path / "score.json"
    result = run("score", offline_traces, "--labels", labels, "--json", out)
    assert result.code == 0, result.err
    text = out.read_text()
    doc = json.loads(text)
    (found,) = doc["audit"]["leakage"]["forecasts"]
    want = sum(_naive_count(t, ENTITY) for t in sorted(offline_traces.glob("*.jsonl")))
    assert want > 0
    assert found["entities"] == {_sha(ENTITY): want, _sha("Bank of Ostmark"): 0}
    assert (found["status"], found["occurrences"], found["n_traces"]) == ("leaked", want, 2)
    assert doc["audit"]["leakage"]["policy"] == "flagged, not excluded"
    (row,) = doc["per_card"]
    assert any(tag.startswith("leakage:") for tag in row["tags"])
    # the names themselves appear nowhere in what scoring writes or prints
    for name in (ENTITY, "Bank of Ostmark"):
        assert name.lower() not in text.lower()
        assert name.lower() not in (result.out + result.err).lower()
    assert _sha(ENTITY)[:16] in result.out
    assert "flagged, not excluded" in result.out


def test_score_reads_each_trace_once_and_audits_it_in_that_pass(
    run: Runner, tmp_path: Path, offline_traces: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import worldsim.trace.reader as reader

    labels = _label(tmp_path, masked_entities=[ENTITY])
    opened: list[Path] = []
    streamed = reader.iter_trace

    def counted(path: str | Path, **options: Any) -> Iterator[reader.TraceLine]:
        opened.append(Path(path))
        return streamed(path, **options)

    monkeypatch.setattr(reader, "iter_trace", counted)
    out = tmp_path / "score.json"
    assert run("score", offline_traces, "--labels", labels, "--json", out).code == 0
    traces = sorted(offline_traces.glob("*.jsonl"))
    assert sorted(opened) == traces  # one read of each, the audit included
    (found,) = json.loads(out.read_text())["audit"]["leakage"]["forecasts"]
    assert found["occurrences"] == sum(_naive_count(t, ENTITY) for t in traces) > 0


def test_a_clean_label_leaves_no_tag(run: Runner, tmp_path: Path, offline_traces: Path) -> None:
    labels = _label(tmp_path, masked_entities=["Bank of Ostmark"])
    out = tmp_path / "score.json"
    assert run("score", offline_traces, "--labels", labels, "--json", out).code == 0
    doc = json.loads(out.read_text())
    (found,) = doc["audit"]["leakage"]["forecasts"]
    assert (found["status"], found["occurrences"]) == ("clean", 0)
    assert doc["per_card"][0]["tags"] == []


def test_prediction_tables_have_no_text_to_audit(run: Runner, tmp_path: Path) -> None:
    labels = write_jsonl_label(tmp_path, masked_entities=["Acme"])
    preds = write_csv(tmp_path / "p.csv", ["card_id", "method", "p_yes"], [["A", "m", "0.6"]])
    out = tmp_path / "score.json"
    result = run("score", preds, "--labels", labels, "--json", out)
    assert result.code == 0, result.err
    (found,) = json.loads(out.read_text())["audit"]["leakage"]["forecasts"]
    assert (found["status"], found["entities"], found["n_traces"]) == ("n/a", None, 0)
    assert "n/a for 1 forecast(s) from prediction tables (no text)" in result.out


def write_jsonl_label(tmp_path: Path, **extra: Any) -> Path:
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps({"card_id": "A", "outcome": "yes", **extra}) + "\n")
    return path


texts = st.text(alphabet="abAB x", max_size=30)
nested = st.recursive(
    texts, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3)
)


def _lines(records: list[tuple[str, str | None, dict[str, Any]]]) -> list[TraceLine]:
    """Lines as the scan sees them (their envelope and data; the scan reads nothing else)."""
    lines = []
    for number, (kind, tl, data) in enumerate(records, start=1):
        raw = json.dumps({"type": kind, "tl": tl, "data": data}).encode()
        lines.append(TraceLine(number, raw, Path("t.jsonl"), type=kind, tl=tl, tick=0, run="r"))
    return lines


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    entities=st.lists(st.text(alphabet="abAB x", min_size=1, max_size=4), min_size=1, max_size=3),
    records=st.lists(
        st.tuples(st.sampled_from(["proposals", "review", "llm_call", "report"]), nested),
        max_size=6,
    ),
)
def test_counts_equal_a_naive_case_insensitive_count_over_the_record_texts(
    entities: list[str], records: list[tuple[str, Any]]
) -> None:
    card = {"id": "A", "question": "Will A happen?"}
    lines = _lines(
        [("run_started", None, {"card": card}), *((k, "t0", {"text": v}) for k, v in records)]
    )
    guard = LeakageGuard.from_strings(entities)
    scan = TraceScan(lambda _card: guard)
    for line in lines:
        scan.see(line)
    audit = scan.audit("t.jsonl", ())
    for entity in {e.strip().lower() for e in entities if e.strip()}:
        want = sum(text.lower().count(entity) for line in lines for text in _strings(line.fields))
        assert audit.leakage.get(_sha(entity), 0) == want


# --------------------------------------------------------------------------------------------
# auxiliary endpoints


status_of = st.sampled_from(["open", "realized", "eliminated"])
_STATUS = {"realized": 1.0, "eliminated": 0.0, "open": 0.5}


def _aux_lines(p_yes: float, statuses: dict[str, tuple[str, str]]) -> list[TraceLine]:
    """Two leaves (t0 mass 0.75, t1 mass 0.25) whose ledgers hold each auxiliary status."""
    ledgers = {
        tl: {ep: pair[i] for ep, pair in statuses.items()} for i, tl in enumerate(("t0", "t1"))
    }
    leaves = [
        {"timeline": "t0", "mass": 0.75, "settlement": "unresolved", "value": p_yes},
        {"timeline": "t1", "mass": 0.25, "settlement": "unresolved", "value": p_yes},
    ]
    return _lines(
        [
            ("run_started", None, {"card": {"id": "A"}}),
            *(
                ("tick_committed", tl, {"ledger": {"yes": "open", "no": "open", **ledger}})
                for tl, ledger in ledgers.items()
            ),
            ("extraction", None, {"leaves": leaves}),
        ]
    )


@settings(max_examples=40, deadline=None)
@given(
    statuses=st.dictionaries(
        st.sampled_from(["a1", "a2", "a3"]), st.tuples(status_of, status_of), min_size=1
    )
)
def test_an_auxiliary_endpoints_probability_is_the_mass_of_its_leaves_ledgers(
    statuses: dict[str, tuple[str, str]],
) -> None:
    """realized counts 1, eliminated 0, open ½, each leaf by its mass."""
    scan = TraceScan(lambda _card: None)
    for line in _aux_lines(0.7, statuses):
        scan.see(line)
    found = scan.audit("t.jsonl", sorted(statuses)).auxiliary
    for ep, (at_t0, at_t1) in statuses.items():
        assert found[ep] == pytest.approx(0.75 * _STATUS[at_t0] + 0.25 * _STATUS[at_t1])


def _leaf_ledger_p(trace: Path, endpoint: str) -> float:
    """An auxiliary endpoint's probability as docs/scoring.md defines it, from the JSON lines:
    each leaf's mass times its status's value in its timeline's last committed ledger (else
    its parent's at the fork)."""
    ledgers: dict[str, dict[str, str]] = {}
    leaves: list[dict[str, Any]] = []
    for raw in trace.read_text().splitlines():
        record = json.loads(raw)
        if record["type"] == "tick_committed":
            ledgers[record["tl"]] = record["data"]["ledger"]
        elif record["type"] == "fork":
            ledgers.setdefault(record["data"]["child"], ledgers.get(record["tl"], {}))
        elif record["type"] == "extraction":
            leaves = record["data"]["leaves"]
    total = sum(leaf["mass"] for leaf in leaves)
    return (
        sum(
            leaf["mass"] * _STATUS[ledgers.get(leaf["timeline"], {}).get(endpoint, "open")]
            for leaf in leaves
        )
        / total
    )


@pytest.fixture(scope="module")
def aux_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A branching offline run of the demo card, whose card has auxiliary endpoints."""
    out = tmp_path_factory.mktemp("aux")
    made = invoke("run", DEMO_CARD, "--policy", "branching", "--ticks", "4", "--out", out, "--json")
    assert made.code == 0, made.err
    return Path(json.loads(made.out)["trace"])


def _demo_label(tmp_path: Path, outcome: str, auxiliary: dict[str, str]) -> Path:
    path = tmp_path / "labels.jsonl"
    record = {"card_id": "merger-review", "outcome": outcome, "auxiliary": auxiliary}
    path.write_text(json.dumps(record) + "\n")
    return path


def test_auxiliary_outcomes_get_an_audit_only_brier_table(
    run: Runner, tmp_path: Path, aux_run: Path
) -> None:
    labels = _demo_label(tmp_path, "yes", {"remedies_offered": "yes"})
    out = tmp_path / "score.json"
    result = run("score", aux_run, "--labels", labels, "--json", out)
    assert result.code == 0, result.err
    doc = json.loads(out.read_text())
    (aux,) = doc["audit"]["auxiliary"]["forecasts"]
    p = _leaf_ledger_p(aux_run, "remedies_offered")
    assert aux["endpoints"]["remedies_offered"]["p"] == pytest.approx(p)
    assert aux["endpoints"]["remedies_offered"]["outcome"] == "yes"
    assert aux["endpoints"]["remedies_offered"]["brier"] == pytest.approx((p - 1) ** 2)
    method = read_trace(aux_run).started.method
    aux_brier = doc["audit"]["auxiliary"]["brier"]
    assert aux_brier == {method: {"n": 1, "brier": pytest.approx((p - 1) ** 2)}}
    # the scored metrics are the scored endpoint's alone
    p_yes = read_trace(aux_run).first("extraction").data.p_yes
    assert doc["methods"][method]["brier"] == pytest.approx((p_yes - 1) ** 2)
    assert doc["methods"][method]["n"] == 1
    assert "audit only" in result.out


def test_an_unknown_auxiliary_endpoint_in_a_label_is_refused(run: Runner, tmp_path: Path) -> None:
    trace = write_trace(
        tmp_path / "t.jsonl", card_id="A", method="m", p_yes=0.7, auxiliary=["dissent"]
    )
    labels = write_jsonl_label(tmp_path, auxiliary={"bogus": "no"})
    out = tmp_path / "score.json"
    result = run("score", trace, "--labels", labels, "--json", out)
    assert result.code == 2
    assert f"{labels}:1" in result.err and "field 'auxiliary.bogus'" in result.err
    assert "dissent" in result.err and not out.exists()


def test_a_label_auxiliary_outcome_must_be_yes_or_no(run: Runner, tmp_path: Path) -> None:
    trace = write_trace(
        tmp_path / "t.jsonl", card_id="A", method="m", p_yes=0.7, auxiliary=["dissent"]
    )
    labels = write_jsonl_label(tmp_path, auxiliary={"dissent": "maybe"})
    result = run("score", trace, "--labels", labels)
    assert result.code == 2 and "field 'auxiliary'" in result.err


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    outcome=st.sampled_from(["yes", "no"]),
    aux=st.dictionaries(
        st.sampled_from(["remedies_offered", "deadline_extended"]),
        st.sampled_from(["yes", "no"]),
        min_size=1,
    ),
)
def test_auxiliary_endpoints_never_change_the_scored_forecast(
    aux_run: Path, outcome: str, aux: dict[str, str]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        docs = []
        for name, label in (("plain", {}), ("aux", {"auxiliary": aux})):
            labels = base / f"{name}-labels.jsonl"
            record = {"card_id": "merger-review", "outcome": outcome, **label}
            labels.write_text(json.dumps(record) + "\n")
            docs.append(to_json(score(ScoreOptions(inputs=(aux_run,), labels=labels))))
        plain_doc, aux_doc = docs
        assert plain_doc["methods"] == aux_doc["methods"]
        assert plain_doc["calibration"] == aux_doc["calibration"]
        keys = ("p_yes", "p_options", "brier", "log", "correct", "outcome")
        assert [{k: r[k] for k in keys} for r in plain_doc["per_card"]] == [
            {k: r[k] for k in keys} for r in aux_doc["per_card"]
        ]
        (plain_aux,) = plain_doc["audit"]["auxiliary"]["forecasts"]
        (labelled,) = aux_doc["audit"]["auxiliary"]["forecasts"]
        assert {ep: e["outcome"] for ep, e in labelled["endpoints"].items() if e["outcome"]} == aux
        assert all(e["outcome"] is None for e in plain_aux["endpoints"].values())


def test_a_multiple_choice_runs_options_are_its_scored_endpoints_only(
    run: Runner, tmp_path: Path
) -> None:
    card_path = ROOT / "scenarios" / "award-best-picture.yaml"
    card = load_card(card_path)
    traces = tmp_path / "traces"
    made = run("run", card_path, "--out", traces, "--ticks", "3", "--cache", "off", "--json")
    assert made.code == 0, made.err
    labels = tmp_path / "label.json"
    labels.write_text(json.dumps({"card_id": card.id, "outcome": card.scored_endpoints[0].id}))
    out = tmp_path / "score.json"
    assert run("score", traces, "--labels", labels, "--json", out).code == 0
    doc = json.loads(out.read_text())
    (row,) = doc["per_card"]
    assert set(row["p_options"]) == {ep.id for ep in card.scored_endpoints}
    assert sum(row["p_options"].values()) == pytest.approx(1.0)
    (aux,) = doc["audit"]["auxiliary"]["forecasts"]
    auxiliary = {ep.id for ep in card.endpoints if ep.kind == "auxiliary"}
    assert set(aux["endpoints"]) == auxiliary and auxiliary.isdisjoint(row["p_options"])
