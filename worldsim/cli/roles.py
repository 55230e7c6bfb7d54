"""``worldsim roles``: every runnable role, where it comes from and what it returns."""

# No `from __future__ import annotations` here: typer reads every command's signature at
# start-up, even for --help, and string annotations would be parsed again each time
# (about half its work). Names imported only for type checking are quoted.

from worldsim.cli._app import app, out_console

__all__: list[str] = []


@app.command()
def roles() -> None:
    """List every runnable role, with its phase, output, prompt version and source.

    Prompt roles come from agents/ files (bundled, or the project's own), Python roles from the
    entry point group worldsim.roles.
    """
    from rich.table import Table

    from worldsim.roles.registry import registered_roles

    table = Table(title="Roles")
    for col in ("name", "phase", "output", "version", "source", "description"):
        table.add_column(col, overflow="fold")
    for spec in registered_roles().values():
        table.add_row(
            spec.name,
            spec.phase,
            spec.output or "(python)",
            spec.version,
            spec.source,
            spec.description,
        )
    out_console.print(table)
