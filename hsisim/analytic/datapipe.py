"""Data pipeline: per-sample and per-batch CPU cost of a PyTorch DataLoader over an HSI cube."""

from __future__ import annotations

import math
from dataclasses import dataclass

from hsisim.catalog import CpuCosts

RAW_BYTES = 2.0  # raw radiance / reflectance cubes are int16 (AVIRIS, ROSIS, CASI products)
FLOAT_BYTES = 4.0  # preprocessed (normalised / PCA) cubes are float32
CHUNK_SIDE = 64  # HDF5 / Zarr chunks of 64×64 pixels × all bands (a common HSI layout)


@dataclass(frozen=True)
class SampleCost:
    """Seconds one worker spends on one sample, by stage."""

    read: float
    preprocess: float
    augment: float

    @property
    def total(self) -> float:
        return self.read + self.preprocess + self.augment


def sample_cost(*, patch: int, bands: int, out_bands: int, preprocess: str, pca: bool, storage: str,
                augmentation: str, cpu: CpuCosts, fs_latency_s: float = 0.0,
                fs_share_bw: float = math.inf) -> SampleCost:
    """CPU seconds to produce one patch in ``__getitem__``.

    ``bands`` is the band count of the cube as stored, ``out_bands`` what the model consumes.
    ``offline`` preprocessing stores the normalised/PCA cube as float32 (nothing to do per sample);
    ``getitem`` reads raw int16 and normalises (and projects with PCA: 2·bands·k FLOPs per pixel).
    """
    pixels = patch * patch
    stored_bands = out_bands if preprocess == "offline" else bands
    value_bytes = FLOAT_BYTES if preprocess == "offline" else RAW_BYTES
    nbytes = pixels * stored_bands * value_bytes
    read = cpu.getitem_overhead_s + nbytes / cpu.copy_bw_bytes_per_s
    if storage == "envi":  # one pread per patch row of a band-interleaved-by-pixel file
        read += patch * cpu.syscall_read_s
    elif storage in ("hdf5", "zarr"):  # a random patch touches ~1 chunk; inflate it
        chunk = CHUNK_SIDE * CHUNK_SIDE * stored_bands * value_bytes
        read += cpu.syscall_read_s + chunk / cpu.decompress_bw_bytes_per_s
    elif storage == "network_fs":
        read += patch * fs_latency_s + nbytes / fs_share_bw
    pre = 0.0
    if preprocess == "getitem":
        pre += pixels * bands * FLOAT_BYTES / cpu.normalize_bw_bytes_per_s
        if pca:
            pre += 2.0 * pixels * bands * out_bands / cpu.pca_flops
    aug = pixels * out_bands * FLOAT_BYTES / cpu.augment_bw_bytes_per_s if augmentation != "none" else 0.0
    return SampleCost(read, pre, aug)


def batch_build_seconds(sample_s: float, batch: int, sample_bytes: float, cpu: CpuCosts) -> float:
    """One worker builds a whole batch: ``batch`` samples, then collates them."""
    return batch * sample_s + cpu.collate_overhead_s + batch * sample_bytes / cpu.collate_bw_bytes_per_s


def h2d_seconds(batch_bytes: float, pcie_bw: float, pinned: bool, copy_bw: float) -> float:
    """Host→device copy of a batch; pageable memory is first staged through a pinned buffer."""
    if pinned:
        return batch_bytes / pcie_bw
    return batch_bytes / copy_bw + batch_bytes / pcie_bw
