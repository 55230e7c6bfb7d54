"""RunConfig: one value from flags, a YAML file or a dict, recorded in the trace header."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import DEMO_CARD
from tests.test_cli import cli
from worldsim.domain.cards import load_card
from worldsim.domain.config import ModelConfig, RetrySettings, RunConfig, load_run_config
from worldsim.domain.errors import ConfigError
from worldsim.domain.policy import load_policy
from worldsim.sim.resume import resume_config
from worldsim.sim.session import run_card
from worldsim.trace.reader import read_trace
from worldsim.world.extraction import EXTRACTION_RULES

CARD = load_card(DEMO_CARD)

names = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)
caching = st.sampled_from(["use", "refresh", "off"]).flatmap(
    lambda cache: st.tuples(st.just(cache), st.booleans() if cache == "use" else st.just(False))
)  # a strict replay reads the cache
models = caching.flatmap(
    lambda caching: st.builds(
        ModelConfig,
        model=st.sampled_from(["offline", "openai/gpt-4o-mini", "stub/test-model"]),
        role_models=st.lists(names.map(lambda n: f"{n}=stub/x"), max_size=3).map(tuple),
        max_connections=st.integers(1, 64),
        cache=st.just(caching[0]),
        cache_dir=st.none() | st.just(Path("/srv/cache/worldsim")),
        replay_strict=st.just(caching[1]),
        max_cost_usd=st.none() | st.floats(0, 100, allow_nan=False),
        leakage=st.sampled_from(["record", "fail"]),
        retry=st.none() | st.builds(RetrySettings, max_attempts=st.integers(1, 9)),
    )
)
configs = st.builds(
    RunConfig,
    card=st.just(CARD),
    policy=st.sampled_from(["no_branch", "branching", "adaptive"]).map(load_policy),
    kind=st.sampled_from(["multiverse", "direct"]),
    seed=st.integers(0, 2**31),
    ticks=st.none() | st.integers(1, 50),
    extraction_rule=st.sampled_from(sorted(EXTRACTION_RULES)),
    method=st.none() | names,
    roles=st.dictionaries(st.sampled_from(["initializer", "governance", "actor"]), names),
    extra_roles=st.lists(names, max_size=3).map(tuple),
    card_path=st.none() | st.just(DEMO_CARD),
    models=models,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config=configs)
def test_a_config_survives_dict_json_and_yaml(
    config: RunConfig, tmp_path_factory: pytest.TempPathFactory
) -> None:
    data = config.to_dict()
    assert RunConfig.from_dict(data) == config
    assert config.to_dict(config.card.public_dict()) == data  # the card dumped already
    assert RunConfig.from_dict(json.loads(json.dumps(data))) == config
    path = tmp_path_factory.mktemp("cfg") / "run.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    assert RunConfig.from_dict(load_run_config(path)) == config


def test_a_dict_names_its_card_by_path_and_its_policy_by_preset() -> None:
    config = RunConfig.from_dict({"card": str(DEMO_CARD), "policy": "no_branch", "seed": 3})
    assert config.card == CARD and config.card_path == DEMO_CARD
    assert config.policy == load_policy("no_branch") and config.method_label == "no_branch"
    assert RunConfig.from_dict({"card": str(DEMO_CARD)}).policy.name == "branching"


def test_an_unknown_field_is_a_config_error_naming_it() -> None:
    with pytest.raises(ConfigError) as info:
        RunConfig.from_dict({"card": str(DEMO_CARD), "models": {"modle": "offline"}})
    assert info.value.field == "models.modle"


def test_the_trace_header_carries_the_config_and_resume_reads_it(tmp_path: Path) -> None:
    config = RunConfig(
        card=CARD,
        policy=load_policy("no_branch"),
        seed=4,
        ticks=2,
        card_path=DEMO_CARD,
        models=ModelConfig(max_connections=3, retry=RetrySettings(max_attempts=2)),
    )
    result = anyio.run(lambda: run_card(config, tmp_path, fsync=False))
    trace = read_trace(result.trace)
    assert trace.started.config == config.to_dict()
    # settings only the config holds come back on resume; cache flags may be changed
    assert resume_config(trace) == config
    changed = resume_config(trace, ModelConfig(model="stub/other", cache="off"))
    assert changed.models.model == "offline" and changed.models.cache == "off"


def _write_config(folder: Path, text: str) -> Path:
    path = folder / "run.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_run_config_file_runs_and_typed_options_override_it(tmp_path: Path) -> None:
    folder = tmp_path / "study"
    folder.mkdir()
    (folder / "card.yaml").write_bytes(DEMO_CARD.read_bytes())
    path = _write_config(
        folder,
        "card: card.yaml\npolicy: no_branch\nseed: 2\nticks: 3\nmodels:\n  max_connections: 4\n",
    )
    out = tmp_path / "out"
    proc = cli("run", "--config", str(path), "--seed", "5", "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)
    assert row["seed"] == 5 and row["method"] == "no_branch"
    started = read_trace(row["trace"]).started
    assert started.ticks == 3 and started.seed == 5
    assert started.config is not None
    assert started.config["models"]["max_connections"] == 4
    assert started.card_path == str(folder / "card.yaml")


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("card: card.yaml\nseeds: 3\n", "field 'seeds'"),
        ("card: card.yaml\nmodels:\n  cache: sometimes\n", "field 'models.cache'"),
        ("card: card.yaml\nticks: [1\n", "run.yaml"),
        ("card: card.yaml\nextra_roles: [nope]\n", "field 'extra_roles': unknown role 'nope'"),
        (
            "card: card.yaml\nmodels:\n  role_models: [bogus]\n",
            "field 'models.role_models': invalid role route 'bogus'",
        ),
        ("card: card.yaml\nmodels:\n  model: nonsense\n", "field 'models.model': invalid route"),
        ("card: card.yaml\nextraction_rule: nope/9\n", "field 'extraction_rule': unknown"),
    ],
)
def test_a_bad_config_file_is_one_line_exit_2_and_nothing_written(
    tmp_path: Path, text: str, named: str
) -> None:
    (tmp_path / "card.yaml").write_bytes(DEMO_CARD.read_bytes())
    path = _write_config(tmp_path, text)
    out = tmp_path / "out"
    proc = cli("run", "--config", str(path), "--out", str(out))
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert str(path) in proc.stderr and named in proc.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--cache", "maybe", "Input should be 'use', 'refresh' or 'off'"),
        ("--policy", "branchy", "unknown policy 'branchy'"),
        ("--extraction", "path-ledger/2", "unknown extraction rule 'path-ledger/2'"),
        ("--model", "nonsense", "invalid route 'nonsense'"),
    ],
)
def test_a_bad_typed_option_is_named_as_it_was_typed(
    tmp_path: Path, option: str, value: str, says: str
) -> None:
    """Not by the settings field behind it (``models.cache``): the user typed the flag."""
    out = tmp_path / "out"
    proc = cli("run", str(DEMO_CARD), option, value, "--out", str(out))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(f"error: field '{option}': {says}")
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_a_role_typed_beside_a_config_file_is_named_where_it_was_given(tmp_path: Path) -> None:
    (tmp_path / "card.yaml").write_bytes(DEMO_CARD.read_bytes())
    path = _write_config(tmp_path, "card: card.yaml\nextra_roles: [nope]\n")
    out = tmp_path / "out"
    typed = cli("run", "--config", str(path), "--role", "nope2", "--out", str(out))
    assert typed.returncode == 2 and typed.stderr.count("\n") == 1
    assert "field 'extra_roles': unknown role 'nope'" in typed.stderr and str(path) in typed.stderr
    path.write_text("card: card.yaml\n", encoding="utf-8")
    typed = cli("run", "--config", str(path), "--role", "nope2", "--out", str(out))
    assert typed.returncode == 2 and str(path) not in typed.stderr
    assert "field '--role': unknown role 'nope2'" in typed.stderr
    assert not out.exists()


@pytest.mark.parametrize("cache", ["off", "refresh"])
def test_a_strict_replay_without_the_cache_is_refused_by_the_library(cache: str) -> None:
    with pytest.raises(ConfigError) as info:
        RunConfig.from_dict(
            {"card": str(DEMO_CARD), "models": {"cache": cache, "replay_strict": True}}
        )
    assert info.value.field == "models.replay_strict" and f"not '{cache}'" in info.value.message
    assert ModelConfig(cache="use", replay_strict=True).replay_strict


def test_a_typed_cache_that_breaks_the_config_files_strict_replay_is_named_as_typed(
    tmp_path: Path,
) -> None:
    """The file's ``replay_strict`` was fine until ``--cache off`` was typed: the flag is
    named, and the file's field beside it."""
    (tmp_path / "card.yaml").write_bytes(DEMO_CARD.read_bytes())
    path = _write_config(tmp_path, "card: card.yaml\nmodels:\n  replay_strict: true\n")
    out = tmp_path / "out"
    proc = cli("run", "--config", str(path), "--cache", "off", "--out", str(out))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("error: field '--cache': a strict replay reads")
    assert f"({path} sets models.replay_strict)" in proc.stderr
    assert not out.exists()


