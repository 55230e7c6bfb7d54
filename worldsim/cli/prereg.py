"""``worldsim prereg lock``: fix the analysis and the prediction inputs before labels are opened."""

# No `from __future__ import annotations` here: typer reads every command's signature at
# start-up, even for --help, and string annotations would be parsed again each time
# (about half its work). Names imported only for type checking are quoted.

from pathlib import Path
from typing import Annotated

import typer

from worldsim.cli._app import command_group, err_console, escape, out_console

__all__ = ["lock_command", "prereg_app"]

prereg_app = command_group(
    "prereg", "Pre-registration: lock the analysis before labels are opened."
)


@prereg_app.command("lock")
def lock_command(
    prereg: Annotated[
        Path,
        typer.Argument(metavar="PREREG", help="The prereg YAML (see docs/prereg-template.yaml)."),
    ],
    predictions: Annotated[
        list[Path],
        typer.Option(
            "--predictions",
            metavar="INPUT",
            help="Prediction inputs (files or folders; a study folder gives its traces).",
        ),
    ],
    out: Annotated[
        Path, typer.Option("-o", "--out", metavar="FILE", help="The lock file to write (JSON).")
    ],
    more: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="INPUT",
            help="Further prediction inputs, as in --predictions A B C.",
            show_default=False,
        ),
    ] = None,
    force: Annotated[bool, typer.Option(help="Replace an existing lock file.")] = False,
) -> None:
    """Hash the prereg and every prediction file into a lock, with each trace's head.

    Every trace among the inputs must verify as `worldsim verify` checks it (one it refuses
    stops the lock, exit 1, nothing written); a trace that holds no result (cut off, or a
    failed run) is locked as a file and named in a warning.
    A prereg naming a method (methods, baseline) that the prediction inputs do not hold is
    refused (exit 2, naming the prereg's field) and nothing is written.

    `score --prereg LOCK` then refuses any changed, missing or added input, and names a trace
    whose head differs from the locked one (another run under the registered name).

    An existing lock file is refused (exit 2, nothing written) unless --force: replacing a lock
    changes its locked_at.
    """
    from worldsim.domain.errors import ConfigError
    from worldsim.domain.files import write_files
    from worldsim.domain.paths import check_file_targets
    from worldsim.scoring.prereg import create_lock, lock_json
    from worldsim.study.folder import expand_study_inputs

    check_file_targets([out])
    if out.exists() and not force:
        raise ConfigError("lock file already exists (use --force to replace it)", file=out)
    inputs, _, heads = expand_study_inputs([*predictions, *(more or ())])
    lock = create_lock(
        prereg,
        inputs,
        out,
        heads=heads,
        warn=lambda note: err_console.print(f"warning: {escape(note)}"),
    )
    write_files({out: lock_json(lock).encode()})
    traces = sum(1 for f in lock.predictions if f.head is not None)
    out_console.print(
        f"locked {lock.prereg.path} and {len(lock.predictions)} prediction file(s) "
        f"({traces} trace head(s)) at {lock.locked_at} → {out}",
        highlight=False,
    )
