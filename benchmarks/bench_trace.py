"""Trace throughput beside plain JSON serialization of the same records (DESIGN §4.8).

The records are real ones: the offline engine runs a demo-derived card with enough actors to
produce about N agent-steps (a proposal record each, and its accesses in its tick's
``retrievals`` record), and their ``(type, tl, tick, data)`` are
replayed through a fresh :class:`TraceWriter`, so the file written is itself a valid, complete
trace. Measured on it:

* append: ``TraceWriter.emit`` (``fsync=False``) against ``json.dumps`` of the same envelopes
  plus a buffered write to a file;
* read: ``read_trace`` (parse, check each envelope, the chain and the seal, keep every line;
  records are validated when first used) and ``iter_effective`` (the same checks, streamed,
  in the effective view: what ``score`` and ``hindsight`` read) against a plain
  ``for line in f: json.loads(line)`` loop over the same file (target ≤ 2×), and that loop
  plus one SHA-256 per line (the irreducible part of a chain check);
* verify: ``verify_trace`` (one streamed pass: chain, seal, schema, writer's form, replay of
  every tick) and the same with the canonical hash (``verify --canonical``) against the same
  baseline (target ≤ 3×); and the peak of memory allocated while verifying, against the
  trace's size (``tracemalloc``, measured apart from the timings): a streamed check holds each
  timeline's open tick, not the file; and the same for ``worldsim replay --tick 0`` (every
  tick rebuilt, one printed);
* score: ``worldsim score`` of the trace (library call) against a label that masks the demo
  label's entities, so that the leakage audit reads every string (target ≤ 2×).

Reading, verifying and scoring are each timed in a fresh process (run once untimed first, so
that imports and first-use set-up are excluded) with the cyclic collector on, as in a user's
command: a reader that keeps what it parses alive pays for it in collections, which pausing the
collector would hide, and the benchmark's own leftovers (the run that made the records) would
be walked by every collection. Appending is timed in this process with the collector paused.
"""

from __future__ import annotations

import gc
import hashlib
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from contextlib import nullcontext
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from benchmarks._common import ROOT, gc_paused, generated_actors_card, run_async
from worldsim.domain.config import RunConfig
from worldsim.domain.policy import load_policy
from worldsim.scoring.analysis import ScoreOptions, score
from worldsim.sim.session import run_card
from worldsim.trace.reader import iter_effective, read_trace
from worldsim.trace.verify import verify_trace
from worldsim.trace.writer import SEALED_TYPES, TraceWriter, utc_stamp

__all__ = ["rows", "run"]

TICKS = 8
#: Proposals per actor per tick: the demo cards' activity.
ACTIVITY = 0.8

Record = tuple[str, str | None, int | None, dict[str, Any]]


def make_records(target: int, workdir: Path) -> list[Record]:
    """The records of a real offline run of about ``target`` agent-steps (each a proposal, and
    the actor's accesses in its tick's retrievals record)."""
    actors = max(10, math.ceil(target / (TICKS * ACTIVITY)))
    config = RunConfig(
        card=generated_actors_card(actors), policy=load_policy("no_branch"), seed=11, ticks=TICKS
    )

    async def go() -> Path:
        result = await run_card(config, workdir / "source", overwrite=True, fsync=False)
        return result.trace

    source = run_async(go)
    records: list[Record] = []
    for raw in source.read_bytes().splitlines():
        env = json.loads(raw)
        data = env["data"]
        if env["type"] in SEALED_TYPES:
            data["seal"] = ""  # the writer seals terminal records again
        records.append((env["type"], env["tl"], env["tick"], data))
    return records


def _baseline_write(records: list[Record], path: Path, run_id: str) -> None:
    """Plain serialization: the same envelopes, ``json.dumps`` to bytes, buffered file writes."""
    prev = "0" * 64
    with path.open("wb") as fh:
        for seq, (type_, tl, tick, data) in enumerate(records):
            envelope = {
                "v": 2,
                "seq": seq,
                "ts": utc_stamp(),
                "run": run_id,
                "type": type_,
                "tl": tl,
                "tick": tick,
                "prev": prev,
                "data": data,
            }
            fh.write(json.dumps(envelope, separators=(",", ":"), ensure_ascii=False).encode())
            fh.write(b"\n")


