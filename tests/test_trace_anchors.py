"""A trace's head as its anchor: the chain cannot catch a rewrite that recomputes it, the head
recorded elsewhere (printed by run, locked by prereg) can.

Each forgery below edits a finished trace and recomputes the chain and the seal, as anyone can
(the chain is unkeyed): ``verify`` passes it, ``verify --expect-head`` with the original head
and ``score --prereg`` with a lock taken before the edit refuse it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.support import DEMO_CARD, ROOT, Edit, Outcome, forge, invoke
from worldsim.domain.cards import load_card, public_card_hash
from worldsim.domain.config import DEFAULT_POLICY, ModelConfig, RunConfig
from worldsim.domain.policy import load_policy
from worldsim.sim.session import forecast, run_card
from worldsim.trace.forecast import FORECAST_TYPES, RecordView, forecast_json
from worldsim.trace.reader import read_trace, trace_head
from worldsim.trace.records import ForecastGraphData
from worldsim.trace.verify import verify_trace

LABELS = ROOT / "scenarios" / "labels" / "merger-review.yaml"
BRANCHING = "merger-review__branching__ticks3__s0.jsonl"
DIRECT = "merger-review__direct__s0.jsonl"
PREREG = """\
methods: [direct, branching]
baseline: direct
comparisons: ["direct:branching"]
bootstrap: {n_resamples: 100}
"""


cli = invoke


def _first(records: list[dict[str, Any]], type_: str) -> dict[str, Any]:
    return next(r for r in records if r["type"] == type_)


def _method_label(records: list[dict[str, Any]]) -> None:
    _first(records, "run_started")["data"]["method"] = "adaptive"


def _card_id(records: list[dict[str, Any]]) -> None:
    """Another card id, its card hash and the forecast graph's record made again to name it
    (a consistent forgery: the hash and the graph the records give are the ones recorded)."""
    started = _first(records, "run_started")["data"]
    started["card"]["id"] = "space-launch"
    started["card_hash"] = public_card_hash(started["card"])
    views = [
        RecordView(r["type"], r["tl"], r["tick"], r["data"], r["run"])
        for r in records
        if r["type"] in FORECAST_TYPES
    ]
    graph = _first(records, "forecast_graph")
    graph["data"] = ForecastGraphData.of(forecast_json(views)).model_dump(mode="json")


def _audit_counts(records: list[dict[str, Any]]) -> None:
    audit = _first(records, "audit")["data"]
    audit["endpoint_hygiene"], audit["endpoint_problems"] = False, ["hand-edited"]


def _future_document(records: list[dict[str, Any]]) -> None:
    accesses = _first(records, "retrievals")["data"]["accesses"]
    opened = dict(accesses[0])
    opened.update(tool="open_document", query=None, doc_id="mr-d99", doc_ids=["mr-d99"], k=None)
    accesses.insert(1, opened)


def _direct_forecast(records: list[dict[str, Any]]) -> None:
    call = _first(records, "llm_call")["data"]
    reply = json.loads(call["reply"])
    reply["p_yes"] = 0.95
    call["reply"] = json.dumps(reply, separators=(",", ":"), sort_keys=True)
    extraction = _first(records, "extraction")["data"]
    extraction["p_yes"] = 0.95
    _first(records, "run_completed")["data"]["p_yes"] = 0.95


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A branching run and a direct forecast of the demo card (seed 0), and seed 1's run."""
    out = tmp_path_factory.mktemp("traces")
    card = load_card(DEMO_CARD)
    for seed in (0, 1):
        config = RunConfig(card=card, policy=load_policy("branching"), seed=seed, ticks=3)
        anyio.run(lambda c=config: run_card(c, out, fsync=False))
    direct = RunConfig(
        card=card,
        policy=load_policy(DEFAULT_POLICY),
        kind="direct",
        method="direct",
        models=ModelConfig(model="offline", cache="off"),
    )
    anyio.run(lambda: forecast(direct, out, fsync=False))
    return out


