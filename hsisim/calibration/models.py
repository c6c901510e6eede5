"""The HSI models in PyTorch, from their papers' layer definitions (torch is imported here only).

Each module takes a batch of patches shaped (N, bands, patch, patch) and returns class logits. The
layer sequence is the one ``hsisim.catalog.hsi_models`` counts, so the catalog's parameters and
FLOPs can be checked against the real module (``torch.utils.flop_counter``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class Hamida(nn.Module):
    """Hamida et al. 2018 3D-CNN as in DeepHyperX (``HamidaEtAl``): strided 3D convs pool the spectrum."""

    def __init__(self, bands: int, patch: int, classes: int) -> None:
        super().__init__()
        p1 = 1 if patch == 3 else 0
        self.features = nn.Sequential(
            nn.Conv3d(1, 20, (3, 3, 3), padding=p1), nn.ReLU(),
            nn.Conv3d(20, 20, (3, 1, 1), stride=(2, 1, 1), padding=(1, 0, 0)),
            nn.Conv3d(20, 35, (3, 3, 3), padding=(1, 0, 0)), nn.ReLU(),
            nn.Conv3d(35, 35, (3, 1, 1), stride=(2, 1, 1), padding=(1, 0, 0)),
            nn.Conv3d(35, 35, (3, 1, 1), padding=(1, 0, 0)), nn.ReLU(),
            nn.Conv3d(35, 35, (2, 1, 1), stride=(2, 1, 1), padding=(1, 0, 0)), nn.ReLU(),
        )
        with torch.no_grad():
            n = self.features(torch.zeros(1, 1, bands, patch, patch)).numel()
        self.fc = nn.Linear(n, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x.unsqueeze(1)).flatten(1))


class HybridSN(nn.Module):
    """Roy et al. 2019: three 3D convolutions (spectral-spatial), one 2D convolution, three dense layers."""

    def __init__(self, bands: int, patch: int, classes: int) -> None:
        super().__init__()
        self.conv3d = nn.Sequential(
            nn.Conv3d(1, 8, (7, 3, 3)), nn.ReLU(),
            nn.Conv3d(8, 16, (5, 3, 3)), nn.ReLU(),
            nn.Conv3d(16, 32, (3, 3, 3)), nn.ReLU(),
        )
        depth, side = bands - 12, patch - 6
        self.conv2d = nn.Sequential(nn.Conv2d(32 * depth, 64, 3), nn.ReLU())
        self.head = nn.Sequential(
            nn.Flatten(), nn.Linear(64 * (side - 2) ** 2, 256), nn.ReLU(), nn.Dropout(0.4),
            nn.Linear(256, 128), nn.ReLU(), nn.Dropout(0.4), nn.Linear(128, classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv3d(x.unsqueeze(1))
        return self.head(self.conv2d(y.flatten(1, 2)))


def _cbr3(cin: int, cout: int, kernel: tuple[int, int, int], **kw: Any) -> nn.Sequential:
    return nn.Sequential(nn.Conv3d(cin, cout, kernel, **kw), nn.BatchNorm3d(cout), nn.ReLU())


class _Residual3d(nn.Module):
    def __init__(self, channels: int, kernel: tuple[int, int, int], pad: tuple[int, int, int]) -> None:
        super().__init__()
        self.body = nn.Sequential(_cbr3(channels, channels, kernel, padding=pad),
                                  _cbr3(channels, channels, kernel, padding=pad))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


class SSRN(nn.Module):
    """Zhong et al. 2018: spectral residual blocks, a spectral reduction, spatial residual blocks."""

    def __init__(self, bands: int, patch: int, classes: int) -> None:
        super().__init__()
        depth = (bands - 7) // 2 + 1
        self.spectral = nn.Sequential(
            _cbr3(1, 24, (7, 1, 1), stride=(2, 1, 1)),
            _Residual3d(24, (7, 1, 1), (3, 0, 0)), _Residual3d(24, (7, 1, 1), (3, 0, 0)),
            _cbr3(24, 128, (depth, 1, 1)),
        )
        self.spatial = nn.Sequential(
            _cbr3(1, 24, (128, 3, 3)),
            _Residual3d(24, (1, 3, 3), (0, 1, 1)), _Residual3d(24, (1, 3, 3), (0, 1, 1)),
        )
        self.fc = nn.Linear(24, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.spectral(x.unsqueeze(1))  # (N, 128, 1, p, p)
        y = self.spatial(y.transpose(1, 2))  # (N, 24, 1, p-2, p-2)
        return self.fc(y.flatten(2).mean(2))


class _Attention(nn.Module):
    """Multi-head self-attention written out (projection, scores, softmax, weighted sum, output)."""

    def __init__(self, dim: int, heads: int, dim_head: int, qkv_bias: bool) -> None:
        super().__init__()
        self.heads, self.scale = heads, dim_head ** -0.5
        self.qkv = nn.Linear(dim, 3 * heads * dim_head, bias=qkv_bias)
        self.out = nn.Linear(heads * dim_head, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, t, _ = x.shape
        q, k, v = self.qkv(x).reshape(n, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        attn = torch.softmax(q @ k.transpose(-1, -2) * self.scale, dim=-1)
        return self.out((attn @ v).transpose(1, 2).reshape(n, t, -1))


class _TransformerLayer(nn.Module):
    def __init__(self, dim: int, heads: int, dim_head: int, mlp: int, qkv_bias: bool) -> None:
        super().__init__()
        self.norm1, self.attn = nn.LayerNorm(dim), _Attention(dim, heads, dim_head, qkv_bias)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp), nn.GELU(), nn.Linear(mlp, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class SSFTT(nn.Module):
    """Sun et al. 2022: 3D+2D conv stem, Gaussian-weighted tokenizer (4 tokens), one transformer layer."""

    def __init__(self, bands: int, patch: int, classes: int, tokens: int = 4, dim: int = 64) -> None:
        super().__init__()
        self.conv3d = _cbr3(1, 8, (3, 3, 3))
        self.conv2d = nn.Sequential(nn.Conv2d(8 * (bands - 2), dim, 3), nn.BatchNorm2d(dim), nn.ReLU())
        self.wa = nn.Linear(dim, tokens, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        nn.init.xavier_normal_(self.wa.weight)  # the paper's Gaussian-weighted token projections
        nn.init.xavier_normal_(self.wv.weight)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, tokens + 1, dim) * 0.02)
        self.layer = _TransformerLayer(dim, heads=8, dim_head=dim // 8, mlp=8, qkv_bias=True)
        self.fc = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv3d(x.unsqueeze(1)).flatten(1, 2)
        y = self.conv2d(y).flatten(2).transpose(1, 2)  # (N, pixels, dim)
        a = torch.softmax(self.wa(y), dim=1)  # (N, pixels, tokens)
        t = a.transpose(1, 2) @ self.wv(y)  # (N, tokens, dim)
        t = torch.cat([self.cls.expand(len(x), -1, -1), t], dim=1) + self.pos
        return self.fc(self.layer(t)[:, 0])


class SpectralFormer(nn.Module):
    """Hong et al. 2021, patch-wise: group-wise spectral embedding, 5 layers with cross-layer fusion (CAF)."""

    def __init__(self, bands: int, patch: int, classes: int, near_band: int = 3, dim: int = 64,
                 depth: int = 5) -> None:
        super().__init__()
        self.near_band = near_band
        n = bands + 1
        self.embed = nn.Linear(near_band * patch * patch, dim)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, n, dim) * 0.02)
        self.layers = nn.ModuleList(_TransformerLayer(dim, heads=4, dim_head=16, mlp=8, qkv_bias=False)
                                    for _ in range(depth))
        self.caf = nn.ModuleList(nn.Conv2d(n, n, (1, 2)) for _ in range(depth - 2))
        self.norm, self.fc = nn.LayerNorm(dim), nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        half = self.near_band // 2
        padded = torch.cat([x[:, -half:], x, x[:, :half]], dim=1) if half else x
        groups = padded.unfold(1, self.near_band, 1)  # (N, bands, p, p, near_band): each band and its neighbours
        y = self.embed(groups.flatten(2))
        y = torch.cat([self.cls.expand(n, -1, -1), y], dim=1) + self.pos
        history = []
        for i, layer in enumerate(self.layers):
            history.append(y)
            if i > 1:  # CAF: fuse this layer's input with the input of the layer two before
                y = self.caf[i - 2](torch.stack([y, history[i - 2]], dim=3)).squeeze(3)
            y = layer(y)
        return self.fc(self.norm(y[:, 0]))


MODELS: dict[str, type[nn.Module]] = {
    "hamida": Hamida,
    "hybridsn": HybridSN,
    "ssrn": SSRN,
    "ssftt": SSFTT,
    "spectralformer": SpectralFormer,
}


def build(name: str, bands: int, patch: int, classes: int) -> nn.Module:
    """The named model for ``bands`` input bands (after PCA), ``patch``×``patch`` patches and ``classes``."""
    return MODELS[name](bands, patch, classes)


def param_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def forward_flops(model: nn.Module, sample_shape: tuple[int, ...]) -> int:
    """FLOPs of one forward pass of one sample shaped ``sample_shape``, counted by ``torch.utils.flop_counter``."""
    from torch.utils.flop_counter import FlopCounterMode

    was = model.training
    model.eval()
    try:
        with FlopCounterMode(display=False) as counter, torch.no_grad():
            model(torch.zeros(1, *sample_shape))
    finally:
        model.train(was)
    return int(counter.get_total_flops())
