"""What a run assumed: the hardware and prices it resolved to, and the defaults it relied on.

Printed with every run (and in its ``--json`` summary) so that a number is never read without what
it rests on; ``scenario_warnings`` names the choices a user likely did not mean.
"""

from __future__ import annotations

from typing import Any

from hsisim import catalog
from hsisim.scenario import Scenario
from hsisim.sim.spec import RunSpec

# Keys whose default changes the answer a lot; shown when the file left them out.
CONSEQUENTIAL = ("overhead.boot", "overhead.image_pull", "overhead.init", "overhead.queue", "spot.notice",
                 "spot.replacement_delay", "spot.correlated_rate_per_hour", "cost.spot_price", "cost.min_billed",
                 "checkpoint.policy", "checkpoint.storage", "checkpoint.async", "memory.fragmentation",
                 "memory.on_oom", "loader.num_workers", "loader.persistent_workers", "dataset.storage",
                 "dataset.train_fraction", "model.precision", "simulation.max_wall")


def assumptions(sc: Scenario, spec: RunSpec) -> dict[str, Any]:
    """Hardware, prices, budget and deadline, the calibration, and the defaults the scenario relied on."""
    job = spec.job
    inst = catalog.instance(sc.cluster.instance)
    gpu = catalog.gpu(inst.gpu)
    out: dict[str, Any] = {
        "instance": inst.name, "gpu": gpu.display, "gpus_per_node": inst.gpus, "nodes": job.nodes,
        "gpus": job.world, "vcpus_per_node": inst.vcpus, "market": sc.cluster.market,
        "on_demand_usd_per_node_h": job.on_demand_usd_per_node_hour,
        "on_demand_price_source": ", ".join(p for p in (inst.price_region, inst.price_as_of) if p) or "scenario",
        "budget_usd": sc.simulation.budget_usd,
        "deadline_h": sc.simulation.deadline / 3600 if sc.simulation.deadline is not None else None,
        "calibration": sc.calibration or "none: compute from the catalog's figures for this GPU",
        "defaults": defaults(sc),
    }
    if sc.cluster.market == "spot":
        out["spot_usd_per_node_h"] = None if spec.spot and spec.spot.trace else job.price_usd_per_node_hour
        out["spot_price"] = _spot_price(sc)
    return out


def _spot_price(sc: Scenario) -> str:
    price = sc.cost.spot_price
    if price is None:
        return "not set: the on-demand price"
    if price.trace:
        return "replayed from cost.price_trace"
    if price.fraction_of_on_demand is not None:
        return f"{price.fraction_of_on_demand:g} × on-demand"
    return f"{price.usd_per_hour:g} USD/h"


def defaults(sc: Scenario) -> dict[str, Any]:
    """The consequential keys the scenario file left out, with the default values used."""
    out: dict[str, Any] = {}
    for key in CONSEQUENTIAL:
        section, field = key.split(".")
        part = getattr(sc, section)
        if part is None or field in part.model_fields_set or field.rstrip("_") + "_" in part.model_fields_set:
            continue
        if field == "async" and "async_" in part.model_fields_set:
            continue
        value = getattr(part, "async_" if field == "async" else field)
        out[key] = value.model_dump(mode="json", by_alias=True) if hasattr(value, "model_dump") else value
    return out


def scenario_warnings(sc: Scenario) -> list[str]:
    """Plain sentences, one per likely mistake: a spot price left out, zero boot times, instant replacements."""
    out = []
    rented = catalog.instance(sc.cluster.instance).on_demand_usd_per_hour > 0
    oh = sc.overhead
    if rented and oh.boot == oh.image_pull == oh.init == 0:
        out.append("overhead.boot, image_pull and init are all 0 s: a rented node takes minutes to boot, pull the "
                   "training image and start (spot_8x assumes 3, 2 and 1 min)")
    if sc.cluster.market == "spot" and sc.spot is not None:
        if sc.cost.spot_price is None:
            out.append("cost.spot_price is not set: spot nodes are billed at the on-demand price (give a fraction "
                       "of on-demand such as 0.4, a price such as '1.2 USD/h', or 'trace')")
        if sc.spot.replacement_delay is None and getattr(sc.spot, "availability", None) is None:
            out.append("spot.replacement_delay is not set: a reclaimed node is replaced at once (real capacity "
                       "waits take minutes to hours)")
    return out