FORGERIES: dict[str, tuple[str, Edit]] = {
    "method-label": (BRANCHING, _method_label),
    "card-id": (BRANCHING, _card_id),
    "audit-counts": (BRANCHING, _audit_counts),
    "future-document": (BRANCHING, _future_document),
    "forecast": (DIRECT, _direct_forecast),
}


@pytest.mark.parametrize("name", list(FORGERIES))
def test_a_recomputed_chain_passes_verify_but_not_the_recorded_head(
    traces: Path, tmp_path: Path, name: str
) -> None:
    source_name, edit = FORGERIES[name]
    source = traces / source_name
    head = trace_head(source)
    forged = tmp_path / source_name
    forge(source, forged, edit)
    assert forged.read_bytes() != source.read_bytes()
    assert verify_trace(forged).exit_code == 0  # the chain cannot catch it
    assert cli("verify", forged).code == 0
    refused = cli("verify", forged, "--expect-head", head)
    assert refused.code == 1
    assert f"head is {trace_head(forged)}, expected {head}" in refused.err
    assert cli("verify", source, "--expect-head", head).code == 0


def test_run_and_forecast_print_the_head_verify_expects(tmp_path: Path) -> None:
    ran = cli("run", DEMO_CARD, "--ticks", "2", "--out", tmp_path, "--json")
    assert ran.code == 0, ran.err
    summary = json.loads(ran.out)
    assert summary["head"] == trace_head(summary["trace"])
    told = cli("forecast", DEMO_CARD, "--model", "offline", "--out", tmp_path)
    assert told.code == 0, told.err
    head = trace_head(tmp_path / DIRECT)
    assert f"{tmp_path / DIRECT} · head {head}" in told.out.replace("\n", "")
    shown = cli("run", DEMO_CARD, "--ticks", "2", "--seed", "3", "--out", tmp_path)
    trace = tmp_path / "merger-review__branching__ticks2__s3.jsonl"
    assert f"{trace} · head {trace_head(trace)}" in shown.out
    checked = cli("verify", trace, "--expect-head", trace_head(trace).upper())
    assert checked.code == 0 and f"head {trace_head(trace)}" in checked.err


@pytest.mark.parametrize("given", ["abc", "0" * 63, "g" * 64, "39c3ef5369e7"])
def test_expect_head_takes_the_whole_head_only(traces: Path, given: str) -> None:
    proc = cli("verify", traces / BRANCHING, "--expect-head", given)
    assert proc.code == 2 and "--expect-head" in proc.err and "64 hex digits" in proc.err


def test_head_is_the_hash_of_the_last_complete_line(traces: Path, tmp_path: Path) -> None:
    blob = (traces / BRANCHING).read_bytes()
    lines = blob.splitlines()
    assert read_trace(traces / BRANCHING).head == hashlib.sha256(lines[-1]).hexdigest()
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"".join(line + b"\n" for line in lines[:10]) + lines[10][:7])
    assert trace_head(cut) == hashlib.sha256(lines[9]).hexdigest()
    assert json.loads(lines[10])["prev"] == trace_head(cut)  # what the next line would carry


# --- pre-registration: the lock records every trace's head --------------------------------


@pytest.fixture
def study(traces: Path, tmp_path: Path) -> dict[str, Path]:
    folder = tmp_path / "predictions"
    folder.mkdir()
    for name in (BRANCHING, DIRECT):
        shutil.copy(traces / name, folder / name)
    prereg = tmp_path / "prereg.yaml"
    prereg.write_text(PREREG)
    lock = tmp_path / "prereg.lock.json"
    locked = cli("prereg", "lock", prereg, "--predictions", folder, "-o", lock)
    assert locked.code == 0, locked.err
    assert "2 trace head(s)" in locked.out
    return {"predictions": folder, "prereg": prereg, "lock": lock}


def _score(study: dict[str, Path], tmp_path: Path) -> tuple[Outcome, Path]:
    report = tmp_path / "score.json"
    outcome = cli(
        "score",
        study["predictions"],
        "--labels",
        LABELS,
        "--prereg",
        study["lock"],
        "--json",
        report,
    )
    return outcome, report


