"""One trace format: worldsim writes and reads format v2 only; a trace of another format is
refused with one line naming its version and the release that reads it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support import forge, invoke
from worldsim.domain.errors import TraceError
from worldsim.domain.version import __version__
from worldsim.trace.reader import read_trace
from worldsim.trace.records import FORMAT_VERSION


def _of_format(version: object) -> Any:
    def edit(records: list[dict[str, Any]]) -> None:
        for record in records:
            record["v"] = version

    return edit


def test_every_line_a_run_writes_is_of_this_format(branching_demo_trace: Path) -> None:
    trace = read_trace(branching_demo_trace)
    assert FORMAT_VERSION == 2
    assert {line.obj["v"] for line in trace.lines} == {2}


def test_a_trace_of_format_1_is_refused_naming_the_release_that_reads_it(
    branching_demo_trace: Path, tmp_path: Path
) -> None:
    old = tmp_path / "old.jsonl"
    forge(branching_demo_trace, old, _of_format(1))
    expected = (
        f"trace format v1: worldsim {__version__} reads format v2 only; worldsim 0.2.0 reads v1"
    )
    with pytest.raises(TraceError) as caught:
        read_trace(old)
    assert caught.value.message == expected and caught.value.line == 1
    for command in (("verify", old), ("replay", old)):
        outcome = invoke(*command)
        assert outcome.code == 1, command
        assert expected in outcome.err and "Traceback" not in outcome.err
        assert len(outcome.err.strip().splitlines()) == 1


@pytest.mark.parametrize("version", [3, 0, "2", None, True])
def test_a_trace_of_an_unknown_format_is_refused(
    branching_demo_trace: Path, tmp_path: Path, version: object
) -> None:
    other = tmp_path / "other.jsonl"
    forge(branching_demo_trace, other, _of_format(version))
    with pytest.raises(TraceError, match=r"is not v2, the one worldsim reads"):
        read_trace(other)
