"""Outputs at paths the user names: a path that cannot be written is one error line naming it
(exit 2, no traceback, nothing written); several files are written all or nothing; a written
file gets the mode ``open()`` gives it; an input folder given for a file is called a folder."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import DEMO_CARD, ROOT, Outcome, invoke
from worldsim.domain import paths
from worldsim.domain.errors import ConfigError
from worldsim.domain.files import write_files

SCENARIOS = ROOT / "scenarios"
LABELS = SCENARIOS / "labels"
GRAPH = SCENARIOS / "hindsight" / "merger-review.json"
ARTICLES = SCENARIOS / "corpus" / "articles.jsonl"
RESOLUTIONS = ROOT / "tests" / "interop" / "data" / "2025-10-26_resolution_set.json"
QUESTIONS_CSV = (
    "question,as_of,deadline\n"
    "Will alpha happen?,2027-01-01,2027-02-01\n"
    "Will beta happen?,2027-01-01,2027-02-01\n"
)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory, branching_demo_trace: Path) -> dict[str, Path]:
    """A trace, a study of two jobs (with its manifest and a prereg), a CSV of two
    questions."""
    root = tmp_path_factory.mktemp("inputs")
    manifest = root / "study.yaml"
    manifest.write_text(
        yaml.safe_dump(
            {
                "name": "two-jobs",
                "cards": [str(DEMO_CARD)],
                "seeds": [0],
                "methods": [
                    {"label": "direct", "forecast": {"model": "offline"}},
                    {"label": "nobranch", "run": {"policy": "no_branch", "ticks": 2}},
                ],
            }
        ),
        encoding="utf-8",
    )
    study = root / "study"
    done = invoke("batch", manifest, "--out", study)
    assert done.code == 0, done.err
    questions = root / "questions.csv"
    questions.write_text(QUESTIONS_CSV, encoding="utf-8")
    prereg = root / "prereg.yaml"
    prereg.write_text(
        "primary_metric: brier\nmethods: [direct, nobranch]\nbaseline: direct\n"
        "comparisons: ['direct:nobranch']\n",
        encoding="utf-8",
    )
    return {
        "trace": branching_demo_trace,
        "study": study,
        "manifest": manifest,
        "questions": questions,
        "prereg": prereg,
    }


FILE_WRITERS = {
    "view": "view {trace} -o {out}",
    "view study": "view {study} -o {out}",
    "score --json": "score {trace} --labels {labels} --json {out}",
    "score --csv": "score {trace} --labels {labels} --csv {out}",
    "score --markdown": "score {trace} --labels {labels} --markdown {out}",
    "export": "export {study} --method direct --format csv -o {out}",
    "hindsight forecast-graph": "hindsight forecast-graph {trace} -o {out}",
    "build annotate": "build annotate {graph} -o {out}",
    "build hindsight": "build hindsight {card} --label {labels} -o {out}",
    "gateway ingest": "gateway ingest {articles} --db {out}",
    "prereg lock": "prereg lock {prereg} --predictions {study} -o {out}",
    "keygen": "keygen {out}",
}
"""The commands that write a file the user names, with their arguments."""
FOLDER_WRITERS = {
    "score --plots": "score {trace} --labels {labels} --plots {out}",
    "hindsight pressure": "hindsight pressure {trace} --hindsight {graph} -o {out}",
    "build questions": "build questions {articles} -o {out}",
    "cards import": "cards import {questions} -o {out}",
    "cards labels": "cards labels {resolutions} -o {out}",
    "batch": "batch {manifest} --out {out}",
}
"""The commands that write into a folder the user names."""


def _args(command: str, inputs: dict[str, Path], out: Path) -> list[str]:
    """A command's arguments, each path in its place (no path here holds a space)."""
    named = {
        **inputs,
        "out": out,
        "labels": LABELS,
        "graph": GRAPH,
        "card": DEMO_CARD,
        "articles": ARTICLES,
        "resolutions": RESOLUTIONS,
    }
    template = {**FILE_WRITERS, **FOLDER_WRITERS}[command]
    return [word.format(**named) for word in template.split()]


TOO_LONG = "x" * 300
"""A name longer than any file system takes (255 bytes on Linux and macOS)."""


def _snapshot(folder: Path) -> dict[str, tuple[bytes | None, int]]:
    """Every path under ``folder``: its bytes (None for a folder) and its mode."""
    found: dict[str, tuple[bytes | None, int]] = {}
    for p in sorted(folder.rglob("*")):
        content = p.read_bytes() if p.is_file() else None
        found[str(p.relative_to(folder))] = (content, stat.S_IMODE(p.stat().st_mode))
    return found


