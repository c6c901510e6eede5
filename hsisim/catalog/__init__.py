"""The catalog: GPUs, instance types, links, storage kinds, CPU costs, HSI datasets and models.

Figures live in the YAML files beside this module, every entry with its `source` and the date the
figure was true (`as_of`; prices also `price_as_of` and `price_region`); this module loads them
once, converts units to SI, and looks names up with an error that lists the known ones.
"""

from __future__ import annotations

import difflib
import functools
import itertools
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

from hsisim import units
from hsisim.catalog.hsi_models import BUILDERS, ModelStats
from hsisim.errors import HsisimInputError

PRECISIONS = ("fp32", "tf32", "amp_fp16", "amp_bf16", "fp16", "bf16")
_PRECISION_LABEL = {"fp32": "fp32", "tf32": "tf32", "amp_fp16": "fp16 tensor (AMP)", "fp16": "fp16 tensor",
                    "amp_bf16": "bf16 tensor (AMP)", "bf16": "bf16 tensor"}


def _interpolate_held(points: tuple[tuple[int, float], ...], x: int) -> float:
    """Piecewise-linear through ``points`` (ascending x), held flat before the first and after the last."""
    if x <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return points[-1][1]


@dataclass(frozen=True)
class GPU:
    name: str
    display: str
    memory_bytes: float  # usable: CUDA's total with ECC on, not the marketing figure
    mem_bw_bytes_per_s: float
    peak_flops: dict[str, float]  # by precision, dense FLOP/s
    pcie: str
    memory_nominal_bytes: float = 0.0
    source: str = ""
    as_of: str = ""

    def describe(self, precision: str) -> str:
        """The figures a roofline of this GPU uses for ``precision``, with their source and date (one line)."""
        return (f"{self.display}: {self.peak_flops[precision] / 1e12:.1f} TFLOP/s {_PRECISION_LABEL[precision]} dense, "
                f"{self.mem_bw_bytes_per_s / 1e9:.0f} GB/s, {self.memory_bytes / 2**30:.1f} GiB usable "
                f"(source: {self.source}; as of {self.as_of})")


@dataclass(frozen=True)
class Instance:
    name: str
    gpu: str
    gpus: int
    vcpus: int
    ram_bytes: float
    intra: str
    network: str
    on_demand_usd_per_hour: float
    price_as_of: str = ""
    price_region: str = ""
    network_baseline_bytes_per_s: float | None = None  # None: the NIC's line rate is sustained
    network_burst_bytes_per_s: float | None = None
    ebs_baseline_bytes_per_s: float | None = None  # None: no EBS (owned hardware)
    ebs_burst_bytes_per_s: float | None = None
    host_link: str = ""  # CPU-GPU link where it differs from the GPU's `pcie`
    source: str = ""
    as_of: str = ""

    @property
    def network_sustained_fraction(self) -> float:
        """Share of the NIC's line (burst) rate a multi-hour job keeps: baseline / burst, 1 for fixed-rate NICs.

        "Up to" sizes spend network I/O credits to burst for minutes (AWS: typically 5 to 60) and
        then fall back to their baseline, which is what hours of all-reduces see.
        """
        if self.network_baseline_bytes_per_s is None or not self.network_burst_bytes_per_s:
            return 1.0
        return min(1.0, self.network_baseline_bytes_per_s / self.network_burst_bytes_per_s)


