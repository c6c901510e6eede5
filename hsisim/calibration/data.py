"""HSI data for the probes: synthetic cubes at real shapes, readers, and a patch ``Dataset``.

A synthetic cube has the real scene's shape and a class layout taken from the real ground-truth
map where one is available (``Indian_pines_gt.mat`` and friends), otherwise a synthetic layout of
blobs with the scene's share of labelled pixels. Each class has a smooth spectral signature; pixels
are that signature plus noise, stored as int16 like the raw AVIRIS/ROSIS products. The probes care
about bytes, shapes and per-sample work, not about accuracy, so this is enough to time a real
``DataLoader`` over a real on-disk cube.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from hsisim.errors import HsisimInputError

GT_FILES = {"indian_pines": "Indian_pines_gt.mat", "pavia_university": "PaviaU_gt.mat", "salinas": "Salinas_gt.mat"}
FORMATS = ("npy", "envi", "mat")


def ground_truth_dirs() -> list[Path]:
    """Where real label maps are looked for: $HSISIM_DATA/hsi, then ../shared/data/hsi."""
    dirs = []
    if os.environ.get("HSISIM_DATA"):
        dirs.append(Path(os.environ["HSISIM_DATA"]) / "hsi")
    dirs.append(Path.cwd().parent / "shared" / "data" / "hsi")
    return dirs


def real_labels(dataset: str) -> np.ndarray | None:
    """The real ground-truth map of ``dataset`` (0 = unlabelled), or None when it is not on disk."""
    name = GT_FILES.get(dataset)
    if name is None:
        return None
    for d in ground_truth_dirs():
        if (d / name).is_file():
            return read_mat(d / name, ndim=2).astype(np.int16)
    return None


def synthetic_labels(rows: int, cols: int, classes: int, labelled: int, rng: np.random.Generator) -> np.ndarray:
    """Blobs around random centres (nearest centre wins), trimmed to ``labelled`` labelled pixels."""
    centres = rng.uniform([0, 0], [rows, cols], size=(max(classes * 3, 1), 2))
    yy, xx = np.mgrid[0:rows, 0:cols]
    best = np.full((rows, cols), np.inf)
    lab = np.zeros((rows, cols), dtype=np.int16)
    for i, (cy, cx) in enumerate(centres):
        d = (yy - cy) ** 2 + (xx - cx) ** 2
        closer = d < best
        best[closer] = d[closer]
        lab[closer] = i % classes + 1
    keep = min(labelled, rows * cols)
    order = np.argsort(best, axis=None)  # the pixels nearest their blob centre stay labelled
    flat = lab.reshape(-1)
    flat[order[keep:]] = 0
    return lab


def synthetic_cube(labels: np.ndarray, bands: int, rng: np.random.Generator) -> np.ndarray:
    """int16 cube (rows, cols, bands): a smooth signature per class plus Gaussian noise."""
    classes = int(labels.max()) + 1
    walk = np.cumsum(rng.normal(0, 60, size=(classes, bands)), axis=1) + rng.uniform(1500, 4000, (classes, 1))
    cube = walk[labels] + rng.normal(0, 40, size=(*labels.shape, bands))
    return np.clip(cube, -32768, 32767).astype(np.int16)


def make_scene(dataset: str, rows: int, cols: int, bands: int, classes: int, labelled: int,
               seed: int = 0, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray, str]:
    """(cube, labels, layout) at the scene's shape, or scaled down by ``scale`` (tests)."""
    rng = np.random.default_rng(seed)
    labels = real_labels(dataset) if scale == 1.0 else None
    layout = "real ground truth"
    if labels is None or labels.shape != (rows, cols):
        r, c = max(8, round(rows * scale)), max(8, round(cols * scale))
        share = labelled / (rows * cols)
        labels = synthetic_labels(r, c, classes, max(1, round(share * r * c)), rng)
        layout = "synthetic layout"
    return synthetic_cube(labels, bands, rng), labels, layout


# ------------------------------------------------------------------------------------------------
# Readers and writers


def read_mat(path: Path, ndim: int) -> np.ndarray:
    """The largest ``ndim``-dimensional array of a MATLAB file (v5 through scipy)."""
    from scipy.io import loadmat

    try:
        data = loadmat(path)
    except (OSError, ValueError, NotImplementedError) as exc:
        raise HsisimInputError(f"cannot read {path} as a MATLAB file: {exc}") from None
    arrays = [v for k, v in data.items() if not k.startswith("__") and isinstance(v, np.ndarray) and v.ndim == ndim]
    if not arrays:
        raise HsisimInputError(f"{path} holds no {ndim}-D array")
    return max(arrays, key=lambda a: a.size)


def write_cube(cube: np.ndarray, path: Path, fmt: str) -> Path:
    """Write a (rows, cols, bands) cube as .npy, ENVI (.hdr + .img, BIP) or .mat; returns the path to open."""
    if fmt == "npy":
        out = path.with_suffix(".npy")
        np.save(out, cube)
        return out
    if fmt == "envi":
        import spectral.io.envi as envi

        out = path.with_suffix(".hdr")
        envi.save_image(str(out), cube, dtype=cube.dtype, interleave="bip", force=True, ext=".img")
        return out
    if fmt == "mat":
        from scipy.io import savemat

        out = path.with_suffix(".mat")
        savemat(out, {"cube": cube})
        return out
    raise HsisimInputError(f"unknown cube format {fmt!r}; one of {', '.join(FORMATS)}")


