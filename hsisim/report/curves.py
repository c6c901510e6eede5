"""The figures that need more than one configuration: ``checkpoint.png`` (``optimize``'s U-curve) and
``scaling.png`` (``plan`` sweeps over the node count and the market)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from hsisim.report import style
from hsisim.scenario import Scenario


def checkpoint_table(opt: Any) -> pd.DataFrame:
    """The U-curve behind ``checkpoint.png``: every interval evaluated (minutes), the mean objective and its
    95 % half-width, and the Young, Daly and simulated optima."""
    rows = [{"kind": "evaluated", "interval_min": t / 60, "mean": v, "ci95_halfwidth": h} for t, v, h in opt.curve]
    for kind, t, v in (("young", opt.young_interval_s, opt.at_young), ("daly", opt.daly_interval_s, opt.at_daly),
                       ("optimal", opt.optimal_interval_s, opt.at_optimal)):
        rows.append({"kind": kind, "interval_min": t / 60, "mean": v, "ci95_halfwidth": math.nan})
    return pd.DataFrame(rows)


def checkpoint(opt: Any | None, name: str, path: Path) -> pd.DataFrame:
    """Draw ``checkpoint.png`` from an ``OptimizeResult`` (None: an on-demand cluster, nothing to trade)."""
    plt = style.pyplot()
    fig, ax = plt.subplots(figsize=(9, 5))
    if opt is None:
        style.note(ax, f"{name}: on-demand capacity — nothing interrupts the job,\n"
                       "so there is no checkpoint trade-off (no U-curve to draw)")
        style.save(fig, path)
        return pd.DataFrame(columns=["kind", "interval_min", "mean", "ci95_halfwidth"])
    df = checkpoint_table(opt)
    cur = df[df["kind"] == "evaluated"]
    x, y, h = cur["interval_min"].to_numpy(), cur["mean"].to_numpy(), cur["ci95_halfwidth"].to_numpy()
    unit = "USD per useful GPU-hour" if opt.objective == "cost" else "wall time (h)"
    ax.fill_between(x, y - h, y + h, color=style.SKY, alpha=0.35, label="95 % CI of the mean")
    ax.plot(x, y, marker="o", color=style.BLUE, label=f"simulated mean ({opt.replicas} replicas each, common "
                                                      "random numbers)")
    ax.axvspan(opt.ci95_s[0] / 60, opt.ci95_s[1] / 60, color=style.GREEN, alpha=0.15,
               label="intervals not worse than the optimum at 95 %")
    for kind, colour, ls in (("young", style.ORANGE, "--"), ("daly", style.VERMILLION, ":"),
                             ("optimal", style.GREEN, "-")):
        r = df[df["kind"] == kind].iloc[0]
        ax.axvline(r["interval_min"], color=colour, linestyle=ls, linewidth=1.6,
                   label=f"{kind.capitalize()}: {_minutes(r['interval_min'])} → {r['mean']:,.4f}")
    ax.set_xscale("log")
    ax.set_xlabel("checkpoint interval (minutes of training progress, log scale)")
    ax.set_ylabel(unit)
    ax.set_title(f"{name}: the checkpoint-interval U-curve (job MTBF {opt.mtbf_s / 3600:,.1f} h, "
                 f"a checkpoint blocks {opt.checkpoint_cost_s:,.3g} s)")
    ax.legend(fontsize=8)
    style.save(fig, path)
    return df


def _minutes(m: float) -> str:
    return f"{m:,.1f} min" if m >= 1 else f"{m * 60:,.1f} s"


def node_counts(nodes: int) -> list[int]:
    """1, the powers of two up to twice the scenario's node count, and the count itself."""
    out = {1, nodes}
    k = 2
    while k <= 2 * nodes:
        out.add(k)
        k *= 2
    return sorted(out)


def micro_for(sc: Scenario, gpus: int) -> int | None:
    """The micro-batch for ``gpus`` GPUs that keeps the scenario's global batch: its own when micro × GPUs
    divides the global batch, else the largest smaller one that does; None when the global batch has
    fewer samples than there are GPUs."""
    g, micro = sc.training.global_batch, sc.training.micro_batch
    if g % gpus:
        return None
    per_gpu = g // gpus
    return max(d for d in range(1, min(micro, per_gpu) + 1) if per_gpu % d == 0)


