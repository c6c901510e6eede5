"""The diagnosis on a terminal: bottlenecks, the ranked fixes with the settings that reproduce them, and the
article's thresholds that trigger."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


def _pct(v: float) -> str:
    return f"{v:+.1f}%"


def print_diagnosis(diag: dict[str, Any], console: Console, command: str) -> None:
    """Print ``Diagnosis.to_json()``: ranked bottlenecks, ranked fixes, triggered thresholds."""
    console.print(f"[bold]{diag['scenario']}[/bold]: diagnosis over {diag['replicas']} replicas, seed {diag['seed']} "
                  f"(fixes ranked by {diag['objective']} gain per effort)")
    b = Table(title="Bottlenecks (by share of T or of the bill)")
    for col, just in (("#", "right"), ("bottleneck", "left"), ("article", "left"), ("of T", "right"),
                      ("of cost", "right"), ("best fix", "left")):
        b.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in diag["bottlenecks"]:
        b.add_row(str(r["rank"]), r["label"], r["section"], f"{r['share_of_time']:.1%}", f"{r['share_of_cost']:.1%}",
                  r["best_fix"] or "-")
    console.print(b)
    f = Table(title="Fixes (each alone, same replica seeds as the baseline)")
    for col, just in (("#", "right"), ("fix", "left"), ("effort", "right"), ("Δη pt", "right"),
                      ("Δ wall", "right"), ("Δ cost", "right"), ("gain/effort", "right")):
        f.add_column(col, justify=just)  # type: ignore[arg-type]
    for x in diag["fixes"]:
        f.add_row(str(x["rank"]), x["title"] if x["lever"] else f"[dim]{x['title']} (no real gain)[/dim]",
                  str(x["effort"]), f"{x['eta_points']['change']:+.1f}", _pct(x["wall_h"]["change_pct"]),
                  _pct(x["cost_usd"]["change_pct"]), f"{x['score']:+.2f}")
    console.print(f)
    console.print("settings of each fix (add them to the command below):")
    for x in diag["fixes"]:
        console.print(f"  {x['rank']}. " + " ".join(f"--set {o}" for o in x["overrides"]), soft_wrap=True,
                      markup=False, highlight=False)
    for s in diag["skipped"]:
        console.print(f"[yellow]not simulated:[/yellow] {s['id']} ({', '.join(s['overrides'])}): {s['reason']}")
    t = Table(title="The article's thresholds that trigger")
    for col in ("check", "article", "value", "trigger"):
        t.add_column(col)
    for r in diag["thresholds"]:
        if r["triggered"]:
            value = r["value"] if isinstance(r["value"], str) else f"{r['value']:,.3g}"
            t.add_row(r["check"], r["section"], value, r["limit"])
    console.print(t)
    console.print(f"reproduce a fix: {command} --set ... (the same seed and replicas give the same numbers)",
                  soft_wrap=True, markup=False, highlight=False)
    for w in diag.get("warnings", []):
        console.print(f"[bold yellow]warning:[/bold yellow] {w}", highlight=False)
    for note in diag["notes"]:
        console.print(f"[yellow]note:[/yellow] {note}", highlight=False)
