"""Command-line start-up: ``worldsim --help`` and ``worldsim roles`` beside ``import typer``.

Each command runs as a fresh process, the way a user meets it: after a first untimed run,
with its modules' bytecode cached as Python caches it by default (``PYTHONDONTWRITEBYTECODE``
is cleared for the commands: with it set, every start would compile worldsim's modules again,
which a user's installation does not). The commands run in turn, round after round, so a noisy
neighbour slows them alike, and each ratio is the median of the per-round ratios. The target
is ``worldsim --help`` ≤ 2 × ``python -c "import typer"``. The same processes report which
heavy modules they imported (none should be, for help).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

HEAVY = ("openai", "httpx", "numpy", "scipy", "aiosqlite")

_PROBE = (
    "import sys\n"
    "sys.argv = ['worldsim', *{args!r}]\n"
    "from worldsim.cli import main\n"
    "try:\n"
    "    main()\n"
    "except SystemExit:\n"
    "    pass\n"
    "sys.stderr.write('\\nHEAVY ' + repr(sorted(m for m in {heavy!r} if m in sys.modules)))\n"
)

COMMANDS: dict[str, list[str]] = {
    "import typer": [sys.executable, "-c", "import typer"],
    "worldsim --help": [sys.executable, "-c", _PROBE.format(args=["--help"], heavy=HEAVY)],
    "worldsim run --help": [
        sys.executable,
        "-c",
        _PROBE.format(args=["run", "--help"], heavy=HEAVY),
    ],
    "worldsim roles": [sys.executable, "-c", _PROBE.format(args=["roles"], heavy=HEAVY)],
}


#: The commands' environment: this one's, bytecode written (see the module doc).
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _timed(cmd: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True, env=_ENV)
    return time.perf_counter() - start, proc.stderr


def run(quick: bool = False) -> dict[str, Any]:
    rounds = 5 if quick else 15
    samples: dict[str, list[float]] = {name: [] for name in COMMANDS}
    heavy: dict[str, list[str]] = {}
    for cmd in COMMANDS.values():  # warm the file cache once, and write the bytecode
        _timed(cmd)
    for _ in range(rounds):
        for name, cmd in COMMANDS.items():
            seconds, stderr = _timed(cmd)
            samples[name].append(seconds)
            if "HEAVY " in stderr:
                heavy[name] = json.loads(stderr.rsplit("HEAVY ", 1)[1].replace("'", '"'))
    base = samples["import typer"]
    ratios = {
        name: statistics.median(a / b for a, b in zip(values, base, strict=True))
        for name, values in samples.items()
        if name != "import typer"
    }
    return {
        "what": "CLI start-up as fresh processes, ratio to `python -c 'import typer'`",
        "rounds": rounds,
        "samples_s": samples,
        "ratio_to_typer": ratios,
        "heavy_modules": heavy,
        "target": {"worldsim --help": 2.0},
    }


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "command": name,
            "time ÷ import typer": ratio,
            "target": result["target"].get(name, "—"),
            "heavy modules imported": ", ".join(result["heavy_modules"].get(name, [])) or "none",
        }
        for name, ratio in result["ratio_to_typer"].items()
    ]
