"""The figures of one Monte Carlo run: ``budget.png``, ``cost.png`` and ``distribution.png``.

Each function draws from a run's ``Results`` and returns the table of numbers it drew, so a test
(and ``report.md``) can check the figure against the summary it claims to show.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hsisim.report import style

TERMS = ("compute", "data", "comm", "stall", "recover", "overhead")
CATEGORIES = ("compute", "data", "comm", "stall", "recover", "overhead", "idle", "storage", "egress")


def budget_table(results: Any) -> pd.DataFrame:
    """The six-term budget: mean hours per replica, share of the mean wall time, P5 and P95 (hours)."""
    m = results.summary()["metrics"]
    wall = m["wall_h"]["mean"]
    rows = [{"term": t, "label": style.TERM_LABELS[t], "mean_h": m[f"t_{t}_h"]["mean"],
             "share_of_T": m[f"t_{t}_h"]["mean"] / wall if wall else 0.0,
             "p5_h": m[f"t_{t}_h"]["p5"], "p95_h": m[f"t_{t}_h"]["p95"]} for t in TERMS]
    return pd.DataFrame(rows)


def budget(results: Any, path: Path) -> pd.DataFrame:
    """Draw ``budget.png``: the share of T of each term (stacked, η marked) and each term's hours."""
    plt = style.pyplot()
    df = budget_table(results)
    eta = results.summary()["metrics"]["eta"]["mean"]
    wall = results.summary()["metrics"]["wall_h"]["mean"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), width_ratios=[1.1, 1])
    x = 0.0
    for r in df.to_dict("records"):
        share, term = float(r["share_of_T"]), str(r["term"])
        left.barh([0], [share], left=[x], color=style.TERM_COLOURS[term], label=r["label"], edgecolor="white",
                  linewidth=0.5)
        if share >= 0.06:
            left.text(x + share / 2, 0, f"{share:.0%}", ha="center", va="center",
                      color="white" if term in ("compute", "recover", "overhead") else "black")
        x += share
    left.axvline(eta, color=style.BLACK, linestyle="--", linewidth=1.2)
    left.annotate(f"η = {eta:.3f}", (eta, 0.5), xytext=(4, 0), textcoords="offset points", va="center")
    left.set_xlim(0, 1)
    left.set_ylim(-0.6, 0.6)
    left.set_yticks([])
    left.set_xlabel(f"share of the wall time T (mean T = {style.hours_label(wall)})")
    left.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2, fontsize=8)
    left.set_title("Where T goes (η = t_compute / T, mean over replicas)")
    y = np.arange(len(df))[::-1]
    err = np.array([df["mean_h"] - df["p5_h"], df["p95_h"] - df["mean_h"]]).clip(min=0)
    right.barh(y, df["mean_h"], xerr=err, color=[style.TERM_COLOURS[t] for t in df["term"]], capsize=3)
    right.set_yticks(y, df["label"], fontsize=8)
    right.set_xlabel("hours per replica (mean; whiskers P5–P95)")
    right.set_title("Each term")
    fig.suptitle(f"{results.scenario.name}: the six-term time budget ({len(results.df):,} replicas)")
    style.save(fig, path)
    return df


def cost_table(results: Any) -> pd.DataFrame:
    """Mean USD per replica of every money category and its share of the mean bill."""
    m = results.summary()["metrics"]
    total = m["cost_usd"]["mean"]
    return pd.DataFrame([{"category": c, "label": style.COST_LABELS[c], "usd": m[f"cost_{c}_usd"]["mean"],
                          "share": m[f"cost_{c}_usd"]["mean"] / total if total else 0.0} for c in CATEGORIES])


