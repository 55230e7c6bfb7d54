"""A project's own prompt role, as a new user writes it: listed, runnable offline and on a server,
and a clear one-line error when its definition is wrong."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support import DEMO_CARD
from tests.test_cli import cli
from worldsim.testing import StubServer
from worldsim.trace.reader import read_trace

MARKET_MAKER = """---
name: market-maker
phase: tick
output: ActorOutput
temperature: 0.3
max_tokens: 400
description: "Quotes the market and leans against the crowd."
---
You make a market on: {{ card.question }}
It is tick {{ tick }} of {{ ticks }} ({{ date }}).
{% for ep in endpoints %}
- {{ ep.id }}: {{ ep.title }} (now {{ "%.2f"|format(ep.p) if ep.p is not none else "n/a" }})
{% endfor %}
---user---
You are {{ actor.name }}. Propose at most one move on the endpoint you think is mispriced.
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project folder with ``agents/market-maker.md`` beside the bundled roles."""
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "market-maker.md").write_text(MARKET_MAKER, encoding="utf-8")
    return tmp_path


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.split("│")[1:-1]]


def _names(proc: subprocess.CompletedProcess[str]) -> set[str]:
    return {cells[0] for line in proc.stdout.splitlines() if (cells := _cells(line)) and cells[0]}


def _decided(trace_path: Path, agent: str) -> tuple[list[object], int]:
    trace = read_trace(trace_path)
    proposals = [p.data for p in trace.proposals() if p.data.agent == agent]
    decided = sum(
        1
        for line in trace.of_type("review")
        for ref in (*line.record.data.accepted, *line.record.data.rejected)
        if ref.agent == agent
    )
    return proposals, decided


def test_a_project_prompt_role_is_listed_with_its_source_output_and_version(
    project: Path,
) -> None:
    proc = cli("roles", cwd=project)
    assert proc.returncode == 0, proc.stderr
    row = next(line for line in proc.stdout.splitlines() if "market-maker" in line)
    assert "tick" in row and "ActorOutput" in row and "project" in row
    from worldsim.roles.prompts import load_prompt_file

    version = load_prompt_file(project / "agents" / "market-maker.md").version
    assert version in proc.stdout
    # the built-in roles stay listed, and every listed role can run (none is a bare name)
    assert {"actor", "cohort", "governance", "initializer", "reporter", "direct"} <= _names(proc)


def test_a_project_prompt_role_acts_on_the_offline_model(project: Path) -> None:
    out = project / "traces"
    proc = cli(
        "run", str(DEMO_CARD), "--role", "market-maker", "--policy", "no_branch",
        "--ticks", "3", "--out", str(out), "--json", cwd=project,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    trace_path = Path(json.loads(proc.stdout)["trace"])
    proposals, decided = _decided(trace_path, "market-maker")
    assert len(proposals) >= 3  # activity 1: one move per tick at least
    assert all(p.role == "market-maker" for p in proposals)  # type: ignore[attr-defined]
    assert decided == len(proposals)
    started = read_trace(trace_path).started
    assert started.extra_roles == ["market-maker"]
    assert started.routes["market-maker"] == "offline"


def test_a_project_prompt_role_calls_a_server_and_is_reviewed(project: Path) -> None:
    out = project / "traces"
    with StubServer(seed=8) as server:
        env = {**os.environ, "STUB_API_KEY": "k", "STUB_BASE_URL": server.base_url}
        from tests.test_cli import WORLDSIM

        proc = subprocess.run(
            [
                *WORLDSIM, "run", str(DEMO_CARD), "--role", "market-maker",
                "--role-model", "market-maker=stub/test-model", "--policy", "no_branch",
                "--ticks", "2", "--out", str(out), "--json",
            ],
            capture_output=True, text=True, cwd=project, env=env, timeout=120, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert server.request_count >= 2
    trace_path = Path(json.loads(proc.stdout)["trace"])
    trace = read_trace(trace_path)
    calls = [line.record.data for line in trace.of_type("llm_call")]
    assert calls and {c.role for c in calls} == {"market-maker"}
    from worldsim.roles.prompts import load_prompt_file

    version = load_prompt_file(project / "agents" / "market-maker.md").version
    assert {c.prompt_version for c in calls} == {version}
    proposals, decided = _decided(trace_path, "market-maker")
    assert decided == len(proposals)


def test_a_project_file_replaces_the_built_in_role_by_name(project: Path) -> None:
    body = MARKET_MAKER.replace("name: market-maker", "name: actor")
    (project / "agents" / "actor.md").write_text(body, encoding="utf-8")
    proc = cli("roles", cwd=project)
    row = next(line for line in proc.stdout.splitlines() if _cells(line)[:1] == ["actor"])
    assert "project" in row


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (("output: ActorOutput", "output: MoveOutput"), "output", "unknown output 'MoveOutput'"),
        (("output: ActorOutput", "output: GovernanceOutput"), "output", "cannot run in phase"),
        (("phase: tick\n", ""), "phase", "Field required"),
        (("temperature: 0.3", "tools: [search_web]"), "tools", "unknown tool 'search_web'"),
        (("name: market-maker", "name: Market Maker"), "name", "String should match pattern"),
        (("{{ card.question }}", "{{ card.question "), None, "template error"),
        (("{{ ticks }}", "{{ tiks }}"), None, "md:10: the template uses 'tiks' ('ticks'?)"),
        (("{{ actor.name }}", "{{ cohort.name }}"), None, "uses 'cohort', which the ActorOutput"),
        (("temperature: 0.3", "route: nonsense"), "route", "invalid route 'nonsense'"),
    ],
)
def test_a_bad_role_definition_is_one_line_naming_the_file_and_field(
    project: Path, change: tuple[str, str], field: str | None, message: str
) -> None:
    path = project / "agents" / "market-maker.md"
    path.write_text(MARKET_MAKER.replace(*change), encoding="utf-8")
    for args in (("roles",), ("run", str(DEMO_CARD), "--role", "market-maker", "--out", "t")):
        proc = cli(*args, cwd=project)
        assert proc.returncode == 2, proc.stdout
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in proc.stderr
        assert "market-maker.md" in lines[0] and message in lines[0]
        if field is not None:
            assert f"'{field}'" in lines[0]
        assert not (project / "t").exists()  # nothing written


def test_a_role_file_saved_with_a_bom_and_windows_line_ends_reads_as_plain_utf8(
    project: Path,
) -> None:
    from worldsim.roles.prompts import load_prompt_file

    plain = load_prompt_file(project / "agents" / "market-maker.md")
    path = project / "agents" / "market-maker.md"
    path.write_bytes(b"\xef\xbb\xbf" + MARKET_MAKER.replace("\n", "\r\n").encode())
    windows = load_prompt_file(path)
    view = {
        "card": {"question": "Q?"},
        "tick": 1,
        "ticks": 3,
        "date": "2027-01-05",
        "endpoints": [{"id": "yes", "title": "Yes", "p": 0.5}],
        "actor": {"name": "A"},
    }
    assert windows.meta == plain.meta
    assert windows.render(**view) == plain.render(**view)
    assert "\r" not in "".join(windows.render(**view))


def test_a_role_file_that_is_not_utf8_is_one_line_naming_it(project: Path) -> None:
    (project / "agents" / "latin.md").write_bytes(b"---\nname: latin\n---\nCaf\xe9\n")
    proc = cli("roles", cwd=project)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"error: {project / 'agents' / 'latin.md'}: not UTF-8 text (byte 23): save it as UTF-8"
    ]


@pytest.mark.parametrize(
    ("role", "message"),
    [
        ("nosuch", "unknown role 'nosuch'"),
        ("governance", "role 'governance' runs in phase 'review', not 'tick'"),
    ],
)
def test_a_cards_actor_with_a_bad_role_names_the_card_and_the_actor(
    tmp_path: Path, role: str, message: str
) -> None:
    text = DEMO_CARD.read_text(encoding="utf-8")
    card = tmp_path / "card.yaml"
    card.write_text(text.replace("activity: 0.3}", f"activity: 0.3, role: {role}}}", 1))
    proc = cli("run", str(card), "--out", "t", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"error: {card}: field 'seeds.actors.5.role': {message}")
    assert not (tmp_path / "t").exists()


def test_an_unknown_role_on_the_command_line_names_the_known_ones(tmp_path: Path) -> None:
    proc = cli("run", str(DEMO_CARD), "--role", "oracle", "--out", str(tmp_path / "t"))
    assert proc.returncode == 2
    assert "unknown role 'oracle'" in proc.stderr and "actor" in proc.stderr
    assert not (tmp_path / "t").exists()


SKEPTIC = """---
name: skeptic
phase: direct
output: ForecastOutput
description: "A forecaster that starts from doubt."
---
Doubt everything you are told. Question: {{ card.question }}
"""


def test_a_project_direct_role_forecasts_and_a_tick_role_cannot(project: Path) -> None:
    (project / "agents" / "skeptic.md").write_text(SKEPTIC, encoding="utf-8")
    out = project / "traces"
    proc = cli(
        "forecast", str(DEMO_CARD), "--model", "offline", "--role", "skeptic",
        "--out", str(out), "--json", cwd=project,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    trace = read_trace(Path(json.loads(proc.stdout)["trace"]))
    from worldsim.roles.prompts import load_prompt_file

    version = load_prompt_file(project / "agents" / "skeptic.md").version
    assert trace.started.prompt_versions == {"skeptic": version}
    (call,) = [line.record.data for line in trace.of_type("llm_call")]
    assert call.role == "skeptic" and call.prompt_version == version
    assert cli("verify", str(trace.path), cwd=project).returncode == 0
    wrong = cli(
        "forecast", str(DEMO_CARD), "--model", "offline", "--role", "market-maker",
        "--out", str(out), "--force", cwd=project,
    )  # fmt: skip
    assert wrong.returncode == 2 and "not 'direct'" in wrong.stderr
