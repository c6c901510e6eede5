"""Communication: the gradient all-reduce over the modelled topology, and what of it is exposed."""

from __future__ import annotations

from dataclasses import dataclass

from hsisim import catalog
from hsisim.analytic import collectives, memory
from hsisim.profile import Profile
from hsisim.resolve.compute import Compute, Steps
from hsisim.resolve.hardware import Hardware
from hsisim.resolve.workload import Workload
from hsisim.scenario import Scenario


@dataclass(frozen=True)
class Comm:
    """All-reduce seconds per optimizer step: total, exposed (not hidden by the backward pass), spread."""

    exposed_s: float
    total_s: float
    cv: float = 0.0
    quantiles: tuple[float, ...] = ()  # measured shape of time / mean, drawn instead of a gamma
    notes: tuple[str, ...] = ()


def comm(sc: Scenario, hw: Hardware, wl: Workload, st: Steps, cp: Compute, prof: Profile | None) -> Comm:
    """The DDP gradient all-reduce (plus ZeRO-3 parameter all-gathers) of one optimizer step."""
    inst, notes = hw.instance, []
    intra, net = catalog.link(inst.intra), catalog.link(inst.network)
    intra_alpha, intra_bw = intra.latency_s, intra.effective_bytes_per_s
    cv = 0.0
    quantiles: tuple[float, ...] = ()
    # a profile's collectives hold for processes of the machine it measured, on one node
    here = prof if prof is not None and prof.catalog_gpu == hw.gpu.name and hw.nodes == 1 else None
    if here is not None and here.collectives:
        intra_alpha, intra_bw = here.collectives["alpha_per_hop_s"], here.collectives["bus_bw_bytes_per_s"]
        cv, quantiles = here.collectives.get("cv", 0.0), here.allreduce_quantiles
        notes.append(f"all-reduce between the processes of this machine from the profile's probe: α "
                     f"{intra_alpha * 1e6:.0f} us per hop, {intra_bw / 1e9:.2f} GB/s bus bandwidth")
    # Inter-node bandwidth at this node count (measured busbw where the catalog has it), at the
    # baseline of "up to" sizes: hours of all-reduces outlast their network burst credits.
    inter_bw = net.effective_bytes_per_s_at(hw.nodes, sc.cluster.collective) * inst.network_sustained_fraction
    topo = collectives.Topology(hw.nodes, inst.gpus, intra_alpha, intra_bw, net.latency_s, inter_bw)
    states = memory.state_bytes_per_param(sc.model.precision, sc.model.optimizer)
    grad_bytes = wl.stats.params * states["grads"]
    backward = cp.cost.time(st.micro_batch) * 2.0 / 3.0
    # ZeRO-1/2 replace the all-reduce by reduce-scatter + all-gather: the same bytes on the wire
    total, exposed = collectives.ddp_exposed(
        grad_bytes, backward, lambda s: collectives.allreduce(s, topo, sc.cluster.collective))
    if hw.on_cpu and hw.world > 1:
        # gloo reduces on the CPU, in threads that need the cores the backward pass is using:
        # on a CPU device the all-reduce does not hide behind computation
        exposed = total
        own = here.allreduce_in_training if here is not None and here.allreduce_world == hw.world else None
        if own is not None and abs(own[0] / grad_bytes - 1) < 0.01:
            # this model's own gradients, all-reduced in DDP training steps on this machine: what a step
            # waits for after the last rank's hand-over, with its measured shape
            total = exposed = own[1]
            quantiles = own[2] or quantiles
            notes.append(f"all-reduce of these {grad_bytes / 1e6:.3g} MB of gradients as measured in the profile's "
                         f"DDP training steps: {own[1] * 1e3:.2f} ms on average")
    if sc.model.zero_stage == 3:  # parameter all-gathers in forward and backward, not overlapped
        inter = net.effective_bytes_per_s_at(hw.nodes) * inst.network_sustained_fraction
        bw = min(intra.effective_bytes_per_s, inter) if hw.nodes > 1 else intra.effective_bytes_per_s
        gather = 2 * collectives.allgather(wl.stats.params * states["weights"], hw.world,
                                           max(intra.latency_s, net.latency_s), bw)
        total += gather * st.accumulation
        exposed += gather * st.accumulation
    if hw.world == 1:
        cv, quantiles = 0.0, ()
    return Comm(exposed, total, cv, quantiles, tuple(notes))
