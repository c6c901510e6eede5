"""Time and money accounting of one replica: the six-term budget and the cost categories.

Every second of wall time goes to exactly one term; every billed second of every node goes to
exactly one money category, so both sets sum to their totals by construction. Work lost to an
interruption is *moved* (time and money) from the training terms to ``recover``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TIME_TERMS = ("compute", "data", "comm", "stall", "recover", "overhead")
TRAINING_TERMS = ("compute", "data", "comm", "stall")
MONEY_CATEGORIES = (*TIME_TERMS, "idle", "storage", "egress")
SECONDS_PER_MONTH = 730 * 3600.0  # AWS bills storage per GB-month of 730 hours


@dataclass(frozen=True)
class Snapshot:
    """Cumulative training time, money and useful GPU-seconds at one instant."""

    time: dict[str, float]
    money: dict[str, float]
    useful_gpu_s: float


@dataclass
class Ledger:
    time: dict[str, float] = field(default_factory=lambda: dict.fromkeys(TIME_TERMS, 0.0))
    money: dict[str, float] = field(default_factory=lambda: dict.fromkeys(MONEY_CATEGORIES, 0.0))
    useful_gpu_s: float = 0.0
    billed_node_seconds: float = 0.0
    spot_node_seconds: float = 0.0
    on_demand_node_seconds: float = 0.0

    def add_time(self, term: str, seconds: float) -> None:
        self.time[term] += seconds

    def add_money(self, category: str, usd: float) -> None:
        self.money[category] += usd

    def snapshot(self) -> Snapshot:
        return Snapshot({t: self.time[t] for t in TRAINING_TERMS}, {t: self.money[t] for t in TRAINING_TERMS},
                        self.useful_gpu_s)

    def lose_since(self, base: Snapshot) -> float:
        """Move training time and money accrued since ``base`` to ``recover``; return seconds moved."""
        moved = 0.0
        for t in TRAINING_TERMS:
            dt = self.time[t] - base.time[t]
            dm = self.money[t] - base.money[t]
            self.time[t] -= dt
            self.time["recover"] += dt
            self.money[t] -= dm
            self.money["recover"] += dm
            moved += dt
        self.useful_gpu_s = base.useful_gpu_s
        return moved

    def store(self, gigabytes: float, seconds: float, usd_per_gb_month: float) -> None:
        """Checkpoint storage: GB held for ``seconds``."""
        self.money["storage"] += gigabytes * seconds / SECONDS_PER_MONTH * usd_per_gb_month

    @property
    def wall(self) -> float:
        return sum(self.time.values())

    @property
    def cost(self) -> float:
        return sum(self.money.values())
