"""The rich tables of ``hsisim plan``, ``optimize``, ``calibrate`` and ``validate`` (``run``: run_output)."""

from __future__ import annotations

import math
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table


def _hours(h: float) -> str:
    return f"{h:,.2f} h" if h >= 1 else f"{h * 60:,.1f} min"


def _p(row: dict[str, Any], key: str) -> str:
    if key not in row:
        return "-"
    lo, hi = row[f"{key}_ci95"]
    return f"{row[key]:.1%} [{lo:.0%}–{hi:.0%}]"


def print_plan(res: dict[str, Any], console: Console) -> None:
    """The plan: percentiles and probabilities, and for sweeps the table of combinations."""
    budget, deadline = res["budget_usd"], res["deadline_h"]
    goal = [f"budget ${budget:,.2f}" if budget is not None else None,
            f"deadline {_hours(deadline)}" if deadline is not None else None]
    console.print(f"[bold]{res['scenario']}[/bold]: {res['replicas']} replicas per configuration, seed "
                  f"{res['seed']}; " + (", ".join(g for g in goal if g) or "no budget or deadline given")
                  + f", confidence {res['confidence']:.0%}")
    rows = res.get("combinations")
    if rows:
        t, rec = _plan_table(rows, res, wide=console.width >= 110)
        console.print(t)
        if rec is not None:
            pick = ", ".join(f"{k}={v}" for k, v in rows[rec]["settings"].items())
            console.print(f"[bold green]recommended ←[/bold green] {pick}: {res['recommendation']}")
        else:
            console.print(f"[red]{res['recommendation']}[/red]")
        return
    m = res["metrics"]
    h = Table(show_header=False, title="Plan")
    h.add_column("")
    h.add_column("", justify="right")
    h.add_row("wall time P50 / P90 / P99",
              f"{_hours(m['wall_h']['p50'])} / {_hours(m['wall_h']['p90'])} / {_hours(m['wall_h']['p99'])}")
    h.add_row("cost P50 / P90 / P99 (USD)",
              f"{m['cost_usd']['p50']:,.2f} / {m['cost_usd']['p90']:,.2f} / {m['cost_usd']['p99']:,.2f}")
    h.add_row("P(cost ≤ budget), 95 % CI", _p(res, "p_budget"))
    h.add_row("P(wall time ≤ deadline), 95 % CI", _p(res, "p_deadline"))
    h.add_row("P(both)", f"{res['p_both']:.1%}")
    verdict = "[green]meets[/green]" if res["meets"] else "[red]does not meet[/red]"
    h.add_row(f"at {res['confidence']:.0%} confidence", verdict)
    console.print(h)


def _plan_table(rows: list[dict[str, Any]], res: dict[str, Any], wide: bool) -> tuple[Table, int | None]:
    """Every combination: its settings, P90 time and cost (P50 too when wide), $/GPU-h, the probabilities."""
    keys = list(rows[0]["settings"])
    t = Table(title="Every combination (same seeds; ★ Pareto on P90 cost and time, ← recommended)",
              box=box.SIMPLE_HEAD, pad_edge=False)
    for k in keys:
        t.add_column(k.rsplit(".", 1)[-1])
    cols = [("T P50 h", lambda r: f"{r['wall_h']['p50']:.1f}")] if wide else []
    cols += [("T P90 h", lambda r: f"{r['wall_h']['p90']:.1f}")]
    cols += [("$ P50", lambda r: f"{r['cost_usd']['p50']:,.0f}")] if wide else []
    cols += [("$ P90", lambda r: f"{r['cost_usd']['p90']:,.0f}"),
             ("$/GPU-h", lambda r: f"{r['cost_per_useful_gpu_h']['mean']:,.2f}")]
    if any(r.get("on_demand_gpu_h", {}).get("mean") for r in rows):  # a policy moves the job to on-demand
        cols += [("OD GPU-h", lambda r: f"{r['on_demand_gpu_h']['mean']:,.1f}")]
    cols += [("P($≤B)", lambda r: f"{r['p_budget']:.0%}" if "p_budget" in r else "-"),
             ("P(T≤D)", lambda r: f"{r['p_deadline']:.0%}" if "p_deadline" in r else "-")]
    for name, _ in cols:
        t.add_column(name, justify="right")
    t.add_column("", justify="left")
    rec = (res.get("recommended") or {}).get("index")
    for i, r in enumerate(rows):
        mark = ("★" if r["pareto"] else "") + ("←" if i == rec else "")
        style = "bold green" if i == rec else ("dim" if not r["meets"] else None)
        t.add_row(*[r["settings"][k] for k in keys], *[cell(r) for _, cell in cols], mark, style=style)
    return t, rec


