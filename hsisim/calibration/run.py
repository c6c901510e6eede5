"""``hsisim calibrate``: run the probes on a device and write a calibration profile (JSON)."""

from __future__ import annotations

import datetime as dt
import os
import platform
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hsisim import catalog
from hsisim._version import __version__
from hsisim.calibration import collectives, probes, threads
from hsisim.calibration.data import PatchDataset, fit_preprocess, make_scene, offline_cube, open_cube, write_cube
from hsisim.calibration.interference import InterferenceProbe, max_workers
from hsisim.calibration.models import MODELS, forward_flops, param_count
from hsisim.errors import HsisimInputError
from hsisim.profile import BLAS_LEVER, FORMAT, ProfileData, document, nearest_count

# the patch sizes of each model's paper (Indian Pines); PCA components where the model takes them
DEFAULT_PATCH = {"hamida": 5, "hybridsn": 25, "ssrn": 7, "ssftt": 13, "spectralformer": 7}
DEFAULT_PCA = {"hybridsn": 30, "ssftt": 30}
PROBE_EXTENT = 256  # the probes cut patches from at most a 256×256 crop of large scenes
SPARE_ROUND_S = 10.0  # --quick runs a third interference round where the first (all data modes) took less (s)


def parse_device(text: str) -> torch.device:
    """``cpu``, ``cuda`` or ``cuda:N``; a CUDA device must exist."""
    if not re.fullmatch(r"cpu|cuda(:\d+)?", text):
        raise HsisimInputError(f"{{device}} must be cpu, cuda or cuda:N, got {text!r}")
    dev = torch.device(text)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise HsisimInputError(f"{{device}} {text}: torch sees no CUDA device (torch {torch.__version__}, "
                                   f"built for CUDA {torch.version.cuda})")
        if (dev.index or 0) >= torch.cuda.device_count():
            raise HsisimInputError(f"{{device}} {text}: only {torch.cuda.device_count()} CUDA device(s)")
        dev = torch.device("cuda", dev.index or 0)
    return dev


def catalog_gpu_for(device: torch.device) -> str | None:
    """The catalog GPU whose name matches the device (``cpu`` for the CPU)."""
    if device.type == "cpu":
        return "cpu"
    name = torch.cuda.get_device_name(device).lower()
    for key in catalog.names("gpus"):
        display = catalog.gpu(key).display.lower()
        short = display.replace("nvidia", "").replace("geforce", "").split()[0] if display else key
        if key in name.replace(" ", "").replace("-", "") or short in name:
            return key
    return None


def fingerprint(device: torch.device) -> dict[str, Any]:
    """What the numbers were measured on."""
    fp: dict[str, Any] = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "host": platform.node(),
                          "python": platform.python_version(), "torch": torch.__version__,
                          "hsisim": __version__, "cpu": cpu_name(), "cores": os.cpu_count(),
                          "torch_threads": torch.get_num_threads()}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        fp.update({"device": props.name, "memory_bytes": props.total_memory, "cuda": torch.version.cuda,
                   "capability": f"{props.major}.{props.minor}", "driver": _driver()})
    else:
        fp.update({"device": fp["cpu"], "memory_bytes": _host_memory()})
    return fp


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _host_memory() -> int | None:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def _driver() -> str | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=10, check=True).stdout
        return out.strip().splitlines()[0] if out.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


@dataclass
class Workload:
    """The model and data shapes being calibrated, and the on-disk cube the data probe reads."""

    model: str
    dataset: str
    patch: int
    bands: int  # bands the model consumes (after PCA)
    raw_bands: int
    classes: int
    pca: int | None


def workload(model: str, dataset: str, patch: int | None = None, pca: int | None = None) -> Workload:
    if model not in MODELS:
        raise HsisimInputError(f"{{model}} must be one of {', '.join(MODELS)}, got {model!r}")
    ds = catalog.dataset(dataset, key="{dataset}")
    info = catalog.model(model, key="{model}")
    p = patch if patch is not None else DEFAULT_PATCH[model]
    k = pca if pca is not None else DEFAULT_PCA.get(model)
    if info.spectral_input == "pca" and k is None:
        raise HsisimInputError(f"{info.display} takes PCA components: give {{pca}}")
    if k is not None and not 1 <= k <= ds.bands:
        raise HsisimInputError(f"{{pca}} must be between 1 and the {ds.bands} bands of {ds.display}, got {k}")
    if p < 1:
        raise HsisimInputError(f"{{patch}} must be positive, got {p}")
    classes = ds.classes + 1 if info.outputs == "classes_plus_one" else ds.classes
    try:
        info.stats(k or ds.bands, p, ds.classes)
    except ValueError as exc:
        raise HsisimInputError(f"{info.display} cannot take {p}×{p} patches: {exc}") from None
    return Workload(model, dataset, p, k or ds.bands, ds.bands, classes, k)


