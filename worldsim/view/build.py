"""``worldsim view``'s work: which page the inputs call for, its data, and the files written."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from worldsim.domain.cards import utc_iso
from worldsim.domain.errors import ConfigError
from worldsim.domain.paths import check_file_targets, check_folder_target, staging_folder
from worldsim.study.folder import JobCheck
from worldsim.trace.signing import PublicKey
from worldsim.view.compare import compare_data
from worldsim.view.extract import Verified, trace_data, verified
from worldsim.view.page import render_page, write_page
from worldsim.view.study import (
    check_jobs,
    load_study,
    paired_data,
    study_data,
    study_scores,
    view_segments,
)

__all__ = [
    "Page",
    "build_page",
    "compare_page",
    "default_output",
    "files_folder",
    "studies_page",
    "trace_page",
    "write_study_view",
    "write_view",
    "write_views",
]


@dataclass(frozen=True, slots=True)
class Page:
    """A page to render: its kind (a template and a script), its title and its data."""

    kind: str
    title: str
    data: dict[str, Any]
    cut_off: str = ""
    """Why a run shown holds no result (cut off, or failed): "" when every one does."""


def trace_page(
    path: str | Path,
    *,
    hindsight: str | Path | None = None,
    expect_head: str | None = None,
    public_key: PublicKey | None = None,
) -> Page:
    """The page of one verified trace; ``hindsight`` adds its causal pressure to the charts;
    ``expect_head`` and ``public_key`` are what the trace must be anchored to and signed by."""
    result = verified(path, expect_head=expect_head, public_key=public_key)
    data = trace_data(
        result,
        pressure=_causal(hindsight, result.trace.started.card.get("id")) if hindsight else None,
        anchored=expect_head is not None,
    )
    meta = data["meta"]
    title = f"{meta['card']} · {meta['policy']} · seed {meta['seed']}"
    return Page("trace", title, data, _cut_off(result))


def compare_page(a: str | Path, b: str | Path) -> Page:
    """Two verified runs of one card side by side."""
    sides = (verified(a), verified(b))
    data = compare_data(trace_data(sides[0]), trace_data(sides[1]))
    return Page(
        "compare",
        f"compare · {data['sides'][0]['meta']['card']}",
        data,
        "; ".join(filter(None, map(_cut_off, sides))),
    )


def _cut_off(checked: Verified) -> str:
    why = checked.verification.why_incomplete
    return f"{checked.verification.path} holds no result: {why}" if why else ""


def build_page(
    paths: Sequence[str | Path],
    *,
    hindsight: str | Path | None = None,
    expect_head: str | None = None,
    public_key: PublicKey | None = None,
) -> Page:
    """One trace gives its page, two give the compare page."""
    for path in paths:
        if Path(path).is_dir():
            raise ConfigError("expected a trace file (JSONL), not a directory", file=path)
    if len(paths) == 1:
        return trace_page(
            paths[0], hindsight=hindsight, expect_head=expect_head, public_key=public_key
        )
    if len(paths) == 2:
        if hindsight:
            raise ConfigError("--hindsight applies to one trace, not to a comparison")
        if expect_head is not None or public_key is not None:
            raise ConfigError(
                "--expect-head and --public-key apply to one trace; check each with "
                "`worldsim verify`",
                field="--expect-head" if expect_head is not None else "--public-key",
            )
        return compare_page(paths[0], paths[1])
    raise ConfigError(f"view takes one trace, or two to compare; {len(paths)} were given")


def default_output(paths: Sequence[str | Path]) -> Path:
    """Beside the (first) trace or study folder: ``run.html`` (``DIR.html``), or
    ``a__vs__b.html`` for a comparison."""
    first = _named(Path(paths[0]))
    if len(paths) == 2:
        return first.with_name(f"{_stem(first)}__vs__{_stem(_named(Path(paths[1])))}.html")
    return first.with_name(f"{_stem(first)}.html")


def _named(path: Path) -> Path:
    """A folder given as ``.`` or ``..`` by its real name (the page is named after it)."""
    return path.resolve() if path.is_dir() and path.name in ("", "..") else path


def _stem(path: Path) -> str:
    return path.name if path.is_dir() else path.stem


def write_views(
    paths: Sequence[Path],
    out: Path | None,
    *,
    hindsight: Path | None = None,
    labels: Path | None = None,
    expect_head: str | None = None,
    public_key: PublicKey | None = None,
) -> tuple[Path, str]:
    """What ``worldsim view`` writes: traces give their page, study folders theirs. Returns
    the page's path and why a run it shows holds no result ("" when every one does)."""
    target = out if out is not None else default_output(paths)
    if not any(Path(p).is_dir() for p in paths):
        if labels is not None:
            raise ConfigError("--labels applies to a study folder, not to a trace")
        page = build_page(
            paths, hindsight=hindsight, expect_head=expect_head, public_key=public_key
        )
        return write_view(page, target), page.cut_off
    if expect_head is not None or public_key is not None:
        raise ConfigError(
            "--expect-head and --public-key apply to a trace; a study's traces are checked "
            "against its lock",
            field="--expect-head" if expect_head is not None else "--public-key",
        )
    if not all(Path(p).is_dir() for p in paths):
        raise ConfigError("view compares two traces or two study folders, not one of each")
    if hindsight is not None:
        raise ConfigError("--hindsight applies to one trace, not to a study")
    if len(paths) == 1:
        return write_study_view(paths[0], target, labels=labels), ""
    if len(paths) == 2:
        if labels is not None:
            raise ConfigError("--labels applies to one study, not to a comparison")
        return write_view(studies_page(paths[0], paths[1]), target), ""
    raise ConfigError(f"view takes one study folder, or two to compare; {len(paths)} were given")


