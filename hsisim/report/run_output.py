"""What ``hsisim run`` prints: the answer first (time, cost, the same job on on-demand, the levers),
then what it assumed, then where the hours and the dollars go. Laid out for 80 columns."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.padding import Padding
from rich.table import Table

TERM_LABELS = {
    "t_compute_h": "compute", "t_data_h": "data wait", "t_comm_h": "exposed comm", "t_stall_h": "memory stall",
    "t_recover_h": "recover (ckpt, lost work)", "t_overhead_h": "overhead (queue, boot, init)",
}
COST_LABELS = {
    "cost_compute_usd": "compute", "cost_data_usd": "data wait", "cost_comm_usd": "exposed comm",
    "cost_stall_usd": "memory stall", "cost_recover_usd": "recover", "cost_overhead_usd": "overhead",
    "cost_idle_usd": "idle", "cost_storage_usd": "checkpoint storage", "cost_egress_usd": "egress",
}


def hours(h: float) -> str:
    return f"{h:,.2f} h" if h >= 1 else f"{h * 60:,.1f} min"


def usd(x: float) -> str:
    return f"${x:,.2f}"


def _say(console: Console, text: str, indent: int = 2) -> None:
    """A line of the answer, its continuation lines indented like it."""
    console.print(Padding(text, (0, 0, 0, indent)))


def print_run(summary: dict[str, Any], console: Console) -> None:
    """The whole output of ``hsisim run`` from its ``--json`` object."""
    _answer(summary, console)
    _levers(summary.get("levers") or [], summary.get("levers_skipped"), console)
    _assumed(summary, console)
    for w in summary.get("warnings", []):
        _say(console, f"[bold yellow]warning:[/bold yellow] {w}", 0)
    for note in summary.get("notes", []):
        _say(console, f"[dim]note: {note}[/dim]", 0)
    _budget(summary["metrics"], console)
    _bill(summary["metrics"], console)
    _details(summary, console)


def _answer(s: dict[str, Any], console: Console) -> None:
    m, a = s["metrics"], s.get("assumptions", {})
    hw = f"{a['gpus']} × {a['gpu']} ({a['nodes']} × {a['instance']}, {a['market'].replace('_', '-')})" if a else ""
    console.print(f"[bold]{s['scenario']}[/bold]: {s['replicas']:,} replicas, seed {s['seed']}. {hw}")
    w, c = m["wall_h"], m["cost_usd"]
    _say(console, f"[bold]{hours(w['mean'])}[/bold] and [bold]{usd(c['mean'])}[/bold] on average "
                  f"(P90 {hours(w['p90'])}, {usd(c['p90'])}; P99 {hours(w['p99'])}, {usd(c['p99'])})")
    goals = []
    if "p_deadline" in s:
        goals.append(f"P(time ≤ deadline) {s['p_deadline']:.0%}")
    if "p_budget" in s:
        goals.append(f"P(cost ≤ budget) {s['p_budget']:.0%}")
    if goals:
        _say(console, ", ".join(goals))
    od = s.get("on_demand_comparison")
    per_gpu = m["cost_per_useful_gpu_h"]["mean"]
    if od:
        o = od["on_demand"]
        verb = "saves" if od["saving_usd"] >= 0 else "costs"
        _say(console, f"The same job on on-demand: {hours(o['wall_h'])}, {usd(o['cost_usd'])}. Spot {verb} "
                      f"{usd(abs(od['saving_usd']))} ({abs(od['saving_pct']):.0f} %) and takes "
                      f"{hours(abs(od['extra_wall_h']))} {'longer' if od['extra_wall_h'] >= 0 else 'less'}.")
        _say(console, f"Cost per useful GPU-hour: {usd(per_gpu)} on spot, {usd(o['cost_per_useful_gpu_h'])} on "
                      f"on-demand (list price {usd(s['on_demand_usd_per_gpu_h'])} per GPU-hour).")
    else:
        _say(console, f"Cost per useful GPU-hour: {usd(per_gpu)} (list price {usd(s['on_demand_usd_per_gpu_h'])} "
                      f"per GPU-hour; η = {m['eta']['mean']:.2f} of the hours are compute)")


def _levers(levers: list[dict[str, Any]], skipped: str | None, console: Console) -> None:
    if skipped:
        _say(console, f"Biggest levers: not simulated ({skipped})")
    if not levers:
        return
    console.print("[bold]Biggest levers[/bold] (what-if runs with the same seeds; hsisim diagnose for all):")
    for lv in levers:
        _say(console, f"{lv['fix']}: time {lv['wall_pct']:+.0f} %, cost {lv['cost_pct']:+.0f} %, "
                      f"η {lv['eta_points']:+.0f} points [dim](--set {' --set '.join(lv['overrides'])})[/dim]")


def _assumed(s: dict[str, Any], console: Console) -> None:
    a = s.get("assumptions")
    if not a:
        return
    price = f"on-demand {a['on_demand_usd_per_node_h']:.3f} USD/h per node ({a['on_demand_price_source']})"
    if a["market"] == "spot":
        spot = a.get("spot_usd_per_node_h")
        price = (f"spot {a['spot_price']}" + (f" = {spot:.3f} USD/h per node" if spot is not None else "")
                 + f"; {price}")
    goals = [f"budget {usd(a['budget_usd'])}" if a.get("budget_usd") is not None else "no budget",
             f"deadline {hours(a['deadline_h'])}" if a.get("deadline_h") is not None else "no deadline"]
    console.print("[bold]Assumed[/bold]:")
    _say(console, f"{a['gpus_per_node']} GPUs and {a['vcpus_per_node']} vCPUs per node; {price}")
    _say(console, f"{', '.join(goals)}; calibration: {a['calibration']}")
    if a.get("defaults"):
        _say(console, "defaults the file left out: " + ", ".join(f"{k} = {_short(v)}" for k, v in
                                                                    a["defaults"].items()))


def _short(v: Any) -> str:
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {x}" for k, x in v.items() if x is not None) + "}"
    if isinstance(v, float) and v >= 86400:
        return f"{v / 86400:g} days"
    return str(v)


def _budget(m: dict[str, Any], console: Console) -> None:
    wall = m["wall_h"]["mean"]
    t = Table(title="Where the wall time goes (mean per replica)")
    for col, just in (("term", "left"), ("mean", "right"), ("share", "right"), ("P90", "right")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for key, label in TERM_LABELS.items():
        t.add_row(label, hours(m[key]["mean"]), f"{m[key]['mean'] / wall:.1%}" if wall else "-", hours(m[key]["p90"]))
    t.add_row("[bold]wall time T[/bold]", f"[bold]{hours(wall)}[/bold]", "100.0%", hours(m["wall_h"]["p90"]))
    console.print(t)


def _bill(m: dict[str, Any], console: Console) -> None:
    c = Table(title="The bill (mean per replica, USD)")
    c.add_column("category")
    c.add_column("USD", justify="right")
    c.add_column("share", justify="right")
    total = m["cost_usd"]["mean"]
    for key, label in COST_LABELS.items():
        if m[key]["mean"] or key in ("cost_compute_usd", "cost_overhead_usd"):
            c.add_row(label, f"{m[key]['mean']:,.2f}", f"{m[key]['mean'] / total:.1%}" if total else "-")
    c.add_row("[bold]total[/bold]", f"[bold]{total:,.2f}[/bold]", "100.0%")
    console.print(c)


def _details(s: dict[str, Any], console: Console) -> None:
    m = s["metrics"]
    h = Table(title="Details", show_header=False)
    h.add_column("metric")
    h.add_column("value", justify="right")
    eta = m["eta"]
    h.add_row("η = t_compute / T", f"{eta['mean']:.3f} (P5 {eta['p5']:.3f}, P95 {eta['p95']:.3f})")
    lo, hi = m["cost_usd"]["ci95"]
    h.add_row("mean cost, 95 % CI", f"{usd(m['cost_usd']['mean'])} [{lo:,.2f}, {hi:,.2f}]")
    h.add_row("useful / billed GPU-hours", f"{m['useful_gpu_h']['mean']:,.1f} / {m['billed_gpu_h']['mean']:,.1f}")
    h.add_row("checkpoints / interruptions", f"{m['checkpoints']['mean']:,.1f} / {m['interruptions']['mean']:,.2f}")
    if m.get("on_demand_gpu_h", {}).get("mean") and m.get("spot_gpu_h", {}).get("mean"):  # a job on both markets
        h.add_row("spot / on-demand GPU-hours, switches", f"{m['spot_gpu_h']['mean']:,.1f} / "
                  f"{m['on_demand_gpu_h']['mean']:,.1f}, {m['switches']['mean']:,.2f}")
    if s.get("p_finished", 1.0) < 1.0:
        h.add_row("[red]replicas that never finished[/red]", f"{1 - s['p_finished']:.1%} (simulation.max_wall)")
    if "stopping" in s:
        st = s["stopping"]
        h.add_row("stopped at", f"{st['replicas']} replicas, mean cost ± {st['ci_halfwidth']:.2%} (target "
                  f"{st['ci_halfwidth_target']:.2%}{', maximum reached' if st['reached_max'] else ''})")
    console.print(h)
