"""``worldsim view``: a verified trace, or two compared, as one self-contained HTML file; a
study folder as a page of its jobs and scores, or two studies paired."""

# No `from __future__ import annotations` here: typer reads every command's signature at
# start-up, even for --help, and string annotations would be parsed again each time.

from pathlib import Path
from typing import Annotated

import typer

from worldsim.cli._app import (
    ExpectHeadOption,
    PublicKeyOption,
    app,
    err_console,
    escape,
    out_console,
    trace_checks,
)

__all__ = ["view"]


@app.command()
def view(
    inputs: Annotated[
        list[Path],
        typer.Argument(
            metavar="TRACE|STUDY",
            help="A trace, or two of one card to compare; a study folder (worldsim batch "
            "--out DIR), or two to pair.",
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "-o", "--out", metavar="FILE.html", help="Where to write (default: beside the input)."
        ),
    ] = None,
    hindsight: Annotated[
        Path | None,
        typer.Option(
            metavar="GRAPH",
            help="A hindsight graph of the run's card: chart its causal pressure beside the run's.",
        ),
    ] = None,
    labels: Annotated[
        Path | None,
        typer.Option(
            "--labels",
            metavar="PATH",
            help="Labels for a study: add its scores, reliability diagram and forest plot.",
        ),
    ] = None,
    expect_head: ExpectHeadOption = None,
    public_key: PublicKeyOption = None,
    open_it: Annotated[
        bool,
        typer.Option("--open", help="Open the page in the default browser (without one, say so)."),
    ] = False,
) -> None:
    """Write one HTML file that shows a run: the multiverse tree, every tick, model calls,
    evidence and charts (inline CSS and script, no network; it opens from disk).

    The trace must verify: one `worldsim verify` refuses is refused with its line (exit 1),
    nothing written; a run that was cut off or failed is shown, marked incomplete, and the
    command exits 3. With --expect-head and --public-key it must also have that head and be
    signed by that key, and the banner says both were checked. Two traces of one card give a
    side-by-side comparison.

    A study folder gives a page of its predictions (sortable, filterable), summaries per
    method, condition and date, each job's trace check against the study's lock, and a link to
    each job's trace page (written to FILE_files/); --labels adds the scores. Two study folders
    give the paired differences in p_yes, job by job. Prints the path.
    """
    from worldsim.view.build import write_views

    head, key = trace_checks(expect_head, public_key)
    path, cut_off = write_views(
        inputs, out, hindsight=hindsight, labels=labels, expect_head=head, public_key=key
    )
    out_console.print(str(path), highlight=False, soft_wrap=True)
    if hindsight is not None:
        from worldsim.cli.hindsight import note_if_not_built
        from worldsim.scoring.hindsight.graph import load_hindsight

        note_if_not_built(load_hindsight(hindsight), hindsight)
    if open_it:
        import webbrowser

        if not webbrowser.open(path.resolve().as_uri()):
            err_console.print(
                "note: no browser could be started here; open the file above in one",
                highlight=False,
            )
    if cut_off:
        err_console.print(f"note: {escape(cut_off)}", highlight=False)
        raise typer.Exit(3)
