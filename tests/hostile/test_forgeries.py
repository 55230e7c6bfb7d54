"""A forger against every reader: one gate.

Each forgery edits a finished trace and re-chains and re-seals it, as anyone can (the chain is
unkeyed): a value edited in any record, a record dropped, duplicated, moved or given another
type, a line written in another spelling or with a key given twice. Whatever ``verify`` says of
the forged trace, every command that reads a trace for a result says the same: a trace
``verify`` refuses makes each of them exit 1 with ``verify``'s own line, and nothing written; a
trace it accepts is read by each of them (no exit 1, no traceback); a trace it finds cut off
(exit 3) makes ``replay`` and ``view`` exit 3.
"""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.hostile.harness import Outcome, in_process
from tests.support import DEMO_CARD, ROOT, direct_trace, forge, invoke
from worldsim.domain.errors import TraceError
from worldsim.trace.records import RECORD_TYPES
from worldsim.trace.verify import verify_trace
from worldsim.trace.writer import SEALED_TYPES

LABELS = ROOT / "scenarios" / "labels"
GRAPHS = ROOT / "scenarios" / "hindsight"
GRAPH = GRAPHS / "merger-review.json"
PREREG = """\
methods: [direct, branching]
baseline: direct
comparisons: ["direct:branching"]
bootstrap: {n_resamples: 100}
"""

Records = list[dict[str, Any]]

