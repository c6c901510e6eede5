"""The catalog: GPUs, instance types, links, storage kinds, CPU costs, HSI datasets and models.

Figures live in the YAML files beside this module, each with its source; this module loads them
once, converts units to SI, and looks names up with an error that lists the known ones.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

from hsisim import units
from hsisim.catalog.hsi_models import BUILDERS, ModelStats
from hsisim.errors import HsisimInputError

PRECISIONS = ("fp32", "tf32", "amp_fp16", "amp_bf16", "fp16", "bf16")


@dataclass(frozen=True)
class GPU:
    name: str
    display: str
    memory_bytes: float
    mem_bw_bytes_per_s: float
    peak_flops: dict[str, float]  # by precision, FLOP/s
    pcie: str


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


@dataclass(frozen=True)
class Link:
    name: str
    display: str
    latency_s: float
    effective_bytes_per_s: float
    line_bytes_per_s: float


@dataclass(frozen=True)
class Storage:
    name: str
    display: str
    write_bw_bytes_per_s: float
    read_bw_bytes_per_s: float
    latency_s: float
    lost_with_node: bool


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
        raise HsisimInputError(f"unknown {kind.rstrip('s')} {name!r}; known: {known}", key=key)
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
    return GPU(name, e["display"], units.size(e["memory"]), units.bandwidth(e["mem_bw"]), peak, e["pcie"])


@functools.cache
def instance(name: str, key: str = "cluster.instance") -> Instance:
    e = _lookup("instances", name, key)
    return Instance(name, e["gpu"], int(e["gpus"]), int(e["vcpus"]), units.size(e["ram"]), e["intra"],
                    e["network"], float(e["on_demand_usd_per_hour"]))


@functools.cache
def link(name: str, key: str = "link") -> Link:
    e = _lookup("links", name, key)
    return Link(name, e["display"], units.duration(e["latency"]), units.bandwidth(e["effective"]),
                units.bandwidth(e["line"]))


@functools.cache
def storage(name: str, key: str = "checkpoint.storage") -> Storage:
    e = _lookup("storage", name, key)
    return Storage(name, e["display"], units.bandwidth(e["write_bw"]), units.bandwidth(e["read_bw"]),
                   units.duration(e["latency"]), bool(e["lost_with_node"]))


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
