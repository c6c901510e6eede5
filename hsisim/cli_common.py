"""What every ``hsisim`` command shares: bad input as one line and exit 2, Ctrl-C as exit 130."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

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


def with_progress(fn: Callable[[Callable[[int, int], None]], T], quiet: bool) -> T:
    """Run ``fn(tick)`` under a rich progress bar (replicas, replicas/s, ETA) when stderr is a terminal."""
    import sys

    if quiet or not sys.stderr.isatty():
        return fn(lambda n, total: None)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    rate = TextColumn("{task.fields[rate]}")
    with Progress(TextColumn("replicas"), BarColumn(), MofNCompleteColumn(), rate, TimeRemainingColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("replicas", total=None, rate="")

        def tick(n: int, total: int) -> None:
            t = bar.tasks[0]
            bar.update(task, advance=n, total=max(total, t.total or 0))
            speed = bar.tasks[0].speed
            bar.update(task, rate=f"{speed:,.0f} replicas/s" if speed else "")

        return fn(tick)


def console() -> Any:
    """A rich console on stdout."""
    from rich.console import Console

    return Console()
