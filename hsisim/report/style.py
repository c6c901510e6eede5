"""What every figure shares: matplotlib on the Agg backend (imported on first use), the Okabe–Ito
palette, and atomic PNG writes.

The Okabe–Ito palette (Okabe & Ito, *Color Universal Design*, 2008) keeps its eight colours apart
for the common forms of colour blindness; greys carry the states that are neither work nor loss.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hsisim.writer import atomic_write

BLACK, ORANGE, SKY, GREEN, YELLOW, BLUE, VERMILLION, PURPLE = (
    "#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7")
GREY, LIGHT_GREY = "#666666", "#BBBBBB"

# the six terms of the time budget (and the money categories that share their names)
TERM_COLOURS = {"compute": BLUE, "data": ORANGE, "comm": SKY, "stall": PURPLE, "recover": VERMILLION,
                "overhead": GREY}
TERM_LABELS = {"compute": "compute", "data": "data wait", "comm": "exposed comm", "stall": "memory stall",
               "recover": "recover (checkpoints, lost work)", "overhead": "overhead (queue, boot, init)"}
COST_COLOURS = {**TERM_COLOURS, "idle": LIGHT_GREY, "storage": GREEN, "egress": YELLOW}
COST_LABELS = {**TERM_LABELS, "recover": "recover (incl. rerun)", "overhead": "overhead (boot, init, billing)",
               "idle": "idle (waiting for capacity)", "storage": "checkpoint storage", "egress": "egress"}
DPI = 110


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (no display needed), imported only when a figure is drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 10, "axes.titlesize": 11, "axes.spines.top": False,
                         "axes.spines.right": False, "legend.frameon": False})
    return plt


def save(fig: Any, path: Path, tight: bool = True) -> Path:
    """Write ``fig`` as a PNG at ``path`` atomically, close it, and return the path."""
    plt = pyplot()
    try:
        if tight:
            fig.tight_layout()
        atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=DPI, metadata={"Software": None}))
    finally:
        plt.close(fig)
    return path


def hours_label(h: float) -> str:
    """``1.25 h`` or ``12.5 min``."""
    return f"{h:,.2f} h" if h >= 1 else f"{h * 60:,.1f} min"


def note(ax: Any, text: str) -> None:
    """A centred message on an empty axis (a figure that has nothing to show says why)."""
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=12, wrap=True, transform=ax.transAxes)