def _writer_append(records: list[Record], path: Path, run_id: str) -> None:
    async def go() -> None:
        writer = await TraceWriter.create(path, run_id, fsync=False, overwrite=True)
        try:
            for type_, tl, tick, data in records:
                await writer.emit(type_, data, tl=tl, tick=tick)
        finally:
            await writer.aclose()

    run_async(go)


def _loads(path: Path) -> None:
    with path.open("rb") as f:
        for line in f:
            json.loads(line)


def _loads_and_hash(path: Path) -> None:
    with path.open("rb") as f:
        for line in f:
            json.loads(line)
            hashlib.sha256(line.rstrip(b"\n")).hexdigest()


def _stream_effective(path: Path) -> None:
    for _ in iter_effective(path):
        pass


def _score(trace: Path, label: Path) -> None:
    score(ScoreOptions(inputs=(trace,), labels=label))


READS: dict[str, Callable[[Path, Path], object]] = {
    "json_loads": lambda trace, _label: _loads(trace),
    "json_loads_sha256": lambda trace, _label: _loads_and_hash(trace),
    "read_trace": lambda trace, _label: read_trace(trace),
    "iter_effective": lambda trace, _label: _stream_effective(trace),
    "verify_trace": lambda trace, _label: verify_trace(trace),
    "verify_canonical": lambda trace, _label: verify_trace(trace, canonical=True),
    "score": _score,
}
"""The read operations, each timed in a fresh process (after one untimed run: start-up
excluded), as a user's command meets them: the parent's leftovers would otherwise be walked by
every collection."""
BASELINES = frozenset({"json_loads", "json_loads_sha256"})
"""The plain loops the reads are compared with, timed at the interpreter's default pace."""


def _read_in_child(name: str, trace: Path, label: Path) -> float:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_trace", name, str(trace), str(label)],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    return float(done.stdout.strip().splitlines()[-1])


def _timed_s(fn: Callable[[], object], *, collector: bool = False) -> float:
    gc.collect()
    with nullcontext() if collector else gc_paused():
        start = time.perf_counter_ns()
        fn()
        return (time.perf_counter_ns() - start) / 1e9


def run(quick: bool = False) -> dict[str, Any]:
    """Time every operation once per round, round-robin (the appends, then the reads), so that a
    noisy neighbour slows all of them alike; ratios are the median of the per-round ratios."""
    target = 2_000 if quick else 20_000
    rounds = 5 if quick else 7
    with tempfile.TemporaryDirectory(prefix="worldsim-bench-") as tmp:
        work = Path(tmp)
        records = make_records(target, work)
        n = len(records)
        source = next((work / "source").glob("*.jsonl"))
        run_id = read_trace(source).lines[0].run  # the forecast graph's digest names the run
        plain, trace = work / "plain.jsonl", work / "trace.jsonl"
        label = _label(records, work / "label.json")
        writes: dict[str, Callable[[], object]] = {
            "json_dumps_write": partial(_baseline_write, records, plain, run_id),
            "writer_emit": partial(_writer_append, records, trace, run_id),
        }
        samples: dict[str, list[float]] = {name: [] for name in (*writes, *READS)}
        for _ in range(rounds):
            for name, op in writes.items():
                samples[name].append(_timed_s(op))
        del records, writes
        for _ in range(rounds):
            for name in READS:
                samples[name].append(_read_in_child(name, trace, label))
        if not read_trace(trace).complete:
            raise RuntimeError("the re-emitted trace is not a complete trace")
        trace_bytes = trace.stat().st_size
        verify_peak = _peak_bytes(lambda: verify_trace(trace))
        replay_peak = _peak_bytes(lambda: _replay_one_tick(trace))

    seconds = {name: statistics.median(values) for name, values in samples.items()}
    per_s = {name: n / s for name, s in seconds.items()}

    def paired(key: str, base: str) -> float:
        return statistics.median(a / b for a, b in zip(samples[key], samples[base], strict=True))

    ops_compared = [
        ("append", "TraceWriter.emit", "writer_emit", "json_dumps_write"),
        ("read", "json.loads + sha256", "json_loads_sha256", "json_loads"),
        ("read", "read_trace", "read_trace", "json_loads"),
        ("read", "iter_effective (score, hindsight)", "iter_effective", "json_loads"),
        ("verify", "verify_trace (replay)", "verify_trace", "json_loads"),
        ("verify", "verify_trace --canonical", "verify_canonical", "json_loads"),
        ("score", "score (forecast and leakage audit)", "score", "json_loads"),
    ]
    comparisons = []
    for kind, measured, key, base in ops_compared:
        slowdown = paired(key, base)
        comparisons.append(
            {
                "op": kind,
                "measured": measured,
                "key": key,
                "baseline": base,
                "slowdown": slowdown,
                "throughput_share": 1.0 / slowdown,
            }
        )
    return {
        "what": "trace append / read-and-verify throughput vs plain json on the same records",
        "records": n,
        "trace_bytes": trace_bytes,
        "mean_record_bytes": trace_bytes / n,
        "rounds": rounds,
        "seconds": seconds,
        "samples_s": samples,
        "records_per_s": per_s,
        "comparisons": comparisons,
        "verify_peak_bytes": verify_peak,
        "verify_peak_share": verify_peak / trace_bytes,
        "replay_peak_bytes": replay_peak,
        "replay_peak_share": replay_peak / trace_bytes,
    }


