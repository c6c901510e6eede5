"""``timeline.png``: one replica as a Gantt chart, one row per node rank.

The replica is run again with a ``Trace`` (same seed and index: the same run, bit for bit). Each
row shows what its node did: starting (boot, image pull, init, rendezvous), waiting (queue,
capacity, survivors idle), training, blocking checkpoint writes, restoring, work later lost to an
interruption, the spot notice before a reclaim (a black band) and the reclaim (×). Training is
synchronous, so its split is the critical path's: a training stretch is drawn as a bar whose height
is divided in proportion to its compute, data wait, exposed comm and memory stall — at the scale
of a day-long job the steps (tens of milliseconds each) cannot be drawn one by one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pandas as pd

from hsisim.report import style
from hsisim.sim.stepmodel import TERMS
from hsisim.sim.trace import Phase, Segment, Trace

STATE_COLOURS = {
    "compute": style.BLUE, "data wait": style.ORANGE, "comm": style.SKY, "memory stall": style.PURPLE,
    "checkpoint": style.GREEN, "restoring": style.YELLOW, "interrupted (lost work)": style.VERMILLION,
    "starting": style.GREY, "waiting": style.LIGHT_GREY, "notice": style.BLACK,
}
TRAINING = {"compute": "compute", "data": "data wait", "comm": "comm", "stall": "memory stall"}
H = 3600.0
GAP = 1e-6  # seconds: blocks end and the next begins at the same instant, up to rounding


@dataclass(frozen=True)
class Traced:
    """A replica run with a trace: its result row, its trace, its nodes and the spot notice (s)."""

    index: int
    row: dict[str, float]
    trace: Trace
    nodes: list[Any]  # sim.cluster.Node: rank, spot, start, reclaim, end
    notice_s: float
    ranks: int


def trace_replica(prep: Any, seed: int, index: int) -> Traced:
    """Run replica ``index`` of a prepared run again, with a trace."""
    from hsisim.montecarlo.prepare import replica

    tr = Trace()
    r = replica(prep, seed, index, trace=tr)
    row = r.run().row()
    notice = prep.spec.spot.notice_s if prep.spec.spot is not None else 0.0
    return Traced(index, row, tr, list(r.cluster.nodes), notice, prep.spec.job.nodes)


def pick_replica(df: pd.DataFrame) -> int:
    """The replica to draw: among those with the most common positive interruption count (else all),
    the one whose wall time is nearest the median: a typical run that shows a recovery if runs have one."""
    pool = df
    hit = df[df["interruptions"] > 0]
    if len(hit):
        pool = hit[hit["interruptions"] == hit["interruptions"].mode().iloc[0]]
    dist = (pool["wall_h"] - pool["wall_h"].median()).abs().to_numpy()
    return int(pool["replica"].to_numpy()[int(dist.argmin())])


def lost_spans(tr: Trace) -> list[tuple[float, float]]:
    """(from, to) seconds of training that each reclaim threw away: from the moment training was at the
    step it went back to, to the reclaim."""
    out = []
    for loss in tr.losses:
        start = None
        for seg in reversed([s for s in tr.segments if s.t1 <= loss.t + GAP]):
            if seg.step0 <= loss.restore_step <= seg.step1:
                start = seg.t0 if loss.restore_step == seg.step0 else seg.t1
                break
        if start is not None:
            out.append((start, loss.t))
    return out


def _is_lost(seg: Segment, spans: list[tuple[float, float]]) -> bool:
    return any(a - GAP <= seg.t0 and seg.t1 <= b + GAP for a, b in spans)


def job_terms(tr: Trace) -> dict[str, float]:
    """The six-term budget (seconds) recomputed from the trace alone: what the figure shows, in the
    ledger's terms (lost training and blocking checkpoints are recover)."""
    spans = lost_spans(tr)
    out = dict.fromkeys(("compute", "data", "comm", "stall", "recover", "overhead"), 0.0)
    for seg in tr.segments:
        for t in TERMS:
            out["recover" if _is_lost(seg, spans) else t] += seg.seconds[t]
    out["recover"] += sum(c.t1 - c.t0 for c in tr.checkpoints)
    for ph in tr.phases:
        out[ph.term] += ph.t1 - ph.t0
    return out


