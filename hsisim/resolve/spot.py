"""Spot capacity: each node's lifetime law, correlated reclaims, the notice, recovery, price and capacity traces.

Hazards given as data (a lifetimes CSV, an AWS Spot Advisor band) become laws here, so the
simulator only ever samples a distribution; a maximum lifetime caps whichever law there is; an
availability trace becomes an object the simulator asks when capacity falls and returns.
"""

from __future__ import annotations

import math
from typing import Any

from hsisim import catalog
from hsisim.distributions import Constant, Exponential, Weibull, capped
from hsisim.errors import HsisimInputError
from hsisim.pricing import hazard as hz
from hsisim.pricing import laws
from hsisim.pricing.availability import AvailabilityTrace, read_availability
from hsisim.pricing.survival import kaplan_meier
from hsisim.pricing.trace import PriceTrace, read_trace
from hsisim.scenario import AdvisorHazard, LifetimesHazard, Scenario
from hsisim.sim.spec import SpotSetup


def lifetime_law(sc: Scenario) -> tuple[Any, Any]:
    """The per-node lifetime law (seconds; capped at ``spot.max_lifetime``) and, for data-driven hazards,
    the fit behind it; (None, None) when only an availability trace reclaims nodes."""
    assert sc.spot is not None
    h, cap = sc.spot.hazard, sc.spot.max_lifetime
    if h is None:
        return (Constant(dist="constant", value=cap) if cap is not None else None), None
    if isinstance(h, AdvisorHazard):
        law: Any = Exponential(dist="exponential", rate_per_hour=hz.advisor_rate_per_hour(h.band))
        return (capped(law, cap) if cap is not None else law), None
    if isinstance(h, LifetimesHazard):
        return _fitted(h, cap)
    return (capped(h, cap) if cap is not None else h), None


def _fitted(h: LifetimesHazard, cap: float | None) -> tuple[Any, Any]:
    """A law fitted to observed lifetimes (with the cap known, fitted as a capped law: see ``pricing.laws``)."""
    sample = hz.read_lifetimes(h.file, where=h.where or None)
    if cap is None and h.fit == "exponential":
        fit = hz.fit_exponential(sample)
        assert fit.rate_per_hour is not None
        return Exponential(dist="exponential", rate_per_hour=fit.rate_per_hour), fit
    if cap is None and h.fit == "weibull":
        fit = hz.fit_weibull(sample)
        assert fit.shape is not None and fit.scale_hours is not None
        return Weibull(dist="weibull", shape=fit.shape, scale=fit.scale_hours * 3600.0), fit
    cap_h = cap / 3600.0 if cap is not None else None
    if h.fit == "empirical":  # Kaplan–Meier, censoring respected
        seen = laws.coarsened(sample, cap_h)
        km = kaplan_meier(seen.hours, seen.observed)
        law = km.law()
        return (capped(law, cap) if cap is not None else law), km
    try:
        lf = laws.fit_law(sample, h.fit, cap_hours=cap_h)
        return lf.law(), lf
    except HsisimInputError as exc:
        raise HsisimInputError(f"{h.file}: {exc.message}", key="spot.hazard.fit") from None


def resolve_spot(sc: Scenario, on_demand_usd_per_node_hour: float) -> SpotSetup | None:
    """The spot setup of ``sc``, or None for an on-demand cluster."""
    if sc.cluster.market != "spot":
        return None
    assert sc.spot is not None
    sp = sc.spot
    law, fit = lifetime_law(sc)
    spot_nodes = sc.cluster.nodes - sc.cluster.on_demand_nodes
    corr = sp.correlated_rate_per_hour / 3600.0
    rate = spot_nodes / law.mean + corr if spot_nodes and law is not None else corr
    avail, wait = _availability(sc, spot_nodes)
    if avail is not None and spot_nodes:
        # a trace reclaim happens each time capacity falls below the job's spot nodes: per second the job can run
        share = avail.share_at_least(spot_nodes)
        rate += avail.drops_per_second(spot_nodes) / share if share > 0 else 0.0
    trace, scale = _trace(sc, on_demand_usd_per_node_hour)
    return SpotSetup(law, corr, sp.notice, sp.replacement_delay, sp.recovery, sp.fallback_after,
                     sp.fallback_wait_limit, sp.bill_survivors, spot_nodes, 1 / rate if rate > 0 else float("inf"),
                     fit, trace, scale, avail, sp.availability.offset if sp.availability else None, wait,
                     sp.hysteresis)


def _availability(sc: Scenario, spot_nodes: int) -> tuple[AvailabilityTrace | None, float]:
    """The availability trace (checked to hold the job's spot nodes at some time) and its mean capacity wait."""
    assert sc.spot is not None
    spec = sc.spot.availability
    if spec is None:
        return None, 0.0
    trace = read_availability(spec.trace)
    if trace.most < spot_nodes:
        raise HsisimInputError(f"{spec.trace} never shows {spot_nodes} instances available (at most {trace.most}): "
                               "the job's spot nodes could never run together", key="spot.availability.trace")
    if spec.offset is not None and spec.offset >= trace.span:
        raise HsisimInputError(f"offset {spec.offset:g} s is past the trace's end ({trace.span:g} s)",
                               key="spot.availability.offset")
    drops = trace.drops_per_second(spot_nodes) if spot_nodes else 0.0
    short = 1.0 - trace.share_at_least(spot_nodes) if spot_nodes else 0.0
    return trace, (short / drops if drops > 0 and math.isfinite(drops) else 0.0)


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
