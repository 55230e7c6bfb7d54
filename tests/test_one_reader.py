"""Exactly one place parses trace files: worldsim.trace.reader, with the line module it reads
with (worldsim.trace.lines).

Statically, no module that handles traces (the trace and scoring packages, and any module that
imports them) calls a JSON parser except where listed below, for a file that is not a trace; and
no module but the reader imports a third-party JSON library (``worldsim.domain.jsonbytes``
imports msgspec to encode, and parses nothing). At run time, every command that
reads a trace does so without ``json.loads`` ever seeing a trace line.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from tests.support import DEMO_CARD, ROOT
from worldsim.cli import app
from worldsim.domain.cards import load_card
from worldsim.domain.config import RunConfig
from worldsim.domain.policy import load_policy
from worldsim.scoring.hindsight.forecast import load_forecast_events, trace_records
from worldsim.scoring.inputs import load_predictions
from worldsim.sim.session import run_card
from worldsim.trace.reader import read_trace
from worldsim.trace.verify import canonical_hash, verify_trace

READER = ("worldsim/trace/reader.py", "worldsim/trace/lines.py")
ENCODER = "worldsim/domain/jsonbytes.py"
_THIRD_PARTY = frozenset({"msgspec", "orjson", "ujson", "simplejson", "rapidjson", "ijson"})
_PARSE_NAMES = frozenset({"load", "loads", "decode", "raw_decode", "JSONDecoder", "Decoder"})


def _parser_calls(tree: ast.AST) -> Iterator[tuple[str, int]]:
    """(enclosing function, line) of each call to a JSON parser in a module."""
    imported_from_json = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module in {"json", "json.decoder"}
        for alias in node.names
        if alias.name in _PARSE_NAMES
    }

    def visit(node: ast.AST, function: str) -> Iterator[tuple[str, int]]:
        for child in ast.iter_child_nodes(node):
            name = function
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = child.name
            if isinstance(child, ast.Call):
                func = child.func
                root = func
                while isinstance(root, ast.Attribute):
                    root = root.value
                if (
                    isinstance(func, ast.Attribute)
                    and func.attr in _PARSE_NAMES
                    and isinstance(root, ast.Name)
                    and root.id in {"json", *_THIRD_PARTY}
                ) or (isinstance(func, ast.Name) and func.id in imported_from_json):
                    yield name, child.lineno
            yield from visit(child, name)

    yield from visit(tree, "<module>")


def _imports(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def _handles_traces(relative: str, imports: set[str]) -> bool:
    if relative.startswith(("worldsim/trace/", "worldsim/scoring/")):
        return True
    return any(m.startswith(("worldsim.trace", "worldsim.scoring")) for m in imports)


_WRITERS_OWN_BYTES = {(ENCODER, "_plain")}
"""Where the encoder reads back bytes it made itself (a row, JSON made already) to hand them to
the standard library's writer: never a line read from a trace."""


def _violations(root: Path = ROOT) -> list[str]:
    bad: list[str] = []
    for path in sorted((root / "worldsim").rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if relative in READER:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imports = _imports(tree)
        if relative != ENCODER:
            bad.extend(
                f"{relative} imports {m}" for m in imports if m.split(".")[0] in _THIRD_PARTY
            )
        if _handles_traces(relative, imports) or relative == ENCODER:
            bad.extend(
                f"{relative}:{line} parses JSON in {function}"
                for function, line in _parser_calls(tree)
                if (relative, function) not in _WRITERS_OWN_BYTES
            )
    return bad


def test_only_the_reader_parses_trace_lines() -> None:
    # graph and event files (not traces) are read through worldsim.domain.files
    assert _violations() == []


def test_the_check_sees_a_parser_call(tmp_path: Path) -> None:
    package = tmp_path / "worldsim" / "scoring"
    package.mkdir(parents=True)
    (package / "probe.py").write_text(
        "import json\nfrom json import loads as parse\nimport orjson\n\n"
        "def rows(raw):\n    return json.loads(raw), parse(raw)\n\n"
        "def fast(raw):\n    return orjson.loads(raw)\n",
        encoding="utf-8",
    )
    assert _violations(tmp_path) == [
        "worldsim/scoring/probe.py imports orjson",
        "worldsim/scoring/probe.py:6 parses JSON in rows",
        "worldsim/scoring/probe.py:6 parses JSON in rows",
        "worldsim/scoring/probe.py:9 parses JSON in fast",
    ]
    assert _handles_traces("worldsim/cli/x.py", {"worldsim.trace.reader"})
    assert not _handles_traces("worldsim/models/x.py", {"worldsim.domain.errors"})


# --------------------------------------------------------------------------------------------
# at run time


@pytest.fixture(scope="module")
def trace_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("one-reader")
    config = RunConfig(card=load_card(DEMO_CARD), policy=load_policy("branching"), seed=2, ticks=4)
    return anyio.run(lambda: run_card(config, out, fsync=False)).trace


@pytest.fixture
def no_trace_line_in_json_loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make the standard library's JSON decoder refuse a trace line; returns what it parsed."""
    seen: list[str] = []
    original = json.JSONDecoder.raw_decode

    def guarded(self: json.JSONDecoder, s: str, idx: int = 0) -> tuple[object, int]:
        seen.append(s[:20])
        if s[idx:].startswith('{"v":2,"seq":'):
            raise AssertionError("a trace line reached json.loads outside the trace reader")
        return original(self, s, idx)

    monkeypatch.setattr(json.JSONDecoder, "raw_decode", guarded)
    return seen


def test_commands_read_traces_only_through_the_reader(
    trace_path: Path, tmp_path: Path, no_trace_line_in_json_loads: list[str]
) -> None:
    with pytest.raises(AssertionError, match="outside the trace reader"):
        json.loads(trace_path.read_bytes().splitlines()[0])  # the guard is on
    assert len(load_predictions([trace_path]).rows) == 1
    assert trace_records(trace_path) and load_forecast_events(trace_path)
    assert (
        canonical_hash(read_trace(trace_path)) == verify_trace(trace_path, canonical=True).canonical
    )
    graph = ROOT / "scenarios" / "hindsight" / "merger-review.json"
    labels = ROOT / "scenarios" / "labels"
    commands = [
        ["score", str(trace_path), "--labels", str(labels), "--hindsight", str(graph.parent)],
        ["hindsight", "ker", str(trace_path), "--hindsight", str(graph)],
        ["hindsight", "sources", str(trace_path), "--hindsight", str(graph)],
        ["hindsight", "forecast-graph", str(trace_path), "-o", str(tmp_path / "f.json")],
        ["replay", str(trace_path)],
        ["verify", str(trace_path)],
    ]
    for args in commands:
        result = CliRunner().invoke(app, args)
        assert result.exception is None and result.exit_code == 0, (args, result.output)
    # the graphs and labels were parsed by json.loads; no trace line was
    assert no_trace_line_in_json_loads
