"""A ForecastBench round end to end, as a user runs it through the CLI: import, study, export.

The question set is round-sized and real in every field: the 2025-10-26 llm slice kept under
``tests/interop/data/`` (109 questions of ForecastBench's published set), its questions repeated
under new ids until the set makes at least 2,245 cards (the size of that whole round). Each step
is one ``worldsim`` process, timed whole (start-up included):

* ``cards import`` of the set;
* ``batch`` of a direct offline study over every card (seed 0, one job per card);
* ``export --format forecastbench`` of the study, then ``export --check`` of the file.

The rows give each step's wall time, the round's total, and the study's per-job cost against
the per-job cost of a study of the first 100 of those cards (the same command): a study whose
bookkeeping grew with its size would show a ratio well above 1 (target: at most 1.3).

Run alone::

    python -m benchmarks.bench_round [CARDS]
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
SLICE = ROOT / "tests" / "interop" / "data" / "2025-10-26-llm.json"
ROUND_CARDS = 2245
SMALL = 100
COLUMNS = ("step", "cards", "wall_s", "per_job_ms", "ratio")


def round_sized(cards: int, out: Path) -> Path:
    """The slice's questions, repeated under new ids until they make at least ``cards`` cards
    (a market question makes one card, a data-set question one per resolution date)."""
    doc = json.loads(SLICE.read_text(encoding="utf-8"))
    questions: list[dict[str, Any]] = []
    made, copy_no = 0, 0
    while made < cards:
        for q in doc["questions"]:
            if made >= cards:
                break
            twin = copy.deepcopy(q)
            if copy_no:
                twin["id"] = f"{q['id']}-r{copy_no}"
            questions.append(twin)
            dates = q.get("resolution_dates")
            made += len(dates) if isinstance(dates, list) and dates else 1
        copy_no += 1
    doc["questions"] = questions
    path = out / doc["question_set"]
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _worldsim(*args: object) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", "from worldsim.cli import main; main()", *map(str, args)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"worldsim {' '.join(map(str, args[:2]))}: {done.stderr.strip()}")
    return time.perf_counter() - started


def _study(cards: list[Path], folder: Path, name: str) -> tuple[Path, float]:
    manifest = folder / f"{name}.yaml"
    manifest.write_text(
        yaml.safe_dump(
            {
                "name": name,
                "cards": [str(p) for p in cards],
                "seeds": [0],
                "methods": [{"label": "direct", "forecast": {"model": "offline"}}],
            }
        ),
        encoding="utf-8",
    )
    out = folder / name
    return out, _worldsim("batch", manifest, "--out", out)


def measure(cards: int = ROUND_CARDS) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        question_set = round_sized(cards, folder)
        imported = folder / "cards"
        import_s = _worldsim("cards", "import", question_set, "-o", imported)
        made = sorted(imported.glob("*.yaml"))
        _, small_s = _study(made[:SMALL], folder, "small")
        study, study_s = _study(made, folder, "round")
        submission = folder / "submission.json"
        export_s = _worldsim(
            "export", study, "--method", "direct", "--question-set", question_set, "-o", submission
        )
        check_s = _worldsim("export", "--check", submission, "--question-set", question_set)
    small_ms = 1000 * small_s / min(SMALL, len(made))
    round_ms = 1000 * study_s / len(made)
    return {
        "cards": len(made),
        "import_s": round(import_s, 2),
        "study_s": round(study_s, 2),
        "export_s": round(export_s + check_s, 2),
        "round_s": round(import_s + study_s + export_s + check_s, 2),
        "small_per_job_ms": round(small_ms, 1),
        "round_per_job_ms": round(round_ms, 1),
        "ratio": round(round_ms / small_ms, 3),
        "target": 1.3,
    }


def run(quick: bool = False) -> dict[str, Any]:
    """A whole round (``quick``: a fifth of one)."""
    return measure(ROUND_CARDS // 5 if quick else ROUND_CARDS)


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    n = result["cards"]
    return [
        {"step": "cards import", "cards": n, "wall_s": result["import_s"]},
        {
            "step": f"study of the first {SMALL}",
            "cards": min(SMALL, n),
            "per_job_ms": result["small_per_job_ms"],
            "ratio": 1.0,
        },
        {
            "step": "study of the round",
            "cards": n,
            "wall_s": result["study_s"],
            "per_job_ms": result["round_per_job_ms"],
            "ratio": result["ratio"],
        },
        {"step": "export + export --check", "cards": n, "wall_s": result["export_s"]},
        {"step": "the round, end to end", "cards": n, "wall_s": result["round_s"]},
    ]


if __name__ == "__main__":
    result = measure(int(sys.argv[1]) if len(sys.argv) > 1 else ROUND_CARDS)
    for row in rows(result):
        print("  ".join(f"{c}={row.get(c, '–')}" for c in COLUMNS))
