"""``report.md``: each figure with the table of numbers behind it, the diagnosis, the scenario and the manifest."""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from hsisim.report.fixes import EFFORT
from hsisim.writer import jsonable


def _num(v: Any, fmt: str = ",.3f") -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int | float):
        return format(v, fmt)
    return str(v).replace("|", "\\|")


def table(df: pd.DataFrame, columns: dict[str, tuple[str, str]]) -> str:
    """A Markdown table of ``df``: ``columns`` maps a column to (header, number format)."""
    head = "| " + " | ".join(h for h, _ in columns.values()) + " |"
    rule = "| " + " | ".join("---" for _ in columns) + " |"
    rows = ["| " + " | ".join(_num(r[c], f) for c, (_, f) in columns.items()) + " |" for _, r in df.iterrows()]
    return "\n".join([head, rule, *rows])


def render(ctx: dict[str, Any]) -> str:
    """The whole ``report.md`` from the report's context (tables, diagnosis, manifest, scenario)."""
    parts = [_head(ctx), _budget(ctx), _cost(ctx), _distribution(ctx), _checkpoint(ctx), _timeline(ctx),
             _scaling(ctx), _diagnosis(ctx), _appendix(ctx)]
    return "\n\n".join(p.strip() for p in parts if p) + "\n"


def _head(ctx: dict[str, Any]) -> str:
    man = ctx["manifest"]
    calib = man["calibration_fingerprint"][:16] if man["calibration_fingerprint"] else "none (catalog figures)"
    notes = "\n".join(f"- {n}" for n in ctx["notes"]) or "- none"
    warned = "".join(f"\n\n> **Warning:** {w}" for w in ctx.get("warnings", []))
    return f"""# hsisim report: {ctx['name']}

{ctx['description']}

Made by `{ctx['command']}`: hsisim {man['hsisim_version']}, seed {man['seed']}, {man['replicas']:,} replicas
({ctx['sweep_replicas']:,} per configuration for the checkpoint curve, the scaling sweep and the diagnosis).
Scenario hash `{man['scenario_hash'][:16]}`; calibration fingerprint `{calib}`.{warned}

Notes of the run:

{notes}"""


def _budget(ctx: dict[str, Any]) -> str:
    df = ctx["tables"]["budget"]
    return f"""## 1. Where the wall time goes

![six-term budget](budget.png)

η = t_compute / T = **{ctx['eta']:.3f}** (mean over replicas).

{table(df, {"label": ("term", ""), "mean_h": ("mean (h)", ",.3f"), "share_of_T": ("share of T", ".1%"),
            "p5_h": ("P5 (h)", ",.3f"), "p95_h": ("P95 (h)", ",.3f")})}"""


def _cost(ctx: dict[str, Any]) -> str:
    df, prices = ctx["tables"]["cost"], ctx["tables"]["prices"]
    return f"""## 2. The bill

![cost by category](cost.png)

{table(df, {"label": ("category", ""), "usd": ("USD (mean)", ",.2f"), "share": ("share", ".1%")})}

{table(prices, {"price": ("per GPU-hour", ""), "usd_per_gpu_h": ("USD", ",.3f")})}"""


def _distribution(ctx: dict[str, Any]) -> str:
    df = ctx["tables"]["distribution"]
    return f"""## 3. Monte Carlo distribution

![cost and wall time distribution](distribution.png)

{table(df, {"metric": ("metric", ""), "mean": ("mean", ",.3f"), "p50": ("P50", ",.3f"), "p90": ("P90", ",.3f"),
            "p99": ("P99", ",.3f"), "limit": ("budget / deadline", ",.2f"), "p_within": ("P(within)", ".1%")})}"""


def _checkpoint(ctx: dict[str, Any]) -> str:
    df = ctx["tables"]["checkpoint"]
    if df.empty:
        return """## 4. Checkpoint interval

![checkpoint interval](checkpoint.png)

On-demand capacity: nothing interrupts the job, so there is no checkpoint trade-off."""
    return f"""## 4. Checkpoint interval

![checkpoint interval U-curve](checkpoint.png)

{ctx['checkpoint_line']}

{table(df, {"kind": ("interval", ""), "interval_min": ("minutes", ",.3f"), "mean": (ctx['objective_unit'], ",.5f"),
            "ci95_halfwidth": ("95 % half-width", ",.5f")})}"""


