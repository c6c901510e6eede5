"""The machines: instance, GPU, host CPU costs, node and process counts, training threads."""

from __future__ import annotations

import os
from dataclasses import dataclass

from hsisim import catalog
from hsisim.profile import Profile
from hsisim.scenario import Scenario


@dataclass(frozen=True)
class Hardware:
    """The cluster of a scenario, from the catalog (and the profile's core count for a local CPU)."""

    instance: catalog.Instance
    gpu: catalog.GPU
    cpu: catalog.CpuCosts
    nodes: int
    vcpus: int  # per node
    threads: int | None  # training threads per process on a CPU device; None on a GPU

    @property
    def world(self) -> int:
        return self.nodes * self.instance.gpus

    @property
    def on_cpu(self) -> bool:
        """The training device is the host CPU (validation runs)."""
        return self.gpu.name == "cpu"


def hardware(sc: Scenario, prof: Profile | None) -> Hardware:
    """The scenario's hardware; ``vcpus: 0`` in the catalog means the profile's (or this machine's) cores.

    On a CPU device each training process runs ``training.threads`` intra-op threads, else the default
    it starts with (:func:`default_threads`), whatever its loader workers use (they then share the
    cores: ``sim.cpu``).
    """
    inst = catalog.instance(sc.cluster.instance)
    gpu = catalog.gpu(inst.gpu)
    local = inst.vcpus == 0
    vcpus = inst.vcpus or (prof.cores if prof and prof.cores else os.cpu_count() or 1)
    threads = None
    if gpu.name == "cpu":
        threads = sc.training.threads or default_threads(vcpus, prof if local else None, inst.gpus)
    return Hardware(inst, gpu, catalog.cpu(), sc.cluster.nodes, vcpus, threads)


def default_threads(vcpus: int, prof: Profile | None, per_node: int = 1) -> int:
    """The intra-op threads a training process starts with. One process on a node: PyTorch's default,
    one per physical core (as the profile saw it on this machine; else the logical CPUs, which is what
    a cloud VM's vCPU count is to a guest without SMT siblings). Several: one each, the
    ``OMP_NUM_THREADS=1`` that ``torchrun`` sets for every process when it starts more than one on a
    node and the variable is unset (``torch/distributed/run.py``, PyTorch 2.x); a launcher that leaves
    PyTorch's default (``mp.spawn``) is a scenario's ``training.threads``."""
    if per_node > 1:
        return 1
    if prof is not None and prof.torch_threads:
        return prof.torch_threads
    return max(1, vcpus)
