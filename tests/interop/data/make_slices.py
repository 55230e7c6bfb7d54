"""How the slices in this folder were cut from ForecastBench's published files (see README.md).

    python tests/interop/data/make_slices.py FORECASTBENCH_DATASETS_CHECKOUT

Not run by the tests: it needs a checkout of forecastingresearch/forecastbench-datasets.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

PER_SOURCE = 12
MARKETS = {"infer", "manifold", "metaculus", "polymarket"}
ROUNDS = {
    "2024-07-21-human.json": "2024-07-21_resolution_set.json",
    "2025-10-26-llm.json": "2025-10-26_resolution_set.json",
}


def _slice_set(doc: dict) -> dict:
    """The first PER_SOURCE questions of each source, in file order, and every market question
    closing after 2200 (a platform's "never")."""
    taken: dict[str, int] = defaultdict(int)
    kept = []
    for q in doc["questions"]:
        late = q["source"] in MARKETS and str(q["market_info_close_datetime"])[:4] > "2200"
        if taken[q["source"]] < PER_SOURCE or late:
            taken[q["source"]] += 1
            kept.append(q)
    return {**doc, "questions": kept}


def _slice_resolutions(doc: dict, questions: list[dict]) -> dict:
    """Every row of the sliced questions, the first 24 combination rows, and the first 24 rows of
    single questions outside the slice."""
    ids = {(q["source"], q["id"]) for q in questions}
    ours, combos, others = [], [], []
    for row in doc["resolutions"]:
        if isinstance(row["id"], list):
            combos.append(row)
        elif (row["source"], row["id"]) in ids:
            ours.append(row)
        else:
            others.append(row)
    return {**doc, "resolutions": ours + combos[:24] + others[:24]}


def main(checkout: Path, out: Path) -> None:
    for name, resolutions in ROUNDS.items():
        doc = _slice_set(json.loads((checkout / "datasets/question_sets" / name).read_text()))
        (out / name).write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
        res = json.loads((checkout / "datasets/resolution_sets" / resolutions).read_text())
        sliced = _slice_resolutions(res, doc["questions"])
        (out / resolutions).write_text(json.dumps(sliced, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(__file__).parent)