def test_an_unknown_extraction_rule_is_refused_by_the_settings_themselves() -> None:
    """Where the settings are made, not later when a run is prepared from them."""
    with pytest.raises(ConfigError) as info:
        RunConfig.from_dict({"card": str(DEMO_CARD), "extraction_rule": "oracle/1"})
    assert info.value.field == "extraction_rule"
    assert "unknown extraction rule 'oracle/1'" in info.value.message
    for rule in EXTRACTION_RULES:
        assert RunConfig.from_dict({"card": str(DEMO_CARD), "extraction_rule": rule})


@pytest.mark.parametrize("command", [["run"], ["forecast", "--model", "stub/test-model"]])
def test_a_strict_replay_with_the_cache_off_is_one_line_exit_2(
    tmp_path: Path, command: list[str]
) -> None:
    """Refused before any route is reached: with the cache off, nothing could be replayed."""
    out = tmp_path / "out"
    args = [*command, str(DEMO_CARD), "--cache", "off", "--replay-strict", "--out", str(out)]
    proc = cli(*args)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and "field '--replay-strict'" in proc.stderr
    assert "needs cache 'use'" in proc.stderr and not out.exists()


def test_a_policy_files_unknown_role_names_the_file(tmp_path: Path) -> None:
    """A policy loaded from a file whose ``roles`` names no role is refused naming that file
    and ``roles``; the file's path is not recorded (the trace holds the policy itself)."""
    from tests.support import invoke
    from worldsim.domain.errors import RoleError
    from worldsim.sim.plan import role_plan

    policy = tmp_path / "mine.yaml"
    policy.write_text(
        yaml.safe_dump({**load_policy("branching").model_dump(mode="json"), "roles": ["nope"]}),
        encoding="utf-8",
    )
    config = RunConfig.from_dict({"card": str(DEMO_CARD), "policy": str(policy)})
    assert config.policy_path == policy and "policy_path" not in config.to_dict()
    with pytest.raises(RoleError) as refused:
        role_plan(config)
    assert (refused.value.file, refused.value.field) == (str(policy), "roles")
    ran = invoke("run", DEMO_CARD, "--policy", policy, "--out", tmp_path / "out")
    assert ran.code == 2 and ran.err.startswith(f"error: {policy}: field 'roles': unknown role")
    assert not (tmp_path / "out").exists()
    preset = RunConfig.from_dict({"card": str(DEMO_CARD), "policy": "branching"})
    assert preset.policy_path is None
