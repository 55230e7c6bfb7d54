"""The README's commands, run in order in a fresh folder as a new user would, do what it says.

Every shell block of the README is either run here, command by command, or listed in
`SKIPPED` with the reason; a new block that is neither fails the first test, so the README and
this test cannot drift apart.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

SKIPPED = {
    "Quick start": "make demo and make test set up and run this suite itself",
    "Real question sets": "1,052 offline jobs, about six minutes",
    "Real models": "needs a provider's key and the network",
}
"""Sections whose shell blocks are not run here, and why."""
RUN = (
    "Using it",
    "Carrying a run forward",
    "Experiments",
    "Build your own tasks",
    "Write your own role",
)
"""Sections whose shell blocks run, in the README's order."""


@dataclass(frozen=True, slots=True)
class Block:
    section: str
    info: str
    body: str


def readme_blocks(text: str) -> list[Block]:
    """The fenced blocks of the README with their info string and the section they are in."""
    blocks: list[Block] = []
    section = ""
    lines = iter(text.splitlines())
    for line in lines:
        if line.startswith("## "):
            section = line[3:].strip()
        fence = re.match(r"^(\s*)```(\S*)\s*$", line)
        if fence is None:
            continue
        indent, info = fence.groups()
        body: list[str] = []
        for inner in lines:
            if inner.strip() == "```":
                break
            body.append(inner.removeprefix(indent))
        blocks.append(Block(section, info, "\n".join(body)))
    return blocks


def shell_blocks() -> list[Block]:
    return [b for b in readme_blocks(README.read_text("utf-8")) if b.info in ("sh", "")]


def commands(body: str) -> Iterator[str]:
    """The block's commands: continued lines joined, a here-document kept with its command."""
    lines = iter(body.splitlines())
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        command = line
        while command.endswith("\\"):
            command = command[:-1] + next(lines).strip()
        here = re.search(r"<<'(\w+)'", command)
        if here is not None:
            for inner in lines:
                command += "\n" + inner
                if inner == here.group(1):
                    break
        yield command


def test_every_shell_block_is_run_here_or_skipped_with_a_reason() -> None:
    sections = [b.section for b in shell_blocks()]
    assert set(sections) == set(RUN) | set(SKIPPED)
    ran = [s for s in dict.fromkeys(sections) if s in RUN]
    assert ran == list(RUN)  # in the README's order


def _trace(folder: Path, name: str) -> Path:
    path = folder / name
    assert path.is_file(), f"{name} is not where the README says"
    return path


def _json_lines(out: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.splitlines()]


Check = Callable[[Path, subprocess.CompletedProcess[str]], None]


def _replicates(home: Path, proc: subprocess.CompletedProcess[str]) -> None:
    for seed in range(20):
        _trace(home / "traces", f"merger-review__branching__s{seed}.jsonl")


def _json_only(home: Path, proc: subprocess.CompletedProcess[str]) -> None:
    (row,) = _json_lines(proc.stdout)
    assert row["card_id"] == "election-runoff" and row["method"] == "no_branch"


def _replayed(home: Path, proc: subprocess.CompletedProcess[str]) -> None:
    assert "matches the recorded p_yes" in proc.stdout.splitlines()[-1]


def _replayed_json(home: Path, proc: subprocess.CompletedProcess[str]) -> None:
    assert _json_lines(proc.stdout)


def _canonical(home: Path, proc: subprocess.CompletedProcess[str]) -> None:
    assert re.fullmatch(r"[0-9a-f]{64}", proc.stdout.split()[-1])


def _viewed(home: Path, proc: subprocess.CompletedProcess[str]) -> None:
    page = home / proc.stdout.strip()
    assert page.suffix == ".html" and page.is_file()
    assert "no browser could be started" in proc.stderr  # --open says so, not nothing


def _keys(home: Path, proc: subprocess.CompletedProcess[str]) -> None:
    assert (home / "keys" / "trace.key").is_file() and (home / "keys" / "trace.key.pub").is_file()


def _signed(home: Path, proc: subprocess.CompletedProcess[str]) -> None:
    _trace(home / "signed", "merger-review__branching__s0.jsonl")
    assert re.search(r"head [0-9a-f]{64} · signed by key", proc.stdout)


def _verified_signature(home: Path, proc: subprocess.CompletedProcess[str]) -> None:
    said = proc.stdout + proc.stderr
    assert said.startswith("OK") and re.search(r"signature by key [0-9a-f]+ checked", said)


def _toll(home: Path, proc: subprocess.CompletedProcess[str]) -> None:
    _trace(home / "traces" / "toll", "harbour-toll__branching__s0.jsonl")


def _continued(home: Path, proc: subprocess.CompletedProcess[str]) -> None:
    _trace(home / "traces" / "toll", "harbour-toll__branching__s0__to20270301.jsonl")
    assert "continued to mid" in proc.stdout


def _lineage(home: Path, proc: subprocess.CompletedProcess[str]) -> None:
    said = proc.stdout + proc.stderr
    assert "verifies, head and canonical hash match" in said and re.search(r"^OK", said, re.M)


def _from_config(home: Path, proc: subprocess.CompletedProcess[str]) -> None:
    _trace(home / "traces", "merger-review__branching__s42.jsonl")