def _workspace(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A folder holding a file ``blocker`` and a folder ``taken`` (with a file in it)."""
    work = tmp_path / "work"
    (work / "taken").mkdir(parents=True)
    (work / "taken" / "kept.txt").write_text("kept\n")
    (work / "blocker").write_text("x\n")
    return work, work / "blocker", work / "taken"


def _assert_refused(done: Outcome, named: str) -> None:
    assert done.code == 2, (done.code, done.err, done.out)
    assert "Traceback" not in done.err
    lines = done.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.err
    assert named in lines[0]


CASES = [
    *[(c, k) for c in sorted(FILE_WRITERS) for k in ("under a file", "a folder", "too long")],
    *[(c, k) for c in sorted(FOLDER_WRITERS) for k in ("under a file", "a file", "too long")],
]
"""Each command with each way its output path (a file, or a folder) cannot be written."""


@pytest.mark.parametrize(("command", "kind"), CASES)
def test_an_output_path_that_cannot_be_written_is_one_error_line_and_nothing_written(
    inputs: dict[str, Path], tmp_path: Path, command: str, kind: str
) -> None:
    work, blocker, taken = _workspace(tmp_path)
    out, named = {
        "under a file": (blocker / "x.json", str(blocker)),
        "a folder": (taken, str(taken)),
        "a file": (blocker, str(blocker)),
        "too long": (work / f"{TOO_LONG}.json", TOO_LONG),
    }[kind]
    before = _snapshot(work)
    _assert_refused(invoke(*_args(command, inputs, out)), named)
    assert _snapshot(work) == before


def test_cards_import_with_one_card_path_taken_by_a_folder_writes_no_card(
    inputs: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "cards"
    (out / "will-beta-happen.yaml").mkdir(parents=True)
    before = _snapshot(out)
    done = invoke("cards", "import", inputs["questions"], "-o", out)
    _assert_refused(done, str(out / "will-beta-happen.yaml"))
    assert "is a folder, not a file" in done.err
    assert _snapshot(out) == before  # no will-alpha-happen.yaml, no rejects.jsonl


def test_build_hindsight_onto_a_folder_with_force_leaves_no_build_log(tmp_path: Path) -> None:
    out = tmp_path / "graphs" / "x.json"
    out.mkdir(parents=True)
    done = invoke("build", "hindsight", DEMO_CARD, "--label", LABELS, "-o", out, "--force")
    _assert_refused(done, str(out))
    assert [p.name for p in out.parent.iterdir()] == ["x.json"]  # no x.build.jsonl
    assert list(out.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_folder_is_one_error_line_naming_the_file(
    inputs: dict[str, Path], tmp_path: Path
) -> None:
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        done = invoke("view", inputs["trace"], "-o", folder / "page.html")
        _assert_refused(done, str(folder / "page.html"))
        assert "Permission denied" in done.err
        assert list(folder.iterdir()) == []
    finally:
        folder.chmod(0o755)


@contextlib.contextmanager
def _umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


@settings(max_examples=12, deadline=None)
@given(st.sampled_from([0o002, 0o022, 0o027, 0o077, 0o000, 0o033]))
def test_written_files_get_the_mode_open_gives_under_the_umask(mask: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, _umask(mask):
        folder = Path(tmp)
        plain, secret = folder / "new" / "page.html", folder / "key"
        with (folder / "opened.txt").open("w") as fh:
            fh.write("x")
        write_files({plain: b"page", secret: b"key"}, private={secret})
        assert stat.S_IMODE(plain.stat().st_mode) == 0o666 & ~mask
        assert stat.S_IMODE(plain.stat().st_mode) == stat.S_IMODE(
            (folder / "opened.txt").stat().st_mode
        )
        assert stat.S_IMODE(plain.parent.stat().st_mode) == 0o777 & ~mask
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600


def test_command_outputs_get_the_umask_mode_and_a_private_key_stays_private(
    inputs: dict[str, Path], tmp_path: Path
) -> None:
    with _umask(0o022):
        page = tmp_path / "page.html"
        assert invoke("view", inputs["trace"], "-o", page).code == 0
        study_page = tmp_path / "study" / "study.html"
        assert invoke("view", inputs["study"], "-o", study_page).code == 0
        sheet = tmp_path / "sheet.csv"
        assert invoke("build", "annotate", GRAPH, "-o", sheet).code == 0
        key = tmp_path / "signing.key"
        assert invoke("keygen", key).code == 0
    job_pages = tmp_path / "study" / "study_files"
    for written in [page, study_page, sheet, key.with_name("signing.key.pub")]:
        assert stat.S_IMODE(written.stat().st_mode) == 0o644, written
    for p in [job_pages, *job_pages.rglob("*")]:
        assert stat.S_IMODE(p.stat().st_mode) == (0o755 if p.is_dir() else 0o644), p
    assert stat.S_IMODE(key.stat().st_mode) == 0o600


@settings(max_examples=40, deadline=None)
@given(
    count=st.integers(min_value=2, max_value=5),
    how=st.sampled_from(["a folder", "under a file", "staging fails", "folder fails"]),
    data=st.data(),
)
def test_write_files_leaves_nothing_when_one_target_cannot_be_written(
    count: int, how: str, data: st.DataObject
) -> None:
    """Target 0 replaces an existing file; the others are new, in folders still to be made.
    Whichever one cannot be written, every target and folder is as it was, and no temporary
    file is left."""
    lowest = 0 if how == "staging fails" else 1
    failing = data.draw(st.integers(min_value=lowest, max_value=count - 1), label="failing")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "old.txt").write_bytes(b"old")
        targets = [root / "old.txt"]
        targets += [root / f"sub{i}" / "deeper" / f"f{i}.txt" for i in range(1, count)]
        bad = targets[failing]
        if how == "a folder":
            bad.mkdir(parents=True)
        elif how == "under a file":
            bad.parent.parent.mkdir(parents=True)
            bad.parent.write_bytes(b"in the way")
        before = _snapshot(root)
        real_open, real_mkdir = os.open, Path.mkdir

        def failing_open(path: str | Path, flags: int, mode: int = 0o777) -> int:
            if how == "staging fails" and Path(path).name.startswith(f".{bad.name}."):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real_open(path, flags, mode)

        def failing_mkdir(self: Path, mode: int = 0o777, *args: bool) -> None:
            if how == "folder fails" and self == bad.parent:
                raise OSError(errno.EACCES, os.strerror(errno.EACCES))
            real_mkdir(self, mode, *args)

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(paths.os, "open", failing_open)
            mp.setattr(Path, "mkdir", failing_mkdir)
            with pytest.raises(ConfigError) as refused:
                write_files({t: f"content {i}".encode() for i, t in enumerate(targets)})
        named = bad.parent if how == "folder fails" else bad
        assert str(refused.value).startswith(f"{named}: ")
        assert _snapshot(root) == before


def test_write_files_replaces_every_target_when_all_can_be_written(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"old")
    files = {tmp_path / "a.txt": b"new a", tmp_path / "x" / "y" / "b.txt": b"new b"}
    write_files(files)
    assert {p: p.read_bytes() for p in files} == files
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a.txt", "b.txt", "x", "y"]


def test_an_existing_prereg_lock_is_refused_without_force(
    inputs: dict[str, Path], tmp_path: Path
) -> None:
    lock = tmp_path / "prereg.lock.json"
    args = ("prereg", "lock", inputs["prereg"], "--predictions", inputs["study"], "-o", lock)
    made = invoke(*args)
    assert made.code == 0, made.err
    first = lock.read_bytes()
    again = invoke(*args)
    _assert_refused(again, str(lock))
    assert "--force" in again.err
    assert lock.read_bytes() == first
    forced = invoke(*args, "--force")
    assert forced.code == 0, forced.err
    assert b'"locked_at"' in lock.read_bytes()


@pytest.mark.parametrize(
    "args",
    [
        ("verify", "{dir}"),
        ("forecast", "{dir}", "--model", "offline"),
        ("score", "{trace}", "--labels", str(LABELS), "--prereg", "{dir}"),
        ("gateway", "search", "--db", "{dir}", "--before", "2027-01-01", "merger"),
        ("replay", "{dir}", "--timeline", "t0", "--tick", "1"),
    ],
    ids=["verify", "forecast", "score --prereg", "gateway search --db", "replay"],
)
def test_a_folder_given_for_an_input_file_is_called_a_folder(
    inputs: dict[str, Path], tmp_path: Path, args: tuple[str, ...]
) -> None:
    folder = tmp_path / "a-folder"
    folder.mkdir()
    filled = [a.format(dir=folder, trace=inputs["trace"]) for a in args]
    done = invoke(*filled)
    _assert_refused(done, f"{folder}: is a folder, not a file")


@pytest.mark.parametrize(
    "args",
    [
        ["run", "{name}.yaml"],
        ["verify", "{name}.jsonl"],
        ["replay", "{name}.jsonl"],
        ["view", "{name}.jsonl"],
        ["score", "{name}.jsonl", "--labels", str(LABELS)],
        ["hindsight", "validate", "{name}.json"],
    ],
    ids=lambda args: args[0] if args[0] != "hindsight" else "hindsight-validate",
)
def test_an_input_name_too_long_to_look_at_is_one_error_line(
    tmp_path: Path, args: list[str]
) -> None:
    """The system refuses to look at the path at all: the console entry point names it."""
    import subprocess
    import sys

    name = str(tmp_path / TOO_LONG)
    done = subprocess.run(
        [sys.executable, "-c", "from worldsim.cli import main; main()"]
        + [a.format(name=name) for a in args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    _assert_refused(Outcome(done.returncode, done.stdout, done.stderr), TOO_LONG)
    assert done.stderr.strip().endswith(": File name too long")
