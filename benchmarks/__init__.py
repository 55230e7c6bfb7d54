"""Performance benchmarks for worldsim (DESIGN §6): run with ``python -m benchmarks``.

Each ``bench_*.py`` module defines ``run(quick: bool) -> dict`` and ``rows(result) -> list[dict]``;
the runner in ``__main__`` discovers them, prints one table each and writes all results as JSON.
Results are reported as ratios, because absolute times on a shared machine are noise.
"""

from __future__ import annotations
