"""The direct baseline: one model call per card against the stub server, in process and on the
command line; its trace verifies, caches, fails cleanly, keeps keys out and scores."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.support import DEMO_CARD, ROOT
from worldsim.domain.cards import load_card
from worldsim.domain.errors import ConfigError, ModelError, TraceError
from worldsim.models import ModelOptions, ModelPool, RetryPolicy, RouteTable
from worldsim.models.leakage import LeakageGuard, fingerprint
from worldsim.sim.direct import DirectResult, forecast_card
from worldsim.testing import StubServer
from worldsim.trace.reader import read_trace
from worldsim.trace.verify import canonical_hash, verify_trace
from worldsim.trace.writer import TraceWriter

WORLDSIM = [sys.executable, "-c", "from worldsim.cli import main; main()"]
ROUTE = "stub/test-model"
TRACE = "merger-review__direct__s0.jsonl"
STUB_TRACE = "merger-review__direct__stub-test-model__s0.jsonl"
PLANTED_KEY = "sk-planted-7c1e9a0b5d3f42e8a6b1c0d9e8f7a6b5"
LABELS = ROOT / "scenarios" / "labels"


def reply(p_yes: float, *, warning: bool = False) -> dict[str, Any]:
    return {
        "p_yes": p_yes,
        "rationale": "Phase 2 reviews with offered remedies usually end in clearance.",
        "drivers": ["remedies on the overlapping plants"],
        "uncertainties": ["a three-week extension"],
        "leakage_warning": warning,
    }


def scripted(*replies: dict[str, Any]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Replies in order; the last one repeats."""
    seen: list[int] = []

    def script(body: dict[str, Any]) -> dict[str, Any]:
        n = len(seen)
        seen.append(n)
        return replies[min(n, len(replies) - 1)]

    return script


