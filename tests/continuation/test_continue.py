"""A continued run (``worldsim run --continue``): particles, news, re-weighting and lineage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from tests.support import ROOT, forge, invoke
from tests.test_cli import cli
from worldsim.domain.cards import load_card, parse_utc
from worldsim.domain.config import RunConfig
from worldsim.domain.contracts import Model, ModelRequest
from worldsim.domain.errors import NewsLeavesNoPath, TraceError
from worldsim.domain.policy import load_policy
from worldsim.offline import OfflineModel
from worldsim.sim.continuation import continue_run
from worldsim.sim.lineage import check_lineage
from worldsim.sim.particles import parent_particles
from worldsim.sim.session import run_card
from worldsim.sim.settlement import RunResult
from worldsim.testing import ScriptedModel
from worldsim.trace.reader import read_trace
from worldsim.trace.verify import verify_trace
from worldsim.world.build import tick_of

NEWS_CARD = ROOT / "scenarios" / "harbour-toll.yaml"
CUT = "2027-03-01"


def _parent(
    out: Path, card: Path = NEWS_CARD, *, overwrite: bool = False, **policy: Any
) -> RunResult:
    config = RunConfig(
        card=load_card(card),
        card_path=card,
        policy=load_policy("branching").model_copy(update=policy),
        seed=0,
    )
    return anyio.run(lambda: run_card(config, out, fsync=False, overwrite=overwrite))


def _continue(parent: Path, when: str = CUT, **kwargs: Any) -> RunResult:
    return anyio.run(lambda: continue_run(parent, parse_utc(when), fsync=False, **kwargs))


class _Assessor:
    """Every role offline but the assessor, which a script answers: one likelihood per
    particle (by timeline id), the same for every document."""

    def __init__(self, likelihood: dict[str, float], default: float = 1.0) -> None:
        self.offline = OfflineModel()

        def reply(request: ModelRequest) -> dict[str, Any]:
            value = likelihood.get(str(request.site.timeline), default)
            news = request.view.context.news
            return {
                "likelihoods": [
                    {"doc_id": d.id, "likelihood": value, "reason": "scripted"} for d in news
                ]
            }

        self.assessor = ScriptedModel(reply, route="scripted/assessor")

    def for_role(self, role: str) -> Model:
        return self.assessor if role == "assessor" else self.offline


def _records(path: Path, kind: str) -> list[Any]:
    return [line for line in read_trace(path).lines if line.type == kind]


def test_continued_run_verifies_and_names_its_parent(tmp_path: Path) -> None:
    parent = _parent(tmp_path)
    child = _continue(parent.trace)
    assert child.trace != parent.trace and child.trace.parent == parent.trace.parent
    checked = verify_trace(child.trace)
    assert checked.complete and abs(checked.mass_sum - 1.0) < 1e-9  # type: ignore[operator]
    ref = read_trace(child.trace).started.parent
    whole = verify_trace(parent.trace, canonical=True)
    assert (ref.run, ref.head, ref.canonical) == (parent.run_id, parent.head, whole.canonical)
    assert check_lineage(read_trace(child.trace), parent.trace).tick == ref.tick


def test_continuation_builds_no_world_and_runs_no_tick_before_its_date(tmp_path: Path) -> None:
    parent = _parent(tmp_path)
    child = _continue(parent.trace)
    card = load_card(NEWS_CARD)
    cut = tick_of(card, 8, parse_utc(CUT))
    assert not _records(child.trace, "world_initialized")
    ticks = {line.tick for line in _records(child.trace, "tick_started")}
    assert min(ticks) == cut
    dates = {line.tick: line.data.date for line in _records(parent.trace, "tick_started")}
    assert all(line.data.date == dates[line.tick] for line in _records(child.trace, "tick_started"))
    config = read_trace(child.trace).started
    assert config.forecast_date == "2027-03-01T00:00:00Z"  # the gateway and prompts' today


def test_news_is_the_documents_between_the_parents_date_and_the_new_one(tmp_path: Path) -> None:
    parent = _parent(tmp_path)
    child = _continue(parent.trace)
    news = [line.data for line in _records(child.trace, "news")]
    card = load_card(NEWS_CARD)
    assert card.evidence is not None and not isinstance(card.evidence, dict)
    expected = sorted(
        (d for d in card.evidence if card.as_of <= d.published_at < parse_utc(CUT)),  # type: ignore[union-attr]
        key=lambda d: (d.published_at, d.id),
    )
    assert [n.id for n in news] == [d.id for d in expected] and news


def test_news_moves_mass_toward_the_particles_that_expected_it(tmp_path: Path) -> None:
    parent = _parent(tmp_path)
    child = _continue(parent.trace)
    (weights,) = _records(child.trace, "reweighting")
    rows = weights.data.rows
    assert len(rows) > 1
    evidence = weights.data.evidence
    for row in rows:  # w > m exactly when L is above the prior-weighted mean likelihood
        assert (row.posterior > row.prior) == (row.likelihood > evidence)
    assert abs(sum(r.posterior for r in rows) - 1.0) < 1e-12
    assert weights.data.effective_paths == pytest.approx(1 / sum(r.posterior**2 for r in rows))


def test_without_news_a_continuation_reproduces_its_parent(tmp_path: Path) -> None:
    card = ROOT / "scenarios" / "merger-review.yaml"
    parent = _parent(tmp_path, card)
    child = _continue(parent.trace, "2027-02-10")
    assert not _records(child.trace, "news")
    # the same particles, draw keys and ids, and masses renormalised by a sum within an ulp of 1
    assert child.p_yes == pytest.approx(parent.p_yes, abs=1e-12)
    assert child.timelines == parent.timelines


def test_a_continuation_is_deterministic(tmp_path: Path) -> None:
    parent = _parent(tmp_path)
    one = _continue(parent.trace)
    two = _continue(parent.trace, overwrite=True)
    hashes = {verify_trace(r.trace, canonical=True).canonical for r in (one, two)}
    assert len(hashes) == 1


def test_particles_are_the_timelines_before_the_cut_and_ids_are_not_reused(tmp_path: Path) -> None:
    parent = _parent(tmp_path)
    trace = read_trace(parent.trace)
    forks = {line.data.child: line.record.tick for line in trace.lines if line.type == "fork"}
    for cut in range(8):
        ids = [p.id for p in parent_particles(trace, cut)]
        assert ids[0] == "t0"
        assert set(ids) == {"t0"} | {c for c, k in forks.items() if k < cut}
    child = _continue(parent.trace, "2027-01-20")  # tick 0: the root alone
    made = {line.data.child for line in _records(child.trace, "fork")}
    assert made and not made & set(forks)  # the root forks again, under ids never used
    started = {line.tl for line in _records(child.trace, "timeline_started")}
    assert started == made  # every new timeline starts from a fork made in this run


def test_a_particle_below_prune_below_keeps_mass_zero_as_a_leaf(tmp_path: Path) -> None:
    parent = _parent(tmp_path, prune_below=0.05)
    child = _continue(parent.trace, model_source=_Assessor({"t0": 1e-4}))
    (weights,) = _records(child.trace, "reweighting")
    pruned = {r.timeline for r in weights.data.rows if r.pruned}
    assert pruned == {"t0"}
    ended = {line.tl: line.data for line in _records(child.trace, "timeline_ended")}
    assert ended["t0"].mass == 0.0 and "pruned" in ended["t0"].reason
    assert not [line for line in _records(child.trace, "tick_started") if line.tl == "t0"]
    assert verify_trace(child.trace).complete
    assert len(_records(child.trace, "llm_call")) == len(weights.data.rows)


def test_news_that_prunes_every_particle_stops_the_run_naming_the_date(tmp_path: Path) -> None:
    parent = _parent(tmp_path, prune_below=0.99)
    with pytest.raises(NewsLeavesNoPath, match="2027-03-01"):
        _continue(parent.trace)
    (path,) = tmp_path.glob("*__to*.jsonl")
    assert read_trace(path).lines[-1].type == "run_failed"


def test_an_altered_parent_is_refused(tmp_path: Path) -> None:
    parent = _parent(tmp_path)
    child = read_trace(_continue(parent.trace).trace)
    edited = tmp_path / "edited.jsonl"

    def lower_mass(records: list[dict[str, Any]]) -> None:
        for r in records:
            if r["type"] == "run_completed":
                r["data"]["forks_rejected"] += 1

    forge(parent.trace, edited, lower_mass)
    with pytest.raises(TraceError):
        check_lineage(child, edited)
    _parent(tmp_path.parent / "again")  # the same run again: another head
    again = next((tmp_path.parent / "again").glob("*.jsonl"))
    with pytest.raises(TraceError, match="head"):
        check_lineage(child, again)


def test_verify_refuses_a_reweighting_that_does_not_add_up(tmp_path: Path) -> None:
    parent = _parent(tmp_path)
    child = _continue(parent.trace)
    forged = tmp_path / "forged.jsonl"

    def shift(records: list[dict[str, Any]]) -> None:
        for r in records:
            if r["type"] == "reweighting":
                rows = r["data"]["rows"]
                first, second = rows[0]["posterior"], rows[1]["posterior"]
                rows[0]["posterior"], rows[1]["posterior"] = second, first

    forge(child.trace, forged, shift)
    with pytest.raises(TraceError, match="re-weighting"):
        verify_trace(forged)


def test_cli_continues_a_run_and_verifies_its_lineage(tmp_path: Path) -> None:
    parent = _parent(tmp_path)
    out = tmp_path / "later"
    made = invoke("run", "--continue", parent.trace, "--as-of", "mid", "--out", out, "--json")
    assert made.code == 0, made.err
    child = Path(json.loads(made.out)["trace"])
    assert child.parent == out and "__to" in child.name
    assert invoke("verify", child, "--parent", parent.trace).code == 0
    replayed = invoke("replay", child)
    assert "news lark-" in replayed.out and "effective paths" in replayed.out
    _parent(tmp_path, overwrite=True)  # the parent run again, in its place: another head
    refused = invoke("verify", child, "--parent", parent.trace)
    assert refused.code == 1 and "head" in refused.err


def test_a_run_continued_and_resumed_from_another_folder_finds_its_cards_database(
    tmp_path: Path,
) -> None:
    """The card names its evidence database relative to its folder and the run was started
    there by a relative path: the trace records where the card is, so a continuation or a
    resume started in another folder opens the same database."""
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    ingested = cli(
        "gateway",
        "ingest",
        str(ROOT / "scenarios" / "corpus" / "articles.jsonl"),
        "--db",
        "evidence.db",
        cwd=here,
    )
    assert ingested.returncode == 0, ingested.stderr
    card = yaml.safe_load(NEWS_CARD.read_text(encoding="utf-8"))
    card["evidence"] = {"database": "evidence.db"}
    (here / "card.yaml").write_text(yaml.safe_dump(card), encoding="utf-8")
    started = cli("run", "card.yaml", "--out", "traces", "--json", cwd=here)
    assert started.returncode == 0, started.stderr
    parent = here / json.loads(started.stdout)["trace"]
    continued = cli("run", "--continue", str(parent), "--as-of", "mid", "--out", "later", cwd=there)
    assert continued.returncode == 0, continued.stderr
    child = next((there / "later").glob("*__to*.jsonl"))
    assert read_trace(child).first("news") is not None
    cut = child.read_bytes().splitlines(keepends=True)
    child.write_bytes(b"".join(cut[: len(cut) // 2]))
    resumed = cli("run", "--resume", str(child), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert verify_trace(child).complete


def test_as_of_outside_the_window_is_an_input_error(tmp_path: Path) -> None:
    parent = _parent(tmp_path)
    before = invoke("run", "--continue", parent.trace, "--as-of", "2027-01-10")
    assert before.code == 2 and "as_of" in before.err
    alone = invoke("run", "--as-of", "mid")
    assert alone.code == 2
    assert not list(tmp_path.glob("*__to*"))


@pytest.mark.parametrize("card", sorted(p.stem for p in (ROOT / "scenarios").glob("*.yaml")))
def test_every_demo_card_continues_and_its_lineage_verifies(card: str, tmp_path: Path) -> None:
    parent = _parent(tmp_path, ROOT / "scenarios" / f"{card}.yaml")
    made = invoke("run", "--continue", parent.trace, "--as-of", "late", "--json")
    assert made.code == 0, made.err
    child = Path(json.loads(made.out)["trace"])
    assert invoke("verify", child, "--parent", parent.trace).code == 0


def test_the_parents_futures_reweighted_are_recorded_and_checked(tmp_path: Path) -> None:
    from worldsim.scoring.attribution import attribute

    parent = _parent(tmp_path)
    child = _continue(parent.trace)
    (weights,) = _records(child.trace, "reweighting")
    recorded = weights.data.p_yes_reweighted
    assert recorded == pytest.approx(attribute(child.trace).p_reweighted, abs=1e-12)
    forged = tmp_path / "forged.jsonl"

    def nudge(records: list[dict[str, Any]]) -> None:
        for r in records:
            if r["type"] == "reweighting":
                r["data"]["p_yes_reweighted"] += 0.01

    forge(child.trace, forged, nudge)
    with pytest.raises(TraceError, match="re-weighted"):
        verify_trace(forged)


@pytest.mark.parametrize(
    ("mode", "typed", "named"),
    [
        ("--continue", ["--seed", "5", "--policy", "no_branch"], "--policy, --seed"),
        ("--continue", ["--model", "openai/gpt-4o-mini"], "--model"),
        ("--resume", ["--ticks", "3"], "--ticks"),
        ("--resume", ["--out", "elsewhere"], "--out"),
        ("--resume", ["--role", "market-maker", "--replicates", "2"], "--role, --replicates"),
    ],
)
def test_an_option_the_trace_decides_is_refused_not_ignored(
    tmp_path: Path, mode: str, typed: list[str], named: str
) -> None:
    parent = _parent(tmp_path)
    before = sorted(tmp_path.iterdir())
    extra = ["--as-of", "mid"] if mode == "--continue" else []
    refused = invoke("run", mode, parent.trace, *extra, *typed)
    assert refused.code == 2, refused.err
    assert f"{mode} keeps what the trace recorded: {named} cannot" in refused.err
    assert "Traceback" not in refused.err
    assert sorted(tmp_path.iterdir()) == before


def test_a_continued_trace_is_named_as_its_parent_then_the_date(tmp_path: Path) -> None:
    parent = _parent(tmp_path)
    child = _continue(parent.trace)
    assert child.trace.name == parent.trace.name.removesuffix(".jsonl") + "__to20270301.jsonl"


def test_a_chain_and_a_run_continued_straight_to_the_same_date_keep_apart(
    tmp_path: Path,
) -> None:
    parent = _parent(tmp_path)
    chained = _continue(_continue(parent.trace).trace, "2027-03-20")
    straight = _continue(parent.trace, "2027-03-20")
    stem = parent.trace.name.removesuffix(".jsonl")
    assert chained.trace.name == f"{stem}__to20270301__to20270320.jsonl"
    assert straight.trace.name == f"{stem}__to20270320.jsonl"
    assert verify_trace(chained.trace).complete and verify_trace(straight.trace).complete


def test_a_document_a_fraction_of_a_second_after_the_date_continued_to_stays_out(
    tmp_path: Path,
) -> None:
    """The date given is the cut-off to the microsecond: not rounded up past a document."""
    import yaml

    data = yaml.safe_load(NEWS_CARD.read_text(encoding="utf-8"))
    data["evidence"].append(
        {
            "id": "future-doc",
            "published_at": "2027-03-02T08:00:00.500Z",
            "title": "Larkport toll approved",
            "text": "The Larkport Harbour Authority approves the ferry toll.",
            "stance": 0.9,
        }
    )
    card = tmp_path / "subsecond.yaml"
    card.write_text(yaml.safe_dump(data), encoding="utf-8")
    parent = _parent(tmp_path, card)
    ran = invoke("run", "--continue", parent.trace, "--as-of", "2027-03-02T08:00:00.100Z")
    assert ran.code == 0, ran.err
    (child,) = tmp_path.glob("*__to*.jsonl")
    assert child.name.endswith("__to20270302T080000.100000.jsonl")
    lines = read_trace(child).lines
    assert lines[0].data.parent.as_of == "2027-03-02T08:00:00.100000Z"
    after_start = [line.raw for line in lines if line.type != "run_started"]
    assert not any(b"future-doc" in raw for raw in after_start)
    assert any(b"2027-03-02T08:00:00Z" in raw for raw in after_start)  # the doc just before


def test_the_assessor_prompt_sees_exactly_the_names_its_file_is_checked_against(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from worldsim.domain.outputs import TEMPLATE_NAMES
    from worldsim.roles.prompts import PromptRole

    seen: dict[str, set[str]] = {}
    render = PromptRole.render

    def recording(self: PromptRole, **context: Any) -> tuple[str, str]:
        seen.setdefault(self.meta.output, set()).update(context)
        return render(self, **context)

    parent = _parent(tmp_path)
    monkeypatch.setattr(PromptRole, "render", recording)
    _continue(parent.trace, model_source=_Assessor({}))
    assert seen == {"AssessmentOutput": set(TEMPLATE_NAMES["AssessmentOutput"])}


def _set_news(index: int, **fields: Any) -> Any:
    def edit(records: list[dict[str, Any]]) -> None:
        news = [r for r in records if r["type"] == "news"]
        news[index]["data"].update(fields)

    return edit


def _set_since(since: str) -> Any:
    def edit(records: list[dict[str, Any]]) -> None:
        records[0]["data"]["parent"]["since"] = since

    return edit


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (_set_news(-1, published_at="2027-03-05T08:00:00Z"), r"not in \[since"),
        (_set_news(0, published_at="2027-01-10T08:00:00Z"), r"not in \[since"),
        (_set_news(0, text_sha256="0" * 64), "text_sha256 differ"),
        (_set_news(1, title="Commuters welcome the toll"), "title differ"),
        (_set_news(1, stance=0.9), "stance differ"),
        (_set_since("2027-01-20T00:00:00Z"), "news lark-02"),
    ],
)
def test_verify_refuses_forged_news_naming_its_line(edit: Any, says: str, tmp_path: Path) -> None:
    parent = _parent(tmp_path)
    child = _continue(parent.trace)
    forged = tmp_path / "forged.jsonl"
    forge(child.trace, forged, edit)
    with pytest.raises(TraceError, match=says) as refused:
        verify_trace(forged)
    assert refused.value.line is not None
    checked = invoke("verify", forged, "--parent", parent.trace)
    assert checked.code == 1 and f"{forged}:{refused.value.line}: " in checked.err
    assert invoke("replay", forged).code == 1


def test_verify_parent_refuses_a_since_that_is_not_the_parents_date(tmp_path: Path) -> None:
    parent = _parent(tmp_path)
    child = _continue(parent.trace)
    forged = tmp_path / "forged.jsonl"
    forge(child.trace, forged, _set_since("2027-01-16T00:00:00Z"))  # no news moves out
    assert verify_trace(forged).complete
    checked = invoke("verify", forged, "--parent", parent.trace)
    assert checked.code == 1 and "parent.since" in checked.err and "2027-01-15" in checked.err


def test_a_continued_run_records_the_interventions_dated_in_its_ticks(tmp_path: Path) -> None:
    config = tmp_path / "veto.yaml"
    iv = {"id": "veto", "kind": "event", "at": "2027-03-20T00:00:00Z", "title": "Veto"}
    early = {"id": "early", "kind": "event", "at": "2027-01-20T00:00:00Z", "title": "Early"}
    config.write_text(yaml.safe_dump({"interventions": [{**iv, "pressure": -0.9}, early]}))
    made = invoke("run", NEWS_CARD, "--seed", "0", "--config", config, "--out", tmp_path)
    assert made.code == 0, made.err
    (parent,) = tmp_path.glob("*.jsonl")
    assert invoke("run", "--continue", parent, "--as-of", "mid").code == 0
    (child,) = tmp_path.glob("*__to*.jsonl")
    recorded = [line.data.id for line in _records(child, "intervention")]
    assert recorded == ["veto"]  # the early one lies before the cut tick
    assert verify_trace(child).complete
    replayed = invoke("replay", child)
    assert "intervention veto (event) at 2027-03-20T00:00:00Z" in replayed.out
    assert "— applied" in replayed.out


def test_replay_shows_a_particle_that_ended_before_the_cut(tmp_path: Path) -> None:
    parent = _parent(tmp_path)
    child = _continue(parent.trace).trace
    ticked = {line.tl for line in _records(child, "tick_committed")}
    ended = [line.tl for line in _records(child, "particle") if line.tl not in ticked]
    assert ended  # a timeline that settled or was pruned before the cut
    shown = invoke("replay", child, "--timeline", ended[0])
    assert shown.code == 0, shown.err
    assert f"{ended[0]}: likelihood" in shown.out


def test_news_that_prunes_every_particle_names_the_trace_and_prune_below(tmp_path: Path) -> None:
    parent = _parent(tmp_path, prune_below=0.99)
    with pytest.raises(NewsLeavesNoPath) as stopped:
        _continue(parent.trace)
    (path,) = tmp_path.glob("*__to*.jsonl")
    assert stopped.value.file == str(path) and "prune_below 0.99" in stopped.value.message
    resumed = invoke("run", "--resume", path)
    assert resumed.code == 2 and str(path) in resumed.err and "prune_below 0.99" in resumed.err
    assert "before its news was weighed" not in resumed.err
