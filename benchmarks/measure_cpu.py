"""Measure the per-core data-pipeline costs recorded in hsisim/catalog/cpu.yaml.

Run: python benchmarks/measure_cpu.py  (prints medians; copy them into cpu.yaml with the date).
Uses only NumPy (the loader's CPU work), not torch, so it runs wherever hsisim is installed.
"""

from __future__ import annotations

import os

# A DataLoader worker is one process on one core: measure single-threaded BLAS.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import multiprocessing as mp  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import zlib  # noqa: E402

import numpy as np  # noqa: E402
from timing import timed  # noqa: E402


class _Cube:
    def __init__(self, arr: np.ndarray, patch: int) -> None:
        self.arr, self.p = arr, patch

    def __getitem__(self, i: int) -> np.ndarray:
        r, c = divmod(i, self.arr.shape[1] - self.p)
        return self.arr[r:r + self.p, c:c + self.p]


def _child(q: mp.Queue[float], t0: float) -> None:
    q.put(time.perf_counter() - t0)


def main() -> None:
    rng = np.random.default_rng(0)
    cube = rng.standard_normal((145, 145, 200), dtype=np.float32)
    ds = _Cube(cube, 15)
    idx = iter(rng.integers(0, 100 * 100, 10**7))
    empty = timed(lambda: ds[next(idx)], 2000)[0]
    patch = cube[10:25, 10:25]
    nbytes = patch.nbytes
    copy = timed(lambda: np.ascontiguousarray(cube[10:25, 10:25]).copy(), 2000)[0]
    proj = rng.standard_normal((200, 30), dtype=np.float32)
    flat = patch.reshape(-1, 200)
    pca = timed(lambda: flat @ proj, 2000)[0]
    mean, std = cube.mean((0, 1)), cube.std((0, 1))
    norm = timed(lambda: (patch - mean) / std, 2000)[0]
    aug = timed(lambda: np.ascontiguousarray(np.rot90(patch[::-1], 1)), 2000)[0]
    batch = [np.ascontiguousarray(cube[i:i + 15, 0:15]) for i in range(64)]
    coll = timed(lambda: np.stack(batch), 500)[0]
    with tempfile.NamedTemporaryFile() as f:
        f.write(cube.tobytes())
        f.flush()
        fd = os.open(f.name, os.O_RDONLY)
        read = timed(lambda: os.pread(fd, 15 * 200 * 4, 4096 * 7), 2000)[0]
        os.close(fd)
    chunk = np.ascontiguousarray(cube[:64, :64])  # an HDF5/Zarr-style 64x64xbands chunk
    packed = zlib.compress(chunk.tobytes(), 1)
    inflate = timed(lambda: zlib.decompress(packed), 200)[0]
    ctx = mp.get_context("fork")
    starts = []
    for _ in range(20):
        q: mp.Queue[float] = ctx.Queue()
        t0 = time.perf_counter()
        p = ctx.Process(target=_child, args=(q, t0))
        p.start()
        starts.append(q.get())
        p.join()
    print(f"getitem_overhead: {empty * 1e6:.1f} us")
    print(f"copy_bw: {nbytes / copy / 1e9:.2f} GB/s   ({copy * 1e6:.1f} us for {nbytes} B)")
    print(f"pca_flops: {2 * flat.shape[0] * 200 * 30 / pca:.3g}   ({pca * 1e6:.1f} us)")
    print(f"normalize_bw: {nbytes / norm / 1e9:.2f} GB/s   ({norm * 1e6:.1f} us)")
    print(f"augment_bw: {nbytes / aug / 1e9:.2f} GB/s   ({aug * 1e6:.1f} us)")
    print(f"decompress_bw: {chunk.nbytes / inflate / 1e9:.2f} GB/s   ({inflate * 1e3:.2f} ms per chunk)")
    print(f"collate_bw: {64 * nbytes / coll / 1e9:.2f} GB/s   ({coll * 1e6:.1f} us)")
    print(f"syscall_read: {read * 1e6:.1f} us")
    print(f"worker_start (fork, median of 20): {statistics.median(starts) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