def cli(
    *args: str, server: StubServer | None, cwd: Path, key: str = PLANTED_KEY
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STUB_")}
    if server is not None:
        env["STUB_BASE_URL"] = server.base_url
        env["STUB_API_KEY"] = key
    return subprocess.run(
        [*WORLDSIM, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
        check=False,
    )


def forecast_args(out: Path, *extra: str) -> list[str]:
    return ["forecast", str(DEMO_CARD), "--model", ROUTE, "--out", str(out), *extra]


def types_of(path: Path) -> list[str]:
    return [line.type for line in read_trace(path).lines]


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


# -------------------------------------------------------------------------- in process


def run_direct(
    server: StubServer,
    out: Path,
    *,
    guard: LeakageGuard | None = None,
    environ: Mapping[str, str] | None = None,
) -> DirectResult:
    card = load_card(DEMO_CARD)
    env = environ if environ is not None else {"STUB_BASE_URL": server.base_url}

    async def go() -> DirectResult:
        pool = ModelPool(
            RouteTable.from_flags(ROUTE),
            options=ModelOptions(retry=RetryPolicy(max_attempts=2, timeout_s=10)),
            guard=guard,
            environ=env,
            dotenv=None,
        )
        try:
            return await forecast_card(
                card,
                model=pool.for_role("direct"),
                route=ROUTE,
                out=out,
                fsync=False,
                guard=guard,
            )
        finally:
            await pool.aclose()

    return anyio.run(go)


def test_direct_trace_verifies_and_carries_the_reply(tmp_path: Path) -> None:
    with StubServer(scripted(reply(0.37))) as server:
        result = run_direct(server, tmp_path)
        body = server.requests[0].body
    assert result.trace == tmp_path / STUB_TRACE
    assert result.p_yes == 0.37
    assert types_of(result.trace) == [
        "run_started",
        "llm_call",
        "extraction",
        "report",
        "audit",
        "run_completed",
    ]
    check = verify_trace(result.trace)
    assert check.exit_code == 0
    assert check.recorded is not None and check.recorded.p_yes == 0.37
    assert check.mass_sum == 1.0
    trace = read_trace(result.trace)
    started = trace.started
    assert (started.kind, started.method, started.ticks) == ("direct", "direct", 0)
    assert started.routes == {"direct": ROUTE}
    assert started.extraction_rule == "direct/1"
    assert set(started.prompt_versions) == {"direct"}
    call = trace.first("llm_call")
    assert call is not None and (call.record.tl, call.record.tick) == (None, None)
    assert call.data.role == "direct" and call.data.error is None
    report = trace.first("report")
    assert report is not None and report.data.summary == reply(0.37)["rationale"]
    audit = trace.first("audit")
    assert audit is not None
    assert (audit.data.report_grounding, audit.data.leakage) == ("not-checked", "not-checked")
    # the prompt is the card without its evidence documents
    prompt = "\n".join(m["content"] for m in body["messages"])
    assert "Will Regulator R clear the merger" in prompt
    assert "mr-d01" not in prompt and "Business Wire" not in prompt


def test_verify_rejects_an_extraction_that_differs_from_the_reply(tmp_path: Path) -> None:
    with StubServer(scripted(reply(0.37))) as server:
        good = run_direct(server, tmp_path / "good").trace
    forged = tmp_path / "forged.jsonl"

    async def rewrite() -> None:
        trace = read_trace(good)
        writer = await TraceWriter.create(forged, trace.run_id, fsync=False)
        for line in trace.lines:
            data = line.data.model_dump(mode="json")
            if "seal" in data:
                data["seal"] = ""  # the writer seals terminal records again
            if line.type == "extraction":
                data["p_yes"] = 0.38
            await writer.emit(line.type, data, tl=line.record.tl, tick=line.record.tick)
        await writer.aclose()

    anyio.run(rewrite)
    with pytest.raises(TraceError, match="differs from the reply"):
        verify_trace(forged)


def test_model_warning_and_forbidden_strings_go_into_the_audit(tmp_path: Path) -> None:
    guard = LeakageGuard.from_strings(["Regulator R"])
    with StubServer(scripted(reply(0.6, warning=True))) as server:
        result = run_direct(server, tmp_path, guard=guard)
    assert result.audit.leakage == "findings"
    kinds = sorted(f["kind"] for f in result.audit.leakage_findings)
    assert kinds == ["forbidden_string", "model_warning"]
    audit = read_trace(result.trace).first("audit")
    assert audit is not None
    recorded = json.dumps(audit.data.leakage_findings).casefold()
    assert "regulator r" not in recorded  # findings name the string by its hash only
    assert fingerprint("Regulator R") in recorded


def test_clean_guard_and_no_warning_audit_clean(tmp_path: Path) -> None:
    guard = LeakageGuard.from_strings(["a string nobody wrote"])
    with StubServer(scripted(reply(0.6))) as server:
        result = run_direct(server, tmp_path, guard=guard)
    assert (result.audit.leakage, result.audit.leakage_findings) == ("clean", [])


def _choice_reply(probs: Mapping[str, float]) -> dict[str, Any]:
    return {
        "probabilities": [{"endpoint": k, "p": v} for k, v in probs.items()],
        "rationale": "Guild awards lead the field.",
        "leakage_warning": False,
    }


def _forecast_choice(server: StubServer, out: Path) -> DirectResult:
    card = load_card(ROOT / "scenarios" / "award-best-picture.yaml")

    async def go() -> DirectResult:
        pool = ModelPool(
            RouteTable.from_flags(ROUTE),
            environ={"STUB_BASE_URL": server.base_url},
            dotenv=None,
        )
        try:
            return await forecast_card(
                card, model=pool.for_role("direct_choice"), route=ROUTE, out=out
            )
        finally:
            await pool.aclose()

    return anyio.run(go)


def test_multiple_choice_card_gets_a_normalised_option_distribution(tmp_path: Path) -> None:
    card = load_card(ROOT / "scenarios" / "award-best-picture.yaml")
    ids = [ep.id for ep in card.scored_endpoints]
    raw = {ep: float(i + 1) / 10 for i, ep in enumerate(ids)}
    with StubServer(scripted(_choice_reply(raw))) as server:
        result = _forecast_choice(server, tmp_path)
        assert server.request_count == 1
    total = sum(raw.values())
    assert result.p_yes is None
    assert result.p_options == pytest.approx({k: v / total for k, v in raw.items()})
    assert verify_trace(result.trace).exit_code == 0  # replay re-extracts the options
    trace = read_trace(result.trace)
    assert trace.first("extraction").data.p_options == result.p_options  # type: ignore[union-attr]
    assert trace.first("run_completed").data.p_yes is None  # type: ignore[union-attr]


def test_multiple_choice_reply_missing_an_outcome_fails_the_run(tmp_path: Path) -> None:
    card = load_card(ROOT / "scenarios" / "award-best-picture.yaml")
    first = card.scored_endpoints[0].id
    with (
        StubServer(scripted(_choice_reply({first: 1.0, "nobody": 0.0}))) as server,
        pytest.raises(ModelError, match="unknown outcome 'nobody'"),
    ):
        _forecast_choice(server, tmp_path)
    trace = read_trace(next(tmp_path.glob("*.jsonl")))
    assert trace.terminal is not None and trace.terminal.type == "run_failed"


def test_binary_role_on_a_multiple_choice_card_is_refused_before_any_file(tmp_path: Path) -> None:
    card = load_card(ROOT / "scenarios" / "award-best-picture.yaml")
    with StubServer(scripted(reply(0.5))) as server:

        async def go() -> None:
            pool = ModelPool(
                RouteTable.from_flags(ROUTE),
                environ={"STUB_BASE_URL": server.base_url},
                dotenv=None,
            )
            try:
                await forecast_card(
                    card, model=pool.for_role("direct"), route=ROUTE, out=tmp_path, role="direct"
                )
            finally:
                await pool.aclose()

        with pytest.raises(ConfigError, match="card needs output ChoiceForecastOutput"):
            anyio.run(go)
        assert server.request_count == 0
    assert list(tmp_path.iterdir()) == []


def test_invalid_reply_in_process_raises_and_ends_with_run_failed(tmp_path: Path) -> None:
    with StubServer(scripted(reply(498))) as server:
        with pytest.raises(ModelError) as info:
            run_direct(server, tmp_path)
        assert server.request_count == 2  # the reply and one repair
    assert info.value.call["error"]
    assert types_of(tmp_path / STUB_TRACE) == ["run_started", "llm_call", "run_failed"]


# -------------------------------------------------------------------------- command line


def test_cli_forecast_json_then_cache_hit(tmp_path: Path, user_cache: Path) -> None:
    out = tmp_path / "traces"
    with StubServer(scripted(reply(0.37))) as server:
        first = cli(*forecast_args(out, "--json"), server=server, cwd=tmp_path)
        assert first.returncode == 0, first.stderr
        assert server.request_count == 1
        row = json.loads(first.stdout)
        assert {"card_id", "seed", "method", "p_yes", "unresolved_mass", "trace"} <= set(row)
        assert (row["card_id"], row["seed"], row["method"]) == ("merger-review", 0, "direct")
        assert (row["p_yes"], row["unresolved_mass"], row["cache"]) == (0.37, 0.0, "miss")
        trace = Path(row["trace"])
        assert trace == out / STUB_TRACE
        assert verify_trace(trace).exit_code == 0
        first_hash = canonical_hash(read_trace(trace))
        assert (user_cache / "responses.sqlite").is_file()

        elsewhere = tmp_path / "elsewhere"  # the same forecast into another folder: no request
        again = cli(*forecast_args(elsewhere, "--json"), server=server, cwd=tmp_path)
        assert again.returncode == 0, again.stderr
        assert server.request_count == 1  # answered from the cache
    row = json.loads(again.stdout)
    assert (row["p_yes"], row["cache"]) == (0.37, "hit")
    assert verify_trace(trace).exit_code == 0
    assert canonical_hash(read_trace(trace)) == first_hash


def test_cli_summary_names_p_yes_rationale_and_trace(tmp_path: Path) -> None:
    out = tmp_path / "traces"
    with StubServer(scripted(reply(0.37))) as server:
        proc = cli(
            *forecast_args(out, "--method-label", "direct-stub", "--seed", "3"),
            server=server,
            cwd=tmp_path,
        )
    assert proc.returncode == 0, proc.stderr
    assert "p_yes 0.3700" in proc.stdout
    assert "Phase 2 reviews with offered remedies" in proc.stdout
    name = "merger-review__direct-stub__stub-test-model__s3.jsonl"  # the route is in the name
    assert name in proc.stdout
    assert read_trace(out / name).started.method == "direct-stub"


def test_cli_replay_strict_with_an_empty_cache_fails_clearly(tmp_path: Path) -> None:
    out = tmp_path / "traces"
    with StubServer(scripted(reply(0.37))) as server:
        proc = cli(*forecast_args(out, "--replay-strict"), server=server, cwd=tmp_path)
        assert server.request_count == 0
    assert proc.returncode == 1
    [line] = error_lines(proc.stderr)
    assert "strict replay: no cached reply" in line
    assert types_of(out / STUB_TRACE) == ["run_started", "run_failed"]
    assert verify_trace(out / STUB_TRACE).exit_code == 3


def test_cli_out_of_bounds_reply_is_a_recorded_failure(tmp_path: Path) -> None:
    out = tmp_path / "traces"
    with StubServer(scripted(reply(498))) as server:
        proc = cli(*forecast_args(out), server=server, cwd=tmp_path)
        assert server.request_count == 2  # the reply and one repair round trip
    assert proc.returncode == 1
    [line] = error_lines(proc.stderr)
    assert "invalid output after one repair" in line
    assert types_of(out / STUB_TRACE) == ["run_started", "llm_call", "run_failed"]
    call = read_trace(out / STUB_TRACE).first("llm_call")
    assert call is not None and call.data.error
    assert '"p_yes":498' in (call.data.reply or "").replace(" ", "")
    check = verify_trace(out / STUB_TRACE)
    assert (check.exit_code, check.terminal) == (3, "run_failed")


def test_cli_out_of_bounds_reply_is_repaired(tmp_path: Path) -> None:
    out = tmp_path / "traces"
    with StubServer(scripted(reply(498), reply(0.42))) as server:
        proc = cli(*forecast_args(out, "--json"), server=server, cwd=tmp_path)
        assert server.request_count == 2
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["p_yes"] == 0.42
    call = read_trace(out / STUB_TRACE).first("llm_call")
    assert call is not None and [e.kind for e in call.data.errors] == ["invalid_output"]
    assert verify_trace(out / STUB_TRACE).exit_code == 0


def test_planted_key_never_leaves_the_request_header(tmp_path: Path, user_cache: Path) -> None:
    out = tmp_path / "traces"
    with StubServer(scripted(reply(0.37))) as server:
        runs = [
            cli(*forecast_args(out, "--force"), server=server, cwd=tmp_path),
            cli(*forecast_args(out, "--force", "--json"), server=server, cwd=tmp_path),
        ]
        headers = [r.headers.get("authorization") for r in server.requests]
    assert headers == [f"Bearer {PLANTED_KEY}"]  # used once, then the cache answered
    with StubServer(scripted(reply(498))) as server:
        runs.append(
            cli(*forecast_args(out, "--force", "--cache", "refresh"), server=server, cwd=tmp_path)
        )
    assert [r.returncode for r in runs] == [0, 0, 1]
    for proc in runs:
        assert PLANTED_KEY not in proc.stdout and PLANTED_KEY not in proc.stderr
    written = [p for p in [*out.rglob("*"), *user_cache.rglob("*")] if p.is_file()]
    assert any(p.name.startswith("responses.sqlite") for p in written)
    assert any(p.suffix == ".jsonl" for p in written)
    for path in written:
        assert PLANTED_KEY.encode() not in path.read_bytes(), path


def test_cli_budget_and_leakage_fail_before_the_call(tmp_path: Path) -> None:
    forbidden = tmp_path / "forbidden.txt"
    forbidden.write_text("# masked names\nregulator r\n")
    with StubServer(scripted(reply(0.37))) as server:
        spent = cli(
            *forecast_args(tmp_path / "a", "--max-cost-usd", "0"), server=server, cwd=tmp_path
        )
        leaked = cli(
            *forecast_args(
                tmp_path / "b", "--forbidden-strings", str(forbidden), "--leakage", "fail"
            ),
            server=server,
            cwd=tmp_path,
        )
        assert server.request_count == 0
    assert spent.returncode == 1 and "budget" in error_lines(spent.stderr)[0]
    # a forecast is one call: it starts over with a higher budget, it does not resume
    assert error_lines(spent.stderr)[0].endswith("goes on, run again with --force")
    assert leaked.returncode == 1 and "forbidden string" in error_lines(leaked.stderr)[0]
    for out in (tmp_path / "a", tmp_path / "b"):
        assert types_of(out / STUB_TRACE) == ["run_started", "run_failed"]
    # a direct forecast never resumes, even one stopped before its call: it starts over
    resumed = cli("run", "--resume", str(tmp_path / "a" / STUB_TRACE), server=None, cwd=tmp_path)
    assert resumed.returncode == 2 and "start it again instead" in resumed.stderr
    assert types_of(tmp_path / "a" / STUB_TRACE) == ["run_started", "run_failed"]
    assert "regulator r" not in leaked.stderr.casefold()


def test_cli_bad_input_is_one_line_exit_2_and_no_trace(tmp_path: Path) -> None:
    out = tmp_path / "traces"
    missing_card = cli(
        "forecast",
        str(tmp_path / "nope.yaml"),
        "--model",
        ROUTE,
        "--out",
        str(out),
        server=None,
        cwd=tmp_path,
    )
    bad_route = cli(
        "forecast",
        str(DEMO_CARD),
        "--model",
        "no-slash-route",
        "--out",
        str(out),
        server=None,
        cwd=tmp_path,
    )
    no_base_url = cli(*forecast_args(out), server=None, cwd=tmp_path)
    wrong_role = cli(
        "forecast",
        str(ROOT / "scenarios" / "award-best-picture.yaml"),
        "--model",
        "offline",
        "--role",
        "direct",
        "--out",
        str(out),
        server=None,
        cwd=tmp_path,
    )
    for proc in (missing_card, bad_route, no_base_url, wrong_role):
        assert proc.returncode == 2, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
        assert proc.stdout == ""
    assert "STUB_BASE_URL" in no_base_url.stderr
    assert "--model" in bad_route.stderr
    assert not out.exists()


def test_cli_offline_route_answers_with_the_base_rate(tmp_path: Path, user_cache: Path) -> None:
    out = tmp_path / "traces"
    proc = cli(
        "forecast",
        str(DEMO_CARD),
        "--model",
        "offline",
        "--out",
        str(out),
        "--json",
        server=None,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)
    assert row["p_yes"] == load_card(DEMO_CARD).seeds.base_rate  # type: ignore[union-attr]
    assert row["cost_usd"] == 0.0
    trace = read_trace(out / TRACE)
    assert "base rate" in trace.first("report").data.summary  # type: ignore[union-attr]
    assert verify_trace(out / TRACE).exit_code == 0
    assert not user_cache.exists()  # the offline route opens no cache
    replayed = subprocess.run(
        [*WORLDSIM, "replay", str(out / TRACE), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert replayed.returncode == 0, replayed.stderr
    assert json.loads(replayed.stdout)["extraction"]["matches"] is True


def test_score_takes_direct_traces_next_to_offline_traces(tmp_path: Path) -> None:
    out = tmp_path / "traces"
    multiverse = subprocess.run(
        [*WORLDSIM, "run", str(DEMO_CARD), "--policy", "no_branch", "--out", str(out), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert multiverse.returncode == 0, multiverse.stderr
    with StubServer(scripted(reply(0.37))) as server:
        direct = cli(*forecast_args(out, "--json"), server=server, cwd=tmp_path)
    assert direct.returncode == 0, direct.stderr
    report = tmp_path / "score.json"
    scored = subprocess.run(
        [
            *WORLDSIM,
            "score",
            str(out),
            "--labels",
            str(LABELS),
            "--json",
            str(report),
            "--compare",
            "no_branch:direct",
            "--bootstrap",
            "200",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert scored.returncode == 0, scored.stderr
    doc = json.loads(report.read_text())
    rows = {row["method"]: row for row in doc["per_card"]}
    assert set(rows) == {"direct", "no_branch"}
    row = rows["direct"]
    assert (row["card_id"], row["p_yes"], row["extraction_rule"]) == (
        "merger-review",
        0.37,
        "direct/1",
    )
    assert row["model"] == ROUTE
    y = 1.0 if row["outcome"] == "yes" else 0.0
    assert row["brier"] == pytest.approx((0.37 - y) ** 2)


def test_cli_cache_dir_and_cache_off(tmp_path: Path, user_cache: Path) -> None:
    out = tmp_path / "traces"
    custom = tmp_path / "elsewhere"
    with StubServer(scripted(reply(0.37))) as server:
        runs = [
            cli(
                *forecast_args(out, "--json", "--cache-dir", str(custom)),
                server=server,
                cwd=tmp_path,
            ),
            cli(
                *forecast_args(out, "--json", "--force", "--cache-dir", str(custom)),
                server=server,
                cwd=tmp_path,
            ),
            cli(
                *forecast_args(out, "--json", "--force", "--cache", "off"),
                server=server,
                cwd=tmp_path,
            ),
        ]
        assert server.request_count == 2  # the first run and the uncached third
    assert [r.returncode for r in runs] == [0, 0, 0], [r.stderr for r in runs]
    assert [json.loads(r.stdout)["cache"] for r in runs] == ["miss", "hit", "off"]
    assert (custom / "responses.sqlite").is_file()
    assert not user_cache.exists()


def test_a_forecast_the_cache_answers_costs_nothing(tmp_path: Path, user_cache: Path) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text("models:\n  test-model: {input: 10.0, output: 10.0}\n", encoding="utf-8")
    out, extra = tmp_path / "traces", ("--json", "--force", "--prices", str(prices))
    with StubServer(scripted(reply(0.37))) as server:
        runs = [cli(*forecast_args(out, *extra), server=server, cwd=tmp_path) for _ in range(2)]
        shown = cli(*forecast_args(out, *extra[1:]), server=server, cwd=tmp_path)
        assert server.request_count == 1
    assert [r.returncode for r in runs] == [0, 0], [r.stderr for r in runs]
    first, again = (json.loads(r.stdout) for r in runs)
    assert (first["cache"], again["cache"]) == ("miss", "hit")
    assert first["cost_usd"] > 0 and again["cost_usd"] == 0.0
    assert "cache hit · cost $0.0000" in shown.stdout, shown.stdout


def _choice(*pairs: tuple[str, float]) -> dict[str, Any]:
    return {
        "probabilities": [{"endpoint": e, "p": p} for e, p in pairs],
        "rationale": "The guild ballot favours the front-runner.",
        "drivers": [],
        "uncertainties": [],
        "leakage_warning": False,
    }


def test_a_reply_naming_an_outcome_the_card_lacks_is_repaired_once(tmp_path: Path) -> None:
    """A multiple-choice reply that fits the schema but not the card goes back to the model
    with the problem, as a schema violation does, and the call records it."""
    card = ROOT / "scenarios" / "award-best-picture.yaml"
    wrong = _choice(("film_a", 0.5), ("film_b", 0.2), ("film_c", 0.2), ("film_e", 0.1))
    right = _choice(("film_a", 0.4), ("film_b", 0.2), ("film_c", 0.3), ("film_d", 0.1))
    args = ("forecast", str(card), "--model", ROUTE, "--out", str(tmp_path / "t"), "--json")
    with StubServer(scripted(wrong, right)) as server:
        proc = cli(*args, "--cache", "off", server=server, cwd=tmp_path)
        repair = server.requests[1].body["messages"][-1]["content"]
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["p_options"]["film_c"] == pytest.approx(0.3)
    assert "unknown outcome 'film_e'" in repair
    (call,) = (
        ln.record.data
        for ln in read_trace(tmp_path / "t" / json.loads(proc.stdout)["trace"]).of_type("llm_call")
    )
    assert call.attempts == 2 and call.errors[0].kind == "invalid_output"
    assert "unknown outcome 'film_e'" in call.errors[0].message


def test_cli_offline_multiple_choice_answers_with_the_base_rates_and_replays(
    tmp_path: Path,
) -> None:
    card_path = ROOT / "scenarios" / "award-best-picture.yaml"
    out = tmp_path / "traces"
    proc = cli(
        "forecast",
        str(card_path),
        "--model",
        "offline",
        "--out",
        str(out),
        "--json",
        server=None,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)
    card = load_card(card_path)
    rates = card.seeds.base_rates if card.seeds and card.seeds.base_rates else None
    expected = rates or {ep.id: 1 / len(card.scored_endpoints) for ep in card.scored_endpoints}
    assert row["p_yes"] is None
    assert row["p_options"] == pytest.approx(expected)
    trace = out / "award-best-picture__direct__s0.jsonl"
    replayed = subprocess.run(
        [*WORLDSIM, "replay", str(trace), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert replayed.returncode == 0, replayed.stderr
    assert json.loads(replayed.stdout)["extraction"]["matches"] is True