def price_table(results: Any) -> pd.DataFrame:
    """USD per GPU-hour: effective per useful GPU-hour, paid per billed GPU-hour, the on-demand list price."""
    s = results.summary()
    m = s["metrics"]
    billed = m["cost_usd"]["mean"] / m["billed_gpu_h"]["mean"] if m["billed_gpu_h"]["mean"] else 0.0
    return pd.DataFrame([
        {"price": "effective cost per useful GPU-hour", "usd_per_gpu_h": m["cost_per_useful_gpu_h"]["mean"]},
        {"price": "paid per billed GPU-hour", "usd_per_gpu_h": billed},
        {"price": "on-demand list price per GPU-hour", "usd_per_gpu_h": s["on_demand_usd_per_gpu_h"]}])


def cost(results: Any, path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Draw ``cost.png``: the bill by category, and the effective cost per useful GPU-hour against the
    on-demand list price per GPU-hour (owned hardware billed at 0: the useful against the billed GPU-hours
    instead). Returns (categories, prices)."""
    plt = style.pyplot()
    df, prices = cost_table(results), price_table(results)
    total = results.summary()["metrics"]["cost_usd"]["mean"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), width_ratios=[1.3, 1])
    if total:
        _bill(left, df, total)
        _prices(right, prices)
    else:
        style.note(left, "owned hardware, billed at 0 USD/h:\nno bill to split")
        _gpu_hours(right, results)
    fig.suptitle(f"{results.scenario.name}: cost by category ({len(results.df):,} replicas)")
    style.save(fig, path)
    return df, prices


def _bill(ax: Any, df: pd.DataFrame, total: float) -> None:
    y = np.arange(len(df))[::-1]
    ax.barh(y, df["usd"], color=[style.COST_COLOURS[c] for c in df["category"]], edgecolor=style.BLACK,
            linewidth=0.3)
    for yi, r in zip(y, df.to_dict("records"), strict=True):
        ax.text(r["usd"], yi, f" {r['usd']:,.2f} ({r['share']:.1%})", va="center", fontsize=8)
    ax.set_yticks(y, df["label"], fontsize=8)
    ax.set_xlim(0, df["usd"].max() * 1.35)
    ax.set_xlabel("USD per replica (mean)")
    ax.set_title(f"The bill: {total:,.2f} USD (mean)")


def _prices(ax: Any, prices: pd.DataFrame) -> None:
    ax.bar(range(3), prices["usd_per_gpu_h"], color=[style.VERMILLION, style.SKY, style.GREY])
    for i, v in enumerate(prices["usd_per_gpu_h"]):
        ax.text(i, v, f"{v:,.3f}", ha="center", va="bottom")
    ax.set_xticks(range(3), ["effective per\nuseful GPU-h", "paid per\nbilled GPU-h", "on-demand list\nper GPU-h"],
                  fontsize=8)
    ax.set_ylabel("USD per GPU-hour")
    ax.set_title("What a useful GPU-hour costs")


def _gpu_hours(ax: Any, results: Any) -> None:
    m = results.summary()["metrics"]
    values = [m["useful_gpu_h"]["mean"], m["billed_gpu_h"]["mean"]]
    ax.bar(range(2), values, color=[style.BLUE, style.GREY])
    for i, v in enumerate(values):
        ax.text(i, v, f"{v:,.3f}", ha="center", va="bottom")
    ax.set_xticks(range(2), ["useful GPU-h", "GPU-h in use"], fontsize=8)
    ax.set_ylabel("GPU-hours per replica (mean)")
    ax.set_title(f"Useful {values[0] / values[1]:.0%} of the GPU-hours" if values[1] else "GPU-hours")


def distribution_table(results: Any) -> pd.DataFrame:
    """P50, P90, P99 and mean of cost and wall time, the budget and deadline, and P(within them)."""
    s = results.summary()
    sim = results.scenario.simulation
    rows = []
    for metric, limit, p in (("cost_usd", sim.budget_usd, s.get("p_budget")),
                             ("wall_h", None if sim.deadline is None else sim.deadline / 3600, s.get("p_deadline"))):
        d = s["metrics"][metric]
        rows.append({"metric": metric, "mean": d["mean"], "p50": d["p50"], "p90": d["p90"], "p99": d["p99"],
                     "limit": limit, "p_within": p})
    return pd.DataFrame(rows)


def distribution(results: Any, path: Path) -> pd.DataFrame:
    """Draw ``distribution.png``: histogram and CDF of cost and of wall time with P50/P90/P99, the budget
    and the deadline."""
    plt = style.pyplot()
    df = distribution_table(results)
    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    for row, (r, unit, colour) in enumerate(zip(df.itertuples(), ("USD", "h"), (style.BLUE, style.ORANGE),
                                                strict=True)):
        p_within: Any = r.p_within
        x = np.sort(results.df[r.metric].to_numpy(dtype=float))
        x = x[np.isfinite(x)]
        name = "cost" if r.metric == "cost_usd" else "wall time"
        hist, cdf = axes[row]
        window = _histogram(hist, x, colour, unit)
        hist.set_xlabel(f"{name} ({unit})")
        hist.set_ylabel("replicas")
        cdf.plot(x, np.arange(1, len(x) + 1) / len(x), color=colour, drawstyle="steps-post")
        cdf.set_xlabel(f"{name} ({unit})")
        cdf.set_ylabel(f"P({name} ≤ x)")
        for ax in (hist, cdf):
            _marks(ax, r, unit, "budget" if r.metric == "cost_usd" else "deadline", x)
            ax.ticklabel_format(axis="x", useOffset=False, style="plain")
            if window is not None:
                ax.set_xlim(*window)
                ax.locator_params(axis="x", nbins=5)
        hist.set_title(f"{name}: histogram")
        cdf.set_title(f"{name}: CDF" + (f" — P(within {('budget' if row == 0 else 'deadline')}) = "
                                         f"{float(p_within):.1%}" if p_within is not None else ""))
        hist.legend(fontsize=8)
    fig.suptitle(f"{results.scenario.name}: Monte Carlo distribution of cost and wall time "
                 f"({len(results.df):,} replicas)")
    style.save(fig, path)
    return df


def _histogram(ax: Any, x: np.ndarray, colour: str, unit: str) -> tuple[float, float] | None:
    """A histogram; a run whose every replica gives the same value (no randomness) gets one bar, labelled,
    and the x range to show it in (None otherwise)."""
    if len(x) and x[-1] - x[0] <= 1e-9 * max(1.0, abs(float(x[-1]))):
        pad = max(abs(float(x[0])) * 0.02, 0.01)
        window = (float(x[0]) - pad, float(x[0]) + pad)
        ax.hist(x, bins=1, range=(float(x[0]) - pad / 10, float(x[0]) + pad / 10), color=colour, alpha=0.85)
        ax.annotate(f"every replica: {float(x[0]):,.3f} {unit}", xy=(0.02, 0.92), xycoords="axes fraction", fontsize=8)
        return window
    ax.hist(x, bins=min(50, max(10, len(x) // 20)), color=colour, alpha=0.85)
    return None


def _marks(ax: Any, r: Any, unit: str, limit_name: str, x: np.ndarray) -> None:
    for q, ls in (("p50", "-"), ("p90", "--"), ("p99", ":")):
        v = getattr(r, q)
        ax.axvline(v, color=style.BLACK, linestyle=ls, linewidth=1, label=f"{q.upper()} {v:,.2f} {unit}")
    if r.limit is None or pd.isna(r.limit):
        return
    lo, hi = float(x[0]), float(x[-1])
    pad = max(hi - lo, 1e-9 + abs(hi) * 0.05)
    if lo - pad <= r.limit <= hi + pad:
        ax.axvline(r.limit, color=style.VERMILLION, linewidth=2, label=f"{limit_name} {r.limit:,.2f} {unit}")
        return
    right = r.limit > hi
    ax.annotate(f"{limit_name} {r.limit:,.2f} {unit} " + ("→" if right else "←"), xy=(0.98 if right else 0.02, 0.45),
                xycoords="axes fraction", ha="right" if right else "left", color=style.VERMILLION, fontsize=9)
