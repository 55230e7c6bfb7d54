"""``worldsim cards import`` and ``worldsim export``: question sets in, forecasts out."""

# No `from __future__ import annotations` here: typer reads every command's signature at
# start-up, even for --help, and string annotations would be parsed again each time.

from pathlib import Path
from typing import Annotated

import typer

from worldsim.cli._app import app, command_group, escape, out_console

__all__ = ["cards_app", "export"]

cards_app = command_group("cards", "Cards from question sets: ForecastBench, CSV or JSONL.")


@cards_app.command("import")
def import_cards(
    source: Annotated[
        Path,
        typer.Argument(
            metavar="SOURCE",
            help="A ForecastBench question set (.json) or a question list (.csv, .jsonl).",
        ),
    ],
    out: Annotated[Path, typer.Option("-o", "--out", metavar="DIR", help="Folder for the cards.")],
) -> None:
    """Turn each question of SOURCE into a card in DIR, and list in DIR/rejects.jsonl each
    question that cannot make one, with the reason.

    A data-set question with several resolution dates gives one card per date; a market
    question one card that ends at the market's close. Cards record their provenance and
    carry no seeds: the initializer role builds each world from the card's text."""
    from worldsim.domain.files import check_folder_target
    from worldsim.interop.questions import import_questions, write_imported

    check_folder_target(out, "--out")
    imported = import_questions(source)
    write_imported(imported, out)
    out_console.print(
        f"{len(imported.cards)} card(s) and {len(imported.rejects)} reject(s) → {escape(str(out))}",
        highlight=False,
        soft_wrap=True,
    )


@cards_app.command("labels")
def import_labels(
    source: Annotated[
        Path, typer.Argument(metavar="RESOLUTION_SET", help="A ForecastBench resolution set.")
    ],
    out: Annotated[Path, typer.Option("-o", "--out", metavar="DIR", help="Folder for labels.")],
) -> None:
    """Write the label of each resolved question of RESOLUTION_SET into DIR, named after the
    card `cards import` made of it; unresolved or unusable ones go to DIR/rejects.jsonl."""
    from worldsim.domain.files import check_folder_target
    from worldsim.interop.labels import import_labels as read_labels

    check_folder_target(out, "--out")
    labels, rejects = read_labels(source, out)
    out_console.print(
        f"{len(labels)} label(s) and {len(rejects)} reject(s) → {escape(str(out))}",
        highlight=False,
        soft_wrap=True,
    )


@app.command()
def export(
    study: Annotated[Path, typer.Argument(metavar="STUDY_DIR", help="A study folder.")],
    out: Annotated[Path, typer.Option("-o", "--out", metavar="FILE", help="File to write.")],
    method: Annotated[str, typer.Option(metavar="LABEL", help="The method to export.")],
    fmt: Annotated[
        str,
        typer.Option("--format", metavar="forecastbench|csv", help="Submission JSON or a table."),
    ] = "forecastbench",
    organization: Annotated[
        str, typer.Option(metavar="NAME", help="Your organization, as the submission names it.")
    ] = "worldsim",
    model_name: Annotated[
        str | None,
        typer.Option("--model-name", metavar="NAME", help="The model's name (default: LABEL)."),
    ] = None,
    question_set: Annotated[
        str | None,
        typer.Option(metavar="NAME", help="The question set's file name (default: STUDY_DIR)."),
    ] = None,
    forecast_due_date: Annotated[
        str | None,
        typer.Option(metavar="YYYY-MM-DD", help="Default: the earliest card as-of."),
    ] = None,
    aggregate: Annotated[
        str,
        typer.Option(metavar="mean|median|logit_mean", help="How a card's seeds are combined."),
    ] = "mean",
) -> None:
    """Write one method's forecasts of a study as a ForecastBench submission, or a CSV.

    One forecast per question (its provenance id and source), the seeds combined by
    --aggregate, the run's report summary as reasoning. Jobs that did not complete, are not
    binary or are not at the card's own forecast date are left out and counted."""
    from typing import cast

    from worldsim.domain.errors import ConfigError
    from worldsim.interop.export import Aggregate, export_study

    if fmt not in ("forecastbench", "csv"):
        raise ConfigError(f"unknown format {fmt!r}: forecastbench or csv", field="--format")
    if aggregate not in ("mean", "median", "logit_mean"):
        raise ConfigError(
            f"unknown aggregate {aggregate!r}: mean, median or logit_mean", field="--aggregate"
        )
    done = export_study(
        study,
        out,
        fmt="forecastbench" if fmt == "forecastbench" else "csv",
        method=method,
        organization=organization,
        model=model_name or method,
        question_set=question_set,
        forecast_due_date=forecast_due_date,
        aggregate=cast("Aggregate", aggregate),
    )
    out_console.print(
        f"{done.questions} forecast(s) → {escape(str(done.path))} "
        f"({done.left_out} job(s) left out)",
        highlight=False,
        soft_wrap=True,
    )
