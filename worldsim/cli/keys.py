"""``worldsim keygen``: an Ed25519 key pair for signing traces (``run --sign-key``)."""

# No `from __future__ import annotations` here: typer reads every command's signature at
# start-up, even for --help, and string annotations would be parsed again each time
# (about half its work).

from pathlib import Path
from typing import Annotated

import typer

from worldsim.cli._app import app, out_console
from worldsim.domain.errors import ConfigError

__all__ = ["keygen"]


@app.command()
def keygen(
    out: Annotated[
        Path,
        typer.Argument(
            metavar="OUT", help="Private key file to write; the public key goes to OUT.pub."
        ),
    ],
    force: Annotated[bool, typer.Option(help="Replace existing key files.")] = False,
    allow_unignored: Annotated[
        bool,
        typer.Option(
            "--allow-unignored",
            help="Write the private key inside a git work tree even where git does not ignore "
            "it (by default refused: one `git add` would publish it).",
        ),
    ] = False,
) -> None:
    """Write a new Ed25519 key pair: OUT (private, PEM PKCS#8, mode 0600) and OUT.pub.

    Sign a run with `worldsim run CARD --sign-key OUT` (or forecast, or run --resume); check it
    with `worldsim verify TRACE --public-key OUT.pub`. Keep OUT private: whoever holds it can
    sign any trace. The printed key id is the SHA-256 of the raw public key, as recorded in
    signed traces.

    Inside a git work tree the private key must go where git ignores it (keygen names the
    path to add to .gitignore), else keygen refuses, unless --allow-unignored.
    """
    from worldsim.domain.files import write_files
    from worldsim.domain.paths import check_file_targets
    from worldsim.trace.signing import new_key_pair

    public = out.with_name(out.name + ".pub")
    check_file_targets([out, public])
    if not allow_unignored:
        _refuse_unignored(out)
    if not force:
        for path in (out, public):
            if path.exists():
                raise ConfigError("key file already exists (use --force to replace it)", file=path)
    private_pem, public_pem, key_id = new_key_pair()
    write_files({out: private_pem, public: public_pem}, private={out})
    out_console.print(f"wrote {out} (private) and {public}; key id {key_id}", highlight=False)


def _refuse_unignored(out: Path) -> None:
    """Refuse a private key path inside a git work tree that git does not ignore."""
    import os
    import shutil
    import subprocess

    here = next((p for p in (out.parent, *out.parent.parents) if p.is_dir()), None)
    git = shutil.which("git")
    if here is None or git is None:
        return  # without git there is no `git add` to fear
    top = subprocess.run(
        [git, "-C", str(here), "rev-parse", "--show-toplevel"],
        capture_output=True,
        text=True,
        check=False,
    )
    if top.returncode != 0:
        return  # not inside a work tree
    ignored = subprocess.run(
        [git, "-C", str(here), "check-ignore", "-q", "--", str(out.absolute())],
        capture_output=True,
        check=False,
    )
    if ignored.returncode != 0:
        root = top.stdout.strip()
        inside = Path(os.path.relpath(out.resolve(), Path(root).resolve())).as_posix()
        raise ConfigError(
            f"inside the git work tree {root} and not ignored by git: one `git add` would "
            f"publish the private key; add {inside} to .gitignore (or write the key outside "
            "the work tree, or pass --allow-unignored)",
            file=out,
        )