@dataclass(frozen=True)
class Link:
    name: str
    display: str
    latency_s: float
    effective_bytes_per_s: float  # bus bandwidth; with a node-count table, the figure held beyond it
    line_bytes_per_s: float  # per direction
    busbw_by_nodes: tuple[tuple[int, float], ...] = ()  # measured (nodes, bus bandwidth B/s), ascending
    measured_gpus_per_node: int = 0
    source: str = ""
    as_of: str = ""

    def effective_bytes_per_s_at(self, nodes: int, algorithm: str = "ring") -> float:
        """Bandwidth (B/s) the all-reduce model should use for this inter-node link on ``nodes`` nodes.

        For ``ring`` and ``tree`` it is the nccl-tests bus bandwidth measured at that node count (the
        B of 2(p-1)/p * S/B, which then reproduces the measured time), interpolated linearly between
        measured counts and held at the last measurement beyond it. ``hierarchical`` moves only the
        inter-node ring over the NIC, 2(n-1)/n * S/B, so it gets the per-node rate that gives the
        same measured time: busbw * p(n-1) / (n(p-1)) with p = n * measured_gpus_per_node.
        Without measurements, the single ``effective_bytes_per_s`` whatever the count.
        """
        if not self.busbw_by_nodes or nodes < 2:
            return self.effective_bytes_per_s
        busbw = _interpolate_held(self.busbw_by_nodes, nodes)
        if algorithm != "hierarchical":
            return busbw
        p = nodes * self.measured_gpus_per_node
        return busbw * p * (nodes - 1) / (nodes * (p - 1))


@dataclass(frozen=True)
class Storage:
    name: str
    display: str
    write_bw_bytes_per_s: float
    read_bw_bytes_per_s: float
    latency_s: float
    lost_with_node: bool
    source: str = ""
    as_of: str = ""


@dataclass(frozen=True)
class Dataset:
    name: str
    display: str
    rows: int
    cols: int
    bands: int
    classes: int
    labelled: int


@dataclass(frozen=True)
class ModelInfo:
    name: str
    display: str
    spectral_input: str  # "pca" or "bands"
    outputs: str  # "classes" or "classes_plus_one"
    efficiency: float
    published_params: int | None

    def stats(self, bands: int, patch: int, classes: int) -> ModelStats:
        """Parameters, forward FLOPs and activations per sample for this input shape."""
        outputs = classes + 1 if self.outputs == "classes_plus_one" else classes
        try:
            return BUILDERS[self.name](bands, patch, outputs)
        except ValueError as exc:
            raise HsisimInputError(f"{self.display} cannot take a {patch}x{patch} patch with {bands} bands: {exc}",
                                   key="dataset.patch") from exc


@dataclass(frozen=True)
class CpuCosts:
    getitem_overhead_s: float
    copy_bw_bytes_per_s: float
    pca_flops: float
    normalize_bw_bytes_per_s: float
    augment_bw_bytes_per_s: float
    decompress_bw_bytes_per_s: float
    collate_bw_bytes_per_s: float
    collate_overhead_s: float
    syscall_read_s: float
    worker_start_s: float
    ipc_handover_s: float  # main process receiving a finished batch (x, y) from a worker: fixed part
    ipc_bw_bytes_per_s: float  # ... and per byte


