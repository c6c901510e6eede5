"""Parameter, FLOP and activation arithmetic of the HSI models, from their papers' layer definitions.

Each model is written once as a sequence of layers on a shape tracker, so the numbers follow the
input (patch size, bands after PCA, classes). Counts: ``params`` are trainable parameters (plus
BatchNorm affine weights), ``fwd_flops`` are 2 × multiply-accumulates of one forward pass of one
sample, ``act_elems`` the elements of every tensor autograd keeps for the backward pass of one
sample (each layer output, attention score matrices, the input).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ModelStats:
    """Per-sample size of a model for a given input shape."""

    name: str
    params: int
    fwd_flops: float
    act_elems: int
    ops: int  # layers that launch kernels in the forward pass (eager-mode overhead)


@dataclass
class _Tracker:
    """Follows a (channels, *spatial) shape through layers and tallies params/MACs/activations."""

    shape: tuple[int, ...]
    params: int = 0
    macs: float = 0.0
    act: int = 0
    ops: int = 0
    _trace: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.act = math.prod(self.shape)

    def _out(self, shape: tuple[int, ...], params: int = 0, macs: float = 0.0, tag: str = "") -> None:
        if any(s <= 0 for s in shape):
            raise ValueError(f"input too small: {tag} would produce shape {shape}")
        self.shape = shape
        self.params += params
        self.macs += macs
        self.act += math.prod(shape)
        self.ops += 1
        self._trace.append(f"{tag}{shape}")

    def conv(self, out_c: int, kernel: tuple[int, ...], stride: tuple[int, ...] | None = None,
             pad: tuple[int, ...] | None = None, bias: bool = True) -> _Tracker:
        in_c, *spatial = self.shape
        nd = len(spatial)
        stride = stride or (1,) * nd
        pad = pad or (0,) * nd
        out_sp = tuple((s + 2 * p - k) // st + 1 for s, k, st, p in zip(spatial, kernel, stride, pad, strict=True))
        k_elems = math.prod(kernel)
        params = in_c * out_c * k_elems + (out_c if bias else 0)
        out = (out_c, *out_sp)
        self._out(out, params, math.prod(out) * in_c * k_elems, f"conv{nd}d")
        return self

    def bn(self) -> _Tracker:
        self._out(self.shape, 2 * self.shape[0], 2.0 * math.prod(self.shape), "bn")
        return self

    def act_fn(self) -> _Tracker:
        self._out(self.shape, 0, 0.0, "act")
        return self

    def reshape(self, shape: tuple[int, ...]) -> _Tracker:
        assert math.prod(shape) == math.prod(self.shape), (shape, self.shape)
        self.shape = shape  # a view: no new activation
        return self

    def linear(self, out_f: int, bias: bool = True) -> _Tracker:
        *lead, in_f = self.shape
        n = math.prod(lead) if lead else 1
        self._out((*lead, out_f), in_f * out_f + (out_f if bias else 0), n * in_f * out_f, "linear")
        return self

    def layernorm(self) -> _Tracker:
        self._out(self.shape, 2 * self.shape[-1], 2.0 * math.prod(self.shape), "ln")
        return self

    def attention(self, heads: int, dim_head: int, qkv_bias: bool) -> _Tracker:
        """Multi-head self-attention on (tokens, dim): qkv projection, scores, softmax, output."""
        n, dim = self.shape
        inner = heads * dim_head
        self._out((n, 3 * inner), dim * 3 * inner + (3 * inner if qkv_bias else 0), n * dim * 3 * inner, "qkv")
        self._out((heads, n, n), 0, heads * n * n * dim_head, "scores")
        self._out((heads, n, n), 0, 0.0, "softmax")
        self._out((n, inner), 0, heads * n * n * dim_head, "attn@v")
        self._out((n, dim), inner * dim + dim, n * inner * dim, "out")
        return self

    def stats(self, name: str) -> ModelStats:
        return ModelStats(name, self.params, 2.0 * self.macs, self.act, self.ops)


def hamida(bands: int, patch: int, outputs: int) -> ModelStats:
    """Hamida et al. 2018 3D-CNN as implemented in DeepHyperX (``HamidaEtAl``)."""
    t = _Tracker((1, bands, patch, patch))
    p1 = 1 if patch == 3 else 0
    t.conv(20, (3, 3, 3), pad=(p1, p1, p1)).act_fn()
    t.conv(20, (3, 1, 1), stride=(2, 1, 1), pad=(1, 0, 0))
    t.conv(35, (3, 3, 3), pad=(1, 0, 0)).act_fn()
    t.conv(35, (3, 1, 1), stride=(2, 1, 1), pad=(1, 0, 0))
    t.conv(35, (3, 1, 1), pad=(1, 0, 0)).act_fn()
    t.conv(35, (2, 1, 1), stride=(2, 1, 1), pad=(1, 0, 0)).act_fn()
    t.reshape((math.prod(t.shape),))
    t.linear(outputs)
    return t.stats("hamida")


def hybridsn(bands: int, patch: int, outputs: int) -> ModelStats:
    """HybridSN (Roy et al. 2019): three 3D convolutions, one 2D convolution, three dense layers."""
    t = _Tracker((1, bands, patch, patch))
    t.conv(8, (7, 3, 3)).act_fn()
    t.conv(16, (5, 3, 3)).act_fn()
    t.conv(32, (3, 3, 3)).act_fn()
    c, d, h, w = t.shape
    t.reshape((c * d, h, w))
    t.conv(64, (3, 3)).act_fn()
    t.reshape((math.prod(t.shape),))
    t.linear(256).act_fn().linear(128).act_fn().linear(outputs)
    return t.stats("hybridsn")


def ssrn(bands: int, patch: int, outputs: int) -> ModelStats:
    """SSRN (Zhong et al. 2018): spectral then spatial residual blocks of 3D convolutions."""
    t = _Tracker((1, bands, patch, patch))
    t.conv(24, (7, 1, 1), stride=(2, 1, 1)).bn().act_fn()
    for _ in range(2):  # spectral residual blocks
        t.conv(24, (7, 1, 1), pad=(3, 0, 0)).bn().act_fn().conv(24, (7, 1, 1), pad=(3, 0, 0)).bn().act_fn()
    t.conv(128, (t.shape[1], 1, 1)).bn().act_fn()
    t.reshape((1, 128, patch, patch))
    t.conv(24, (128, 3, 3)).bn().act_fn()
    for _ in range(2):  # spatial residual blocks
        t.conv(24, (1, 3, 3), pad=(0, 1, 1)).bn().act_fn().conv(24, (1, 3, 3), pad=(0, 1, 1)).bn().act_fn()
    t.reshape((24, math.prod(t.shape[1:])))
    t._out((24,), 0, float(math.prod(t.shape)), "avgpool")
    t.linear(outputs)
    return t.stats("ssrn")


def ssftt(bands: int, patch: int, outputs: int, tokens: int = 4, dim: int = 64) -> ModelStats:
    """SSFTT (Sun et al. 2022): 3D+2D conv stem, Gaussian-weighted tokenizer, one transformer layer."""
    t = _Tracker((1, bands, patch, patch))
    t.conv(8, (3, 3, 3)).bn().act_fn()
    c, d, h, w = t.shape
    t.reshape((c * d, h, w))
    t.conv(dim, (3, 3)).bn().act_fn()
    n = t.shape[1] * t.shape[2]
    t.reshape((n, dim))
    # tokenizer: A = softmax(X W_a^T) (n x L), V = X W_v (n x dim), T = A^T V (L x dim)
    t.linear(tokens, bias=False).act_fn()
    t.shape = (n, dim)  # W_v acts on the same token matrix X, not on A
    t.linear(dim, bias=False)
    t._out((tokens, dim), 0, float(tokens * n * dim), "tokens")
    t.reshape((tokens, dim))
    t._out((tokens + 1, dim), dim + (tokens + 1) * dim, 0.0, "cls+pos")
    _transformer_layer(t, heads=8, dim_head=dim // 8, mlp=8, qkv_bias=True)
    t._out((dim,), 0, 0.0, "cls")
    t.linear(outputs)
    return t.stats("ssftt")


def spectralformer(bands: int, patch: int, outputs: int, near_band: int = 3, dim: int = 64,
                   depth: int = 5) -> ModelStats:
    """SpectralFormer (Hong et al. 2021), patch-wise with group-wise spectral embedding and CAF."""
    n = bands + 1
    t = _Tracker((bands, near_band * patch * patch))
    t.linear(dim)
    t._out((n, dim), dim + n * dim, 0.0, "cls+pos")
    for layer in range(depth):
        if layer > 1:  # cross-layer adaptive fusion: a 1x2 conv over (tokens, 2 layers)
            t._out((n, dim), n * n * 2 + n, float(n * n * 2 * dim), "caf")
        _transformer_layer(t, heads=4, dim_head=16, mlp=8, qkv_bias=False)
    t._out((dim,), 0, 0.0, "cls")
    t.layernorm().linear(outputs)
    return t.stats("spectralformer")


def _transformer_layer(t: _Tracker, heads: int, dim_head: int, mlp: int, qkv_bias: bool) -> None:
    n, dim = t.shape
    t.layernorm().attention(heads, dim_head, qkv_bias)
    t._out((n, dim), 0, float(n * dim), "residual")
    t.layernorm().linear(mlp).act_fn().linear(dim)
    t._out((n, dim), 0, float(n * dim), "residual")


BUILDERS: dict[str, Callable[[int, int, int], ModelStats]] = {
    "hamida": hamida,
    "hybridsn": hybridsn,
    "ssrn": ssrn,
    "ssftt": ssftt,
    "spectralformer": spectralformer,
}