READERS: dict[str, Callable[[Path, Path], tuple[str, ...]]] = {
    "score": lambda t, o: ("score", str(t), "--labels", str(LABELS), "--json", str(o / "s.json")),
    "score --hindsight": lambda t, o: (
        "score", str(t), "--labels", str(LABELS), "--hindsight", str(GRAPHS),
        "--json", str(o / "h.json"),
    ),
    "hindsight ker": lambda t, o: ("hindsight", "ker", str(t), "--hindsight", str(GRAPH)),
    "hindsight sources": lambda t, o: ("hindsight", "sources", str(t), "--hindsight", str(GRAPH)),
    "hindsight forecast-graph": lambda t, o: (
        "hindsight", "forecast-graph", str(t), "-o", str(o / "g.json"),
    ),
    "hindsight pressure": lambda t, o: (
        "hindsight", "pressure", "--hindsight", str(GRAPH), "-o", str(o / "p"), str(t),
    ),
    "replay": lambda t, o: ("replay", str(t)),
    "view": lambda t, o: ("view", str(t), "-o", str(o / "v.html")),
    "prereg lock": lambda t, o: (
        "prereg", "lock", str(o.parent / "prereg.yaml"), "--predictions", str(t),
        str(o.parent / "direct.jsonl"), "-o", str(o / "lock.json"),
    ),
}  # fmt: skip


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A branching offline run of the demo card (its evidence searched, forks made)."""
    out = tmp_path_factory.mktemp("recorded")
    made = invoke("run", DEMO_CARD, "--policy", "branching", "--ticks", "3", "--out", out, "--json")
    assert made.code == 0, made.err
    return Path(json.loads(made.out)["trace"])


def _verdict(trace: Path) -> tuple[int, str]:
    """What ``verify`` says: its exit code, and its message when it refuses."""
    try:
        return verify_trace(trace).exit_code, ""
    except TraceError as exc:
        return exc.exit_code, str(exc)


def _agree(trace: Path, work: Path) -> None:
    """Every reader says of ``trace`` what ``verify`` says."""
    code, message = _verdict(trace)
    (work / "prereg.yaml").write_text(PREREG)
    direct_trace(work / "direct.jsonl", card_id="merger-review", method="direct", p_yes=0.5)
    for name, args in READERS.items():
        out = work / name.replace(" ", "_")
        out.mkdir()
        outcome: Outcome = in_process(args(trace, out), work)
        assert "Traceback" not in outcome.stderr, (name, outcome.stderr[-3000:])
        if code == 1:
            assert outcome.code == 1, (name, message, outcome.stderr[-2000:])
            assert message in outcome.stderr, (name, message, outcome.stderr[-2000:])
            assert not any(out.iterdir()), (name, "wrote", list(out.iterdir()))
        else:
            assert outcome.code != 1, (name, code, outcome.stderr[-2000:])
            if code == 3 and name in ("replay", "view"):
                assert outcome.code == 3, (name, outcome.stderr[-2000:])


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every scalar's path in a JSON value."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _leaves(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _leaves(v, (*path, i))]
    return [path]


def _changed(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value + 0.125 if value < 0.5 else value / 2
    if isinstance(value, str):
        return value + "x"
    return 0  # a null given a value


def _set(data: Any, path: tuple[Any, ...], value: Any) -> None:
    for step in path[:-1]:
        data = data[step]
    data[path[-1]] = value


def _get(data: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        data = data[step]
    return data


RESPELLINGS: dict[str, Callable[[bytes], bytes]] = {
    "a key given twice": lambda raw: raw.replace(b'{"v":2,', b'{"v":2,"v":2,', 1),
    "an escaped letter": lambda raw: raw.replace(b'"type"', b'"\\u0074ype"', 1),
    "a float written long": lambda raw: raw.replace(b'"v":2,', b'"v":2.0,', 1),
    "spaces after separators": lambda raw: raw.replace(b",", b", ").replace(b'":', b'": '),
}


@st.composite
def forgeries(draw: st.DrawFn, records: Records) -> tuple[str, Callable[[Path, Path], None]]:
    """One forgery of ``records`` (a trace's lines, parsed): its name and how to write it."""
    kinds = ["edit", "drop", "duplicate", "move", "retype", "respell"]
    kind = draw(st.sampled_from(kinds), label="kind")
    n = len(records)
    i = draw(st.integers(0, n - 1), label="record")

    def written(edit: Callable[[Records], None], **options: Any) -> Callable[[Path, Path], None]:
        return lambda source, target: forge(source, target, edit, **options)

    if kind == "edit":
        leaves = [p for p in _leaves(records[i]["data"]) if p and p[-1] not in ("seal",)]
        if not leaves:
            kind = "drop"
        else:
            path = draw(st.sampled_from(leaves), label="leaf")
            value = _changed(_get(records[i]["data"], path))

            def edit(rs: Records) -> None:
                _set(rs[i]["data"], path, value)

            return f"{records[i]['type']} data.{'.'.join(map(str, path))}", written(edit)
    if kind == "drop":
        return f"drop {records[i]['type']}", written(lambda rs: rs.pop(i))
    if kind == "duplicate":
        return f"duplicate {records[i]['type']}", written(
            lambda rs: rs.insert(i + 1, copy.deepcopy(rs[i]))
        )
    if kind == "move":
        j = draw(st.integers(0, n - 1).filter(lambda j: j != i), label="to")

        def move(rs: Records) -> None:
            rs[i], rs[j] = rs[j], rs[i]

        return f"swap {records[i]['type']} and {records[j]['type']}", written(move)
    if kind == "retype":
        other = draw(st.sampled_from(sorted(set(RECORD_TYPES) - {records[i]["type"]})))

        def retype(rs: Records) -> None:
            rs[i]["type"] = other

        return f"{records[i]['type']} made {other}", written(retype)
    respellings = sorted(RESPELLINGS)
    if records[i]["type"] in SEALED_TYPES:  # a seal is taken over the writer's `"seal":""`
        respellings.remove("spaces after separators")
    how = draw(st.sampled_from(respellings), label="respelling")
    return f"{records[i]['type']} with {how}", written(
        lambda rs: None, respell=i, rewrite=RESPELLINGS[how]
    )


@settings(
    max_examples=24,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_every_reader_says_of_a_forged_trace_what_verify_says(
    recorded: Path, data: st.DataObject
) -> None:
    records = [json.loads(raw) for raw in recorded.read_bytes().splitlines()]
    _name, write = data.draw(forgeries(records), label="forgery")
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        forged = work / recorded.name
        write(recorded, forged)
        _agree(forged, work)


def _first(records: Records, type_: str) -> dict[str, Any]:
    return next(r for r in records if r["type"] == type_)


def _p_yes_099(records: Records) -> None:
    _first(records, "extraction")["data"]["p_yes"] = 0.99


def _failed(records: Records) -> None:
    records[-1]["type"] = "run_failed"


def _no_extraction(records: Records) -> None:
    records.remove(_first(records, "extraction"))


def _final_p_yes(records: Records) -> None:
    records[-1]["data"]["p_yes"] = 0.01


def _no_report(records: Records) -> None:
    records.remove(_first(records, "report"))


def _no_audit(records: Records) -> None:
    records.remove(_first(records, "audit"))


def _two_extractions(records: Records) -> None:
    at = records.index(_first(records, "extraction"))
    records.insert(at + 1, copy.deepcopy(records[at]))


def _audit_mass(records: Records) -> None:
    _first(records, "audit")["data"]["unresolved_mass"] = 0.5


def _forks_counted(records: Records) -> None:
    records[-1]["data"]["forks"] += 1


def _committed(records: Records) -> list[dict[str, Any]]:
    return [r["data"] for r in records if r["type"] == "tick_committed"]


def _committed_p_yes(records: Records) -> None:
    for data in _committed(records):  # what `hindsight pressure` and the viewer plot
        data["p_yes_now"] = 0.0123


def _committed_ledger(records: Records) -> None:
    data = _committed(records)[0]
    data["ledger"] = {key: "resolved" for key in data["ledger"]}


def _committed_pressure(records: Records) -> None:
    data = _committed(records)[0]
    data["pressure"] = {key: value + 1.0 for key, value in data["pressure"].items()}


def _committed_settled(records: Records) -> None:
    _committed(records)[0]["status"] = "settled"


def _ended_otherwise(records: Records) -> None:
    ended = _first(records, "timeline_ended")["data"]
    ended["status"] = "terminated" if ended["status"] == "deadline" else "deadline"


@pytest.mark.parametrize(
    "edit",
    [
        _p_yes_099,
        _failed,
        _no_extraction,
        _final_p_yes,
        _no_report,
        _no_audit,
        _two_extractions,
        _audit_mass,
        _forks_counted,
        _committed_p_yes,
        _committed_ledger,
        _committed_pressure,
        _committed_settled,
        _ended_otherwise,
    ],
)
def test_verify_refuses_what_a_run_never_writes_and_so_does_every_reader(
    recorded: Path, tmp_path: Path, edit: Callable[[Records], None]
) -> None:
    forged = tmp_path / recorded.name
    forge(recorded, forged, edit)
    code, message = _verdict(forged)
    assert code == 1, message
    _agree(forged, tmp_path)


@pytest.mark.parametrize("how", sorted(RESPELLINGS))
def test_a_line_in_another_spelling_is_refused_by_every_reader(
    recorded: Path, tmp_path: Path, how: str
) -> None:
    forged = tmp_path / recorded.name
    at = next(i for i, raw in enumerate(recorded.read_bytes().splitlines()) if b'"review"' in raw)
    forge(recorded, forged, lambda rs: None, respell=at, rewrite=RESPELLINGS[how])
    code, message = _verdict(forged)
    assert code == 1 and f":{at + 1}:" in message, message
    _agree(forged, tmp_path)


def test_a_cut_off_trace_is_skipped_by_score_and_prereg_and_exits_3_in_replay_and_view(
    recorded: Path, tmp_path: Path
) -> None:
    cut = tmp_path / recorded.name
    lines = recorded.read_bytes().splitlines(keepends=True)
    cut.write_bytes(b"".join(lines[:-1]))
    assert _verdict(cut)[0] == 3
    _agree(cut, tmp_path)
    ok = tmp_path / "ok.jsonl"
    shutil.copyfile(recorded, ok)
    scored = invoke("score", ok, cut, "--labels", LABELS)
    assert scored.code == 0 and f"{cut}: no result: cut off" in scored.err


def test_a_run_made_to_fail_after_its_results_holds_no_result_for_any_reader(
    recorded: Path, tmp_path: Path
) -> None:
    def failed(records: Records) -> None:
        records[-1]["type"] = "run_failed"
        records[-1]["data"] = {"error": "hand-made", "kind": "ModelError", "resumable": False}

    forged = tmp_path / recorded.name
    forge(recorded, forged, failed)
    assert _verdict(forged)[0] == 3
    _agree(forged, tmp_path)
    scored = invoke("score", forged, "--labels", LABELS)
    assert scored.code == 3 and "no result: the run failed: hand-made; skipped" in scored.err


def test_a_direct_forecast_whose_reply_and_extraction_were_both_edited_is_refused(
    tmp_path: Path,
) -> None:
    """The final record keeps the reply's first number: verify refuses the trace."""
    source = direct_trace(tmp_path / "d.jsonl", card_id="merger-review", method="d", p_yes=0.3)

    def both(records: Records) -> None:
        call = _first(records, "llm_call")["data"]
        reply = json.loads(call["reply"])
        reply["p_yes"] = 0.99
        call["reply"] = json.dumps(reply)
        _first(records, "extraction")["data"]["p_yes"] = 0.99

    forged = tmp_path / "forged.jsonl"
    forge(source, forged, both)
    code, message = _verdict(forged)
    assert code == 1 and "run_completed p_yes" in message, message
    _agree(forged, tmp_path)
