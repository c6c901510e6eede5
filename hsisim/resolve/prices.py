"""Prices: the on-demand and spot price of one node (USD/h); a replayed trace is billed as it goes."""

from __future__ import annotations

from dataclasses import dataclass

from hsisim.resolve.hardware import Hardware
from hsisim.scenario import Price, Scenario


@dataclass(frozen=True)
class Prices:
    """USD per node-hour: what a node of this cluster is billed, and the on-demand list price."""

    usd_per_node_hour: float
    on_demand_usd_per_node_hour: float
    notes: tuple[str, ...] = ()


def prices(sc: Scenario, hw: Hardware) -> Prices:
    """The scenario's prices (a fraction of on-demand, a price, or the on-demand price under a trace)."""
    listed = hw.instance.on_demand_usd_per_hour
    on_demand = _price(sc.cost.on_demand_price, listed, listed)
    if sc.cluster.market != "spot":
        return Prices(on_demand, on_demand)
    return Prices(_price(sc.cost.spot_price, on_demand, on_demand), on_demand)


def _price(spec: Price | None, on_demand: float, default: float) -> float:
    """USD/h per node; a replayed trace is billed as it goes (this is then the on-demand price)."""
    if spec is None or spec.trace:
        return default
    if spec.fraction_of_on_demand is not None:
        return on_demand * spec.fraction_of_on_demand
    assert spec.usd_per_hour is not None
    return spec.usd_per_hour
