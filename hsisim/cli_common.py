"""What every ``hsisim`` command shares: bad input as one line and exit 2, Ctrl-C as exit 130."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import typer

from hsisim.errors import HsisimInputError

T = TypeVar("T")


def guard(fn: Callable[[], T]) -> T:
    """Run ``fn``; bad input becomes one line on stderr and exit code 2, never a traceback."""
    try:
        return fn()
    except HsisimInputError as exc:
        typer.echo(f"error: {exc.cli_text()}", err=True)
        raise typer.Exit(2) from None


def interrupted(out: Path | None, again: str) -> None:
    """Ctrl-C: say what was kept and how to continue; exit 130 like any interrupted command."""
    if out is not None:
        from hsisim.montecarlo.store import saved_replicas

        typer.echo(f"interrupted: {saved_replicas(out):,} replicas are saved in {out}; continue with\n"
                   f"  {again} --out {out} --resume", err=True)
    else:
        typer.echo("interrupted", err=True)
    raise typer.Exit(130)