def _phase_state(ph: Phase, up: bool) -> str:
    if ph.what in ("queue", "replacement capacity"):
        return "waiting"
    if ph.term == "recover":
        return "restoring" if ph.what.startswith("restored") else "checkpoint"
    if ph.term == "stall":
        return "memory stall"
    if ph.what.startswith("rendezvous"):
        return "starting"
    return "waiting" if up else "starting"


def _runs(tr: Trace, spans: list[tuple[float, float]]) -> list[tuple[list[Segment], bool]]:
    """Consecutive training segments (across checkpoint writes) on the same ranks and equally lost or kept."""
    ends = {c.t0: c.t1 for c in tr.checkpoints}
    runs: list[tuple[list[Segment], bool]] = []
    for seg in tr.segments:
        lost = _is_lost(seg, spans)
        if runs:
            last, was = runs[-1]
            prev = last[-1]
            joined = seg.t0 - prev.t1 <= GAP or abs(seg.t0 - ends.get(prev.t1, -1.0)) <= GAP
            if joined and was == lost and seg.ranks == prev.ranks:
                last.append(seg)
                continue
        runs.append(([seg], lost))
    return runs


def intervals(tx: Traced) -> pd.DataFrame:
    """The figure's data: one row per drawn bar (node rank, state, start and end in hours, and the
    bar's height share and offset: training bars are split by height in proportion to their terms)."""
    tr = tx.trace
    rows: list[tuple[int, str, float, float, float, float]] = []
    for ph in tr.phases:
        nodes = ph.nodes or tuple((r, False) for r in range(tx.ranks))
        for rank, up in nodes:
            rows.append((rank, _phase_state(ph, up), ph.t0, ph.t1, 1.0, 0.0))
    spans = lost_spans(tr)
    for segs, lost in _runs(tr, spans):
        a, b = segs[0].t0, segs[-1].t1
        for rank in segs[0].ranks:
            if lost:
                rows.append((rank, "interrupted (lost work)", a, b, 1.0, 0.0))
                continue
            total = sum(sum(s.seconds.values()) for s in segs) or 1.0
            base = 0.0
            for t, label in TRAINING.items():
                share = sum(s.seconds[t] for s in segs) / total
                if share > 0:
                    rows.append((rank, label, a, b, share, base))
                    base += share
    for c in tr.checkpoints:
        rows.extend((rank, "checkpoint", c.t0, c.t1, 1.0, 0.0) for rank in c.ranks)
    for n in tx.nodes:
        if n.spot and n.end is not None and n.end == n.reclaim:
            rows.append((n.rank, "notice", max(n.start, n.reclaim - tx.notice_s), n.reclaim, 0.15, 0.85))
    df = pd.DataFrame(rows, columns=["node", "state", "t0_h", "t1_h", "share", "base"])
    df[["t0_h", "t1_h"]] /= H
    return df.sort_values(["node", "t0_h", "base"], kind="stable").reset_index(drop=True)


def figure(tx: Traced, title: str, path: Path) -> pd.DataFrame:
    """Draw ``timeline.png`` (the whole run, and a zoom on the first reclaim or on the start); returns
    the bars it shows (``intervals``)."""
    plt = style.pyplot()
    df = intervals(tx)
    height = 0.75 * tx.ranks + 0.8
    fig, (ax, zoom) = plt.subplots(2, 1, figsize=(11, 2 * height + 2.2), height_ratios=[1, 1])
    wall = tx.row["wall_h"]
    every = _draw(ax, tx, df, (0.0, wall * 1.01))
    ax.set_title(f"{title}: replica {tx.index}, node by node — wall time {style.hours_label(wall)}, "
                 f"{int(tx.row['interruptions'])} interruption(s), {len(tx.trace.checkpoints):,} checkpoints")
    window, what = zoom_window(tx)
    _draw(zoom, tx, df, window)
    zoom.set_title(f"zoom: {what}", fontsize=10)
    labels = dict(zip(STATE_COLOURS, STATE_COLOURS, strict=True))
    labels["checkpoint"] = "checkpoint (bar: write; ticks: " + ("each)" if every == 1 else f"1 in {every:,} above)")
    labels["notice"] = "spot notice, then reclaim (×)"
    handles = [plt.Rectangle((0, 0), 1, 1, facecolor=c, hatch="//" if s.startswith("interrupted") else None)
               for s, c in STATE_COLOURS.items()]
    fig.legend(handles, list(labels.values()), ncol=5, loc="lower center", fontsize=8)
    fig.subplots_adjust(top=0.93, bottom=0.17, hspace=0.6, left=0.15, right=0.98)
    style.save(fig, path, tight=False)
    return df