@contextmanager
def scene(w: Workload, fmt: str = "npy", scale: float = 1.0):
    """A temporary on-disk cube (raw int16) plus its offline-preprocessed twin; removed afterwards."""
    ds = catalog.dataset(w.dataset)
    rows, cols = ds.rows, ds.cols
    crop = scale
    if scale == 1.0 and max(rows, cols) > PROBE_EXTENT:
        crop = PROBE_EXTENT / max(rows, cols)
    cube, labels, layout = make_scene(w.dataset, rows, cols, w.raw_bands, ds.classes, ds.labelled, scale=crop)
    with tempfile.TemporaryDirectory(prefix="hsisim-probe-") as d:
        path = write_cube(cube, Path(d) / "cube", fmt)
        raw = open_cube(path)
        pre = fit_preprocess(raw, labels, w.pca)
        offline = offline_cube(raw, pre, Path(d) / "offline.npy")
        yield {"raw": raw, "offline": offline, "labels": labels, "pre": pre, "layout": layout,
               "shape": list(cube.shape), "format": fmt}
        del raw, offline


def dataset_for(sc_data: dict[str, Any], w: Workload, mode: str, repeats: int = 1, augment: bool = False
                ) -> PatchDataset:
    cube = sc_data["raw"] if mode == "getitem" else sc_data["offline"]
    return PatchDataset(cube, sc_data["labels"], w.patch, mode, sc_data["pre"], repeats=repeats, augment=augment)


def calibrate(*, device: str, model: str, dataset: str, quick: bool = False, patch: int | None = None,
              pca: int | None = None, batch: int = 64, world_size: int = 1, checkpoint_dir: Path | None = None,
              checkpoint_storage: str = "local_nvme", fmt: str = "npy", log: Callable[[str], None] | None = None,
              model_factory: str | None = None, dataset_factory: str | None = None,
              factory_kwargs: str | dict[str, Any] | None = None) -> ProfileData:
    """Run every probe; returns the profile (``write`` it where scenarios can name it).

    With ``model_factory`` and ``dataset_factory`` the probes measure the user's own module and
    ``Dataset`` (its real ``__getitem__`` and collate) instead of a built-in model and cube.
    """
    dev = parse_device(device)
    _check(dev, model_factory, dataset_factory, batch, world_size, checkpoint_dir, checkpoint_storage)
    say = log or (lambda s: None)
    t_start = time.perf_counter()
    cores = os.cpu_count() or 1
    profile: dict[str, Any] = {"format": FORMAT, "source": "measured", "fingerprint": fingerprint(dev),
                               "device": {"kind": dev.type, "name": None, "catalog_gpu": catalog_gpu_for(dev),
                                          "cores": cores, "torch_threads": torch.get_num_threads()}}
    profile["device"]["name"] = profile["fingerprint"]["device"]
    if model_factory is not None and dataset_factory is not None:
        net, user_ds, fwd = _user_model(profile, model_factory, dataset_factory, factory_kwargs, batch)
        w = None
    else:
        w, user_ds = workload(model, dataset, patch, pca), None
        net, fwd = _builtin_model(profile, w)
    _compute_and_data(profile, net, fwd, w, user_ds, str(dataset_factory), dev, batch, quick, fmt, say)
    say("checkpoint probe")
    m, opt, scaler, dtype = probes.make_training(net, dev)
    probes.training_step(m, opt, *net.batch(2, dev), scaler, dtype)  # Adam state exists
    profile["checkpoint"] = {**probes.checkpoint_probe(m, opt, checkpoint_dir), "storage": checkpoint_storage}
    if world_size > 1:
        _collectives(profile, dev, world_size, batch, cores, say)
    profile["probe_seconds"] = time.perf_counter() - t_start
    return document(profile)