def write_view(page: Page, out: str | Path) -> Path:
    """Render ``page`` and write it atomically to ``out``."""
    return write_page(out, render_page(page.kind, page.data, title=page.title))


def files_folder(out: Path) -> Path:
    """The folder of a study page's job pages: ``study.html`` → ``study_files/``."""
    return out.with_name(f"{out.stem}_files")


def write_study_view(folder: Path, out: str | Path, *, labels: Path | None = None) -> Path:
    """The study page at ``out`` and every verified job's trace page under
    :func:`files_folder`. The job pages are written to a temporary folder that replaces the old
    one only once the study page is ready: a refused input leaves nothing half-written."""
    target = Path(out)
    check_file_targets([target])
    check_folder_target(files_folder(target), "--out")
    study = load_study(folder)
    if labels is not None:
        from worldsim.scoring.labels import load_labels

        load_labels(labels)  # bad labels are refused before any page is written
    pages = staging_folder(files_folder(target))
    try:
        checked = [_write_job_page(pages, check) for check in check_jobs(study)]
        scores = study_scores(study, checked, labels) if labels is not None else None
        data = study_data(study, checked, files=files_folder(target).name, scores=scores)
        html = render_page("study", data, title=f"study · {study.name}")
        shutil.rmtree(files_folder(target), ignore_errors=True)
        try:
            pages.rename(files_folder(target))
        except OSError as exc:
            raise ConfigError(
                f"cannot write: {exc.strerror or exc}", file=files_folder(target)
            ) from None
    finally:
        shutil.rmtree(pages, ignore_errors=True)
    return write_page(target, html)


def _write_job_page(pages: Path, check: JobCheck[Verified]) -> JobCheck[Any]:
    """Write the trace page of a job whose trace verifies; the check, without the replay."""
    if check.read is None:
        return check
    row = check.row.to_dict()
    data = trace_data(check.read)
    data["verification"]["anchor"] = (
        "matches the study's job log" if check.usable else f"MISMATCH: {check.note}"
    )
    meta = data["meta"]
    title = f"{meta['card']} · {row['method']} · {row['forecast_date']} · seed {meta['seed']}"
    write_page(pages.joinpath(*view_segments(row)), render_page("trace", data, title=title))
    return replace(check, read=None)


def studies_page(a: Path, b: Path) -> Page:
    """Two studies' forecasts paired job by job."""
    sides = []
    for folder in (a, b):
        study = load_study(folder)
        checked = [replace(c, read=None) for c in check_jobs(study)]
        sides.append((folder, study_data(study, checked, files="", scores=None)))
    data = paired_data((sides[0][0], sides[0][1]["jobs"]), (sides[1][0], sides[1][1]["jobs"]))
    data["names"] = [side["name"] for _, side in sides]
    return Page("studies", f"compare studies · {_named(a).name} · {_named(b).name}", data)


def _causal(path: str | Path, card_id: str | None) -> dict[str, Any]:
    """The causal pressure of the hindsight graph in ``path``, refused as score refuses it:
    on a structural error, or when written for another card than ``card_id`` (the run's)."""
    from worldsim.scoring.hindsight.graph import check_graph, load_hindsight
    from worldsim.scoring.hindsight.pressure import causal_pressure

    graph = load_hindsight(path)
    check_graph(graph, file=path, card_id=card_id)
    points = causal_pressure(graph)
    return {"causal": [[utc_iso(p.date), p.value] for p in points]}
