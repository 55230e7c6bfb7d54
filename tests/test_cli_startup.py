"""The command line starts without the heavy libraries: help and `roles` never load them, and
an offline run never loads the model client library.

Timing lives in benchmarks/bench_startup.py; this checks what a fresh process imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import DEMO_CARD, cli_command_paths

HEAVY = ("openai", "httpx", "numpy", "scipy", "aiosqlite")
#: Help needs none of these either: it is typer's work alone (``roles`` reads role files and so
#: loads pydantic, jinja2 and yaml, and prints a rich table).
NOT_FOR_HELP = ("pydantic", "rich", "structlog")

PROBE = """
import json, sys
args, watched = json.loads(sys.argv[1]), json.loads(sys.argv[2])
sys.argv = ["worldsim", *args]
from worldsim.cli import main
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
heavy = sorted(m for m in watched if m in sys.modules)
sys.stderr.write("\\nPROBE " + json.dumps({"code": code, "heavy": heavy}))
"""


def _probe(*args: str, watched: tuple[str, ...] = HEAVY) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(list(args)), json.dumps(watched)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    result: dict[str, object] = json.loads(proc.stderr.rsplit("PROBE ", 1)[1])
    return result


def test_the_probe_sees_a_heavy_import() -> None:
    # `worldsim verify` on a missing file still imports the trace machinery (numpy)
    assert "numpy" in _probe("verify", "no-such-trace.jsonl")["heavy"]  # type: ignore[operator]


@pytest.mark.parametrize("path", [(), *cli_command_paths()], ids=lambda p: " ".join(p) or "top")
def test_help_imports_nothing_heavy(path: tuple[str, ...]) -> None:
    result = _probe(*path, "--help", watched=(*HEAVY, *NOT_FOR_HELP))
    assert result == {"code": 0, "heavy": []}


def test_roles_imports_nothing_heavy() -> None:
    assert _probe("roles") == {"code": 0, "heavy": []}


def test_an_offline_run_and_forecast_never_load_the_model_client(tmp_path: Path) -> None:
    """`openai` (and its HTTP stack) is imported when a run first needs a server's route: an
    offline run or forecast of the demo card is spared its import (a third of a demo
    run's wall time)."""
    client = ("openai", "httpx")
    ran = _probe("run", str(DEMO_CARD), "--ticks", "2", "--out", str(tmp_path), watched=client)
    assert ran == {"code": 0, "heavy": []}
    told = _probe(
        "forecast", str(DEMO_CARD), "--model", "offline", "--out", str(tmp_path), watched=client
    )
    assert told == {"code": 0, "heavy": []}