def test_the_lock_records_each_trace_head(study: dict[str, Path], tmp_path: Path) -> None:
    lock = json.loads(study["lock"].read_text())
    assert lock["schema"] == "worldsim.prereg-lock/2"
    heads = {Path(f["path"]).name: f["head"] for f in lock["predictions"]}
    assert heads == {name: trace_head(study["predictions"] / name) for name in heads}
    scored, report = _score(study, tmp_path)
    assert scored.code == 0, scored.err
    assert report.exists()


@pytest.mark.parametrize("name", ["method-label", "audit-counts", "forecast"])
def test_score_refuses_a_forged_trace_under_the_lock(
    study: dict[str, Path], tmp_path: Path, name: str
) -> None:
    source_name, edit = FORGERIES[name]
    target = study["predictions"] / source_name
    locked_head = trace_head(target)
    forge(target, target, edit)
    assert verify_trace(target).exit_code == 0
    scored, report = _score(study, tmp_path)
    assert scored.code == 2
    assert str(target) in scored.err
    assert f"its head is {trace_head(target)}, the locked head {locked_head}" in scored.err
    assert len(scored.err.strip().splitlines()) == 1
    assert not report.exists()


def test_score_refuses_another_seed_under_the_locked_name(
    traces: Path, study: dict[str, Path], tmp_path: Path
) -> None:
    target = study["predictions"] / BRANCHING
    locked_head = trace_head(target)
    shutil.copy(traces / "merger-review__branching__ticks3__s1.jsonl", target)
    assert verify_trace(target).exit_code == 0
    scored, report = _score(study, tmp_path)
    assert scored.code == 2
    assert str(target) in scored.err and locked_head in scored.err
    assert trace_head(target) in scored.err
    assert not report.exists()


def test_a_version_1_lock_is_refused_naming_its_schema_and_the_release_that_reads_it(
    study: dict[str, Path], tmp_path: Path
) -> None:
    lock = json.loads(study["lock"].read_text())
    lock["schema"] = "worldsim.prereg-lock/1"
    for entry in lock["predictions"]:
        del entry["head"]
    study["lock"].write_text(json.dumps(lock))
    scored, report = _score(study, tmp_path)
    assert scored.code == 2
    assert str(study["lock"]) in scored.err and "schema" in scored.err
    assert "lock schema worldsim.prereg-lock/1" in scored.err
    assert "worldsim 0.2.0 reads worldsim.prereg-lock/1" in scored.err
    assert "Traceback" not in scored.err and len(scored.err.strip().splitlines()) == 1
    assert not report.exists()


def test_a_damaged_trace_cannot_be_locked(traces: Path, tmp_path: Path) -> None:
    folder = tmp_path / "predictions"
    folder.mkdir()
    lines = (traces / BRANCHING).read_bytes().splitlines(keepends=True)
    lines[4] = lines[4].replace(b'"seq":4', b'"seq":5')
    (folder / BRANCHING).write_bytes(b"".join(lines))
    prereg = tmp_path / "prereg.yaml"
    prereg.write_text(PREREG)
    lock = tmp_path / "lock.json"
    proc = cli("prereg", "lock", prereg, "--predictions", folder, "-o", lock)
    assert proc.code == cli("verify", folder / BRANCHING).code == 1
    assert f"{folder / BRANCHING}:5:" in proc.err
    assert not lock.exists()


@pytest.mark.parametrize("source_name", [BRANCHING, DIRECT])
def test_a_card_edited_without_its_hash_is_refused_by_verify(
    traces: Path, tmp_path: Path, source_name: str
) -> None:
    """The card a run records and its card_hash (what score groups runs by) must agree."""

    def edit(records: list[dict[str, Any]]) -> None:
        _first(records, "run_started")["data"]["card"]["seeds"]["base_rate"] = 0.9

    forged = tmp_path / source_name
    forge(traces / source_name, forged, edit)
    refused = cli("verify", forged)
    assert refused.code == 1
    assert "card_hash is not the SHA-256 of the card the record holds" in refused.err
    scored = cli("score", forged, "--labels", LABELS)
    assert scored.code != 0 and "card_hash" in scored.err
