"""``hsisim report`` and ``hsisim diagnose``: thin Typer wrappers over ``hsisim.api.write_report`` and
``hsisim.api.diagnose``, with a rich progress display (stage and replicas) on a terminal."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from hsisim.cli_common import console, guard, interrupted
from hsisim.errors import HsisimInputError
from hsisim.writer import dumps

Tick = Callable[[int, int], None]
Say = Callable[[str], None]

ScenarioArg = Annotated[Path, typer.Argument(help="Scenario YAML file.")]
Sets = Annotated[list[str] | None, typer.Option("--set", help="Override a key: --set cluster.nodes=4 (repeatable).")]
Seed = Annotated[int | None, typer.Option(help="Seed (default: the scenario's).")]
AsJson = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout (no progress display).")]
Workers = Annotated[int | None, typer.Option(help="Worker processes, local or Dask LocalCluster (default: all cores).")]
Scheduler = Annotated[str | None, typer.Option(help="Dask scheduler tcp://HOST:PORT (default: a LocalCluster).")]
AllowLong = Annotated[bool, typer.Option("--allow-long", help="Run even if the work estimate is over 10 minutes.")]
AllowCode = Annotated[bool, typer.Option(
    "--allow-code", help="Let the scenario's model/dataset factories (Python code named in the file) run.")]


@contextmanager
def staged(quiet: bool) -> Iterator[tuple[Tick, Say]]:
    """(tick, stage) callbacks drawing a rich progress line (stage, replicas, elapsed) when stderr is a terminal."""
    if quiet or not sys.stderr.isatty():
        yield (lambda n, total: None), (lambda text: None)
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("replicas"), TimeElapsedColumn(), console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("starting", total=None)

        def tick(n: int, total: int) -> None:
            bar.update(task, advance=n, total=max(total, bar.tasks[0].total or 0))

        def stage(text: str) -> None:
            bar.reset(task, total=None, description=text)

        yield tick, stage


@contextmanager
def step_status(quiet: bool) -> Iterator[Say | None]:
    """A ``log`` for steps (calibrate, validate): None when quiet; on a terminal a rich status line with the
    current step, a spinner and the time so far, each finished step printed above it with its duration;
    else plain lines on stderr."""
    if quiet:
        yield None
        return
    if not sys.stderr.isatty():
        yield lambda text: typer.echo(text, err=True)
        return
    from rich.console import Console

    con = Console(stderr=True)
    start = time.monotonic()
    steps: list[tuple[str, float]] = []

    def finish(now: float) -> None:
        if steps:
            con.print(f"  {len(steps)}. {steps[-1][0]} [dim]({now - steps[-1][1]:,.1f} s)[/dim]", highlight=False)

    with con.status("starting") as status:
        def log(text: str) -> None:
            now = time.monotonic()
            finish(now)
            steps.append((text, now))
            status.update(f"{len(steps)}. {text} [dim]({now - start:,.0f} s so far)[/dim]")

        yield log
        finish(time.monotonic())


def _seed(seed: int | None) -> None:
    if seed is not None and seed < 0:
        raise HsisimInputError(f"--seed must not be negative, got {seed}")


def report_command(
    scenario: ScenarioArg,
    out: Annotated[Path, typer.Option(help="Folder for the report (new, empty, or a previous report).")],
    replicas: Annotated[int | None, typer.Option(help="Replicas of the main run (default: the scenario's).")] = None,
    sweep_replicas: Annotated[int | None, typer.Option(
        help="Replicas per configuration of the checkpoint curve, the scaling sweep and the diagnosis "
             "(default: min(replicas, 200)).")] = None,
    seed: Seed = None,
    set_: Sets = None,
    as_json: AsJson = False,
    workers: Workers = None,
    executor: Annotated[str, typer.Option(help="inline | local | dask")] = "local",
    scheduler: Scheduler = None,
    allow_long: AllowLong = False,
    allow_code: AllowCode = False,
) -> None:
    """Write figures (budget, cost, distribution, checkpoint, timeline, scaling) and report.md for SCENARIO."""
    from hsisim import api

    def go() -> Any:
        _seed(seed)
        with staged(as_json) as (tick, stage):
            return api.write_report(scenario, out=out, overrides=set_ or [], replicas=replicas,
                              sweep_replicas=sweep_replicas, seed=seed, executor=executor, workers=workers,
                              scheduler=scheduler, allow_long=allow_long, allow_code=allow_code, progress=tick,
                              stage=stage)

    try:
        rep = guard(go)
    except KeyboardInterrupt:
        interrupted(None, "")
    if as_json:
        typer.echo(dumps(rep.to_json()))
        return
    typer.echo(f"report written to {out}/: report.md and six figures")
    for lever in rep.diagnosis.top(2):
        typer.echo(f"  lever: {lever['title']} ({' '.join('--set ' + o for o in lever['overrides'])}): "
                   f"wall {lever['wall_h']['change_pct']:+.1f}%, cost {lever['cost_usd']['change_pct']:+.1f}%")


def diagnose_command(
    scenario: ScenarioArg,
    replicas: Annotated[int | None, typer.Option(help="Replicas per run (default 64; 16 with --fast).")] = None,
    seed: Seed = None,
    set_: Sets = None,
    objective: Annotated[str, typer.Option(help="Rank fixes by: balanced (time and cost) | time | cost | eta")
                         ] = "balanced",
    fast: Annotated[bool, typer.Option("--fast", help="Few replicas, the two largest bottlenecks' fixes only.")
                    ] = False,
    as_json: AsJson = False,
    workers: Workers = None,
    executor: Annotated[str, typer.Option(help="inline | local | dask (default inline: each run is one chunk)")
                        ] = "inline",
    scheduler: Scheduler = None,
    allow_long: AllowLong = False,
    allow_code: AllowCode = False,
) -> None:
    """The article's checklist, quantified: bottlenecks ranked, standard fixes simulated, ranked by gain per effort."""
    from hsisim import api

    def go() -> Any:
        _seed(seed)
        with staged(as_json) as (tick, stage):
            return api.diagnose(scenario, overrides=set_ or [], replicas=replicas, seed=seed, objective=objective,
                                fast=fast, executor=executor, workers=workers, scheduler=scheduler,
                                allow_long=allow_long, allow_code=allow_code, progress=tick, stage=stage)

    try:
        diag = guard(go)
    except KeyboardInterrupt:
        interrupted(None, "")
    data = diag.to_json()
    if as_json:
        typer.echo(dumps(data))
        return
    from hsisim.report.console import print_diagnosis

    sets = "".join(f" --set {x}" for x in set_ or [])
    print_diagnosis(data, console(), f"hsisim run {scenario}{sets} --replicas {diag.replicas} --seed {diag.seed}")
