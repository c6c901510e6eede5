"""A user's own training script, written without hsisim: a Hamida-style 3D-CNN on hyperspectral patches.

It imports nothing from hsisim and trains the way a plain PyTorch script does: PyTorch's default
thread count, a DataLoader with the script's own batch and workers. ``make_model`` and
``make_dataset`` are the factories hsisim calibrates and simulates; ``python hamida_user.py CONFIG``
trains for real and prints, as JSON, every step's time and the time it waited for its batch.

Configurations (the three kinds of issue 12):
    offline5   batch 100, 2 workers, preprocessed cube, 5x5 patches (compute-bound, more workers than free cores)
    getitem11  batch 64, no workers, normalise + per-patch PCA in __getitem__, 11x11 patches (data-bound, no workers)
    getitem9   batch 64, 1 worker, normalise + per-patch PCA in __getitem__, 9x9 patches (one worker preprocessing)
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

CONFIGS: dict[str, dict[str, Any]] = {
    "offline5": {"batch": 100, "workers": 2, "patch": 5, "preprocess": "offline"},
    "getitem11": {"batch": 64, "workers": 0, "patch": 11, "preprocess": "getitem"},
    "getitem9": {"batch": 64, "workers": 1, "patch": 9, "preprocess": "getitem"},
}
ROWS, COLS, BANDS, COMPONENTS, CLASSES = 145, 145, 200, 30, 16  # an Indian Pines-shaped scene


class Hamida3D(nn.Module):
    """3D convolutions over (bands, height, width), spectral stride-2 reductions, a linear classifier."""

    def __init__(self, bands: int, patch: int, classes: int = CLASSES) -> None:
        super().__init__()
        spatial = 3 if patch > 3 else 1
        self.features = nn.Sequential(
            nn.Conv3d(1, 20, (3, spatial, spatial)), nn.ReLU(),
            nn.Conv3d(20, 20, (3, 1, 1), stride=(2, 1, 1), padding=(1, 0, 0)), nn.ReLU(),
            nn.Conv3d(20, 35, (3, spatial, spatial), padding=(1, 0, 0)), nn.ReLU(),
            nn.Conv3d(35, 35, (3, 1, 1), stride=(2, 1, 1), padding=(1, 0, 0)), nn.ReLU(),
        )
        with torch.no_grad():
            n = self.features(torch.zeros(1, 1, bands, patch, patch)).numel()
        self.classifier = nn.Linear(n, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x.unsqueeze(1)).flatten(1))


class Patches(Dataset):
    """Square patches around labelled pixels of a synthetic scene of the real shape.

    ``offline``: the cube was normalised and reduced beforehand (float32); ``__getitem__`` slices.
    ``getitem``: the raw int16 patch is normalised per band and reduced by its own PCA (an SVD of
    the patch's pixels) in ``__getitem__``, patch by patch, as a prototype does.
    """

    def __init__(self, patch: int, preprocess: str, samples: int = 20000, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        raw = rng.integers(0, 8000, (ROWS, COLS, BANDS), dtype=np.int16)
        self.mean = raw.reshape(-1, BANDS).mean(0).astype(np.float32)
        self.std = raw.reshape(-1, BANDS).std(0).astype(np.float32) + 1e-6
        z = ((raw.reshape(-1, BANDS)[::37] - self.mean) / self.std).astype(np.float32)
        self.components = np.linalg.svd(z, full_matrices=False)[2][:COMPONENTS].T.copy()
        self.patch, self.preprocess, self.half = patch, preprocess, patch // 2
        if preprocess == "offline":
            self.cube = (((raw - self.mean) / self.std).astype(np.float32) @ self.components).astype(np.float32)
        else:
            self.cube = raw
        self.centres = rng.integers(self.half, [ROWS - self.half, COLS - self.half], (samples, 2))
        self.labels = rng.integers(0, CLASSES, samples)

    @property
    def bands(self) -> int:
        return COMPONENTS

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        r, c = self.centres[i]
        window = self.cube[r - self.half:r + self.half + 1, c - self.half:c + self.half + 1]
        if self.preprocess == "getitem":
            pixels = (window.reshape(-1, BANDS).astype(np.float32) - self.mean) / self.std
            pixels -= pixels.mean(0)
            basis = np.linalg.svd(pixels, full_matrices=False)[2][:COMPONENTS]
            window = np.zeros((self.patch * self.patch, COMPONENTS), np.float32)
            window[:, :len(basis)] = pixels @ basis.T
            window = window.reshape(self.patch, self.patch, COMPONENTS)
        x = np.ascontiguousarray(np.transpose(window, (2, 0, 1)), dtype=np.float32)
        return torch.from_numpy(x), int(self.labels[i])


def make_model(patch: int = 5, **_: object) -> nn.Module:
    return Hamida3D(COMPONENTS, patch)


def make_dataset(patch: int = 5, preprocess: str = "offline", **_: object) -> Dataset:
    return Patches(patch, preprocess)


def timed_step(it: Any, model: nn.Module, opt: torch.optim.Optimizer, loss_fn: nn.Module) -> tuple[float, float]:
    """One step of the loop: take the next batch, then forward, backward and the optimizer's step. Returns the
    wait for the batch and the whole step (seconds)."""
    t0 = time.perf_counter()
    x, y = next(it)
    t1 = time.perf_counter()
    opt.zero_grad()
    loss_fn(model(x), y).backward()
    opt.step()
    return t1 - t0, time.perf_counter() - t0


def setup(config: str) -> tuple[DataLoader, nn.Module, torch.optim.Optimizer, nn.Module]:
    """The configuration's loader, model, optimizer and loss, as the script trains them."""
    cfg = CONFIGS[config]
    ds = make_dataset(cfg["patch"], cfg["preprocess"])
    model = make_model(cfg["patch"])
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = DataLoader(ds, batch_size=cfg["batch"], shuffle=True, num_workers=cfg["workers"], drop_last=True)
    return loader, model, opt, nn.CrossEntropyLoss()


def epochs(loader: DataLoader) -> Iterator[Any]:
    """The loader's batches epoch after epoch, as a loop over epochs takes them (each epoch's start counts in the
    wait for its first batch)."""
    while True:
        yield from loader


def train(config: str, steps: int, warmup: int) -> dict[str, object]:
    """Train ``steps`` steps after ``warmup`` and return each step's time and data wait (seconds)."""
    loader, model, opt, loss_fn = setup(config)
    it = epochs(loader)
    step_s, wait_s = [], []
    for k in range(warmup + steps):
        wait, step = timed_step(it, model, opt, loss_fn)
        if k >= warmup:
            step_s.append(step)
            wait_s.append(wait)
    return {"config": config, "torch_threads": torch.get_num_threads(), "step_s": step_s, "wait_s": wait_s}


if __name__ == "__main__":
    name = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    print(json.dumps(train(name, n, warmup=10)))
