"""Resume: any crash point continues to the same canonical hash, with nothing paid twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import worldsim.sim.resuming as resuming_module
from tests.support import DEMO_CARD, collector_paces
from worldsim.domain.cards import load_card
from worldsim.domain.config import ModelConfig, RunConfig
from worldsim.domain.errors import BudgetExhausted, ConfigError
from worldsim.domain.policy import load_policy
from worldsim.sim.resume import recorded_spend
from worldsim.sim.resuming import resume_run
from worldsim.sim.session import run_card
from worldsim.testing import StubServer, worst_case_usage
from worldsim.trace.reader import Trace, read_trace
from worldsim.trace.verify import canonical_hash, verify_trace


def _whole_run(config: RunConfig, out: Path, min_forks: int) -> tuple[bytes, str, int]:
    """An uninterrupted run: its bytes, its canonical hash, and where its world is written."""
    result = anyio.run(lambda: run_card(config, out, fsync=False))
    assert result.forks >= min_forks
    trace = read_trace(result.trace)
    init = trace.first("world_initialized")
    assert init is not None
    after_init = len(b"".join(line.raw + b"\n" for line in trace.lines[: init.number]))
    return result.trace.read_bytes(), canonical_hash(trace), after_init


@pytest.fixture(scope="module")
def complete(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, str, int]:
    config = RunConfig(card=load_card(DEMO_CARD), policy=load_policy("branching"), seed=6)
    return _whole_run(config, tmp_path_factory.mktemp("whole"), min_forks=2)


@pytest.mark.parametrize("whole", ["complete", "wide"])
@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_a_crash_anywhere_resumes_to_the_same_hash(
    whole: str, request: pytest.FixtureRequest, tmp_path: Path, data: st.DataObject
) -> None:
    """Any prefix of a trace is a state a crash can leave; resuming it gives the same run.

    ``wide`` is bushy (more forks than the reporter cites), so report order is tested too.
    """
    blob, want, after_init = request.getfixturevalue(whole)
    cut = data.draw(st.integers(after_init, len(blob) - 2), label="cut")
    path = tmp_path / "crashed.jsonl"
    path.write_bytes(blob[:cut])
    anyio.run(lambda: resume_run(path, fsync=False))
    verdict = verify_trace(path, canonical=True)
    assert verdict.exit_code == 0 and verdict.complete
    assert verdict.canonical == want
    assert read_trace(path).first("run_resumed") is not None


def test_resuming_twice_keeps_the_hash(complete: tuple[bytes, str, int], tmp_path: Path) -> None:
    blob, want, after_init = complete
    path = tmp_path / "twice.jsonl"
    path.write_bytes(blob[: after_init + (len(blob) - after_init) // 3])
    # a second crash in the middle of the resumed stretch
    anyio.run(lambda: resume_run(path, fsync=False))
    resumed = path.read_bytes()
    marker = resumed.index(b'"type":"run_resumed"')
    path.write_bytes(resumed[: marker + (len(resumed) - marker) // 2])
    anyio.run(lambda: resume_run(path, fsync=False))
    verdict = verify_trace(path, canonical=True)
    assert verdict.exit_code == 0 and verdict.canonical == want
    # what the first resume committed before the second cut is kept, not run again
    trace = read_trace(path)
    markers = [line.number for line in trace.lines if line.type == "run_resumed"]
    assert len(markers) == 2
    first_stretch = [
        line
        for line in trace.lines
        if markers[0] < line.number < markers[1] and line.type == "tick_committed"
    ]
    kept = {line.number for line in trace.effective}
    assert first_stretch and all(line.number in kept for line in first_stretch)


def test_a_resume_leaves_the_collectors_pace_to_the_program(
    complete: tuple[bytes, str, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trace is read and replayed to its cut at the pace the program set (the threshold
    is read as the restore point is made from the replay)."""
    blob, want, after_init = complete
    path = tmp_path / "cut.jsonl"
    path.write_bytes(blob[: after_init + (len(blob) - after_init) // 2])
    with collector_paces(monkeypatch, resuming_module, "restore_point") as seen:
        anyio.run(lambda: resume_run(path, fsync=False))
    assert seen == [700]
    assert verify_trace(path, canonical=True).canonical == want


def test_a_complete_run_is_not_resumed_and_one_cut_before_its_world_starts_again(
    complete: tuple[bytes, str, int], tmp_path: Path
) -> None:
    blob, want, after_init = complete
    done = tmp_path / "done.jsonl"
    done.write_bytes(blob)
    with pytest.raises(ConfigError, match="nothing to resume"):
        anyio.run(lambda: resume_run(done))
    # cut anywhere before its world: run again from its recorded settings, in the same file
    first_line = blob.index(b"\n") + 1
    for n, cut in enumerate((first_line, after_init - 1)):
        early = tmp_path / f"early{n}.jsonl"
        early.write_bytes(blob[:cut])
        result = anyio.run(lambda p=early: resume_run(p, fsync=False))
        assert result.trace == early
        verdict = verify_trace(early, canonical=True)
        assert verdict.exit_code == 0 and verdict.canonical == want
        assert read_trace(early).first("run_resumed") is None


WORLDSIM = [sys.executable, "-c", "from worldsim.cli import main; main()"]


def test_sigkill_mid_tick_resumes_without_repaying_calls(tmp_path: Path) -> None:
    """A live run against the stub server is killed mid-tick; resume finishes it, every call
    completed before the kill is answered from the cache, and an uninterrupted run with the
    same cache gives the same canonical hash with zero calls."""
    # replies that run all 4 ticks (22 calls); the server answers 12, then holds the rest, so
    # the kill falls mid-run however fast the run is
    with StubServer(seed=8, hold_after=12) as server:
        env = {**os.environ, "STUB_API_KEY": "k", "STUB_BASE_URL": server.base_url}
        args = [
            str(DEMO_CARD),
            "--model",
            "stub/test-model",
            "--seed",
            "2",
            "--ticks",
            "4",
            "--out",
            str(tmp_path),
            "--json",
        ]
        proc = subprocess.Popen(
            [*WORLDSIM, "run", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        trace = tmp_path / "merger-review__branching__stub-test-model__ticks4__s2.jsonl"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            held = server.request_count > 12
            if held and trace.exists() and trace.read_bytes().count(b'"type":"llm_call"') >= 12:
                break
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        server.release()
        before = read_trace(trace)
        assert before.terminal is None
        paid_before = {
            (c.data.timeline, c.data.tick, c.data.role, c.data.agent, c.data.index)
            for c in before.of_type("llm_call")
        }
        requests_before = server.request_count

        resumed = subprocess.run(
            [*WORLDSIM, "run", "--resume", str(trace), "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert resumed.returncode == 0, resumed.stderr
        assert json.loads(resumed.stdout)["trace"] == str(trace)
        after = read_trace(trace)
        marker = after.first("run_resumed")
        assert marker is not None
        repaid = [
            c.data
            for c in after.lines[marker.number :]
            if c.type == "llm_call"
            and c.data.cache == "miss"
            and (c.data.timeline, c.data.tick, c.data.role, c.data.agent, c.data.index)
            in paid_before
        ]
        assert repaid == []
        assert server.request_count - requests_before == sum(
            1
            for c in after.lines[marker.number :]
            if c.type == "llm_call" and c.data.cache == "miss"
        )
        verdict = verify_trace(trace, canonical=True)
        assert verdict.exit_code == 0

        calls = server.request_count
        again = subprocess.run(
            [
                *WORLDSIM,
                "run",
                *args[:-3],
                "--out",
                str(tmp_path / "again"),
                "--replay-strict",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert again.returncode == 0, again.stderr
        assert server.request_count == calls
    whole = verify_trace(tmp_path / "again" / trace.name, canonical=True)
    assert whole.canonical == verdict.canonical


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, str, int]:
    """A bushy multiverse (more forks than the reporter cites) to resume from."""
    from worldsim.domain.policy import BranchPolicy

    policy = BranchPolicy(
        name="wide",
        max_depth=4,
        max_active=16,
        max_branches_per_tick=2,
        branch_threshold=0.5,
        runway_ticks=1,
    )
    config = RunConfig(card=load_card(DEMO_CARD), policy=policy, seed=2, ticks=10)
    return _whole_run(config, tmp_path_factory.mktemp("wide"), min_forks=6)


def _sent(trace: Trace) -> int:
    """The HTTP requests the trace's paid calls made (a repair is a second one)."""
    return sum(c.data.attempts for c in trace.of_type("llm_call") if c.data.cache != "hit")


def _paid(trace: Trace) -> list[tuple[object, ...]]:
    """The calls a trace paid for (not cache hits), by site and request."""
    return [
        (c.data.timeline, c.data.tick, c.data.role, c.data.agent, c.data.index, c.data.request_hash)
        for c in trace.of_type("llm_call")
        if c.data.cache != "hit"
    ]


def test_replicates_spend_from_one_cap_and_the_stop_names_what_is_left(tmp_path: Path) -> None:
    """``--max-cost-usd`` is the command's cap: each replicate had a cap of its own, and three
    spent 67% over the value typed."""
    prices = tmp_path / "prices.yaml"
    prices.write_text("models:\n  test-model: {input: 10.0, output: 10.0}\n")
    with StubServer(seed=8, usage=worst_case_usage) as server:
        env = {**os.environ, "STUB_API_KEY": "k", "STUB_BASE_URL": server.base_url}
        args = ["--model", "stub/test-model", "--ticks", "2", "--seed", "5", "--replicates", "3"]
        args += ["--prices", str(prices), "--max-cost-usd", "1.0", "--out", str(tmp_path / "t")]
        done = subprocess.run(
            [*WORLDSIM, "run", str(DEMO_CARD), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    traces = sorted((tmp_path / "t").glob("*.jsonl"))
    spent = [recorded_spend(read_trace(t)) for t in traces]
    assert sum(spent) <= 1.0 + 1e-9 and spent[0] > 0.34  # one run alone spends over a third
    assert done.returncode == 1 and "budget of $1.0000 reached" in done.stderr
    assert "of 3 runs finished" in done.stderr and "Traceback" not in done.stderr


def test_a_resume_in_another_folder_prices_by_the_table_the_run_named(tmp_path: Path) -> None:
    """``--prices prices.yaml`` typed in the run's folder is recorded as that file: a resume
    from elsewhere found no such file, or, where another folder held one, priced by it."""
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    (here / "prices.yaml").write_text("models:\n  test-model: {input: 10.0, output: 10.0}\n")
    (there / "prices.yaml").write_text("models:\n  test-model: {input: 0.0, output: 0.0}\n")
    with StubServer(seed=8, usage=worst_case_usage) as server:
        env = {**os.environ, "STUB_API_KEY": "k", "STUB_BASE_URL": server.base_url}
        run = [*WORLDSIM, "run", str(DEMO_CARD), "--model", "stub/test-model", "--ticks", "3"]
        args = ["--prices", "prices.yaml", "--max-cost-usd", "0.2", "--out", "t", "--json"]
        stopped = subprocess.run(
            [*run, *args], cwd=here, env=env, capture_output=True, text=True, check=False
        )
        assert stopped.returncode == 1 and "budget" in stopped.stderr
        trace = next((here / "t").glob("*.jsonl"))
        before = len(_paid(read_trace(trace)))
        resumed = subprocess.run(
            [*WORLDSIM, "run", "--resume", str(trace), "--max-cost-usd", "50"],
            cwd=there,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert resumed.returncode == 0, resumed.stderr
    whole = read_trace(trace)
    assert len(_paid(whole)) > before
    assert all(c.data.cost_usd for c in whole.of_type("llm_call") if c.data.cache != "hit")


def test_a_capped_run_stops_within_its_cap_and_resumes_under_a_higher_one(tmp_path: Path) -> None:
    """The cap holds over the run and every resumed part of it: a resumed budget counts what the
    trace already spent, each part ends with a resumable ``run_failed`` naming the budget, and
    no call is paid for twice."""
    prices = tmp_path / "prices.yaml"
    prices.write_text("models:\n  test-model: {input: 10.0, output: 10.0}\n")
    trace = tmp_path / "merger-review__branching__stub-test-model__ticks4__s2.jsonl"
    # every call costs exactly the worst case it reserved: $0.03 to $0.11 here
    with StubServer(seed=8, usage=worst_case_usage, latency_s=0.005) as server:
        env = {"STUB_API_KEY": "k", "STUB_BASE_URL": server.base_url}
        models = ModelConfig(model="stub/test-model", prices=prices, max_cost_usd=0.4)
        config = RunConfig(
            card=load_card(DEMO_CARD), policy=load_policy("branching"), seed=2, ticks=4
        ).model_copy(update={"models": models})
        with pytest.raises(BudgetExhausted):
            anyio.run(lambda: run_card(config, tmp_path, fsync=False, environ=env))
        first = read_trace(trace)
        assert first.terminal is not None and first.terminal.type == "run_failed"
        stop = first.terminal.data
        assert stop.resumable and stop.kind == "BudgetExhausted"
        assert "budget of $0.4000 reached" in stop.error and "higher budget" in stop.error
        spent = recorded_spend(first)
        assert 0 < spent <= 0.4 + 1e-9
        # every request sent was answered and recorded: none was in flight at the stop
        assert server.request_count == _sent(first)

        # a cap $0.02 above the spend: a fresh budget would run calls, the continued one none
        tight = models.model_copy(update={"max_cost_usd": spent + 0.02})
        with pytest.raises(BudgetExhausted):
            anyio.run(lambda: resume_run(trace, models=tight, fsync=False, environ=env))
        assert server.request_count == _sent(first)

        # on the command line, a resume without --max-cost-usd keeps the run's recorded cap
        kept = subprocess.run(
            [*WORLDSIM, "run", "--resume", str(trace)],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert kept.returncode == 1 and "budget of $0.4000 reached" in kept.stderr
        assert server.request_count == _sent(first)

        # it keeps the recorded price table too; the new cap counts the whole run
        part = subprocess.run(
            [*WORLDSIM, "run", "--resume", str(trace), "--max-cost-usd", "0.75"],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        middle = read_trace(trace)
        assert _paid(middle)[len(_paid(first)) :]  # it made calls, priced by the recorded table
        assert all(c.data.cost_usd for c in middle.of_type("llm_call"))
        assert recorded_spend(middle) <= 0.75 + 1e-9
        # the whole run costs about $1.06: stopped again, with one clear line and no traceback
        assert part.returncode == 1 and "Traceback" not in part.stderr
        assert "budget of $0.7500 reached" in part.stderr
        assert part.stderr.strip().endswith(f"`worldsim run --resume {trace} --max-cost-usd MORE`")

        more = models.model_copy(update={"max_cost_usd": 5.0})
        result = anyio.run(lambda: resume_run(trace, models=more, fsync=False, environ=env))
        whole = read_trace(result.trace)
        assert whole.complete and verify_trace(trace).exit_code == 0
        paid = _paid(whole)
        assert server.request_count == _sent(whole)
        assert all(c.data.cost_usd for c in whole.of_type("llm_call"))
    assert len(set(paid)) == len(paid)  # nothing already paid was paid again
    assert recorded_spend(whole) <= 5.0
    assert [line.type for line in whole.lines].count("run_failed") >= 2


@pytest.mark.parametrize("cache", ["off", "another folder"])
def test_a_resume_pays_for_no_call_its_trace_recorded_whatever_the_cache(
    tmp_path: Path, cache: str
) -> None:
    """A run cut just after a call of an uncommitted tick was answered and recorded, resumed
    without that reply in its cache (the cache off, or another cache folder): the recorded call
    is answered from the trace, so the resume asks the server only for the calls the cut run
    never made, and ends with the uninterrupted run's canonical hash."""
    first = ModelConfig(model="stub/test-model", cache="off")
    then = (
        first
        if cache == "off"
        else first.model_copy(update={"cache": "use", "cache_dir": tmp_path / "other"})
    )
    config = RunConfig(
        card=load_card(DEMO_CARD), policy=load_policy("branching"), seed=2, ticks=4
    ).model_copy(update={"models": first})
    with StubServer(seed=3, content_by_request=True) as server:
        env = {"STUB_API_KEY": "k", "STUB_BASE_URL": server.base_url}
        result = anyio.run(lambda: run_card(config, tmp_path / "whole", fsync=False, environ=env))
        whole = read_trace(result.trace)
        asked_whole = server.request_count
        lines = result.trace.read_bytes().splitlines(keepends=True)
        commits = [i for i, line in enumerate(lines) if b'"type":"tick_committed"' in line[:200]]
        middle = commits[len(commits) // 2]
        calls = [i for i, line in enumerate(lines) if b'"type":"llm_call"' in line[:200]]
        answered = next(i for i in calls if i > middle)  # recorded, its tick never committed
        cut = tmp_path / "cut.jsonl"
        cut.write_bytes(b"".join(lines[: answered + 1]))
        recorded = read_trace(cut)
        voided = [c for c in recorded.of_type("llm_call") if c.number > middle]
        assert voided
        before = server.request_count
        resumed = anyio.run(lambda: resume_run(cut, models=then, fsync=False, environ=env))
        asked = server.request_count - before
    after = read_trace(resumed.trace)
    sent_before_cut = sum(c.data.attempts for c in recorded.of_type("llm_call"))
    assert asked == asked_whole - sent_before_cut  # nothing the cut run was answered is asked
    marker = after.first("run_resumed")
    assert marker is not None
    again = [line.data for line in after.lines[marker.number :] if line.type == "llm_call"]
    hits = {(c.timeline, c.tick, c.agent, c.request_hash) for c in again if c.cache == "hit"}
    assert {
        (c.data.timeline, c.data.tick, c.data.agent, c.data.request_hash) for c in voided
    } <= hits
    assert canonical_hash(after) == canonical_hash(whole)


def test_a_resume_refuses_a_prompt_file_changed_since_the_run_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trace names the prompt versions its run started under: a resume after the role's
    file changed is refused naming that file, before anything is written; with the file as it
    was, it resumes."""
    from tests.support import cut_mid_run
    from worldsim.roles.prompts import known_prompt_roles

    shipped = known_prompt_roles()["actor"][0].read_text(encoding="utf-8")
    mine = tmp_path / "agents" / "actor.md"
    mine.parent.mkdir()
    mine.write_text(shipped + "\nThink twice.\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    config = RunConfig(card=load_card(DEMO_CARD), policy=load_policy("branching"), seed=2, ticks=4)
    whole = anyio.run(lambda: run_card(config, tmp_path / "runs", fsync=False)).trace
    cut = cut_mid_run(whole, tmp_path / "cut.jsonl")
    before = cut.read_bytes()
    recorded = read_trace(cut).started.prompt_versions["actor"]
    mine.write_text(shipped + "\nThink thrice.\n", encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        anyio.run(lambda: resume_run(cut, fsync=False))
    assert Path(str(refused.value.file)).resolve() == mine.resolve()
    assert f"the run started under {recorded}" in refused.value.message
    assert cut.read_bytes() == before
    mine.write_text(shipped + "\nThink twice.\n", encoding="utf-8")
    done = anyio.run(lambda: resume_run(cut, fsync=False))
    assert verify_trace(done.trace).exit_code == 0
    assert canonical_hash(done.trace) == canonical_hash(whole)