def _members(home: Path, proc: subprocess.CompletedProcess[str]) -> None:
    assert list((home / "traces").glob("merger-review-members__*__s0.jsonl"))


def _roles(home: Path, proc: subprocess.CompletedProcess[str]) -> None:
    assert "actor" in proc.stdout and "governance" in proc.stdout


def _study(home: Path, proc: subprocess.CompletedProcess[str]) -> None:
    with (home / "studies" / "demo" / "predictions.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 126 and {r["status"] for r in rows} == {"complete"}


def _scored(home: Path, proc: subprocess.CompletedProcess[str]) -> None:
    assert "Brier" in proc.stdout or "brier" in proc.stdout


def _built(home: Path, proc: subprocess.CompletedProcess[str]) -> None:
    assert (home / "tasks" / "cards" / "rejects.jsonl").is_file()
    assert (home / "tasks" / "cards" / "demo-market-larkport-toll.yaml").is_file()


def _graph(home: Path, proc: subprocess.CompletedProcess[str]) -> None:
    assert (home / "tasks" / "hindsight" / "demo-market-larkport-toll.json").is_file()


def _sheet(home: Path, proc: subprocess.CompletedProcess[str]) -> None:
    assert (home / "tasks" / "sheet.csv").is_file()


def _project_role(home: Path, proc: subprocess.CompletedProcess[str]) -> None:
    assert re.search(r"market-maker\s.*project", proc.stdout)


def _role_run(home: Path, proc: subprocess.CompletedProcess[str]) -> None:
    added = _trace(home / "traces", "merger-review__branching__market-maker__s0.jsonl")
    plain = _trace(home / "traces", "merger-review__branching__s0.jsonl")
    assert added.read_bytes() != plain.read_bytes()


def _nothing(home: Path, proc: subprocess.CompletedProcess[str]) -> None:
    return None


CHECKS: list[tuple[str, Check]] = [
    (
        "worldsim run scenarios/merger-review.yaml --policy branching --seed 0 --replicates 20",
        _replicates,
    ),
    ("worldsim run scenarios/election-runoff.yaml --policy no_branch --json", _json_only),
    ("worldsim replay traces/merger-review__branching__s0.jsonl  ", _replayed),
    ("worldsim replay traces/merger-review__branching__s0.jsonl --json", _replayed_json),
    ("worldsim verify traces/merger-review__branching__s0.jsonl --canonical", _canonical),
    ("worldsim view traces/merger-review__branching__s0.jsonl --open", _viewed),
    ("worldsim keygen keys/trace.key", _keys),
    ("worldsim run scenarios/merger-review.yaml --sign-key", _signed),
    ("worldsim verify signed/merger-review__branching__s0.jsonl --public-key", _verified_signature),
    ("worldsim run --config scenarios/configs/run.yaml --seed 42", _from_config),
    ("worldsim run scenarios/members/merger-review-members.yaml", _members),
    ("worldsim roles", _roles),
    ("worldsim run scenarios/harbour-toll.yaml --seed 0 --out traces/toll", _toll),
    ("worldsim run --continue traces/toll/harbour-toll__branching__s0.jsonl", _continued),
    ("worldsim verify traces/toll/harbour-toll__branching__s0__to20270301.jsonl", _lineage),
    ("worldsim batch scenarios/studies/demo-study.yaml --out studies/demo", _study),
    ("worldsim score studies/demo", _scored),
    ("worldsim gateway ingest", _nothing),
    ("worldsim build questions", _built),
    ("worldsim build hindsight", _graph),
    ("worldsim build annotate", _sheet),
    ("mkdir -p agents", _nothing),
    ("cat > agents/market-maker.md", _nothing),
    ("worldsim roles", _project_role),
    ("worldsim run scenarios/merger-review.yaml --role market-maker", _role_run),
]
"""Each command the README runs offline, in order (by how it starts), and what it says the
command does."""


def test_the_readmes_offline_commands_run_in_order_in_a_fresh_folder(tmp_path: Path) -> None:
    home = tmp_path / "project"
    home.mkdir()
    (home / "scenarios").symlink_to(ROOT / "scenarios")
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DISPLAY", "WAYLAND_DISPLAY", "BROWSER"}
    }
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        WORLDSIM_CACHE_DIR=str(tmp_path / "cache"),
        BROWSER=str(tmp_path / "no-browser"),  # no browser here, whatever the machine has
        COLUMNS="200",
    )
    ran = [
        command
        for section in RUN
        for block in shell_blocks()
        if block.section == section
        for command in commands(block.body)
    ]
    assert len(ran) == len(CHECKS)
    for command, (start, check) in zip(ran, CHECKS, strict=True):
        assert command.startswith(start), f"the README's next command is {command!r}"
        proc = subprocess.run(
            ["bash", "-c", command],
            cwd=home,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert proc.returncode == 0, f"{command}\n{proc.stderr}"
        assert "error" not in proc.stderr.lower(), f"{command}\n{proc.stderr}"
        check(home, proc)


@pytest.mark.parametrize("skipped", sorted(SKIPPED))
def test_a_skipped_section_still_has_its_commands(skipped: str) -> None:
    """A section left out here is still in the README (else it belongs in neither list)."""
    assert any(b.section == skipped and list(commands(b.body)) for b in shell_blocks())
