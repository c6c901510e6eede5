"""``hsisim prices``: real spot prices and interruption hazards (thin wrappers over ``hsisim.pricing``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from hsisim.cli_common import guard
from hsisim.writer import dumps

prices_app = typer.Typer(no_args_is_help=True, help="Real AWS spot prices and interruption hazards.")
AsJson = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]


def _console() -> Any:
    from rich.console import Console

    return Console()


def _written(result: Any, as_json: bool) -> None:
    prov = result.provenance
    if as_json:
        typer.echo(dumps(prov))
        return
    typer.echo(f"wrote {result.path}: {prov['rows']} rows, {', '.join(prov['instance_types'])} in "
               f"{', '.join(prov['regions'])}" + (f", {prov['pages']} page(s)" if "pages" in prov else ""))
    od = prov.get("on_demand")
    if od:
        typer.echo(f"on-demand: {od['source'] or 'unknown'} — {od['note']}")
    typer.echo(f"provenance: {result.provenance_path}")


@prices_app.command("fetch")
def fetch(
    region: Annotated[str, typer.Option(help="AWS region, e.g. us-east-1.")],
    instance_type: Annotated[list[str], typer.Option("--instance-type", help="Instance type (repeatable).")],
    out: Annotated[Path, typer.Option(help="Trace to write: .csv, or .parquet.")],
    days: Annotated[float, typer.Option(help="Days of history, up to 90.")] = 7.0,
    product: Annotated[str, typer.Option(help="Product description.")] = "Linux/UNIX",
    endpoint_url: Annotated[str | None, typer.Option(help="Another EC2 endpoint (e.g. a local moto server).")] = None,
    on_demand: Annotated[str, typer.Option(help="pricing-api (else catalog fallback) | catalog")] = "pricing-api",
    max_attempts: Annotated[int, typer.Option(help="Attempts per request (botocore standard retry mode).")] = 5,
    as_json: AsJson = False,
) -> None:
    """Spot price history from your AWS account (boto3's credential chain) → a tidy trace + provenance."""
    from hsisim.pricing.fetch import fetch_prices

    res = guard(lambda: fetch_prices(region=region, instance_types=instance_type, out=str(out), days=days,
                                      product=product, endpoint_url=endpoint_url,
                                      on_demand=on_demand.replace("-", "_"), max_attempts=max_attempts))
    _written(res, as_json)


@prices_app.command("import")
def import_(
    files: Annotated[list[Path], typer.Argument(help="Saved describe-spot-price-history JSON files.")],
    out: Annotated[Path, typer.Option(help="Trace to write: .csv, or .parquet.")],
    as_json: AsJson = False,
) -> None:
    """The same trace from saved `aws ec2 describe-spot-price-history` JSON (no AWS access needed)."""
    from hsisim.pricing.imports import import_history

    _written(guard(lambda: import_history(files=files, out=out)), as_json)


@prices_app.command("show")
def show(
    file: Annotated[Path, typer.Argument(help="A price trace (CSV or Parquet).")],
    as_json: AsJson = False,
) -> None:
    """Per instance type and zone: min / median / max, changes per day, spot/on-demand, cheapest zone."""
    from hsisim.pricing.summary import summarize_prices

    summary = guard(lambda: summarize_prices(path=file))
    if as_json:
        typer.echo(dumps(summary))
        return
    from hsisim.pricing.tables import print_price_summary

    print_price_summary(summary, _console())


def _hours(text: str | None) -> float | None:
    from hsisim import units
    from hsisim.errors import HsisimInputError

    if text is None:
        return None
    try:
        return units.duration(text) / 3600.0
    except ValueError as exc:
        raise HsisimInputError(f"{{max_lifetime_hours}}: {exc}") from None


@prices_app.command("hazard")
def hazard(
    file: Annotated[Path, typer.Argument(help="Lifetimes CSV: lifetime_hours, status (preempted = event).")],
    group_by: Annotated[str | None, typer.Option(help="Fit each value of this column, e.g. gpu_type, zone.")] = None,
    fit: Annotated[str, typer.Option(help="exponential | weibull | bathtub | both (the first two) | all")] = "both",
    max_lifetime: Annotated[str | None, typer.Option(help="Cap every law here, e.g. '24 h' (GCP preemptible).")]
    = None,
    as_json: AsJson = False,
) -> None:
    """Censored ML fits of observed lifetimes per group: 95 % intervals, LR test, AIC, KS distance to
    Kaplan–Meier, and a spot.hazard block to paste."""
    from hsisim.pricing.hazard_report import fit_hazards

    report = guard(lambda: fit_hazards(path=file, group_by=group_by, fit=fit,
                                       max_lifetime_hours=_hours(max_lifetime)))
    if as_json:
        typer.echo(dumps(report))
        return
    from hsisim.pricing.tables import print_hazard_report

    print_hazard_report(report, _console())
