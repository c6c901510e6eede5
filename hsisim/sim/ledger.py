"""Time and money accounting of one replica: the six-term budget and the cost categories.

Every second of wall time goes to exactly one term; every billed second of every node goes to
exactly one money category at the price in force, so both sets sum to their totals by construction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

TIME_TERMS = ("compute", "data", "comm", "stall", "recover", "overhead")
MONEY_CATEGORIES = (*TIME_TERMS, "idle", "storage", "egress")
SECONDS_PER_MONTH = 730 * 3600.0  # AWS bills storage per GB-month of 730 hours


@dataclass
class Ledger:
    """Running totals; ``rate_usd_per_s`` is what the running nodes cost right now."""

    gpus_per_node: int
    time: dict[str, float] = field(default_factory=lambda: dict.fromkeys(TIME_TERMS, 0.0))
    money: dict[str, float] = field(default_factory=lambda: dict.fromkeys(MONEY_CATEGORIES, 0.0))
    rate_usd_per_s: float = 0.0
    node_starts: list[tuple[float, float]] = field(default_factory=list)  # (boot time, USD/h)
    billed_node_seconds: float = 0.0

    def spend(self, term: str, seconds: float, category: str | None = None) -> None:
        """Attribute ``seconds`` of wall time to ``term`` and their node cost to ``category``."""
        self.time[term] += seconds
        self.money[category or term] += seconds * self.rate_usd_per_s

    def start_nodes(self, now: float, count: int, usd_per_hour: float) -> None:
        """``count`` nodes begin billing at ``now``."""
        for _ in range(count):
            self.node_starts.append((now, usd_per_hour))
        self.rate_usd_per_s += count * usd_per_hour / 3600.0

    def stop_all(self, now: float, min_billed_s: float) -> None:
        """Terminate every node: per-second billing, rounded up to whole seconds, with a minimum.

        The rounding and minimum-charge remainder is overhead money (no wall time: the job is over).
        """
        for boot, price in self.node_starts:
            ran = now - boot
            billed = max(min_billed_s, math.ceil(ran - 1e-9))
            self.money["overhead"] += (billed - ran) * price / 3600.0
            self.billed_node_seconds += billed
        self.node_starts.clear()
        self.rate_usd_per_s = 0.0

    def store(self, gigabytes: float, seconds: float, usd_per_gb_month: float) -> None:
        """Checkpoint storage: GB held for ``seconds``."""
        self.money["storage"] += gigabytes * seconds / SECONDS_PER_MONTH * usd_per_gb_month

    @property
    def wall(self) -> float:
        return sum(self.time.values())

    @property
    def cost(self) -> float:
        return sum(self.money.values())