def scaling_table(rows: list[dict[str, Any]], gpus_per_node: int, own: dict[str, str]) -> pd.DataFrame:
    """One row per (node count, market): GPUs, P50/P90 wall time and cost, mean η, the Pareto flag over every
    row (P90 cost and P90 wall time, as ``plan`` compares), and whether it is the scenario's own."""
    from hsisim.planning import pareto

    out = []
    for r in rows:
        s = r["settings"]
        nodes = int(s["cluster.nodes"])
        out.append({"nodes": nodes, "gpus": nodes * gpus_per_node, "market": s["cluster.market"],
                    "micro_batch": int(s["training.micro_batch"]), "wall_p50_h": r["wall_h"]["p50"],
                    "wall_p90_h": r["wall_h"]["p90"], "cost_p50_usd": r["cost_usd"]["p50"],
                    "cost_p90_usd": r["cost_usd"]["p90"], "eta_mean": r["eta"]["mean"],
                    "own": s["cluster.nodes"] == own["cluster.nodes"] and s["cluster.market"] == own["cluster.market"]})
    df = pd.DataFrame(out).sort_values(["market", "gpus"], ignore_index=True)
    df["pareto"] = pareto(list(zip(df["cost_p90_usd"], df["wall_p90_h"], strict=True)))
    return df


def scaling(df: pd.DataFrame, name: str, notes: list[str], path: Path) -> pd.DataFrame:
    """Draw ``scaling.png``: P90 cost against P90 wall time for each GPU count and market, the Pareto front
    marked, the scenario's own configuration starred."""
    plt = style.pyplot()
    fig, ax = plt.subplots(figsize=(9, 5.5))
    for market, colour, marker in (("spot", style.BLUE, "o"), ("on_demand", style.ORANGE, "s")):
        part = df[df["market"] == market]
        if part.empty:
            continue
        ax.plot(part["wall_p90_h"], part["cost_p90_usd"], marker=marker, color=colour, markersize=8,
                label=market.replace("_", "-"))
        for r in part.to_dict("records"):
            gpus, micro = int(r["gpus"]), int(r["micro_batch"])
            label = f"{gpus} GPU{'s' if gpus > 1 else ''}" + (
                "" if micro == df["micro_batch"].max() else f" (micro {micro})")
            ax.annotate(label, (r["wall_p90_h"], r["cost_p90_usd"]), xytext=(6, 4), textcoords="offset points",
                        fontsize=8)
    front = df[df["pareto"]].sort_values("wall_p90_h")
    ax.plot(front["wall_p90_h"], front["cost_p90_usd"], color=style.BLACK, linestyle="--", linewidth=1,
            marker="o", markersize=14, markerfacecolor="none", label="Pareto front (no cheaper and faster option)")
    own = df[df["own"]]
    ax.plot(own["wall_p90_h"], own["cost_p90_usd"], linestyle="none", marker="*", markersize=16,
            color=style.VERMILLION, label="this scenario")
    ax.set_xlabel("wall time P90 (h)")
    ax.set_ylabel("cost P90 (USD)")
    ax.set_title(f"{name}: cost against time, {df['gpus'].min()}–{df['gpus'].max()} GPUs, by market")
    ax.legend(fontsize=8)
    if notes:
        fig.text(0.01, 0.01, "\n".join(notes), fontsize=7, va="bottom")
        fig.subplots_adjust(bottom=0.12 + 0.03 * len(notes))
    ax.margins(0.15)
    top = float(df["cost_p90_usd"].max())
    ax.set_ylim(0, top * 1.15 if top > 0 else 1.0)
    if top <= 0:
        ax.text(0.5, 0.5, "owned hardware, billed at 0 USD/h: only the time differs", ha="center",
                transform=ax.transAxes)
    style.save(fig, path, tight=not notes)
    return df


def plan_scaling(source: Any, overrides: list[str], sc: Scenario, *, replicas: int, seed: int, executor: str,
                 workers: int | None, progress: Any = None) -> tuple[list[dict[str, Any]], list[str]]:
    """``plan`` sweeps over the node counts (grouped by the micro-batch that keeps the global batch) and,
    on a scenario with a spot section, both markets. Returns the plan rows and notes."""
    from hsisim.planning import plan

    per_node = gpus_per_node(sc)
    markets = "spot,on_demand" if sc.spot is not None else "on_demand"
    groups: dict[int, list[int]] = {}
    notes = []
    for n in node_counts(sc.cluster.nodes):
        micro = micro_for(sc, n * per_node)
        if micro is None:
            notes.append(f"{n * per_node} GPUs left out: the global batch of {sc.training.global_batch} "
                         "cannot be split over them")
            continue
        groups.setdefault(micro, []).append(n)
    rows = []
    for micro, counts in sorted(groups.items(), reverse=True):
        if micro != sc.training.micro_batch:
            notes.append(f"{', '.join(str(c * per_node) for c in counts)} GPUs: micro-batch {micro} keeps the "
                         f"global batch of {sc.training.global_batch}")
        sweeps = [f"cluster.nodes={','.join(map(str, counts))}", f"cluster.market={markets}",
                  f"training.micro_batch={micro}"]
        res = plan(source, overrides=overrides, sweeps=sweeps, replicas=replicas, seed=seed, executor=executor,
                   workers=workers, progress=progress)
        rows.extend(res.to_json()["combinations"])
    return rows, notes


def gpus_per_node(sc: Scenario) -> int:
    from hsisim import catalog

    return catalog.instance(sc.cluster.instance).gpus
