"""Checkpoints: their size, how long a write, a restore and a device→host snapshot take, and the policy."""

from __future__ import annotations

from dataclasses import dataclass

from hsisim import catalog
from hsisim.analytic import checkpoint as ckpt
from hsisim.profile import Profile
from hsisim.resolve.hardware import Hardware
from hsisim.resolve.workload import Workload
from hsisim.scenario import Scenario
from hsisim.sim.spec import CheckpointPlan


@dataclass(frozen=True)
class Checkpoints:
    """Bytes of one checkpoint and the seconds it takes to write, restore and snapshot."""

    bytes: float
    write_s: float
    restore_s: float
    snapshot_s: float
    notes: tuple[str, ...] = ()


def checkpoints(sc: Scenario, hw: Hardware, wl: Workload, prof: Profile | None) -> Checkpoints:
    """Checkpoint times from the storage kind's bandwidths (the instance's EBS link, a profile's measurement)."""
    cbytes = ckpt.checkpoint_bytes(wl.stats.params, sc.model.precision, sc.model.optimizer)
    store = catalog.storage(sc.checkpoint.storage)
    writers = hw.nodes if sc.model.zero_stage >= 1 else 1
    write_bw, read_bw, notes = store.write_bw_bytes_per_s, store.read_bw_bytes_per_s, []
    if store.name == "ebs" and hw.instance.ebs_baseline_bytes_per_s is not None:
        # A volume is no faster than the instance's own EBS link. Its baseline, not its burst: AWS
        # guarantees the burst of smaller sizes for 30 minutes per 24 h only, and a job that writes
        # checkpoints for hours (beside its dataset and log I/O) cannot count on the credits.
        write_bw = min(write_bw, hw.instance.ebs_baseline_bytes_per_s)
        read_bw = min(read_bw, hw.instance.ebs_baseline_bytes_per_s)
    measured = prof.checkpoint if prof is not None and prof.catalog_gpu == hw.gpu.name else None
    if measured is not None and prof is not None and prof.checkpoint_storage == store.name:
        # the profile timed torch.save/torch.load of this model to this kind of storage on this machine
        write_bw, read_bw = measured["write_bw_bytes_per_s"], measured["read_bw_bytes_per_s"]
        notes.append(f"checkpoint bandwidths from the profile's probe ({store.name}): write "
                     f"{write_bw / 1e6:,.0f} MB/s, read {read_bw / 1e6:,.0f} MB/s")
    write = sc.checkpoint.write_time if sc.checkpoint.write_time is not None else \
        ckpt.write_seconds(cbytes, write_bw, store.latency_s, writers)
    restore = sc.checkpoint.restore_time if sc.checkpoint.restore_time is not None else \
        ckpt.write_seconds(cbytes, read_bw, store.latency_s, writers)
    host = catalog.link(hw.instance.host_link)
    snapshot = cbytes / hw.world ** (sc.model.zero_stage >= 1) / host.effective_bytes_per_s
    return Checkpoints(cbytes, write, restore, snapshot, tuple(notes))


def plan(sc: Scenario) -> CheckpointPlan:
    """The scenario's checkpoint policy as the simulation reads it."""
    cp = sc.checkpoint
    local = catalog.storage(cp.storage).lost_with_node
    return CheckpointPlan(policy=cp.policy, interval_s=cp.interval, every_steps=cp.every_steps,
                          asynchronous=cp.async_, on_notice=cp.on_notice, local=local,
                          sharded=sc.model.zero_stage >= 1, keep_last=cp.keep_last)
