"""Human-readable output of ``hsisim prices show`` and ``hsisim prices hazard`` (rich, fits 80 columns)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


def _usd(x: float | None) -> str:
    return "-" if x is None else f"{x:.4f}"


def _g(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}g}"


def _ci(ci: list[float | None] | None, unit: str = "") -> str:
    if ci is None:
        return "-"
    lo = "0" if ci[0] is None else f"{ci[0]:.3g}"  # a side the likelihood never closes: unbounded
    hi = "∞" if ci[1] is None else f"{ci[1]:.3g}"
    return f"{lo}–{hi}{unit}"


def print_price_summary(summary: dict[str, Any], console: Console) -> None:
    """Per-series table (USD/h), the cheapest zone per instance type, and the notes."""
    products = {s.get("product") for s in summary["series"]}
    t = Table(title=f"Spot prices, USD/h ({summary['median']} median)", title_justify="left")
    for name, justify in (("type", "left"), ("zone", "left"), ("min", "right"), ("median", "right"),
                          ("max", "right"), ("chg/day", "right"), ("mean/OD", "right")):
        t.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for s in summary["series"]:
        zone = s.get("availability_zone", "-") + (f" {s['product']}" if len(products) > 1 else "")
        ratio = s.get("spot_to_on_demand")
        per_day = s["changes_per_day"]
        t.add_row(s.get("instance_type", "-"), zone, _usd(s["min_usd_per_hour"]), _usd(s["median_usd_per_hour"]),
                  _usd(s["max_usd_per_hour"]), "-" if per_day is None else f"{per_day:.2f}",
                  "-" if ratio is None else f"{ratio:.2f}")
    console.print(t)
    if summary["cheapest"]:
        c = Table(title="Cheapest zone: share of time at the lowest price (ties count for each)",
                  title_justify="left")
        for name in ("type", "zone", "share", "window"):
            c.add_column(name, no_wrap=True)
        for row in summary["cheapest"]:
            c.add_row(row["instance_type"], row["zone"], f"{row['share']:.0%}", f"{row['window_days']:.1f} d")
        console.print(c)
    for note in summary["notes"]:
        console.print(f"note: {note}", soft_wrap=False)


def print_hazard_report(report: dict[str, Any], console: Console) -> None:
    """Per group: counts, each fit with its 95 % interval, the LR test, and the ``spot.hazard`` to paste."""
    by = report["group_by"]
    if report["censored_statuses"]:
        seen = ", ".join(f"{k or '(empty)'} ({v})" for k, v in report["censored_statuses"].items())
        console.print(f"censored (status other than 'preempted'): {seen}")
    for g in report["groups"]:
        head = f"{by} = {g['group']}" if by else "all lifetimes"
        console.print(f"\n[bold]{head}[/bold]: {g['n']} lifetimes, {g['events']} preemptions, "
                      f"{g['exposure_hours']:.4g} h exposure")
        if g["note"]:
            console.print(f"  {g['note']}")
        if not g.get("comparison"):
            continue
        console.print(_fit_table(g))
        if len(g["comparison"]) > 1:
            cap = g.get("max_lifetime_hours")
            console.print("  by AIC" + (f", every law capped at {cap:g} h" if cap else "") + "; KS = sup |F − F_KM|")
            console.print(_comparison_table(g))
        lr = g["likelihood_ratio"]
        if lr:
            console.print(f"  LR (exponential = Weibull k=1): 2Δll = {lr['statistic']:.4g}, "
                          f"p = {lr['p_value']:.3g} → {g['preferred']}")
        # the block is pasted into a scenario: never wrapped
        console.print(f"  spot:\n    hazard: {g['spot_hazard']}", soft_wrap=True)
        if g.get("spot_max_lifetime"):
            console.print(f"    max_lifetime: {g['spot_max_lifetime']}", soft_wrap=True)


def _fit_table(g: dict[str, Any]) -> Table:
    t = Table(box=None, padding=(0, 1, 0, 2))
    for name, justify in (("law", "left"), ("estimate", "right"), ("95 % interval", "right"), ("mean", "right"),
                          ("AIC", "right")):
        t.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    e, w = g["exponential"], g["weibull"]
    if e:
        t.add_row("exponential", f"rate {_g(e['rate_per_hour'])}/h", _ci(e["rate_ci95"], "/h"),
                  f"{_g(e['mean_hours'])} h", f"{e['aic']:.2f}")
    if w:
        t.add_row("Weibull", f"shape {_g(w['shape'])}", _ci(w["shape_ci95"]), f"{_g(w['mean_hours'])} h",
                  f"{w['aic']:.2f}")
        t.add_row("", f"scale {_g(w['scale_hours'])} h", _ci(w["scale_hours_ci95"], " h"), "", "")
    b = g.get("bathtub")
    if b:
        t.add_row("bathtub", f"a {_g(b['a'])}", "", f"{_g(b['mean_hours'])} h", f"{b['aic']:.2f}")
        t.add_row("", f"tau1 {_g(b['tau1_hours'])} h, tau2 {_g(b['tau2_hours'])} h", "", "", "")
        t.add_row("", f"b {_g(b['b_hours'])} h", "", "", "")
    return t


def _comparison_table(g: dict[str, Any]) -> Table:
    """The laws by AIC, with their distance to the Kaplan–Meier estimate."""
    t = Table(box=None, padding=(0, 1, 0, 2))
    for name in ("law", "k", "log-lik", "ΔAIC", "KS"):
        t.add_column(name, justify="left" if name == "law" else "right", no_wrap=True)
    for c in g["comparison"]:
        t.add_row(c["family"], str(c["parameters"]), f"{c['log_likelihood']:.2f}", f"{c['delta_aic']:.2f}",
                  f"{c['ks_distance']:.3f}")
    return t
