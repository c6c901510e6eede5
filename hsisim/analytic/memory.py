"""GPU memory: model states sharded by ZeRO stage, activations, workspace, fragmentation."""

from __future__ import annotations

import math
from dataclasses import dataclass

HALF = ("fp16", "bf16")  # pure half precision: fp16 weights and grads with an fp32 master copy
AUTOCAST = ("amp_fp16", "amp_bf16")  # torch.autocast: fp32 weights and grads, half activations


def state_bytes_per_param(precision: str, optimizer: str) -> dict[str, float]:
    """Bytes per parameter of each model-state tensor (before ZeRO sharding).

    fp32 + Adam: 4 (weights) + 4 (grads) + 8 (two fp32 moments) = 16 B, so 1e8 parameters take
    1.6 GB (seed article §5.1). Pure fp16/bf16 keeps an fp32 master copy (+4 B); autocast keeps
    fp32 weights and caches a half copy of each weight during the forward pass (+2 B).
    """
    weight = 2.0 if precision in HALF else 4.0
    opt = {"adam": 8.0, "adamw": 8.0, "sgd": 4.0}[optimizer]  # SGD: one fp32 momentum buffer
    out = {"weights": weight, "grads": weight, "optimizer": opt}
    if precision in HALF:
        out["master"] = 4.0
    if precision in AUTOCAST:
        out["cast_cache"] = 2.0
    return out


def activation_bytes_per_element(precision: str) -> float:
    """Half-precision activations under AMP or pure half; fp32 otherwise."""
    return 2.0 if precision in HALF + AUTOCAST else 4.0


@dataclass(frozen=True)
class MemoryBreakdown:
    weights: float
    grads: float
    optimizer: float
    activations: float
    workspace: float
    context: float
    fragmentation: float

    @property
    def total(self) -> float:
        """Bytes the process holds: allocated × fragmentation (reserved/allocated) + CUDA context."""
        allocated = self.weights + self.grads + self.optimizer + self.activations + self.workspace
        return allocated * self.fragmentation + self.context


def model_states(params: int, precision: str, optimizer: str, zero_stage: int,
                 world: int) -> tuple[float, float, float]:
    """(weights, grads, optimizer) bytes on one GPU after ZeRO sharding over ``world`` ranks.

    ZeRO-1 shards optimizer states (and the master copy), ZeRO-2 also gradients, ZeRO-3 also
    weights (Rajbhandari et al., SC20).
    """
    b = state_bytes_per_param(precision, optimizer)
    weights = params * (b["weights"] + b.get("cast_cache", 0.0))
    grads = params * b["grads"]
    opt = params * (b["optimizer"] + b.get("master", 0.0))
    if zero_stage >= 1:
        opt /= world
    if zero_stage >= 2:
        grads /= world
    if zero_stage >= 3:
        weights /= world
    return weights, grads, opt


def checkpointed_activation_factor(layers: int) -> float:
    """Share of activations kept with √n-segment checkpointing (Chen et al. 2016): ~2/√n."""
    return min(1.0, 2.0 / math.sqrt(max(layers, 1)))


def breakdown(*, params: int, act_elems: int, layers: int, micro_batch: int, precision: str, optimizer: str,
              zero_stage: int, world: int, activation_checkpointing: bool, workspace: float, context: float,
              fragmentation: float) -> MemoryBreakdown:
    """Peak memory of one training process for this configuration."""
    w, g, o = model_states(params, precision, optimizer, zero_stage, world)
    act = act_elems * activation_bytes_per_element(precision) * micro_batch
    if activation_checkpointing:
        act *= checkpointed_activation_factor(layers)
    return MemoryBreakdown(w, g, o, act, workspace, context, fragmentation)