@functools.cache
def _load(kind: str) -> dict[str, Any]:
    text = resources.files("hsisim.catalog").joinpath(f"{kind}.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    assert isinstance(data, dict)
    return data


def _lookup(kind: str, name: str, key: str) -> dict[str, Any]:
    table = _load(kind)
    if name not in table:
        known = ", ".join(sorted(table))
        close = difflib.get_close_matches(str(name), list(table), n=2, cutoff=0.6)
        hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
        raise HsisimInputError(f"unknown {kind.rstrip('s')} {name!r}; {hint}known: {known} (hsisim catalog {kind})",
                               key=key)
    entry = table[name]
    assert isinstance(entry, dict)
    return entry


def names(kind: str) -> list[str]:
    """Known names of one catalog table (``gpus``, ``instances``, ``links``, ...)."""
    return sorted(_load(kind))


@functools.cache
def gpu(name: str, key: str = "gpu") -> GPU:
    e = _lookup("gpus", name, key)
    peak = {
        "fp32": e["fp32"] * 1e12, "tf32": e["tf32"] * 1e12,
        "amp_fp16": e["fp16_tensor"] * 1e12, "fp16": e["fp16_tensor"] * 1e12,
        "amp_bf16": e["bf16_tensor"] * 1e12, "bf16": e["bf16_tensor"] * 1e12,
    }
    memory = units.size(e["memory"])
    return GPU(name, e["display"], memory, units.bandwidth(e["mem_bw"]), peak, e["pcie"],
               units.size(e.get("memory_nominal", memory)), _text(e.get("source")), _text(e.get("as_of")))


@functools.cache
def instance(name: str, key: str = "cluster.instance") -> Instance:
    e = _lookup("instances", name, key)
    burst = link(e["network"]).line_bytes_per_s
    return Instance(name, e["gpu"], int(e["gpus"]), int(e["vcpus"]), units.size(e["ram"]), e["intra"],
                    e["network"], float(e["on_demand_usd_per_hour"]), _text(e.get("price_as_of")),
                    _text(e.get("price_region")), _bandwidth_or_none(e.get("network_baseline")), burst,
                    _bandwidth_or_none(e.get("ebs_baseline")), _bandwidth_or_none(e.get("ebs_burst")),
                    e.get("host_link") or gpu(e["gpu"]).pcie, _text(e.get("source")), _text(e.get("as_of")))


@functools.cache
def link(name: str, key: str = "link") -> Link:
    e = _lookup("links", name, key)
    table = tuple(sorted((int(n), units.bandwidth(bw)) for n, bw in (e.get("busbw_by_nodes") or {}).items()))
    effective = units.bandwidth(e["effective"]) if "effective" in e else table[-1][1]
    return Link(name, e["display"], units.duration(e["latency"]), effective, units.bandwidth(e["line"]), table,
                int(e.get("measured_gpus_per_node", 0)), _text(e.get("source")), _text(e.get("as_of")))


@functools.cache
def storage(name: str, key: str = "checkpoint.storage") -> Storage:
    e = _lookup("storage", name, key)
    return Storage(name, e["display"], units.bandwidth(e["write_bw"]), units.bandwidth(e["read_bw"]),
                   units.duration(e["latency"]), bool(e["lost_with_node"]), _text(e.get("source")),
                   _text(e.get("as_of")))


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _bandwidth_or_none(value: Any) -> float | None:
    return None if value is None else units.bandwidth(value)


@functools.cache
def dataset(name: str, key: str = "dataset.name") -> Dataset:
    e = _lookup("datasets", name, key)
    return Dataset(name, e["display"], int(e["rows"]), int(e["cols"]), int(e["bands"]), int(e["classes"]),
                   int(e["labelled"]))


@functools.cache
def model(name: str, key: str = "model.name") -> ModelInfo:
    e = _lookup("models", name, key)
    pub = e.get("published_params")
    return ModelInfo(name, e["display"], e["spectral_input"], e["outputs"], float(e["efficiency"]),
                     int(pub["value"]) if pub else None)


@functools.lru_cache(maxsize=1)
def cpu() -> CpuCosts:
    e = _load("cpu")
    return CpuCosts(
        getitem_overhead_s=units.duration(e["getitem_overhead"]),
        copy_bw_bytes_per_s=units.bandwidth(e["copy_bw"]),
        pca_flops=float(e["pca_flops"]),
        normalize_bw_bytes_per_s=units.bandwidth(e["normalize_bw"]),
        augment_bw_bytes_per_s=units.bandwidth(e["augment_bw"]),
        decompress_bw_bytes_per_s=units.bandwidth(e["decompress_bw"]),
        collate_bw_bytes_per_s=units.bandwidth(e["collate_bw"]),
        collate_overhead_s=units.duration(e["collate_overhead"]),
        syscall_read_s=units.duration(e["syscall_read"]),
        worker_start_s=units.duration(e["worker_start"]),
        ipc_handover_s=units.duration(e["ipc_handover"]),
        ipc_bw_bytes_per_s=units.bandwidth(e["ipc_bw"]),
    )
