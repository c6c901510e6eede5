"""What the catalog knows, as plain data for ``hsisim catalog``: every entry with its figures and sources.

Figures are given in the units people quote them in, and every key names its unit (``memory_gib``,
``mem_bw_gb_per_s``); ``source`` and ``as_of`` say where each entry's figures come from and when
they were true.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hsisim import catalog
from hsisim.errors import HsisimInputError

GIB = 2.0**30
GB = 1e9
GBIT = 1e9 / 8

ABOUT = {
    "gpus": "GPU parts: usable memory, memory bandwidth, dense peak FLOP/s per precision",
    "instances": "AWS instance types: GPUs, vCPUs, RAM, links, EBS, on-demand list price",
    "links": "GPU and network links: line rate, effective (nccl-tests bus) bandwidth, latency",
    "storage": "checkpoint and dataset storage: write/read bandwidth, latency",
    "datasets": "hyperspectral scenes: shape, bands, classes, labelled pixels",
    "models": "HSI models: paper, input, prior efficiency, published parameter count",
}
KINDS = tuple(ABOUT)
# The tags instances.yaml cites in its `source` fields (defined in that file's header comment).
LEGEND = {
    "instances": {
        "[V]": "instances.vantage.sh data (from the AWS Price List API) as snapshotted in github.com/tsaol/aws-gpu, "
               "last updated 2026-08-26 (p5en: 2025-12-21)",
        "[G]": "AWS 'Amazon EC2 Instance Types' guide (2024 edition): network and EBS specifications of "
               "accelerated computing instances",
    },
}


def _rounded(value: float | None, digits: int = 4) -> float | None:
    """``value`` to ``digits`` significant digits (None stays None)."""
    return None if value is None else float(f"{value:.{digits}g}")


def _raw(kind: str, name: str) -> dict[str, Any]:
    """The catalog entry as written in its YAML file (for fields the typed loaders do not keep)."""
    entry = catalog._load(kind)[name]
    assert isinstance(entry, dict)
    return entry


def _provenance(kind: str, name: str, source: str | None = None) -> dict[str, str]:
    """``source`` and ``as_of`` of one entry (empty strings when the file gives none)."""
    raw = _raw(kind, name)
    return {"source": source if source is not None else str(raw.get("source") or ""),
            "as_of": str(raw.get("as_of") or "")}


def _gpu(name: str) -> dict[str, Any]:
    """One GPU: usable and nominal memory (GiB), bandwidth (GB/s), dense peaks (TFLOP/s), host link."""
    g = catalog.gpu(name)
    peaks = {p: _rounded(g.peak_flops[p] / 1e12) for p in ("fp32", "tf32", "amp_fp16", "amp_bf16")}
    return {"name": name, "display": g.display, "memory_gib": _rounded(g.memory_bytes / GIB),
            "memory_nominal_gib": _rounded(g.memory_nominal_bytes / GIB),
            "mem_bw_gb_per_s": _rounded(g.mem_bw_bytes_per_s / GB),
            "peak_tflops": {"fp32": peaks["fp32"], "tf32": peaks["tf32"], "fp16_tensor": peaks["amp_fp16"],
                            "bf16_tensor": peaks["amp_bf16"]},
            "host_link": g.pcie, **_provenance("gpus", name)}


def _gbit(bytes_per_s: float | None) -> float | None:
    return None if bytes_per_s is None else _rounded(bytes_per_s / GBIT)


def _instance(name: str) -> dict[str, Any]:
    """One instance type: GPUs, vCPUs, RAM (GiB), links, network and EBS (Gbit/s), list price (USD/h)."""
    i = catalog.instance(name)
    return {"name": name, "gpu": i.gpu, "gpus": i.gpus, "vcpus": i.vcpus, "ram_gib": _rounded(i.ram_bytes / GIB),
            "intra": i.intra, "host_link": i.host_link, "network": i.network,
            "network_burst_gbit_per_s": _gbit(i.network_burst_bytes_per_s),
            "network_baseline_gbit_per_s": _gbit(i.network_baseline_bytes_per_s),
            "ebs_baseline_gbit_per_s": _gbit(i.ebs_baseline_bytes_per_s),
            "ebs_burst_gbit_per_s": _gbit(i.ebs_burst_bytes_per_s),
            "on_demand_usd_per_hour": i.on_demand_usd_per_hour, "price_as_of": i.price_as_of,
            "price_region": i.price_region, **_provenance("instances", name)}


def _link(name: str) -> dict[str, Any]:
    """One link: line and effective bandwidth (GB/s), measured bus bandwidth by node count, latency (µs)."""
    lk = catalog.link(name)
    by_nodes = [{"nodes": n, "busbw_gb_per_s": _rounded(bw / GB)} for n, bw in lk.busbw_by_nodes]
    return {"name": name, "display": lk.display, "line_gb_per_s": _rounded(lk.line_bytes_per_s / GB),
            "effective_gb_per_s": _rounded(lk.effective_bytes_per_s / GB), "busbw_by_nodes": by_nodes,
            "measured_gpus_per_node": lk.measured_gpus_per_node or None,
            "latency_us": _rounded(lk.latency_s * 1e6), **_provenance("links", name)}


def _storage(name: str) -> dict[str, Any]:
    """One storage kind: write and read bandwidth (MB/s), latency (ms), lost with a reclaimed node."""
    s = catalog.storage(name, key="storage")
    return {"name": name, "display": s.display, "write_mb_per_s": _rounded(s.write_bw_bytes_per_s / 1e6),
            "read_mb_per_s": _rounded(s.read_bw_bytes_per_s / 1e6), "latency_ms": _rounded(s.latency_s * 1e3),
            "lost_with_node": s.lost_with_node, **_provenance("storage", name)}


def _dataset(name: str) -> dict[str, Any]:
    """One scene: rows × cols pixels, bands used and as recorded, classes, labelled pixels."""
    d = catalog.dataset(name, key="dataset")
    raw = _raw("datasets", name)
    return {"name": name, "display": d.display, "rows": d.rows, "cols": d.cols, "bands": d.bands,
            "raw_bands": int(raw.get("raw_bands", d.bands)), "classes": d.classes, "labelled": d.labelled,
            **_provenance("datasets", name)}


def _model(name: str) -> dict[str, Any]:
    """One HSI model: its paper (the source), spectral input, outputs, prior efficiency, published params."""
    m = catalog.model(name, key="model")
    raw = _raw("models", name)
    pub = raw.get("published_params")
    published = {"value": int(pub["value"]), "at": str(pub.get("at", ""))} if pub else None
    return {"name": name, "display": m.display, "spectral_input": m.spectral_input, "outputs": m.outputs,
            "efficiency": m.efficiency, "published_params": published,
            **_provenance("models", name, source=str(raw.get("paper") or ""))}


ENTRY: dict[str, Callable[[str], dict[str, Any]]] = {
    "gpus": _gpu, "instances": _instance, "links": _link, "storage": _storage, "datasets": _dataset,
    "models": _model,
}


def _overview() -> dict[str, Any]:
    """Every table with its entry count, what it holds and its entries' names."""
    tables = [{"kind": k, "count": len(catalog.names(k)), "about": ABOUT[k], "names": catalog.names(k)}
              for k in KINDS]
    return {"kind": None, "tables": tables}


def listing(kind: str | None = None) -> dict[str, Any]:
    """The catalog table ``kind`` as ``{"kind", "about", "legend", "entries"}`` (one dict per entry, by name).

    ``kind`` None gives the overview ``{"kind": None, "tables": [...]}`` (counts and names). An
    unknown ``kind`` raises ``HsisimInputError`` listing the known ones.
    """
    if kind is None:
        return _overview()
    if kind not in ENTRY:
        raise HsisimInputError(f"unknown catalog table {kind!r}; known: {', '.join(KINDS)}")
    return {"kind": kind, "about": ABOUT[kind], "legend": LEGEND.get(kind, {}),
            "entries": [ENTRY[kind](n) for n in catalog.names(kind)]}