def _timeline(ctx: dict[str, Any]) -> str:
    df = ctx["tables"]["timeline_totals"]
    return f"""## 5. One replica, node by node

![timeline of one replica](timeline.png)

Replica {ctx['timeline_replica']}: {ctx['timeline_line']} The trace's time budget (critical path, hours) equals
the replica's row of the results:

{table(df, {"term": ("term", ""), "trace_h": ("from the trace (h)", ",.4f"), "results_h": ("results (h)", ",.4f")})}"""


def _scaling(ctx: dict[str, Any]) -> str:
    df = ctx["tables"]["scaling"]
    notes = "\n".join(f"- {n}" for n in ctx["scaling_notes"])
    return f"""## 6. Cost against time: GPUs and market

![cost against time](scaling.png)

The global batch is kept (gradient accumulation makes up for fewer GPUs); node counts step by one instance.

{notes}

{table(df, {"gpus": ("GPUs", "d"), "market": ("market", ""), "micro_batch": ("micro-batch", "d"),
            "wall_p50_h": ("wall P50 (h)", ",.2f"), "wall_p90_h": ("wall P90 (h)", ",.2f"),
            "cost_p50_usd": ("cost P50 (USD)", ",.2f"), "cost_p90_usd": ("cost P90 (USD)", ",.2f"),
            "eta_mean": ("η", ".3f"), "pareto": ("Pareto", ""), "own": ("this scenario", "")})}"""


def diagnosis_text(diag: dict[str, Any], command: str) -> str:
    """The diagnosis as Markdown: bottlenecks, fixes (with the command that reproduces each), thresholds."""
    b = pd.DataFrame(diag["bottlenecks"])
    b["best_fix"] = b["best_fix"].fillna("–")
    rows = []
    for f in diag["fixes"]:
        rows.append({"rank": f["rank"], "fix": f["title"], "set": " ".join(f"`--set {o}`" for o in f["overrides"]),
                     "effort": f"{f['effort']} ({EFFORT[f['effort']]})", "eta": f["eta_points"]["change"],
                     "wall": f["wall_h"]["change_pct"], "cost": f["cost_usd"]["change_pct"], "gain": f["gain"],
                     "score": f["score"], "lever": f["lever"]})
    fixes = pd.DataFrame(rows, columns=["rank", "fix", "set", "effort", "eta", "wall", "cost", "gain", "score",
                                        "lever"])
    t = pd.DataFrame(diag["thresholds"])
    t["value"] = [_num(v, ",.3g") for v in t["value"]]
    t["triggered"] = ["–" if v is None else ("**yes**" if v else "no") for v in t["triggered"]]
    skipped = "".join(f"\n- {s['id']} ({', '.join(s['overrides'])}): {s['reason']}" for s in diag["skipped"])
    return f"""Bottlenecks, by their share of the wall time T or of the bill (whichever is larger):

{table(b, {"rank": ("rank", "d"), "label": ("bottleneck", ""), "section": ("article", ""),
           "share_of_time": ("share of T", ".1%"), "share_of_cost": ("share of cost", ".1%"),
           "best_fix": ("best fix", "")})}

Fixes, each simulated alone with the same {diag['replicas']} replica seeds (seed {diag['seed']}), ranked by gain
per effort (objective: {diag['objective']}; effort 1 = configuration, 2 = code change, 3 = infrastructure).
`{command} --set ...` with a fix's settings reproduces its numbers exactly.

{table(fixes, {"rank": ("rank", "d"), "fix": ("fix", ""), "set": ("settings", ""), "effort": ("effort", ""),
               "eta": ("Δη (points)", "+.1f"), "wall": ("Δ wall time (%)", "+.1f"), "cost": ("Δ cost (%)", "+.1f"),
               "gain": ("gain (%)", "+.2f"), "score": ("gain / effort", "+.2f"), "lever": ("lever", "")})}
{skipped}

The article's trigger thresholds on this scenario:

{table(t, {"check": ("check", ""), "section": ("article", ""), "value": ("value", ""), "limit": ("trigger", ""),
           "triggered": ("triggered", ""), "basis": ("from", "")})}"""


def _diagnosis(ctx: dict[str, Any]) -> str:
    return "## 7. Diagnosis: what to fix first\n\n" + diagnosis_text(ctx["diagnosis"], ctx["reproduce"])


def _appendix(ctx: dict[str, Any]) -> str:
    scen = json.dumps(jsonable(ctx["scenario"]), indent=2)
    man = json.dumps(jsonable(ctx["manifest"]), indent=2)
    return f"""## The scenario (resolved)

```json
{scen}
```

## Manifest

```json
{man}
```"""
