"""``worldsim cards import`` and ``worldsim export``: question sets in, forecasts out."""

# No `from __future__ import annotations` here: typer reads every command's signature at
# start-up, even for --help, and string annotations would be parsed again each time.

from pathlib import Path
from typing import Annotated

import typer

from worldsim.cli._app import app, command_group, err_console, escape, out_console

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
    out: Annotated[
        Path, typer.Option("-o", "--out", metavar="DIR", help="Folder for the cards (one round).")
    ],
    naive: Annotated[
        Path | None,
        typer.Option(
            "--naive",
            metavar="FILE",
            help="ForecastBench's Naive Forecaster file of the round: its forecasts of the "
            "data-set questions become their cards' priors (else 0.5).",
        ),
    ] = None,
) -> None:
    """Turn each question of SOURCE into a card in DIR, and list in DIR/rejects.jsonl each
    question that cannot make one, with the reason.

    A data-set question gives one card per resolution date; a market question one card that
    ends at the market's close, whose prior (seeds.base_rate) is the market's freeze value.
    Combination questions are rejected ("combination"), and so is a question whose id, source,
    question, freeze date (freeze_datetime) or market freeze value (freeze_datetime_value) is
    missing or bad where its card needs it, the reason naming the field. Each card records the round
    (question_set, forecast due date) in its provenance; a round goes into a folder of its
    own: DIR holding cards of another question set is refused. A question list needs the
    columns question, as_of and deadline (optional: id, background, outcomes as A|B|C); one
    missing, another column, no question at all or no question that makes a card is refused,
    exit 2, with nothing written."""
    from worldsim.domain.errors import ConfigError
    from worldsim.domain.files import check_folder_target
    from worldsim.interop.forecast_file import naive_forecasts
    from worldsim.interop.questions import import_questions, write_imported

    check_folder_target(out, "--out")
    naive_due, priors = naive_forecasts(naive) if naive is not None else (None, None)
    imported = import_questions(source, priors)
    if naive_due is not None and imported.round is not None and imported.round.due != naive_due:
        raise ConfigError(
            f"the naive forecasts are of the round due {naive_due}, the question set's is due "
            f"{imported.round.due}",
            field="--naive",
        )
    if not imported.cards:  # nothing to simulate: nothing is written
        listed = "; ".join(f"{n} {reason}" for reason, n in imported.reasons().most_common())
        raise ConfigError(
            f"none of its {imported.questions} question(s) makes a card: {listed}", file=source
        )
    write_imported(imported, out, source)
    what = f"{imported.questions} question(s) of {source.name}"
    if imported.round is not None:
        what = f"{imported.questions} question(s) of {imported.round.name}"
        what += f" (due {imported.round.due})" if imported.round.due else ""
    out_console.print(
        f"{len(imported.cards)} card(s) from {escape(what)} → {escape(str(out))}",
        highlight=False,
        soft_wrap=True,
    )
    reasons = imported.reasons()
    if reasons:
        listed = "; ".join(f"{n} {reason}" for reason, n in reasons.most_common())
        out_console.print(
            f"{len(imported.rejects)} rejected ({escape(str(out / 'rejects.jsonl'))}): "
            f"{escape(listed)}",
            highlight=False,
            soft_wrap=True,
        )


@cards_app.command("labels")
def import_labels(
    source: Annotated[
        Path, typer.Argument(metavar="RESOLUTION_SET", help="A ForecastBench resolution set.")
    ],
    out: Annotated[Path, typer.Option("-o", "--out", metavar="DIR", help="Folder for labels.")],
    cards: Annotated[
        Path | None,
        typer.Option(
            "--cards",
            metavar="CARDS_DIR",
            help="Only label the cards of this folder (`cards import`'s), of the same round.",
        ),
    ] = None,
) -> None:
    """Write one label per row of RESOLUTION_SET into DIR, named after the card `cards import`
    made of its question; rows left go to DIR/rejects.jsonl with the reason.

    A resolved row is a yes/no label; an unresolved market row a provisional label holding the
    market's value (scored by Brier only, never a resolution date); combination rows,
    unresolved data-set rows and rows whose id, source, resolution_date or resolved is missing
    or bad (resolved must be a JSON boolean) are left, the reason naming the field. The counts
    of each kind are printed. Each label records the set's round (its forecast_due_date), which
    score --forecastbench checks. A set none of whose rows makes a label is refused, exit 2,
    with nothing written."""
    from worldsim.domain.files import check_folder_target
    from worldsim.interop.labels import cards_in
    from worldsim.interop.labels import import_labels as read_labels

    check_folder_target(out, "--out")
    ids, due = cards_in(cards) if cards is not None else (None, None)
    done = read_labels(source, out, ids, due)
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(done.kinds().items()))
    out_console.print(
        f"{len(done.labels)} label(s) from {done.rows} row(s) → {escape(str(out))}"
        + (f": {kinds}" if kinds else ""),
        highlight=False,
        soft_wrap=True,
    )
    if done.left:
        listed = "; ".join(f"{n} {reason}" for reason, n in done.reasons().most_common())
        out_console.print(
            f"{len(done.left)} row(s) left ({escape(str(out / 'rejects.jsonl'))}): "
            f"{escape(listed)}",
            highlight=False,
            soft_wrap=True,
        )


