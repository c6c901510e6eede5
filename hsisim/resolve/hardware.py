"""The machines: instance, GPU, host CPU costs, node and process counts, training threads."""

from __future__ import annotations

import os
from dataclasses import dataclass

from hsisim import catalog
from hsisim.analytic import datapipe
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
    """The scenario's hardware; ``vcpus: 0`` in the catalog means the profile's (or this machine's) cores."""
    inst = catalog.instance(sc.cluster.instance)
    gpu = catalog.gpu(inst.gpu)
    vcpus = inst.vcpus or (prof.cores if prof and prof.cores else os.cpu_count() or 1)
    # a CPU device: each training process gets the cores its loader workers leave free
    threads = datapipe.training_threads(vcpus, inst.gpus, sc.loader.num_workers) if gpu.name == "cpu" else None
    return Hardware(inst, gpu, catalog.cpu(), sc.cluster.nodes, vcpus, threads)