def print_optimize(res: dict[str, Any], console: Console) -> None:
    """The U-curve of the objective against the checkpoint interval, and the three intervals."""
    unit = "USD per useful GPU-h" if res["objective"] == "cost" else "wall hours"
    t = Table(title=f"Mean {unit} against the checkpoint interval ({res['replicas']} replicas each, "
                    "common random numbers)")
    t.add_column("interval", justify="right")
    t.add_column("mean", justify="right")
    t.add_column("± 95 %", justify="right")
    t.add_column("")
    best = res["optimal_interval_min"]
    finite = [p["mean"] for p in res["curve"] if p["mean"] is not None and math.isfinite(p["mean"])]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 0.0)
    for p in res["curve"]:
        if p["mean"] is None or not math.isfinite(p["mean"]):  # replicas that never finish
            t.add_row(_minutes(p["interval_min"]), "never finishes", "", "")
            continue
        bar = "█" * (1 + int(30 * (p["mean"] - lo) / (hi - lo))) if hi > lo else "█"
        mark = " ← optimal" if abs(p["interval_min"] - best) < 1e-9 else ""
        t.add_row(_minutes(p["interval_min"]), f"{p['mean']:.6g}", f"{p['ci95_halfwidth']:.2g}", bar + mark)
    console.print(t)
    h = Table(show_header=False, title="Checkpoint interval (training progress between checkpoints)")
    h.add_column("")
    h.add_column("", justify="right")
    h.add_column("", justify="right")
    lo_ci, hi_ci = res["ci95_min"]
    h.add_row("optimal (simulated)", _minutes(best), f"{res['objective_at_optimal']:.6g}")
    h.add_row("  not worse at 95 %", f"{_minutes(lo_ci)} – {_minutes(hi_ci)}", "")
    h.add_row("Young  √(2δM)", _minutes(res["young_interval_min"]), f"{res['objective_at_young']:.6g}")
    h.add_row("Daly (2006)", _minutes(res["daly_interval_min"]), f"{res['objective_at_daly']:.6g}")
    h.add_row("job MTBF M", f"{res['mtbf_h']:.2f} h", "")
    h.add_row("checkpoint cost δ", _minutes(res["checkpoint_write_min"]), "")
    console.print(h)


def _minutes(m: float) -> str:
    if m >= 60:
        return f"{m / 60:.2f} h"
    if m >= 1:
        return f"{m:.1f} min"
    return f"{m * 60:.2f} s" if m * 60 >= 0.01 else f"{m * 60e3:.2f} ms"