def zoom_window(tx: Traced) -> tuple[tuple[float, float], str]:
    """(start, end) hours around the first reclaim (notice, lost work, waiting, restart, restore), or the start."""
    tr = tx.trace
    if tr.losses:
        t = tr.losses[0].t
        restored = [p.t1 for p in tr.phases if p.term == "recover" and p.t0 >= t]
        back = min(restored, default=t + 600.0)
        span = back - t
        a, b = t - max(600.0, 2 * tx.notice_s, 0.4 * span), back + max(600.0, 0.3 * span)
        return (a / H, b / H), "the first reclaim and the recovery"
    first = min((s.t0 for s in tr.segments), default=0.0)
    return (0.0, (first + max(600.0, 0.25 * first)) / H), "the start of the run"


def _draw(ax: Any, tx: Traced, df: pd.DataFrame, window: tuple[float, float]) -> int:
    """Draw the rows over ``window`` (hours); returns the thinning step of the checkpoint ticks."""
    lo, hi = window
    for n in tx.nodes:  # each node's billed life, outlined
        end = n.end if n.end is not None else tx.row["wall_h"] * H
        ax.broken_barh([(n.start / H, (end - n.start) / H)], (n.rank - 0.4, 0.8), facecolors="none",
                       edgecolors=style.BLACK, linewidth=0.6)
        if n.spot and n.end is not None and n.end == n.reclaim:
            ax.plot([n.end / H], [n.rank], marker="x", color=style.BLACK, markersize=9, mew=2, zorder=5)
    seen = df[(df["t1_h"] >= lo) & (df["t0_h"] <= hi)]
    for state, colour in STATE_COLOURS.items():
        for key, bars in seen[seen["state"] == state].groupby(["node", "base", "share"]):
            node, b, s = (float(k) for k in cast(tuple[Any, Any, Any], key))
            ax.broken_barh(list(zip(bars["t0_h"], bars["t1_h"] - bars["t0_h"], strict=True)),
                           (node - 0.4 + 0.8 * b, 0.8 * s), facecolors=colour, edgecolor="none",
                           hatch="//" if state.startswith("interrupted") else None)
    every = _rug(ax, tx, window)
    ax.set_yticks(range(tx.ranks), [_row_label(tx, r) for r in range(tx.ranks)])
    ax.set_ylim(tx.ranks - 0.4, -0.55)
    ax.set_xlim(lo, hi)
    ax.set_xlabel("time since submission (h)")
    return every


def _rug(ax: Any, tx: Traced, window: tuple[float, float], most: int = 300) -> int:
    """Ticks under each row at the checkpoints in ``window`` (at most ``most`` per row); returns the
    thinning step."""
    lo, hi = window[0] * H, window[1] * H
    per_rank = {r: sorted(c.t0 for c in tx.trace.checkpoints if r in c.ranks and lo <= c.t0 <= hi)
                for r in range(tx.ranks)}
    every = max(1, -(-max(map(len, per_rank.values()), default=0) // most))
    for rank, times in per_rank.items():
        shown = [t / H for t in times[::every]]
        ax.plot(shown, [rank + 0.47] * len(shown), linestyle="none", marker="|", markersize=5, color=style.GREEN)
    return every


def _row_label(tx: Traced, rank: int) -> str:
    kinds = {("spot" if n.spot else "on-demand") for n in tx.nodes if n.rank == rank}
    return f"node {rank} ({'/'.join(sorted(kinds))})"
