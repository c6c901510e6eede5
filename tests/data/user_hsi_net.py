import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset


class Small3D(nn.Module):
    """A small 3D-CNN: two 3x3x3 convolutions and a linear classifier."""

    def __init__(self, bands=12, patch=7, classes=5, width=16):
        super().__init__()
        self.f = nn.Sequential(nn.Conv3d(1, width, 3), nn.ReLU(), nn.Conv3d(width, width, 3), nn.ReLU())
        self.fc = nn.Linear(width * (bands - 4) * (patch - 4) ** 2, classes)

    def forward(self, x):
        return self.fc(self.f(x.unsqueeze(1)).flatten(1))


class SlowPatches(Dataset):
    """Patches whose __getitem__ is deliberately expensive: `work` rounds of a dense spectral mixing."""

    def __init__(self, n=4096, bands=12, patch=7, raw_bands=96, classes=5, work=1):
        rng = np.random.default_rng(0)
        self.cube = rng.normal(size=(64, 64, raw_bands)).astype(np.float32)
        self.mix = rng.normal(size=(raw_bands, raw_bands)).astype(np.float32) / raw_bands ** 0.5
        self.proj = rng.normal(size=(raw_bands, bands)).astype(np.float32)
        self.n, self.patch, self.classes, self.work = n, patch, classes, work

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        r, c = (i * 7) % (64 - self.patch), (i * 13) % (64 - self.patch)
        x = self.cube[r:r + self.patch, c:c + self.patch].reshape(-1, self.cube.shape[2])
        for _ in range(self.work):
            x = np.tanh(x @ self.mix)
        x = (x @ self.proj).reshape(self.patch, self.patch, -1).transpose(2, 0, 1)
        return torch.from_numpy(np.ascontiguousarray(x)), i % self.classes


def make_model(bands=12, patch=7, classes=5, width=16):
    return Small3D(bands, patch, classes, width)


def make_dataset(bands=12, patch=7, work=1):
    return SlowPatches(bands=bands, patch=patch, work=work)
