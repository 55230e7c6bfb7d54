"""The benchmark runner refuses a bad ``--out`` before it runs anything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_out_that_is_a_folder_is_refused_in_one_line_before_any_benchmark(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--only", "columnar", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert f"--out {tmp_path} is a folder" in done.stderr
    assert "Traceback" not in done.stderr
    assert "running" not in done.stdout  # refused before the first benchmark starts
    assert list(tmp_path.iterdir()) == []
