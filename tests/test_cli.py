"""The command line as a user meets it: exit codes, one-line errors, --json output."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import DEMO_CARD

WORLDSIM = [sys.executable, "-c", "from worldsim.cli import main; main()"]


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*WORLDSIM, *args], capture_output=True, text=True, cwd=cwd, timeout=120, check=False
    )


def test_run_json_prints_only_json_lines_in_seed_order(tmp_path: Path) -> None:
    proc = cli(
        "run", str(DEMO_CARD), "--seed", "3", "--replicates", "3", "--out", str(tmp_path), "--json"
    )
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["seed"] for r in rows] == [3, 4, 5]
    for r in rows:
        assert {
            "card_id",
            "seed",
            "method",
            "p_yes",
            "unresolved_mass",
            "timelines",
            "forks",
            "trace",
        } <= set(r)
        assert r["method"] == "branching" and Path(r["trace"]).is_file()


def test_run_prints_a_summary_and_verify_and_replay_agree(tmp_path: Path) -> None:
    proc = cli("run", str(DEMO_CARD), "--seed", "0", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "p_yes" in proc.stdout and "timelines" in proc.stdout
    trace = tmp_path / "merger-review__branching__s0.jsonl"
    ver = cli("verify", str(trace), "--canonical")
    assert ver.returncode == 0, ver.stderr
    assert len(ver.stdout.strip()) == 64
    again = cli("run", str(DEMO_CARD), "--seed", "0", "--out", str(tmp_path / "b"))
    ver2 = cli("verify", str(tmp_path / "b" / trace.name), "--canonical")
    assert ver2.stdout == ver.stdout
    assert again.returncode == 0
    rep = cli("replay", str(trace), "--json")
    assert rep.returncode == 0, rep.stderr
    objs = [json.loads(line) for line in rep.stdout.splitlines()]
    ticks = [o for o in objs if "digest" in o]
    assert ticks and all(len(o["digest"]) == 64 for o in ticks)
    assert objs[-1]["extraction"]["matches"] is True
    assert objs[-1]["extraction"]["recorded_p_yes"] == objs[-1]["extraction"]["replayed_p_yes"]
    one = cli("replay", str(trace), "--timeline", "t0", "--tick", "1")
    assert one.returncode == 0 and "t0 · tick 1" in one.stdout and "matches" in one.stdout


def test_existing_trace_is_not_replaced_without_force(tmp_path: Path) -> None:
    assert cli("run", str(DEMO_CARD), "--out", str(tmp_path)).returncode == 0
    again = cli("run", str(DEMO_CARD), "--out", str(tmp_path))
    assert again.returncode == 2 and "--force" in again.stderr
    assert cli("run", str(DEMO_CARD), "--out", str(tmp_path), "--force").returncode == 0


BAD_CARDS = {
    "malformed.yaml": ("id: x\nquestion: [oops\n", "malformed YAML"),
    "missing.yaml": ("id: x\nas_of: 2027-01-01\ndeadline: 2027-02-01\n", "field 'question'"),
    "order.yaml": (
        "id: x\nquestion: q\nas_of: 2027-03-01\ndeadline: 2027-02-01\nendpoints:\n"
        "  - {id: y, title: Y, polarity: 'yes'}\n  - {id: n, title: N, polarity: 'no'}\n",
        "field 'deadline': must be after as_of",
    ),
    "outcome.yaml": (
        "id: x\nquestion: q\noutcome: 'yes'\nas_of: 2027-01-01\ndeadline: 2027-02-01\n"
        "endpoints:\n  - {id: y, title: Y, polarity: 'yes'}\n"
        "  - {id: n, title: N, polarity: 'no'}\n",
        "resolution field 'outcome'",
    ),
    "naive.yaml": (
        "id: x\nquestion: q\nas_of: '2027-01-01T10:00:00'\ndeadline: 2027-02-01\nendpoints:\n"
        "  - {id: y, title: Y, polarity: 'yes'}\n  - {id: n, title: N, polarity: 'no'}\n",
        "field 'as_of'",
    ),
    "three.yaml": (
        "id: x\nquestion: q\nas_of: 2027-01-01\ndeadline: 2027-02-01\nendpoints:\n"
        "  - {id: y, title: Y, polarity: 'yes'}\n  - {id: n, title: N, polarity: 'no'}\n"
        "  - {id: m, title: M, polarity: 'no'}\n",
        "exactly two scored endpoints",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_CARDS))
def test_bad_input_is_one_line_exit_2_and_no_trace(tmp_path: Path, name: str) -> None:
    text, expected = BAD_CARDS[name]
    card = tmp_path / name
    card.write_text(text)
    out = tmp_path / "out"
    proc = cli("run", str(card), "--out", str(out))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert str(card) in proc.stderr and expected in proc.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--policy", "nope"], "unknown policy 'nope'"),
        (["--extraction", "magic/9"], "unknown extraction rule"),
    ],
)
def test_bad_flags_are_config_errors(tmp_path: Path, args: list[str], expected: str) -> None:
    proc = cli("run", str(DEMO_CARD), "--out", str(tmp_path / "o"), *args)
    assert proc.returncode == 2 and expected in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "o").exists()


def test_missing_card_file(tmp_path: Path) -> None:
    proc = cli("run", str(tmp_path / "nowhere.yaml"))
    assert proc.returncode == 2 and "card not found" in proc.stderr


def test_verify_exit_codes(tmp_path: Path) -> None:
    assert cli("run", str(DEMO_CARD), "--out", str(tmp_path), "--ticks", "4").returncode == 0
    trace = tmp_path / "merger-review__branching__ticks4__s0.jsonl"
    blob = trace.read_bytes()
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(blob[: len(blob) - 30])
    proc = cli("verify", str(torn))
    assert proc.returncode == 3 and "torn final line" in proc.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(blob.replace(b'"seq":3,', b'"seq":4,', 1))
    proc = cli("verify", str(bad))
    assert proc.returncode == 1 and ":4:" in proc.stderr
    absent = cli("verify", str(tmp_path / "absent.jsonl"))  # no such file: bad input, as anywhere
    assert absent.returncode == 2 and "absent.jsonl: trace not found" in absent.stderr


def test_roles_lists_the_builtins() -> None:
    proc = cli("roles")
    assert proc.returncode == 0
    for name in ("initializer", "actor", "cohort", "governance", "reporter", "direct"):
        assert name in proc.stdout
    from worldsim.roles.prompts import load_prompt_role

    assert load_prompt_role("governance").version in proc.stdout


def test_an_unwritable_output_folder_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    proc = cli("run", str(DEMO_CARD), "--out", str(blocker / "traces"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"{blocker}: field 'out': not a folder" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args",
    [("a.yaml", "b.yaml"), ("a.yaml", "--seed", "3", "b.yaml", "c.yaml"), (".",)],
    ids=["two cards", "three cards among options", "a folder"],
)
def test_run_takes_one_card_and_says_so(tmp_path: Path, args: tuple[str, ...]) -> None:
    proc = cli("run", *args, "--out", str(tmp_path / "t"), cwd=tmp_path)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "run takes one card file" in proc.stderr and "run each card separately" in proc.stderr
    assert not (tmp_path / "t").exists()


HELP_PAGES = """
import json, sys
from typer.testing import CliRunner
from tests.support import cli_command_paths
from worldsim.cli import app
runner = CliRunner()
pages = {" ".join(p): runner.invoke(app, [*p, "--help"]).output for p in [(), *cli_command_paths()]}
sys.stdout.write(json.dumps(pages))
"""


def _help_pages(columns: int) -> list[str]:
    """Every help page of the CLI as a fresh process on a terminal ``columns`` wide renders it."""
    env = {**os.environ, "COLUMNS": str(columns)}
    proc = subprocess.run(
        [sys.executable, "-c", HELP_PAGES], capture_output=True, text=True, env=env, check=True
    )
    pages: dict[str, str] = json.loads(proc.stdout)
    assert len(pages) > 10 and all(page.startswith("Usage: worldsim") for page in pages.values())
    return [line for page in pages.values() for line in page.splitlines()]


def test_help_is_wrapped_at_120_columns_on_a_narrow_terminal() -> None:
    from worldsim.world.extraction import EXTRACTION_RULES

    lines = _help_pages(80)
    assert max(map(len, lines)) > 80  # wrapped wider than the terminal...
    assert all(len(line) <= 120 for line in lines)  # ...at the help width
    # every choice is listed, in full, where the option is named
    assert f"  --extraction {'|'.join(EXTRACTION_RULES)}" in lines
    choices = [
        line.split()[:2] for line in lines if line.startswith(("  --cache ", "  --leakage "))
    ]
    assert choices == [["--cache", "use|refresh|off"], ["--leakage", "record|fail"]] * 2


@pytest.mark.parametrize("columns", [80, 137, 200])
def test_help_never_cuts_or_splits_a_word(columns: int) -> None:
    lines = _help_pages(columns)
    cut = [line for line in lines if "…" in line or line.endswith("...")]
    assert all(line.startswith("Usage: ") for line in cut)  # "ARGS..." repeats, is not cut
    assert not [line for line in lines if re.search(r"[A-Za-z]-$", line)]  # e.g. "path-|ledger/1"


def test_top_level_help_lists_each_commands_summary_whole() -> None:
    from typer.testing import CliRunner

    from worldsim.cli import app

    page = CliRunner().invoke(app, ["--help"], terminal_width=80).output
    view = CliRunner().invoke(app, ["view", "--help"]).output
    summary = " ".join(view.split("\n\n")[1].split()).split(". ")[0]
    assert summary.startswith("Write one HTML file") and summary in " ".join(page.split())


def test_version_names_the_release_and_the_checkouts_revision() -> None:
    from worldsim.domain.version import __version__

    root = Path(__file__).resolve().parents[1]
    described = subprocess.run(
        ["git", "describe", "--always", "--dirty", "--tags"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    proc = cli("--version")
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout == f"worldsim {__version__} ({described})\n"


def test_version_outside_a_checkout_is_the_release_alone(tmp_path: Path) -> None:
    from worldsim.domain.version import __version__, version_line

    assert version_line(tmp_path) == f"worldsim {__version__}"


def test_hindsight_subcommands_take_their_inputs_one_way() -> None:
    """What is analysed is a positional path; the graph scored against is --hindsight FILE;
    what is written goes to -o."""
    import typer.main

    from worldsim.cli import app

    group = typer.main.get_group(app).commands["hindsight"]
    commands = group.commands  # type: ignore[attr-defined]
    assert set(commands) == {"validate", "forecast-graph", "ker", "sources", "pressure"}
    for name, command in commands.items():
        arguments = [p for p in command.params if p.param_type_name == "argument"]
        options = {p.name: p for p in command.params if p.param_type_name == "option"}
        assert len(arguments) == 1, name
        assert arguments[0].metavar == arguments[0].metavar.upper(), name
        if name == "validate":
            assert arguments[0].metavar == "HINDSIGHT" and "hindsight" not in options
        elif name != "forecast-graph":
            assert options["hindsight"].opts == ["--hindsight"], name
        if "output" in options:
            assert options["output"].opts == ["-o", "--output"], name


def test_replay_prints_ticks_in_simulated_order_then_the_report_and_audit(tmp_path: Path) -> None:
    run = cli("run", str(DEMO_CARD), "--seed", "6", "--out", str(tmp_path), "--json")
    trace = json.loads(run.stdout)["trace"]
    proc = cli("replay", trace, "--json")
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    steps = [r for r in rows if "tick" in r and "timeline" in r]
    order = [(r["tick"], [int(p) for p in r["timeline"][1:].split(".")]) for r in steps]
    assert len({r["timeline"] for r in steps}) > 1 and order == sorted(order)
    # each proposal with its agent's role, as the trace records it
    roles = {p["role"] for r in steps for p in r["proposals"]}
    assert roles and roles <= {"actor", "cohort"} and "actor" in roles
    outcome = next(r for r in rows if "audit" in r)
    assert outcome["report"]["claims"] and outcome["audit"]["mass_conserved"] is True
    text = cli("replay", trace).stdout
    assert text.index("─ report ─") > text.rindex("· tick 7 ·") and "report_grounding" in text


def test_replay_re_extracts_a_multiple_choice_distribution(tmp_path: Path) -> None:
    card = DEMO_CARD.parent / "award-best-picture.yaml"
    run = cli("run", str(card), "--seed", "2", "--out", str(tmp_path), "--json")
    trace = json.loads(run.stdout)["trace"]
    proc = cli("replay", trace, "--json")
    extraction = json.loads(proc.stdout.splitlines()[-1])["extraction"]
    options = extraction["recorded_p_options"]
    assert options and set(options) == {"film_a", "film_b", "film_c", "film_d"}
    assert extraction["replayed_p_options"] == options and extraction["matches"] is True
    assert "p_options film_a=" in cli("replay", trace).stdout
    # a recorded distribution that the rebuilt leaves do not give is caught
    from worldsim.domain.errors import TraceError
    from worldsim.trace.reader import read_trace
    from worldsim.trace.replay import extract_again, replay_steps

    tr = read_trace(trace)
    recorded, leaves, at = next(item[1] for item in replay_steps(tr) if isinstance(item, tuple))
    shifted = {**recorded.p_options, "film_a": recorded.p_options["film_a"] + 0.01}
    with pytest.raises(TraceError, match="p_options") as caught:
        changed = recorded.model_copy(update={"p_options": shifted})
        extract_again(tr.started.card, changed, leaves, file=tr.path, line=at)
    assert caught.value.line == tr.first("extraction").number


def test_replay_names_what_exists_for_a_missing_tick_or_timeline(tmp_path: Path) -> None:
    run = cli("run", str(DEMO_CARD), "--seed", "6", "--out", str(tmp_path), "--json")
    trace = json.loads(run.stdout)["trace"]
    tick = cli("replay", trace, "--tick", "99")
    assert tick.returncode == 2 and "no tick 99" in tick.stderr and "0..7" in tick.stderr
    timeline = cli("replay", trace, "--timeline", "t9")
    assert timeline.returncode == 2 and "no timeline t9" in timeline.stderr
    assert "t0.1" in timeline.stderr and not timeline.stdout


def test_a_method_label_cannot_leave_the_output_folder(tmp_path: Path) -> None:
    out = tmp_path / "deep" / "out"
    proc = cli("run", str(DEMO_CARD), "--method-label", "../../escape", "--out", str(out))
    assert proc.returncode == 2 and "method" in proc.stderr
    assert not list(tmp_path.rglob("*.jsonl"))


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_source_revision_is_read_in_a_linked_work_tree_too(tmp_path: Path) -> None:
    """A trace's git_revision names the commit a linked work tree (``git worktree add``) is at,
    not only a main checkout's; outside a checkout there is none."""
    from worldsim.domain.version import git_revision

    def git(*args: str, cwd: Path) -> str:
        env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org"}
        env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}
        done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    main = tmp_path / "main"
    main.mkdir()
    git("init", "-q", "-b", "main", cwd=main)
    (main / "a.txt").write_text("a\n")
    git("add", "a.txt", cwd=main)
    git("commit", "-q", "-m", "first", cwd=main)
    git("worktree", "add", "-q", "-b", "side", str(tmp_path / "side"), cwd=main)
    (tmp_path / "side" / "b.txt").write_text("b\n")
    git("add", "b.txt", cwd=tmp_path / "side")
    git("commit", "-q", "-m", "second", cwd=tmp_path / "side")
    git("pack-refs", "--all", cwd=main)  # refs read from packed-refs as well as loose files

    assert git_revision(main) == git("rev-parse", "HEAD", cwd=main)
    assert git_revision(tmp_path / "side") == git("rev-parse", "HEAD", cwd=tmp_path / "side")
    assert git_revision(main) != git_revision(tmp_path / "side")
    assert git_revision(tmp_path) is None


def test_tasks_that_failed_together_end_in_the_one_line_of_their_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A worldsim error raised inside a task group reaches the entry point as an exception
    group: it is still one line and its exit status; any other group is not hidden."""
    import worldsim.cli as cli
    from worldsim.domain.errors import ConfigError

    def failing() -> None:
        raise ExceptionGroup(
            "tasks", [ExceptionGroup("inner", [ConfigError("trace not found", file="t.jsonl")])]
        )

    monkeypatch.setattr(cli, "app", failing)
    monkeypatch.setattr(sys, "argv", ["worldsim", "--help"])  # no logging set-up
    with pytest.raises(SystemExit) as ended:
        cli.main()
    assert ended.value.code == 2
    assert capsys.readouterr().err.splitlines() == ["error: t.jsonl: trace not found"]

    def crashing() -> None:
        raise ExceptionGroup("tasks", [ValueError("a bug")])

    monkeypatch.setattr(cli, "app", crashing)
    with pytest.raises(ExceptionGroup):
        cli.main()