def print_profile(prof: dict[str, Any], console: Console) -> None:
    """What a calibration measured."""
    fp, m = prof["fingerprint"], prof["model"]
    shape = "×".join(str(d) for d in m.get("sample_shape") or (m["bands"], m["patch"], m["patch"]))
    console.print(f"[bold]{fp['device']}[/bold] ({prof['device']['kind']}, catalog: {prof['device']['catalog_gpu']}),"
                  f" torch {fp['torch']}, {fp['cores']} cores; {m['name']} {shape}: "
                  f"{m['params']:,} parameters, {m['fwd_flops'] / 1e6:,.1f} MFLOP forward per sample")
    for role, f in (prof.get("factories") or {}).items():
        if role in ("model", "dataset"):
            console.print(f"{role} factory {f['factory']} ({f['file']}, sha256 {str(f['sha256'])[:12]}…)")
    t = Table(title="Compute: one training step t(b) = a + c·b")
    for col in ("threads", "a (fixed)", "c (per sample)", "R²", "cv", "batches"):
        t.add_column(col, justify="right")
    fits = prof["compute"].get("by_threads") or {str(prof["compute"].get("threads", "-")): prof["compute"]}
    for th, f in fits.items():
        t.add_row(th, f"{f['a_s'] * 1e3:.2f} ms", f"{f['c_s_per_sample'] * 1e3:.3f} ms", f"{f['r2']:.4f}",
                  f"{f['cv']:.3f}", ",".join(str(p["batch"]) for p in f["points"]))
    console.print(t)
    if prof.get("memory"):
        mem = prof["memory"]
        console.print(f"memory: {mem['activation_bytes_per_sample'] / 2**20:.1f} MiB activations per sample, "
                      f"fragmentation {mem['fragmentation']:.2f}, largest batch {mem['largest_batch']:,}")
    d = Table(title=f"Data pipeline ({prof['data']['dataset']}, {prof['data'].get('layout', 'your Dataset')}, "
                    f"batch {prof['data']['batch']})")
    for col in ("preprocess", "per sample", "cv", "batch build", "samples/s by workers"):
        d.add_column(col, justify="right")
    for mode, v in prof["data"]["modes"].items():
        bb = v["batch_build"]
        d.add_row(mode, f"{v['per_sample_s'] * 1e6:.1f} us", f"{v['per_sample_cv']:.2f}",
                  f"{bb['a_s'] * 1e3:.2f} ms + {bb['c_s_per_sample'] * 1e6:.1f} us/sample",
                  ", ".join(f"{r['num_workers']}: {r['samples_per_s']:,.0f}" for r in v["loader"]))
    console.print(d)
    ck = prof["checkpoint"]
    console.print(f"checkpoint: {ck['bytes'] / 2**20:.1f} MiB, write {ck['write_bw_bytes_per_s'] / 1e9:.2f} GB/s "
                  f"(fsync), read {ck['read_bw_bytes_per_s'] / 1e9:.2f} GB/s in {ck['dir']}")
    if prof.get("collectives"):
        c = prof["collectives"]
        console.print(f"all-reduce ({c['backend']}, {c['world_size']} processes): α {c['alpha_s'] * 1e6:.0f} us, "
                      f"bus bandwidth {c['bus_bw_bytes_per_s'] / 1e9:.2f} GB/s, R² {c['r2']:.3f}")
    console.print(f"probes took {prof['probe_seconds']:.1f} s")


def print_validation(res: dict[str, Any], console: Console) -> None:
    """Measured against predicted, with the error of each."""
    c = res["config"]
    console.print(f"[bold]{res['scenario']}[/bold] on {res['device']} ({res['world_size']} process(es), "
                  f"{res['threads']} training thread(s)): {c['model']}, micro-batch {c['micro_batch']}, "
                  f"{c['num_workers']} workers, preprocess {c['preprocess']}; {res['steps']} steps after "
                  f"{res['warmup']} warm-up")
    for note in res["notes"]:
        console.print(f"[yellow]note:[/yellow] {note}")
    t = Table(title="Measured vs predicted",
              caption="step time and data wait: means of the steps without the fastest and slowest 10 %")
    for col in ("quantity", "measured", "predicted", "error"):
        t.add_column(col, justify="right")
    m, p, e = res["measured"], res["predicted"], res["error_pct"]
    t.add_row("step time", f"{m['step_time_s'] * 1e3:.2f} ms", f"{p['step_time_s'] * 1e3:.2f} ms",
              f"{e['step_time_s']:+.1f} %")
    t.add_row("data-wait fraction", f"{m['data_wait_fraction']:.1%}", f"{p['data_wait_fraction']:.1%}",
              f"{e['data_wait_fraction']:+.1f} % ({res['error_points']['data_wait_fraction']:+.1f} points)")
    for key, label in (("compute_s", "computation in a step"),
                       ("barrier_wait_s", "wait for the slowest rank in a step"),
                       ("allreduce_s", "all-reduce in a step"),
                       ("allreduce_probe_s", "the gradients' all-reduce in the collective probe")):
        if key in m and key in p:
            err = f"{e[key]:+.1f} %" if key in e else f"{100.0 * (p[key] - m[key]) / m[key]:+.1f} %"
            t.add_row(label, f"{m[key] * 1e3:.2f} ms", f"{p[key] * 1e3:.2f} ms", err)
    console.print(t)
