"""Collective communication times over a modelled topology (latency α, effective bandwidth B)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

DDP_BUCKET_BYTES = 25 * 2**20  # torch DistributedDataParallel bucket_cap_mb default


@dataclass(frozen=True)
class Topology:
    """p = nodes × gpus_per_node ranks; intra-node and inter-node links (α seconds, B bytes/s)."""

    nodes: int
    gpus_per_node: int
    intra_alpha_s: float
    intra_bw: float
    inter_alpha_s: float
    inter_bw: float

    @property
    def world(self) -> int:
        return self.nodes * self.gpus_per_node


def ring_allreduce(size: float, p: int, alpha: float, bw: float) -> float:
    """Ring all-reduce: 2(p−1)α + 2(p−1)/p · S/B (Patarasuk & Yuan 2009)."""
    if p <= 1:
        return 0.0
    return 2 * (p - 1) * alpha + 2 * (p - 1) / p * size / bw


def tree_allreduce(size: float, p: int, alpha: float, bw: float) -> float:
    """Double binary tree all-reduce (NCCL ≥ 2.4): 2⌈log2 p⌉α + 2·S/B (Sanders et al. 2009)."""
    if p <= 1:
        return 0.0
    return 2 * math.ceil(math.log2(p)) * alpha + 2 * size / bw


def allgather(size: float, p: int, alpha: float, bw: float) -> float:
    """Ring all-gather of a tensor of total ``size``: (p−1)α + (p−1)/p · S/B."""
    if p <= 1:
        return 0.0
    return (p - 1) * alpha + (p - 1) / p * size / bw


def allreduce(size: float, topo: Topology, algorithm: str) -> float:
    """All-reduce time of ``size`` bytes on ``topo`` with ``ring``, ``tree`` or ``hierarchical``.

    A flat ring or tree spanning nodes runs at the slower of the two links; hierarchical does an
    intra-node reduce-scatter, an inter-node all-reduce of each GPU's 1/g shard (the g shards
    travel in parallel, sharing the NIC) and an intra-node all-gather.
    """
    p, g, n = topo.world, topo.gpus_per_node, topo.nodes
    if n == 1:
        fn = tree_allreduce if algorithm == "tree" else ring_allreduce
        return fn(size, g, topo.intra_alpha_s, topo.intra_bw)
    alpha = max(topo.intra_alpha_s, topo.inter_alpha_s)
    bw = min(topo.intra_bw, topo.inter_bw)
    if algorithm == "ring":
        return ring_allreduce(size, p, alpha, bw)
    if algorithm == "tree":
        return tree_allreduce(size, p, alpha, bw)
    intra = 2 * allgather(size, g, topo.intra_alpha_s, topo.intra_bw)  # reduce-scatter + all-gather
    inter = ring_allreduce(size / g, n, topo.inter_alpha_s, topo.inter_bw / g)
    return intra + inter


def bus_bandwidth(size: float, seconds: float, p: int) -> float:
    """nccl-tests all-reduce bus bandwidth: algbw × 2(p−1)/p, algbw = S / t."""
    return size / seconds * 2 * (p - 1) / p


def ddp_exposed(grad_bytes: float, backward_s: float, comm: Callable[[float], float],
                bucket_bytes: float = DDP_BUCKET_BYTES) -> tuple[float, float]:
    """(total, exposed) all-reduce seconds of DDP's bucketed gradients overlapping the backward pass.

    Gradients become ready uniformly over ``backward_s``; bucket i can start once its last
    gradient is ready and the previous bucket is done (one communication stream). Exposed is the
    time communication runs past the end of the backward pass (Li et al., VLDB 2020).
    """
    if grad_bytes <= 0:
        return 0.0, 0.0
    n = max(1, math.ceil(grad_bytes / bucket_bytes))
    end = total = 0.0
    for i in range(n):
        size = min(bucket_bytes, grad_bytes - i * bucket_bytes)
        ready = backward_s * min(1.0, (i * bucket_bytes + size) / grad_bytes)
        t = comm(size)
        end = max(end, ready) + t
        total += t
    return total, max(0.0, end - backward_s)