@app.command()
def export(
    study: Annotated[
        Path | None, typer.Argument(metavar="STUDY_DIR", help="A study folder.")
    ] = None,
    out: Annotated[
        Path | None, typer.Option("-o", "--out", metavar="FILE", help="File to write.")
    ] = None,
    method: Annotated[
        str | None, typer.Option(metavar="LABEL", help="The method to export.")
    ] = None,
    question_set: Annotated[
        Path | None,
        typer.Option(
            metavar="SET",
            help="The round's question set file (the one `cards import` read): every row of "
            "it is answered. Required for a submission and for --check.",
        ),
    ] = None,
    check: Annotated[
        Path | None,
        typer.Option(
            "--check",
            metavar="FILE",
            help="Check a forecast file by ForecastBench's reader rules against --question-set "
            "instead of exporting (exit 1 on any problem).",
        ),
    ] = None,
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
    model_organization: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="The organization that made the model (default: --organization).",
        ),
    ] = None,
    aggregate: Annotated[
        str,
        typer.Option(metavar="mean|median|logit_mean", help="How a card's seeds are combined."),
    ] = "mean",
) -> None:
    """Write one method's forecasts of a study as a ForecastBench submission, or a CSV; or
    check a forecast file (--check) as ForecastBench's reader would.

    One row per row of the round's question set (SET): a card's seeds combined by --aggregate
    and rounded to 6 decimals, with a reasoning saying how; a question the study did not
    forecast gets the fallback (a market's freeze value, else 0.5) and is listed. Jobs that
    did not complete, are not binary or are not at the card's own forecast date are left out
    and counted, and so are, with a warning, those of cards of another round than SET's; a
    study with none of SET's round is refused."""
    from typing import cast

    from worldsim.domain.errors import ConfigError

    if check is not None:
        _check(check, question_set)
        return
    if study is None or out is None or method is None:
        missing = [
            n for n, v in (("STUDY_DIR", study), ("--out", out), ("--method", method)) if v is None
        ]
        raise ConfigError(f"give {', '.join(missing)} (or --check FILE)", field=missing[0])
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
        model_organization=model_organization or organization,
        question_set=question_set,
        aggregate=cast("Aggregate", aggregate),
    )
    out_console.print(
        f"{done.questions} forecast(s) → {escape(str(done.path))} "
        f"({len(done.fallbacks)} fallback(s), {done.left_out} job(s) left out)",
        highlight=False,
        soft_wrap=True,
    )
    for line in done.fallbacks:
        out_console.print(f"fallback {escape(line)}", highlight=False, soft_wrap=True)
    for other, n in done.other_rounds:
        err_console.print(
            f"warning: {n} job(s) of cards of another round, {escape(other)}, left out",
            highlight=False,
            soft_wrap=True,
        )


def _check(path: Path, question_set: Path | None) -> None:
    """``export --check``: every problem ForecastBench's reader would meet, one per line."""
    from worldsim.domain.errors import ConfigError
    from worldsim.interop.forecast_file import check_forecast_file

    if question_set is None:
        raise ConfigError("--check needs the round's question set", field="--question-set")
    checked = check_forecast_file(path, question_set)
    for problem in checked.problems:
        out_console.print(
            f"{escape(str(path))}: {escape(problem)}", highlight=False, soft_wrap=True
        )
    if not checked.ok:
        out_console.print(f"{checked.count} problem(s)", highlight=False)
        raise typer.Exit(1)
    out_console.print(
        f"OK: {escape(str(path))} answers all {checked.questions} question(s) of the round due "
        f"{checked.due}, as ForecastBench's reader reads it",
        highlight=False,
        soft_wrap=True,
    )