def _compute_and_data(profile: dict[str, Any], net: probes.Net, fwd: float, w: Workload | None, user_ds: Any,
                      factory: str, dev: torch.device, batch: int, quick: bool, fmt: str,
                      say: Callable[[str], None]) -> None:
    """The compute probe and the data probes (the user's Dataset, or a built-in cube in both modes), with
    the interference rounds spread around them (``_Meetings``)."""
    cores = profile["device"]["cores"]
    workers = [0, 1] if quick else sorted({0, 1, 2, min(4, cores)})
    with ExitStack() as stack:
        if user_ds is not None:
            sets: dict[str, Any] = {"factory": user_ds}
            label, samples = {"factory": factory}, 100 if quick else 300
        else:
            assert w is not None
            s = stack.enter_context(scene(w, fmt))
            sets = {mode: dataset_for(s, w, mode) for mode in ("getitem", "offline")}
            label, samples = {m: f"preprocess {m}" for m in sets}, 200 if quick else 600
        meet = _Meetings(net, sets, dev, batch, quick, say)
        meet.round()
        _compute(profile, net, dev, _batches(fwd, dev, batch, quick), quick, cores, say)
        meet.round(spare=True)
        data = {mode: _data(ds, label[mode], dev, batch, workers, samples, quick, say) for mode, ds in sets.items()}
        meet.round()
        for mode, d in data.items():
            d.update(meet.result(mode))
        if user_ds is not None:  # the user's own __getitem__ and collate
            profile["data"] = {"dataset": factory, "batch": batch, "modes": {"factory": {
                "dataset_factory": factory, "sample_shape": list(net.sample_shape), **data["factory"]}}}
        else:
            assert w is not None
            profile["data"] = {"dataset": w.dataset, "cube_shape": s["shape"], "cube_format": s["format"],
                               "layout": s["layout"], "batch": batch,
                               "modes": {mode: {"patch": w.patch, "out_bands": w.bands, **d}
                                         for mode, d in data.items()}}


def _check(dev: torch.device, model_factory: str | None, dataset_factory: str | None, batch: int, world_size: int,
           checkpoint_dir: Path | None, checkpoint_storage: str) -> None:
    if (model_factory is None) != (dataset_factory is None):
        raise HsisimInputError("give {model_factory} and {dataset_factory} together (the model's input is the "
                               "dataset's sample)")
    if batch < 1:
        raise HsisimInputError(f"{{batch}} must be positive, got {batch}")
    if world_size < 1 or (dev.type == "cuda" and world_size > torch.cuda.device_count()):
        raise HsisimInputError(f"{{world_size}} must be between 1 and the devices available, got {world_size}")
    if checkpoint_dir is not None and not checkpoint_dir.is_dir():
        raise HsisimInputError(f"{{checkpoint_dir}} {checkpoint_dir} is not a directory")
    catalog.storage(checkpoint_storage, key="checkpoint_storage")


def _user_model(profile: dict[str, Any], model_factory: str, dataset_factory: str,
                factory_kwargs: str | dict[str, Any] | None, batch: int) -> tuple[probes.Net, Any, float]:
    """The user's module and Dataset, built from their factories: (net, dataset, forward FLOPs)."""
    from hsisim.calibration import factories as fx

    mf = fx.load_factory(model_factory, "{model_factory}")
    df = fx.load_factory(dataset_factory, "{dataset_factory}")
    mk, dk, flat = fx.split_kwargs(factory_kwargs)
    user_ds, shape = fx.make_dataset(df, dk, flat, batch)
    net = fx.make_net(mf, mk, shape, flat)
    stats = fx.module_stats(net.build(), shape)
    profile["model"] = {"name": mf.spec, "sample_shape": list(shape), "classes": net.classes, **stats}
    profile["factories"] = {"model": mf.record(), "dataset": df.record(), "kwargs": {"model": mk, "dataset": dk}}
    return net, user_ds, stats["fwd_flops"]


def _builtin_model(profile: dict[str, Any], w: Workload) -> tuple[probes.Net, float]:
    net = probes.builtin_net(w.model, w.bands, w.patch, w.classes)
    built = net.build()
    fwd = forward_flops(built, net.sample_shape)
    profile["model"] = {"name": w.model, "bands": w.bands, "patch": w.patch, "classes": w.classes,
                        "params": param_count(built), "fwd_flops": fwd}
    return net, fwd


