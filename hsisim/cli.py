"""The ``hsisim`` command: thin Typer wrappers over plain functions of the package."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from hsisim.errors import HsisimInputError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="What a hyperspectral training job really costs on a rented GPU cluster.")
scenario_app = typer.Typer(no_args_is_help=True, help="Scenario files: JSON Schema and validation.")
app.add_typer(scenario_app, name="scenario")

T = TypeVar("T")


def _guard(fn: Callable[[], T]) -> T:
    """Run ``fn``; bad input becomes one line on stderr and exit code 2, never a traceback."""
    try:
        return fn()
    except HsisimInputError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


Sets = Annotated[list[str] | None, typer.Option("--set", help="Override a key: --set cluster.nodes=4 (repeatable).")]
Seed = Annotated[int | None, typer.Option(help="Seed (default: the scenario's).")]
AsJson = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]
Workers = Annotated[int | None, typer.Option(help="Local worker processes (default: all cores).")]
Executor = Annotated[str, typer.Option(help="inline | local")]


def _check_execution(executor: str, seed: int | None) -> None:
    """The execution flags every simulating command shares."""
    from hsisim.montecarlo import check_executor

    check_executor(executor)
    if seed is not None and seed < 0:
        raise HsisimInputError(f"--seed must not be negative, got {seed}")


@app.command()
def run(
    scenario: Annotated[Path, typer.Argument(help="Scenario YAML file.")],
    replicas: Annotated[int | None, typer.Option(help="Replicas (default: the scenario's).")] = None,
    seed: Seed = None,
    set_: Sets = None,
    out: Annotated[Path | None, typer.Option(help="Write replicas.parquet, summary.json, scenario, manifest.")] = None,
    as_json: AsJson = False,
    workers: Workers = None,
    executor: Executor = "local",
) -> None:
    """Simulate SCENARIO (Monte Carlo) and print the time budget, the bill and the percentiles."""
    from hsisim.montecarlo import simulate
    from hsisim.scenario import load_scenario

    def go() -> Any:
        sc = load_scenario(scenario, set_ or [])
        if replicas is not None and replicas < 1:
            raise HsisimInputError(f"--replicas must be at least 1, got {replicas}")
        _check_execution(executor, seed)
        if out is not None and out.exists() and not out.is_dir():
            raise HsisimInputError(f"--out {out} exists and is not a directory")
        n = replicas if replicas is not None else sc.simulation.replicas
        return _with_progress(lambda tick: simulate(sc, replicas=replicas, seed=seed, workers=workers,
                                                    executor=executor, progress=tick), n, quiet=as_json)

    results = _guard(go)
    summary = results.summary()
    if out is not None:
        results.write(out)
    if as_json:
        typer.echo(json.dumps(summary))
    else:
        from rich.console import Console

        from hsisim.report.table import print_summary
        print_summary(summary, Console())
        if out is not None:
            typer.echo(f"results written to {out}/")


def _with_progress(fn: Callable[[Callable[[int], None]], T], total: int, quiet: bool) -> T:
    if quiet or not sys.stderr.isatty():
        return fn(lambda n: None)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn("replicas"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  transient=True) as bar:
        task = bar.add_task("replicas", total=total)
        return fn(lambda n: bar.advance(task, n))


@app.command()
def optimize(
    scenario: Annotated[Path, typer.Argument(help="Scenario YAML file (a spot cluster).")],
    objective: Annotated[str, typer.Option(help="cost (per useful GPU-hour) | time (wall)")] = "cost",
    replicas: Annotated[int, typer.Option(help="Replicas per candidate interval (common random numbers).")] = 200,
    seed: Seed = None,
    set_: Sets = None,
    as_json: AsJson = False,
    workers: Workers = None,
    executor: Executor = "local",
) -> None:
    """Find the checkpoint interval that minimises cost per useful GPU-hour (or wall time)."""
    from hsisim.optimize import optimize_interval
    from hsisim.scenario import load_scenario

    def go() -> Any:
        sc = load_scenario(scenario, set_ or [])
        if replicas < 2:
            raise HsisimInputError(f"--replicas must be at least 2, got {replicas}")
        _check_execution(executor, seed)
        return optimize_interval(sc, objective=objective, replicas=replicas, seed=seed, workers=workers,
                                 executor=executor)

    result = _guard(go).to_json()
    if as_json:
        typer.echo(json.dumps(result))
        return
    from rich.console import Console

    from hsisim.report.table import print_optimize
    print_optimize(result, Console())


@scenario_app.command("schema")
def scenario_schema() -> None:
    """Print the JSON Schema of scenario files (for editor completion)."""
    from hsisim.scenario import json_schema

    typer.echo(json.dumps(json_schema(), indent=2))


@scenario_app.command("validate")
def scenario_validate(
    scenario: Annotated[Path, typer.Argument(help="Scenario YAML file.")],
    set_: Sets = None,
) -> None:
    """Check a scenario file (schema, units, catalog names, memory fit) without simulating it."""
    from hsisim.resolve import resolve
    from hsisim.scenario import load_scenario

    def go() -> str:
        sc = load_scenario(scenario, set_ or [])
        job = resolve(sc)
        return f"{scenario}: ok ({sc.name}: {job.world} GPUs, {job.total_steps:,} steps)"

    typer.echo(_guard(go))


def main() -> None:
    app()
