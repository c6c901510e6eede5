"""Spot capacity: each node's lifetime law, correlated reclaims, the notice, recovery, price traces.

Hazards given as data (a lifetimes CSV, an AWS Spot Advisor band) become registry distributions
here, so the simulator only ever samples a distribution.
"""

from __future__ import annotations

from typing import Any

from hsisim import catalog
from hsisim.distributions import Exponential, Weibull
from hsisim.pricing import hazard as hz
from hsisim.pricing.trace import PriceTrace, read_trace
from hsisim.scenario import AdvisorHazard, LifetimesHazard, Scenario
from hsisim.sim.spec import SpotSetup


def lifetime_law(sc: Scenario) -> tuple[Any, hz.HazardFit | None]:
    """The per-node lifetime distribution (seconds) and, for data-driven hazards, the fit behind it."""
    assert sc.spot is not None
    h = sc.spot.hazard
    if isinstance(h, AdvisorHazard):
        return Exponential(dist="exponential", rate_per_hour=hz.advisor_rate_per_hour(h.band)), None
    if isinstance(h, LifetimesHazard):
        sample = hz.read_lifetimes(h.file, where=h.where or None)
        if h.fit == "exponential":
            fit = hz.fit_exponential(sample)
            assert fit.rate_per_hour is not None
            return Exponential(dist="exponential", rate_per_hour=fit.rate_per_hour), fit
        fit = hz.fit_weibull(sample)
        assert fit.shape is not None and fit.scale_hours is not None
        return Weibull(dist="weibull", shape=fit.shape, scale=fit.scale_hours * 3600.0), fit
    return h, None


def resolve_spot(sc: Scenario, on_demand_usd_per_node_hour: float) -> SpotSetup | None:
    """The spot setup of ``sc``, or None for an on-demand cluster."""
    if sc.cluster.market != "spot":
        return None
    assert sc.spot is not None
    sp = sc.spot
    law, fit = lifetime_law(sc)
    spot_nodes = sc.cluster.nodes - sc.cluster.on_demand_nodes
    corr = sp.correlated_rate_per_hour / 3600.0
    rate = spot_nodes / law.mean + corr if spot_nodes else corr
    trace, scale = _trace(sc, on_demand_usd_per_node_hour)
    return SpotSetup(law, corr, sp.notice, sp.replacement_delay, sp.recovery, sp.fallback_after,
                     sp.fallback_wait_limit, sp.bill_survivors, spot_nodes, 1 / rate if rate > 0 else float("inf"),
                     fit, trace, scale)


def _trace(sc: Scenario, on_demand: float) -> tuple[PriceTrace | None, float]:
    price = sc.cost.spot_price
    if price is None or not price.trace:
        return None, 1.0
    spec = sc.cost.price_trace
    assert spec is not None
    where = {k: v for k, v in (("availability_zone", spec.availability_zone), ("instance_type", spec.instance_type),
                               ("product_description", spec.product_description)) if v}
    trace = read_trace(spec.file, where=where or None)
    source = spec.instance_type or sc.cluster.instance
    if source == sc.cluster.instance:
        return trace, 1.0
    # a trace of another instance type: keep its spot/on-demand ratio over time
    src_od = catalog.instance(source, key="cost.price_trace.instance_type").on_demand_usd_per_hour
    return trace, on_demand / src_od