def _replay_one_tick(trace: Path) -> None:
    """``worldsim replay TRACE --tick 0 --json``: every tick rebuilt, one printed."""
    from typer.testing import CliRunner

    from worldsim.cli import app

    result = CliRunner().invoke(app, ["replay", str(trace), "--tick", "0", "--json"])
    if result.exit_code != 0:
        raise RuntimeError(f"replay failed: {result.output}")


def _label(records: list[Record], path: Path) -> Path:
    """A label for the records' card that masks the demo label's entities."""
    card = next(data["card"] for type_, _, _, data in records if type_ == "run_started")
    demo = yaml.safe_load((ROOT / "scenarios" / "labels" / "merger-review.yaml").read_text())
    label = {"card_id": card["id"], "outcome": "yes", "masked_entities": demo["masked_entities"]}
    path.write_text(json.dumps(label), encoding="utf-8")
    return path


def _peak_bytes(fn: Callable[[], object]) -> int:
    """The peak of memory allocated while ``fn`` runs (``tracemalloc``), in bytes."""
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    names = {"json_dumps_write": "json.dumps + write", "json_loads": "json.loads"}
    return [
        {
            "op": c["op"],
            "measured": c["measured"],
            "baseline": names[c["baseline"]],
            "records": result["records"],
            "time ÷ baseline": c["slowdown"],
            "throughput ÷ baseline": c["throughput_share"],
            "memory ÷ baseline": None,
        }
        for c in result["comparisons"]
    ] + [
        {
            "op": "verify",
            "measured": "peak memory of verify_trace",
            "baseline": "trace file size",
            "records": result["records"],
            "time ÷ baseline": None,
            "throughput ÷ baseline": None,
            "memory ÷ baseline": result["verify_peak_share"],
        },
        {
            "op": "replay",
            "measured": "peak memory of replay --tick 0",
            "baseline": "trace file size",
            "records": result["records"],
            "time ÷ baseline": None,
            "throughput ÷ baseline": None,
            "memory ÷ baseline": result["replay_peak_share"],
        },
    ]


if __name__ == "__main__":
    from worldsim.domain.collector import collector_paced

    op, trace_arg, label_arg = sys.argv[1:]
    read = READS[op]
    # worldsim's reads at the pace the worldsim command sets; the plain loops at the default
    with nullcontext() if op in BASELINES else collector_paced():
        read(Path(trace_arg), Path(label_arg))  # imports and first-use set-up, not timed
        print(_timed_s(lambda: read(Path(trace_arg), Path(label_arg)), collector=True))
