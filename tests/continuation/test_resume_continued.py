"""Resuming a continued run (``run --continue``) cut off after its particles were re-weighted:
any such cut resumes to the uninterrupted continuation's canonical hash; a cut before the
re-weighting, a missing parent or another parent in its place is refused, saying what to do."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.continuation.test_continue import _continue, _parent
from tests.support import invoke
from worldsim.domain.errors import ConfigError
from worldsim.sim.resuming import resume_run
from worldsim.trace.reader import read_trace
from worldsim.trace.verify import verify_trace


@dataclass(frozen=True, repr=False)
class Whole:
    """A continued run's bytes, canonical hash, and the byte offsets where its re-weighting
    record starts and ends."""

    blob: bytes
    canonical: str
    start: int
    end: int


def _whole(folder: Path) -> tuple[Path, Whole]:
    parent = _parent(folder)
    child = _continue(parent.trace)
    blob = child.trace.read_bytes()
    start = blob.index(b'"type":"reweighting"')
    start = blob.rindex(b"\n", 0, start) + 1
    end = blob.index(b"\n", start) + 1
    verdict = verify_trace(child.trace, canonical=True)
    assert verdict.complete and verdict.canonical is not None
    # a cut after the re-weighting can land inside a tick, so there must be ticks after it
    assert blob.count(b'"type":"tick_committed"', end) >= 2
    return parent.trace, Whole(blob, str(verdict.canonical), start, end)


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> Whole:
    return _whole(tmp_path_factory.mktemp("continued"))[1]


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_a_continuation_cut_after_its_reweighting_resumes_to_the_same_hash(
    whole: Whole, tmp_path: Path, data: st.DataObject
) -> None:
    blob, want, end = whole.blob, whole.canonical, whole.end
    cut = data.draw(st.integers(end, len(blob) - 2), label="cut")
    path = tmp_path / "crashed.jsonl"
    path.write_bytes(blob[:cut])
    anyio.run(lambda: resume_run(path, fsync=False))
    verdict = verify_trace(path, canonical=True)
    assert verdict.exit_code == 0 and verdict.complete
    assert verdict.canonical == want
    assert read_trace(path).first("run_resumed") is not None


@pytest.mark.parametrize("where", ["in the particles", "in the re-weighting record"])
def test_a_continuation_cut_before_its_reweighting_is_refused_saying_what_to_do(
    whole: Whole, tmp_path: Path, where: str
) -> None:
    blob, start, end = whole.blob, whole.start, whole.end
    cut = start if where == "in the particles" else (start + end) // 2
    path = tmp_path / "early.jsonl"
    path.write_bytes(blob[:cut])
    refused = invoke("run", "--resume", path)
    assert refused.code == 2, refused.err
    assert "before its news was weighed" in refused.err and "--continue PARENT" in refused.err
    assert path.read_bytes() == blob[:cut]  # nothing written


def test_the_cli_resumes_a_continuation_whose_parent_moved_beside_it(tmp_path: Path) -> None:
    parent, whole = _whole(tmp_path / "made")
    blob, want, end = whole.blob, whole.canonical, whole.end
    moved = tmp_path / "moved"
    moved.mkdir()
    shutil.move(parent, moved / parent.name)
    path = moved / "cut.jsonl"
    path.write_bytes(blob[: end + (len(blob) - end) // 2])
    resumed = invoke("run", "--resume", path)
    assert resumed.code == 0, resumed.err
    assert "resumed and completed" in resumed.out
    assert verify_trace(path, canonical=True).canonical == want


def test_a_resume_passes_over_another_run_at_the_recorded_path_for_the_parent_beside(
    tmp_path: Path,
) -> None:
    """Another run of the parent's name at the recorded path, the parent itself beside the
    continued trace: the resume found the first, and refused."""
    parent, whole = _whole(tmp_path / "made")
    beside = tmp_path / "elsewhere"
    beside.mkdir()
    shutil.copy(parent, beside / parent.name)
    path = beside / "cut.jsonl"
    path.write_bytes(whole.blob[: whole.end + (len(whole.blob) - whole.end) // 2])
    _parent(tmp_path / "made", overwrite=True, max_active=2)  # another run, at the recorded path
    resumed = invoke("run", "--resume", path)
    assert resumed.code == 0, resumed.err
    assert verify_trace(path, canonical=True).canonical == whole.canonical


def test_a_continuation_is_not_resumed_from_a_missing_or_another_parent(tmp_path: Path) -> None:
    parent, whole = _whole(tmp_path / "made")
    blob, end = whole.blob, whole.end
    path = tmp_path / "cut.jsonl"
    cut = blob[: end + (len(blob) - end) // 2]
    path.write_bytes(cut)
    original = parent.read_bytes()
    parent.unlink()
    missing = invoke("run", "--resume", path)
    assert missing.code == 2 and "put the parent trace back" in missing.err
    _parent(tmp_path / "made", overwrite=True, max_active=2)  # another run, same name
    assert parent.read_bytes() != original
    other = invoke("run", "--resume", path)
    assert other.code == 2 and "is not the run this one continued" in other.err
    assert path.read_bytes() == cut
    with pytest.raises(ConfigError, match="is not the run this one continued"):
        anyio.run(lambda: resume_run(path, fsync=False))
