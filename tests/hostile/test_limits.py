"""The documented limits: docs/limits.md agrees with worldsim/domain/bounds.py, dates and
nesting are bounded for any input, and the run-size estimate refuses what it documents."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import DEMO_CARD, ROOT, card_with
from worldsim.domain import bounds
from worldsim.domain.cards import ActorSeed, load_card, parse_utc
from worldsim.domain.config import RunConfig
from worldsim.domain.errors import CardError, ConfigError
from worldsim.domain.files import load_document
from worldsim.domain.policy import load_policy
from worldsim.sim.plan import check_run_size, estimated_trace_mb, max_timelines, role_plan

DOC = ROOT / "docs" / "limits.md"


def _documented() -> dict[str, str]:
    rows = re.findall(r"^\| `([A-Z_]+)` \| ([^|]+) \|", DOC.read_text(encoding="utf-8"), re.M)
    return {name: value.strip() for name, value in rows}


def _shown(value: object) -> str:
    if isinstance(value, datetime):
        return value.date().isoformat()
    if isinstance(value, float) and value.is_integer():
        return f"{int(value):,}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def test_docs_list_every_limit_with_its_value() -> None:
    documented = _documented()
    named = {name for name in bounds.__all__ if not name.startswith("BYTES_")}
    assert set(documented) == named
    for name in named:
        assert documented[name] == _shown(getattr(bounds, name)), name


@given(
    st.datetimes(timezones=st.just(UTC)),
    st.integers(min_value=-23 * 60, max_value=23 * 60),
)
def test_any_iso_datetime_parses_inside_the_range_or_is_refused(
    moment: datetime, offset_min: int
) -> None:
    local = moment.replace(tzinfo=timezone(timedelta(minutes=offset_min)))
    try:
        parsed = parse_utc(local.isoformat())
    except ValueError as exc:
        assert "outside the supported range" in str(exc)
        try:
            utc = local.astimezone(UTC)
        except OverflowError:
            return
        assert not bounds.EARLIEST_DATE <= utc <= bounds.LATEST_DATE
    else:
        assert bounds.EARLIEST_DATE <= parsed <= bounds.LATEST_DATE
        assert parsed == local


@settings(max_examples=30, deadline=None)
@given(st.integers(min_value=1, max_value=3_000), st.booleans())
def test_nesting_beyond_the_limit_is_refused_at_any_depth(depth: int, as_json: bool) -> None:
    suffix = ".json" if as_json else ".yaml"
    text = "[" * depth + "]" * depth
    with _file(suffix, text) as path:
        if depth <= bounds.MAX_NESTING:
            assert json.dumps(load_document(path)) == text
        else:
            with pytest.raises(CardError, match="nested deeper than 64 levels"):
                load_document(path)


class _file:
    """A temporary input file (hypothesis runs many examples in one test)."""

    def __init__(self, suffix: str, text: str) -> None:
        import tempfile

        self._dir = tempfile.TemporaryDirectory()
        self.path = Path(self._dir.name) / f"input{suffix}"
        self.path.write_text(text, encoding="utf-8")

    def __enter__(self) -> Path:
        return self.path

    def __exit__(self, *exc: object) -> None:
        self._dir.cleanup()


def test_a_bom_is_skipped_in_yaml_and_json(tmp_path: Path) -> None:
    for suffix in (".yaml", ".json"):
        path = tmp_path / f"doc{suffix}"
        path.write_bytes(b"\xef\xbb\xbf" + b'{"id": "x"}')
        assert load_document(path) == {"id": "x"}


def _config(actors: int, policy: str = "branching", ticks: int = 8) -> RunConfig:
    card = card_with(
        load_card(DEMO_CARD),
        actors=tuple(ActorSeed(id=f"a{i}", name="A") for i in range(actors)),
        relations=(),
    )
    return RunConfig(card=card, policy=load_policy(policy), ticks=ticks, card_path=DEMO_CARD)


def test_the_estimate_is_the_documented_formula() -> None:
    config = _config(498)  # 498 actors + the demo's 2 cohorts
    per_tick = 500 * bounds.BYTES_PER_AGENT_TICK + bounds.BYTES_PER_TIMELINE_TICK
    assert max_timelines(config) == 4
    estimate = estimated_trace_mb(config, role_plan(config))
    assert estimate == pytest.approx(4 * 8 * per_tick / 1e6)


def test_a_policy_without_forks_has_one_timeline() -> None:
    assert max_timelines(_config(1, "no_branch")) == 1


def test_a_run_over_the_size_limit_says_what_to_raise() -> None:
    config = _config(40_000)  # 4 timelines × 8 ticks × 40,002 agents: about 2.6 GB
    plan = role_plan(config)
    with pytest.raises(ConfigError, match="raise --max-trace-mb") as caught:
        check_run_size(config, plan)
    assert caught.value.file == str(DEMO_CARD)
    check_run_size(config, plan, max_trace_mb=3_000)  # raised explicitly: allowed
    check_run_size(config, plan, max_trace_mb=None)  # no limit
    check_run_size(_config(30_000), plan)  # 30,000 actors fit the default


def test_the_default_limit_admits_a_run_of_a_hundred_thousand_actors() -> None:
    """A run of 10⁵ actors, 8 ticks, no forks (about 0.7 GB written) starts by default."""
    config = _config(100_000, "no_branch")
    assert estimated_trace_mb(config, role_plan(config)) < bounds.DEFAULT_MAX_TRACE_MB


def test_the_demo_card_fits_the_default_limit_with_room() -> None:
    config = _config(0)
    assert estimated_trace_mb(config, role_plan(config)) < bounds.DEFAULT_MAX_TRACE_MB / 100


def _manifest(folder: Path, **changes: object) -> Path:
    data = {
        "name": "s",
        "cards": [str(DEMO_CARD)],
        "methods": [{"label": "m", "run": {"policy": "no_branch", "ticks": 2}}],
        **changes,
    }
    path = folder / "study.json"  # JSON: a long list of seeds reads fast
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_a_study_over_its_seed_limit_is_refused_naming_the_limit(tmp_path: Path) -> None:
    from worldsim.study.manifest import load_study

    seeds = list(range(bounds.MAX_STUDY_SEEDS + 1))
    with pytest.raises(ConfigError) as caught:
        load_study(_manifest(tmp_path, seeds=seeds))
    assert caught.value.field == "seeds" and "MAX_STUDY_SEEDS" in str(caught.value)
    assert f"{bounds.MAX_STUDY_SEEDS:,}" in str(caught.value)
    load_study(_manifest(tmp_path, seeds=seeds[:-1]))  # at the limit: accepted


def test_a_study_over_its_job_limit_is_refused_and_ten_to_the_fifth_jobs_are_not(
    tmp_path: Path,
) -> None:
    from worldsim.study.manifest import load_study

    assert bounds.MAX_STUDY_JOBS >= 10**5
    methods = [
        {"label": f"m{i}", "run": {"policy": "no_branch", "ticks": 2}}
        for i in range(bounds.MAX_STUDY_JOBS // bounds.MAX_STUDY_SEEDS)
    ]
    seeds = list(range(bounds.MAX_STUDY_SEEDS))
    study = load_study(_manifest(tmp_path, methods=methods, seeds=seeds))
    assert len(study.methods) * len(study.manifest.seeds) == bounds.MAX_STUDY_JOBS
    over = [*methods, {"label": "extra", "run": {"policy": "no_branch", "ticks": 2}}]
    with pytest.raises(ConfigError) as caught:
        load_study(_manifest(tmp_path, methods=over, seeds=seeds))
    message = str(caught.value)
    assert "study.json" in message and "MAX_STUDY_JOBS" in message
    assert f"{bounds.MAX_STUDY_JOBS + bounds.MAX_STUDY_SEEDS:,} jobs" in message