def open_cube(path: str | Path) -> np.ndarray:
    """A (rows, cols, bands) array: memory-mapped for .npy and ENVI, loaded for .mat."""
    p = Path(path)
    if not p.is_file():
        raise HsisimInputError(f"cube not found: {p}")
    if p.suffix == ".npy":
        return np.load(p, mmap_mode="r")
    if p.suffix == ".hdr":
        import spectral

        img = spectral.open_image(str(p))
        mm: np.ndarray = img.open_memmap(interleave="bip")
        return mm
    if p.suffix == ".mat":
        return read_mat(p, ndim=3)
    raise HsisimInputError(f"{p}: unknown cube format (expected .npy, .hdr (ENVI) or .mat)")


# ------------------------------------------------------------------------------------------------
# Preprocessing and the Dataset


@dataclass(frozen=True)
class Preprocess:
    """Per-band normalisation and a PCA projection, fitted on a sample of labelled pixels."""

    mean: np.ndarray  # (bands,)
    std: np.ndarray  # (bands,)
    components: np.ndarray | None  # (bands, k) or None: keep every band

    @property
    def out_bands(self) -> int:
        return len(self.mean) if self.components is None else self.components.shape[1]

    def apply(self, pixels: np.ndarray) -> np.ndarray:
        """(..., bands) raw → (..., out_bands) float32."""
        x = (pixels.astype(np.float32) - self.mean) / self.std
        return x @ self.components if self.components is not None else x


def fit_preprocess(cube: np.ndarray, labels: np.ndarray, pca_components: int | None, seed: int = 0,
                   sample: int = 20000) -> Preprocess:
    rng = np.random.default_rng(seed)
    rr, cc = np.nonzero(labels)
    pick = rng.choice(len(rr), size=min(sample, len(rr)), replace=False)
    px = np.asarray(cube[rr[pick], cc[pick]], dtype=np.float32)
    mean, std = px.mean(0), px.std(0) + 1e-6
    comps = None
    if pca_components is not None:
        _, _, vt = np.linalg.svd((px - mean) / std, full_matrices=False)
        comps = np.ascontiguousarray(vt[:pca_components].T, dtype=np.float32)
    return Preprocess(mean.astype(np.float32), std.astype(np.float32), comps)


def offline_cube(cube: np.ndarray, pre: Preprocess, path: Path, rows_per_chunk: int = 64) -> np.ndarray:
    """Precompute the normalised/PCA cube once into a float32 .npy memmap (``preprocess: offline``)."""
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32,
                                    shape=(cube.shape[0], cube.shape[1], pre.out_bands))
    for r in range(0, cube.shape[0], rows_per_chunk):
        out[r:r + rows_per_chunk] = pre.apply(np.asarray(cube[r:r + rows_per_chunk]))
    out.flush()
    return np.load(path, mmap_mode="r")


class PatchDataset(Dataset):
    """Patches around labelled pixels of a cube, as (bands, patch, patch) float32 tensors.

    ``preprocess='getitem'`` normalises (and projects with PCA) inside ``__getitem__``, as lab
    prototypes do; ``'offline'`` reads an already preprocessed cube. Border pixels get reflected
    padding. ``repeats`` draws each pixel that many times per epoch; ``augment`` adds a random
    flip and 90° rotation.
    """

    def __init__(self, cube: np.ndarray, labels: np.ndarray, patch: int, preprocess: str,
                 pre: Preprocess | None = None, repeats: int = 1, augment: bool = False) -> None:
        if preprocess not in ("getitem", "offline"):
            raise HsisimInputError(f"preprocess must be 'getitem' or 'offline', got {preprocess!r}")
        if preprocess == "getitem" and pre is None:
            raise HsisimInputError("preprocess 'getitem' needs the fitted normalisation / PCA")
        self.cube, self.patch, self.mode, self.pre = cube, patch, preprocess, pre
        rr, cc = np.nonzero(labels)
        self.rows, self.cols = rr.astype(np.int64), cc.astype(np.int64)
        self.targets = (labels[rr, cc] - 1).astype(np.int64)
        self.repeats, self.augment = repeats, augment
        self.half = patch // 2

    def __len__(self) -> int:
        return len(self.rows) * self.repeats

    def _window(self, r: int, c: int) -> np.ndarray:
        h, p = self.half, self.patch
        r0, c0 = r - h, c - h
        nr, nc = self.cube.shape[:2]
        if r0 >= 0 and c0 >= 0 and r0 + p <= nr and c0 + p <= nc:
            return np.asarray(self.cube[r0:r0 + p, c0:c0 + p])
        ri = np.abs(np.arange(r0, r0 + p))
        ri = np.where(ri >= nr, 2 * nr - 2 - ri, ri)
        ci = np.abs(np.arange(c0, c0 + p))
        ci = np.where(ci >= nc, 2 * nc - 2 - ci, ci)
        return np.asarray(self.cube[np.ix_(ri, ci)])

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        j = i % len(self.rows)
        x = self._window(int(self.rows[j]), int(self.cols[j]))
        if self.mode == "getitem":
            assert self.pre is not None
            x = self.pre.apply(x)
        else:
            x = x.astype(np.float32, copy=False)
        if self.augment:
            k = int(np.random.randint(4))
            x = np.rot90(x, k, axes=(0, 1))
            if np.random.randint(2):
                x = x[:, ::-1]
        return torch.from_numpy(np.ascontiguousarray(x.transpose(2, 0, 1))), int(self.targets[j])
