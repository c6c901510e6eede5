"""The resolved run spec: everything the simulation reads, as plain numbers (seconds, bytes, USD).

``hsisim.resolve`` builds a ``RunSpec`` from a scenario, the catalog and a calibration profile;
the simulation never sees the scenario, the catalog or a file. The step-level ``Job`` is what the
micro simulation needs; the other parts are what the run-level simulation needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Protocol


@dataclass(frozen=True)
class Paces:
    """Measured slowdowns of a training step and of its workers' builds as they meet (index n - 1: n
    workers building), each over its time alone (``interference_probe``)."""

    step: tuple[float, ...]
    build_idle: tuple[float, ...]
    build_busy: tuple[float, ...]

    def of(self, table: tuple[float, ...], n: int, grow: bool) -> float:
        """The ratio with ``n`` workers building; beyond the measured counts it grows in proportion
        (``grow``: builds sharing the cores) or along the last measured slope (a step)."""
        if n <= 0:
            return 1.0
        k = len(table)
        if n <= k:
            return table[n - 1]
        if grow:
            return table[-1] * n / k
        slope = max(0.0, table[-1] - table[-2]) if k > 1 else 0.0
        return table[-1] + (n - k) * slope


@dataclass(frozen=True)
class Job:
    """One training world (a node count) at step level: seconds, bytes and USD."""

    nodes: int
    gpus_per_node: int
    accumulation: int  # micro-steps per optimizer step
    micro_batch: int  # after any memory-driven shrink
    steps_per_epoch: int
    total_steps: int
    # step level (per micro-step unless stated)
    compute_s: float  # mean fwd+bwd(+opt share) of one micro-step, incl. any shrink penalty
    stall_share: float  # share of compute_s caused by a shrunk micro-batch (→ t_stall)
    compute_cv: float
    batch_build_s: float  # one worker building one micro-batch
    batch_build_cv: float
    h2d_s: float
    num_workers: int
    prefetch_factor: int
    persistent_workers: bool
    worker_start_s: float
    comm_exposed_s: float  # per optimizer step
    comm_total_s: float
    timed: bool = False  # step components given by `timings`, not modelled
    handover_s: float = 0.0  # training process receiving a worker's batch, on its critical path (CPU device)
    comm_cv: float = 0.0  # step-to-step spread of the exposed all-reduce (measured; 0 = constant)
    # the measured shape of the all-reduce: quantiles (evenly spaced in probability) of time / mean; drawn
    # instead of a gamma with comm_cv when given
    comm_quantiles: tuple[float, ...] = ()
    # the node's cores, when they can be oversubscribed (0: every piece of work runs at full speed), and
    # the cores a rank's computation keeps busy (its intra-op threads on a CPU device; the launching
    # thread on a GPU); a loader worker building a batch and a hand-over keep one core busy
    cpu_cores: float = 0.0
    compute_cpu_demand: float = 1.0
    # a training step's measured slowdown beside 0, 1, 2, ... busy cores of other work (calibrated; empty:
    # the processor-sharing share)
    compute_slowdown: tuple[float, ...] = ()
    # measured paces of the training step and its workers' builds as they meet on this node (calibrated
    # on this machine, one training process per node); replace the share and the slowdown where given
    paces: Paces | None = None
    # the profile measured these paces again with the Dataset's BLAS at one thread: ``dataset.blas_threads=1``
    # is a fix the calibration can predict (``report.fixes``)
    blas_lever: bool = False
    # run level
    ckpt_bytes: float = 0.0
    ckpt_write_s: float = 0.0
    ckpt_snapshot_s: float = 0.0
    ckpt_restore_s: float = 0.0
    oom_retry_s: float = 0.0  # one-time: failed attempts before the micro-batch was shrunk
    price_usd_per_node_hour: float = 0.0
    on_demand_usd_per_node_hour: float = 0.0
    notes: tuple[str, ...] = field(default_factory=tuple)
    warnings: tuple[str, ...] = field(default_factory=tuple)  # what makes the step itself doubtful

    @property
    def world(self) -> int:
        return self.nodes * self.gpus_per_node


class Sampler(Protocol):
    """A registry distribution, as the simulation uses it: draws and a mean (seconds)."""

    @property
    def mean(self) -> float: ...

    def sample(self, rng: Any, n: int | None = None) -> Any: ...


class PriceCurve(Protocol):
    """A replayed price history: USD of one node over [a, b] seconds, replayed from ``offset``."""

    @property
    def span(self) -> float: ...

    def integral(self, offset: float, a: float, b: float) -> float: ...


class Capacity(Protocol):
    """Replayed spot capacity: instances available at simulated time t of a replay from trace time ``offset``."""

    @property
    def span(self) -> float: ...

    def available(self, offset: float, t: float) -> int: ...

    def next_below(self, offset: float, t: float, n: int) -> tuple[float, int]: ...

    def next_at_least(self, offset: float, t: float, n: int) -> float: ...


@dataclass(frozen=True)
class SpotSetup:
    """Spot capacity as the run-level simulation needs it (seconds, USD)."""

    lifetime: Sampler | None  # one spot node's lifetime from boot (None: only the availability trace reclaims)
    correlated_rate_per_s: float  # zone-wide reclaims of every spot node
    notice_s: float
    replacement: Sampler | None  # the wait for replacement capacity (None: immediate)
    recovery: str  # restart | elastic | fallback_on_demand | deadline_safety_net | uniform_progress
    fallback_after: int | None
    fallback_wait_limit_s: float | None
    bill_survivors: bool
    spot_nodes: int
    mtbf_s: float  # of the whole job: 1 / (Σ 1/mean lifetime + correlated rate)
    fit: Any | None  # the hazard fit behind a data-driven lifetime law (reported, not simulated)
    trace: PriceCurve | None
    trace_scale: float  # trace price × scale = price of this scenario's instance
    availability: Capacity | None = None  # replayed capacity: reclaims when it falls below the spot nodes in use
    availability_offset_s: float | None = None  # where every replica starts the replay (None: random per replica)
    capacity_wait_mean_s: float = 0.0  # mean wait for capacity after a trace reclaim (for work estimates)
    hysteresis_s: float | None = None  # uniform_progress: work ahead of the line before returning to spot


@dataclass(frozen=True)
class CheckpointPlan:
    """When checkpoints are taken and where they live."""

    policy: str  # none | fixed | young | daly | optimal | on_notice
    interval_s: float | None = None  # fixed: training progress between checkpoints
    every_steps: int | None = None  # fixed: optimizer steps between checkpoints
    asynchronous: bool = False  # block only for the device→host snapshot, persist in the background
    on_notice: bool = False  # also an emergency checkpoint on a spot notice
    local: bool = False  # on the node's local disk: lost with a reclaimed node
    sharded: bool = False  # ZeRO: every node holds a shard (else rank 0 holds it)
    keep_last: int = 2
    override_s: float | None = None  # the interval chosen by optimisation (policy optimal, or a sweep)

    @property
    def emergency(self) -> bool:
        return self.on_notice or self.policy == "on_notice"


@dataclass(frozen=True)
class Overheads:
    """Time before and between training phases (seconds)."""

    queue: Sampler | None = None
    boot_s: float = 0.0
    image_pull_s: float = 0.0
    init_s: float = 0.0
    rendezvous_s: float = 0.0

    @property
    def start_s(self) -> float:
        """A node from launch to ready: boot, image pull, init."""
        return self.boot_s + self.image_pull_s + self.init_s


@dataclass(frozen=True)
class Billing:
    """What is billed besides instance time."""

    min_billed_s: float = 60.0  # per instance start (AWS Linux: 60 s)
    storage_usd_per_gb_month: float = 0.023
    egress_bytes: float = 0.0
    egress_usd_per_gb: float = 0.09


@dataclass(frozen=True)
class RunSpec:
    """A resolved run: the job, spot capacity, checkpoints, overheads, billing and limits."""

    name: str
    job: Job
    checkpoint: CheckpointPlan
    overhead: Overheads = Overheads()
    billing: Billing = Billing()
    spot: SpotSetup | None = None
    fidelity: str = "two_level"  # two_level | step
    max_wall_s: float = 90 * 86400.0  # a replica still running is stopped and counted unfinished
    deadline_s: float | None = None  # from submission; the deadline-aware recovery policies steer by it

    @property
    def notes(self) -> tuple[str, ...]:
        return self.job.notes

    @property
    def warnings(self) -> tuple[str, ...]:
        return self.job.warnings

    def with_interval(self, seconds: float | None) -> RunSpec:
        """The same run with the checkpoint interval (training progress) set by optimisation."""
        return replace(self, checkpoint=replace(self.checkpoint, override_s=seconds))
