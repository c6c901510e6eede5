"""The ``hsisim`` command: thin Typer wrappers over the public functions of ``hsisim.api``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from hsisim.cli_catalog import catalog_command
from hsisim.cli_common import console, guard, interrupted, with_progress
from hsisim.cli_prices import prices_app
from hsisim.cli_report import diagnose_command, report_command, step_status
from hsisim.errors import HsisimInputError
from hsisim.writer import dumps

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="What a hyperspectral training job really costs on a rented GPU cluster.")
scenario_app = typer.Typer(no_args_is_help=True, help="Scenario files: JSON Schema and validation.")
app.add_typer(scenario_app, name="scenario")
app.add_typer(prices_app, name="prices")


def _version(value: bool) -> None:
    if value:
        from hsisim._version import __version__

        typer.echo(f"hsisim {__version__}")
        raise typer.Exit()


@app.callback()
def _main(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                help="Print the version and exit.")] = False) -> None:
    """What a hyperspectral training job really costs on a rented GPU cluster."""

Scenario = Annotated[Path, typer.Argument(help="Scenario YAML file.")]
Sets = Annotated[list[str] | None, typer.Option("--set", help="Override a key: --set cluster.nodes=4 (repeatable).")]
Seed = Annotated[int | None, typer.Option(help="Seed (default: the scenario's).")]
AsJson = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]
Workers = Annotated[int | None, typer.Option(help="Worker processes, local or Dask LocalCluster (default: all cores).")]
Executor = Annotated[str, typer.Option(help="inline | local | dask")]
Scheduler = Annotated[str | None, typer.Option(help="Dask scheduler tcp://HOST:PORT (default: a LocalCluster).")]
Out = Annotated[Path | None, typer.Option(help="Folder for replicas.parquet (streamed in parts) and summary.")]
Resume = Annotated[bool, typer.Option("--resume", help="Continue the run in --out (or add replicas to it).")]
Overwrite = Annotated[bool, typer.Option("--overwrite", help="Replace the finished run in --out.")]
AllowLong = Annotated[bool, typer.Option("--allow-long", help="Run even if the work estimate is over 10 minutes.")]
AllowCode = Annotated[bool, typer.Option(
    "--allow-code", help="Let the scenario's model/dataset factories (Python code named in the file) run.")]


def _fraction(text: str | None, flag: str) -> float | None:
    """'1%' or '0.01' → 0.01."""
    if text is None:
        return None
    t = text.strip()
    try:
        value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise HsisimInputError(f"{flag} expects a fraction like 1% or 0.01, got {text!r}") from None
    if not 0 < value < 1:
        raise HsisimInputError(f"{flag} must be between 0 and 100 %, got {text!r}")
    return value


def _with_unit(text: str | None, flag: str, example: str, parse: Any) -> float | None:
    """A quantity typed on the command line: a bare number is refused (22 could be seconds or hours)."""
    if text is None:
        return None
    try:
        float(text)
    except ValueError:
        pass
    else:
        raise HsisimInputError(f"{flag} {text} has no unit: write it with one, e.g. {flag} '{example}'")
    try:
        return float(parse(text))
    except (ValueError, TypeError) as exc:
        raise HsisimInputError(f"{flag}: {exc}") from None


def _usd(text: str) -> float:
    t = text.strip().replace("$", "").upper().removesuffix("USD").strip().replace(",", "")
    if text.strip().startswith("$") or text.strip().upper().endswith("USD"):
        return float(t)
    raise ValueError(f"cannot read {text!r} as an amount of USD (e.g. '500 USD')")


def _seed(seed: int | None) -> None:
    if seed is not None and seed < 0:
        raise HsisimInputError(f"--seed must not be negative, got {seed}")


@app.command()
def run(
    scenario: Scenario,
    replicas: Annotated[int | None, typer.Option(help="Replicas (default: the scenario's).")] = None,
    seed: Seed = None,
    set_: Sets = None,
    out: Out = None,
    as_json: AsJson = False,
    workers: Workers = None,
    executor: Executor = "local",
    scheduler: Scheduler = None,
    resume: Resume = False,
    overwrite: Overwrite = False,
    ci_halfwidth: Annotated[str | None, typer.Option(
        help="Run until the 95 % CI of the mean cost is this tight (e.g. 1%), instead of --replicas.")] = None,
    max_replicas: Annotated[int, typer.Option(help="Most replicas --ci-halfwidth may run.")] = 100_000,
    allow_long: AllowLong = False,
    allow_code: AllowCode = False,
    compare: Annotated[bool, typer.Option(
        help="Also simulate the same job on on-demand capacity (same seeds) beside a spot run.")] = True,
    levers: Annotated[bool, typer.Option(
        help="Also name the one or two biggest levers (hsisim diagnose's quick what-if runs).")] = True,
) -> None:
    """Simulate SCENARIO (Monte Carlo): time, cost, the same job on on-demand, where the hours and dollars go."""
    from hsisim import api

    def go() -> Any:
        _seed(seed)
        if replicas is not None and ci_halfwidth is not None:
            raise HsisimInputError("give --replicas or --ci-halfwidth, not both")
        target = _fraction(ci_halfwidth, "--ci-halfwidth")
        return with_progress(lambda tick: api.simulate(
            scenario, overrides=set_ or [], replicas=replicas, seed=seed, workers=workers, executor=executor,
            scheduler=scheduler, progress=tick, out=out, resume=resume, overwrite=overwrite, ci_halfwidth=target,
            max_replicas=max_replicas, allow_long=allow_long, allow_code=allow_code), quiet=as_json)

    try:
        results = guard(go)
        summary = results.summary()
        from hsisim.answer import extras

        summary |= guard(lambda: extras(results, compare=compare, levers=levers, executor=executor,
                                        workers=workers, allow_code=allow_code))
    except KeyboardInterrupt:
        interrupted(out, f"hsisim run {scenario}")
    if as_json:
        typer.echo(dumps(summary))
        return
    from hsisim.report.run_output import print_run

    print_run(summary, console())
    if out is not None:
        typer.echo(f"results written to {out}/")


@app.command()
def plan(
    scenario: Scenario,
    budget: Annotated[str | None, typer.Option(help="Budget, e.g. '500 USD' (default: simulation.budget_usd).")
                      ] = None,
    deadline: Annotated[str | None, typer.Option(help="Deadline, e.g. 36h or 3 days (default: simulation.deadline).")
                        ] = None,
    sweep: Annotated[list[str] | None, typer.Option(
        help="KEY=V1,V2,... : simulate every combination (repeatable), e.g. cluster.nodes=1,2,4.")] = None,
    confidence: Annotated[float, typer.Option(help="Probability a recommendation must reach for budget and deadline.")
                          ] = 0.9,
    replicas: Annotated[int | None, typer.Option(help="Replicas per combination (default: the scenario's).")] = None,
    seed: Seed = None,
    set_: Sets = None,
    out: Out = None,
    as_json: AsJson = False,
    workers: Workers = None,
    executor: Executor = "local",
    scheduler: Scheduler = None,
    resume: Resume = False,
    overwrite: Overwrite = False,
    allow_long: AllowLong = False,
    allow_code: AllowCode = False,
) -> None:
    """Budget planning: P(cost ≤ budget), P(time ≤ deadline), sweeps with a Pareto table and a recommendation."""
    from hsisim import api
    from hsisim.units import duration

    def go() -> Any:
        _seed(seed)
        d = _with_unit(deadline, "--deadline", "36 h", duration)
        b = _with_unit(budget, "--budget", "500 USD", _usd)
        result = with_progress(lambda tick: api.plan(
            scenario, overrides=set_ or [], sweeps=sweep or [], budget=b, deadline_s=d, confidence=confidence,
            replicas=replicas, seed=seed, workers=workers, executor=executor, scheduler=scheduler, out=out,
            resume=resume, overwrite=overwrite, allow_long=allow_long, allow_code=allow_code, progress=tick),
            quiet=as_json)
        if out is not None:
            result.write(out)
        return result.to_json()

    try:
        result = guard(go)
    except KeyboardInterrupt:
        interrupted(out, f"hsisim plan {scenario}")
    if as_json:
        typer.echo(dumps(result))
        return
    from hsisim.report.table import print_plan

    print_plan(result, console())


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
    scheduler: Scheduler = None,
    allow_long: AllowLong = False,
    allow_code: AllowCode = False,
) -> None:
    """Find the checkpoint interval that minimises cost per useful GPU-hour (or wall time)."""
    from hsisim import api

    def go() -> Any:
        _seed(seed)
        return api.optimize(scenario, overrides=set_ or [], objective=objective, replicas=replicas, seed=seed,
                            workers=workers, executor=executor, scheduler=scheduler, allow_long=allow_long,
                            allow_code=allow_code).to_json()

    try:
        result = guard(go)
    except KeyboardInterrupt:
        interrupted(None, "")
    if as_json:
        typer.echo(dumps(result))
        return
    from hsisim.report.table import print_optimize

    print_optimize(result, console())


ModelFactory = Annotated[str | None, typer.Option(
    help="Your model: MODULE:CALLABLE or path/to/file.py:CALLABLE returning a torch.nn.Module.")]
DatasetFactory = Annotated[str | None, typer.Option(
    help="Your dataset: MODULE:CALLABLE or path/to/file.py:CALLABLE returning a Dataset of (x, y).")]
FactoryKwargs = Annotated[str | None, typer.Option(
    help='JSON keyword arguments: {"model": {...}, "dataset": {...}} or one object for both.')]


def _torch_or_exit(what: str) -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        raise HsisimInputError(f"{what} runs real PyTorch: pip install 'hsisim[torch]' torch==2.13.0") from None


@app.command()
def calibrate(
    device: Annotated[str, typer.Option(help="cpu | cuda | cuda:N")] = "cpu",
    model: Annotated[str, typer.Option(help="hamida | hybridsn | ssrn | ssftt | spectralformer")] = "hybridsn",
    dataset: Annotated[str, typer.Option(help="A catalog dataset (its shape; real labels where available).")
                       ] = "indian_pines",
    out: Annotated[Path, typer.Option(help="Profile JSON to write.")] = Path("calibration/profile.json"),
    quick: Annotated[bool, typer.Option("--quick", help="Fewer batch sizes, thread counts and workers.")] = False,
    patch: Annotated[int | None, typer.Option(help="Patch size (default: the model's paper).")] = None,
    pca: Annotated[int | None, typer.Option(help="PCA components (default: the model's paper).")] = None,
    batch: Annotated[int, typer.Option(help="Largest micro-batch and the DataLoader batch.")] = 64,
    world_size: Annotated[int, typer.Option(help="Processes for the all-reduce probe (gloo on CPU, nccl on GPU).")
                          ] = 1,
    checkpoint_dir: Annotated[Path | None, typer.Option(help="Folder whose write/read bandwidth to measure.")
                              ] = None,
    checkpoint_storage: Annotated[str, typer.Option(
        help="What kind of storage --checkpoint-dir is (local_nvme | ebs | s3 | fsx): scenarios checkpointing "
             "to that kind on this GPU use the measured bandwidths.")] = "local_nvme",
    cube_format: Annotated[str, typer.Option("--format", help="On-disk cube for the data probe: npy | envi | mat")
                           ] = "npy",
    spec: Annotated[str | None, typer.Option(help="Derive the profile from a catalog GPU's published figures "
                                                  "instead of measuring (source: spec).")] = None,
    model_factory: ModelFactory = None,
    dataset_factory: DatasetFactory = None,
    factory_kwargs: FactoryKwargs = None,
    as_json: AsJson = False,
) -> None:
    """Measure compute, memory, data pipeline, checkpoint I/O (and all-reduce) on a device: a profile JSON."""
    from hsisim import api

    def go() -> Any:
        _torch_or_exit("calibrate")
        with step_status(as_json) as log:
            return api.calibrate(device=device, model=model, dataset=dataset, out=out, quick=quick, patch=patch,
                                 pca=pca, batch=batch, world_size=world_size, checkpoint_dir=checkpoint_dir,
                                 checkpoint_storage=checkpoint_storage, fmt=cube_format, spec=spec,
                                 model_factory=model_factory, dataset_factory=dataset_factory,
                                 factory_kwargs=factory_kwargs, log=log).to_json()

    try:
        prof = guard(go)
    except KeyboardInterrupt:
        interrupted(None, "")
    if as_json:
        typer.echo(dumps(prof))
        return
    if spec is not None:
        typer.echo(f"{prof['note']}\nprofile written to {out}")
        return
    from hsisim.report.table import print_profile

    print_profile(prof, console())
    typer.echo(f"profile written to {out}")


@app.command()
def validate(
    scenario: Annotated[Path, typer.Option(help="Scenario YAML whose model, batch, loader and data to train.")],
    device: Annotated[str, typer.Option(help="cpu | cuda | cuda:N")] = "cpu",
    steps: Annotated[int, typer.Option(help="Measured optimizer steps (after warm-up).")] = 100,
    warmup: Annotated[int | None, typer.Option(help="Steps discarded first (default: loader prefetch + 2, ≥ 5).")
                      ] = None,
    profile: Annotated[Path | None, typer.Option(help="Calibration profile (default: measure one now).")] = None,
    world_size: Annotated[int, typer.Option(help="1, or 2 processes with DDP (gloo on CPU, nccl on GPUs).")] = 1,
    set_: Sets = None,
    as_json: AsJson = False,
    allow_code: AllowCode = False,
) -> None:
    """Train SCENARIO for real on a device and compare step time and data-wait fraction with the prediction."""
    from hsisim import api

    def go() -> Any:
        _torch_or_exit("validate")
        with step_status(as_json) as log:
            return api.validate(scenario, overrides=set_ or [], device=device, steps=steps, warmup=warmup,
                                profile=profile, world_size=world_size, log=log, allow_code=allow_code)

    try:
        res = guard(go)
    except KeyboardInterrupt:
        interrupted(None, "")
    if as_json:
        typer.echo(dumps(res))
        return
    from hsisim.report.table import print_validation

    print_validation(res, console())


@scenario_app.command("schema")
def scenario_schema() -> None:
    """Print the JSON Schema of scenario files (for editor completion)."""
    from hsisim.scenario import json_schema

    typer.echo(dumps(json_schema(), indent=2))


@scenario_app.command("validate")
def scenario_validate(scenario: Scenario, set_: Sets = None, allow_code: AllowCode = False) -> None:
    """Check a scenario file (schema, units, catalog names, memory fit) without simulating it."""
    from hsisim.resolve import resolve
    from hsisim.scenario import Scenario as Model

    def go() -> str:
        sc = Model.load(scenario, overrides=set_ or [])
        job = resolve(sc, allow_code=allow_code).job
        return f"{scenario}: ok ({sc.name}: {job.world} GPUs, {job.total_steps:,} steps)"

    typer.echo(guard(go))


app.command("catalog")(catalog_command)
app.command("report")(report_command)
app.command("diagnose")(diagnose_command)


def main() -> None:
    from hsisim.terminal import tolerate_narrow_encodings

    tolerate_narrow_encodings()
    app()
