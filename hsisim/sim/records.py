"""What one replica returns: its time budget, its bill and its counts."""

from __future__ import annotations

import math
from dataclasses import dataclass

from hsisim.sim.ledger import MONEY_CATEGORIES, TIME_TERMS


@dataclass(frozen=True)
class ReplicaResult:
    """One replica's outcome. Times in seconds, money in USD."""

    replica: int
    wall: float
    time: dict[str, float]
    money: dict[str, float]
    useful_gpu_h: float
    billed_gpu_h: float
    spot_node_h: float
    interruptions: int
    checkpoints: int
    fell_back: bool = False
    finished: bool = True
    spot_gpu_h: float = 0.0  # GPU-hours of spot nodes, launch to termination (unrounded)
    on_demand_gpu_h: float = 0.0  # GPU-hours of on-demand nodes, launch to termination (unrounded)
    switches: int = 0  # moves of the job between spot and on-demand capacity

    @property
    def cost(self) -> float:
        return sum(self.money.values())

    def row(self) -> dict[str, float]:
        """Flat metrics for the results table (the names of the CLI contract)."""
        h = 3600.0
        out: dict[str, float] = {"replica": self.replica, "wall_h": self.wall / h}
        out.update({f"t_{t}_h": self.time[t] / h for t in TIME_TERMS})
        out["eta"] = self.time["compute"] / self.wall if self.wall > 0 else 0.0
        out.update({f"cost_{c}_usd": self.money[c] for c in MONEY_CATEGORIES})
        out["cost_usd"] = self.cost
        out["useful_gpu_h"] = self.useful_gpu_h
        out["billed_gpu_h"] = self.billed_gpu_h
        out["cost_per_useful_gpu_h"] = self.cost / self.useful_gpu_h if self.useful_gpu_h > 0 else math.inf
        out["spot_node_h"] = self.spot_node_h
        out["interruptions"] = self.interruptions
        out["checkpoints"] = self.checkpoints
        out["fell_back"] = float(self.fell_back)
        out["finished"] = float(self.finished)
        out["spot_gpu_h"] = self.spot_gpu_h
        out["on_demand_gpu_h"] = self.on_demand_gpu_h
        out["switches"] = self.switches
        return out