def _compute(profile: dict[str, Any], net: probes.Net, dev: torch.device, batches: list[int], quick: bool,
             cores: int, say: Callable[[str], None]) -> None:
    """Micro-batch sweep; on the CPU once per training-thread count a loader can leave."""
    say(f"compute probe: {net.name}, batches {batches}")
    if dev.type == "cpu":
        counts = sorted({1, cores}) if quick else list(range(1, cores + 1))
        by = {str(t): probes.compute_probe(net, dev, batches, threads=t,
                                           reps=5 if quick else 7, warmup=2 if quick else 3) for t in counts}
        say("contention probe: a training step beside busy cores")
        profile["compute"] = {"by_threads": by,
                              "contention": probes.contention_probe(net, batches[-1], rounds=2 if quick else 3)}
    else:
        profile["compute"] = probes.compute_probe(net, dev, batches)
        say("memory probe")
        profile["memory"] = probes.memory_probe(net, dev, batches)


def _data(ds: Any, label: str, dev: torch.device, batch: int, workers: list[int], samples: int, quick: bool,
          say: Callable[[str], None]) -> dict[str, Any]:
    """The batch builds of one dataset (the user's own ``__getitem__`` and collate, or a built-in mode)."""
    say(f"data probe: {label}, workers {workers}")
    d = probes.data_probe(ds, batch, workers, pin_memory=dev.type == "cuda", samples=samples)
    d["handover"] = probes.handover_probe(ds, sorted({max(1, batch // 4), batch}), d["batch_build"],
                                          fetches=10 if quick else 20)
    return d


class _Meetings:
    """On the CPU, how each dataset's batch builds and the training step slow each other (1 … 4 workers):
    the interference probe's rounds spread through the calibration (before the compute probe, after it,
    after the data probes) rather than back to back, so that they sample a shared machine at moments
    as far apart as the probes between them last, as a training run spans many moments (back to back,
    two rounds read one moment: a user's own 150-step loop moved 23.4 to 29.6 ms between two runs a
    minute apart, batch 100 of 5x5 patches, this 2-core VM, December 2026). ``--quick`` skips the
    middle round where the first round (every data mode's) took longer than ``SPARE_ROUND_S``. A full
    calibration lengthens each loop to ``threads.THREADED_LOOP_S`` where the build runs threads of its own;
    ``--quick`` does not (in two sittings the longer loops did not bring the prediction closer, and they
    took a --quick calibration of a threaded 9x9 build from 115 s to 244-269 s).

    Where a dataset's build runs BLAS threads of its own (``threads.threaded``, and a BLAS library ran more than
    one thread), each round from then on runs that dataset's loops again with the BLAS limited to one thread
    (``InterferenceProbe``'s ``blas_limit``): the run ``hsisim run``'s warning advises, predicted from its own
    paces with ``dataset.blas_threads: 1`` (``interference_one_blas``)."""

    def __init__(self, net: probes.Net, sets: dict[str, Any], dev: torch.device, batch: int, quick: bool,
                 say: Callable[[str], None]) -> None:
        k = max_workers()
        self.probes = {} if dev.type != "cpu" else {
            mode: InterferenceProbe(net, ds, batch, k, steps=10 if quick else 16,
                                    threaded_s=0.0 if quick else threads.THREADED_LOOP_S)
            for mode, ds in sets.items()}
        self.limited: dict[str, InterferenceProbe] = {}  # the same loops at one BLAS thread, where they are due
        self.net, self.sets, self.batch = net, sets, batch
        self.quick, self.say, self.k, self.took, self.done = quick, say, k, 0.0, 0

    def due(self, spare: bool = False) -> bool:
        """Whether this round runs: never off the CPU (no probes), and ``--quick`` skips the spare one after a
        slow first round."""
        return bool(self.probes) and not (spare and self.quick and self.took > SPARE_ROUND_S)

    def round(self, spare: bool = False) -> None:
        if not self.due(spare):
            return
        self.done += 1
        self.say(f"interference probe, round {self.done}: batch builds beside the training step, 0..{self.k} "
                 "workers")
        took = 0.0  # the default loops' time (the spare round's rule predates the loops at one BLAS thread)
        for mode, probe in self.probes.items():
            t0 = time.perf_counter()
            probe.round()
            took += time.perf_counter() - t0
            if mode not in self.limited and threads.threaded(probe.worker_builds) and probe.worker_builds[-1].get(
                    "blas"):
                self.say(f"the batch build runs BLAS threads of its own: its loops again with the BLAS at "
                         f"{BLAS_LEVER} thread, from this round on")
                self.limited[mode] = InterferenceProbe(self.net, self.sets[mode], self.batch, self.k,
                                                       steps=probe.steps, threaded_s=probe.threaded_s,
                                                       blas_limit=BLAS_LEVER)
            if mode in self.limited:
                self.limited[mode].round()
        self.took = max(self.took, took)

    def result(self, mode: str) -> dict[str, Any]:
        if mode not in self.probes:
            return {}
        limited = {"interference_one_blas": self.limited[mode].result()} if mode in self.limited else {}
        return {"interference": self.probes[mode].result(), **limited}


def _collectives(profile: dict[str, Any], dev: torch.device, world: int, batch: int, cores: int,
                 say: Callable[[str], None]) -> None:
    say(f"collective probe: {world} processes")
    # between two all-reduces: one training step at `batch` with the threads each process gets
    comp = profile["compute"]
    fit = comp["by_threads"][str(nearest_count(map(int, comp["by_threads"]), max(1, cores // world)))] \
        if "by_threads" in comp else comp
    busy = min(0.05, max(0.001, fit["a_s"] + fit["c_s_per_sample"] * batch))
    profile["collectives"] = collectives.collective_probe(world, "nccl" if dev.type == "cuda" else "gloo",
                                                          busy_s=busy, near=4 * int(profile["model"]["params"]))


def _batches(fwd_flops: float, dev: torch.device, batch: int, quick: bool) -> list[int]:
    """Micro-batch sizes to sweep: powers of two up to ``batch``, fewer and smaller on a slow CPU."""
    top = batch
    if dev.type == "cpu":  # keep a step under ~1 s: estimate from the forward FLOPs at ~20 GFLOP/s
        flops = 3 * max(fwd_flops, 1.0)
        top = int(max(2, min(batch, 2 ** np.floor(np.log2(max(2.0, 20e9 / flops))))))
    sizes = [b for b in (2**k for k in range(0, 12)) if b <= top]
    if quick:
        sizes = sizes[-4:] if len(sizes) > 4 else sizes
    return sizes if len(sizes) >= 2 else [1, 2]


def spec_profile(gpu_name: str, model: str, dataset: str, patch: int | None = None, pca: int | None = None,
                 precision: str = "amp_fp16", optimizer: str = "adam") -> ProfileData:
    """A profile derived from a GPU's published figures (roofline over the catalog), marked ``source: spec``."""
    from hsisim.analytic import compute, memory

    gpu = catalog.gpu(gpu_name, key="{spec}")
    w = workload(model, dataset, patch, pca)
    info = catalog.model(model)
    stats = info.stats(w.bands, w.patch, catalog.dataset(dataset).classes)
    states = memory.state_bytes_per_param(precision, optimizer)
    cost = compute.roofline_cost(
        fwd_flops=stats.fwd_flops, act_bytes=stats.act_elems * memory.activation_bytes_per_element(precision),
        params=stats.params, ops=stats.ops, peak_flops=gpu.peak_flops[precision], efficiency=info.efficiency,
        mem_bw_bytes_per_s=gpu.mem_bw_bytes_per_s,
        optimizer_bytes_per_param=3 * states["optimizer"] + 2 * states["weights"] + states["grads"])
    figures = {"gpu": gpu.name, "precision": precision, "peak_flops": gpu.peak_flops[precision],
               "mem_bw_bytes_per_s": gpu.mem_bw_bytes_per_s, "memory_bytes": gpu.memory_bytes,
               "source": gpu.source, "as_of": gpu.as_of, "efficiency": info.efficiency}
    return document({"format": FORMAT, "source": "spec",
            "note": f"derived from the catalog figures for {gpu.describe(precision)} and the model's layer "
                    f"arithmetic at the catalog's prior efficiency {info.efficiency}: not measured",
            "catalog_figures": figures,
            "device": {"kind": "cuda", "name": gpu.display, "catalog_gpu": gpu.name, "cores": None},
            "model": {"name": w.model, "bands": w.bands, "patch": w.patch, "classes": w.classes, "params": stats.params,
                      "fwd_flops": stats.fwd_flops, "precision": precision, "optimizer": optimizer},
            "compute": {"a_s": cost.a_s, "c_s_per_sample": cost.c_s_per_sample, "cv": 0.0}})
