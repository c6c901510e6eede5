"""The sections of a scenario (pydantic v2, frozen): dataset, model, training, loader, cluster, spot,
checkpoint, overhead, cost, memory, timings, simulation.

Units are normalised here, once: every duration is seconds, every size bytes, every bandwidth
bytes/s, every price USD. Unknown keys are errors; numbers are finite; counts are whole numbers.
This module never imports SimPy.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from hsisim import units
from hsisim.distributions import Bathtub, Constant, Distribution, Empirical, Exponential, Gamma, LogNormal, Weibull
from hsisim.errors import HsisimInputError
from hsisim.fields import Bytes, Count, Flag, Number, Seconds


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, allow_inf_nan=False)


class DatasetSpec(_Section):
    """Which scene, how patches are cut and where they are read from (or the user's own Dataset)."""

    name: str | None = Field(default=None, description="a catalog dataset")
    factory: str | None = Field(default=None, description="MODULE:CALLABLE or FILE.py:CALLABLE returning a Dataset")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of the factory")
    patch: Count | None = Field(default=None, ge=1, le=63, description="spatial patch side in pixels")
    pca_components: Count | None = Field(default=None, ge=1, description="bands after PCA, for PCA-input models")
    storage: Literal["in_memory", "memmap", "envi", "hdf5", "zarr", "network_fs"] = "memmap"
    preprocess: Literal["offline", "getitem"] = Field(
        default="offline", description="offline: PCA and normalisation precomputed; getitem: done per sample")
    augmentation: Literal["none", "flip_rotate"] = "none"
    train_fraction: Number = Field(default=1.0, gt=0, le=1, description="share of labelled pixels used for training")
    blas_threads: Count | None = Field(default=None, ge=1, le=1024, description=(
        "threads of each BLAS library (numpy's OpenBLAS, MKL) the Dataset's code runs on, in the training process "
        "and in each DataLoader worker (OPENBLAS_NUM_THREADS / MKL_NUM_THREADS, or threadpoolctl.threadpool_limits "
        "in worker_init_fn); default: the library's own, one per core. Predicted from a profile measured at that "
        "count: calibration measures 1 too where a build runs BLAS threads of its own"))

    @model_validator(mode="after")
    def _source(self) -> DatasetSpec:
        if (self.name is None) == (self.factory is None):
            raise ValueError("give exactly one of 'name' (a catalog dataset) or 'factory' (your Dataset)")
        if self.name is not None and self.patch is None:
            raise ValueError("a catalog dataset needs 'patch'")
        if self.kwargs and self.factory is None:
            raise ValueError("'kwargs' go with a 'factory'")
        return self


class ModelSpec(_Section):
    name: str | None = Field(default=None, description="a catalog model")
    factory: str | None = Field(default=None, description="MODULE:CALLABLE or FILE.py:CALLABLE returning a Module")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of the factory")
    precision: Literal["fp32", "tf32", "amp_fp16", "amp_bf16", "fp16", "bf16"] = "fp32"
    optimizer: Literal["adam", "adamw", "sgd"] = "adam"
    activation_checkpointing: Flag = False
    zero_stage: Count = Field(default=0, ge=0, le=3)

    @model_validator(mode="after")
    def _source(self) -> ModelSpec:
        if (self.name is None) == (self.factory is None):
            raise ValueError("give exactly one of 'name' (a catalog model) or 'factory' (your module)")
        if self.kwargs and self.factory is None:
            raise ValueError("'kwargs' go with a 'factory'")
        return self


class TrainingSpec(_Section):
    epochs: Count | None = Field(default=None, ge=1)
    steps: Count | None = Field(default=None, ge=1, description="optimizer steps, instead of epochs")
    global_batch: Count = Field(ge=1)
    micro_batch: Count = Field(ge=1)
    repeats: Count = Field(default=1, ge=1, description="times each training sample is visited per epoch")
    threads: Count | None = Field(default=None, ge=1, le=1024, description=(
        "intra-op threads of each training process (torch.set_num_threads / OMP_NUM_THREADS); default: "
        "PyTorch's, one per physical core, or 1 with several processes on a node (torchrun's OMP_NUM_THREADS=1)"))

    @model_validator(mode="after")
    def _length(self) -> TrainingSpec:
        if (self.epochs is None) == (self.steps is None):
            raise ValueError("give exactly one of 'epochs' or 'steps'")
        return self


class LoaderSpec(_Section):
    num_workers: Count = Field(default=0, ge=0, le=256)
    prefetch_factor: Count = Field(default=2, ge=1, le=64)
    pin_memory: Flag = False
    persistent_workers: Flag = False


class ClusterSpec(_Section):
    instance: str
    nodes: Count = Field(default=1, ge=1, le=4096)
    market: Literal["on_demand", "spot"] = "on_demand"
    on_demand_nodes: Count = Field(default=0, ge=0, description="with market spot: nodes kept on-demand (mixed)")
    collective: Literal["ring", "tree", "hierarchical"] = "ring"

    @model_validator(mode="after")
    def _mixed(self) -> ClusterSpec:
        if self.on_demand_nodes > self.nodes:
            raise ValueError(f"on_demand_nodes ({self.on_demand_nodes}) exceeds nodes ({self.nodes})")
        return self


class AdvisorHazard(_Section):
    """AWS Spot Instance Advisor 'frequency of interruption' band, mapped to a constant hazard."""

    dist: Literal["advisor"]
    band: Literal["<5%", "5-10%", "10-15%", "15-20%", ">20%"]


class LifetimesHazard(_Section):
    """Observed spot lifetimes (CSV: lifetime_hours, status), fitted by censored maximum likelihood."""

    dist: Literal["lifetimes"]
    file: str
    fit: Literal["exponential", "weibull", "bathtub", "empirical"] = "weibull"
    where: dict[str, str] = Field(default_factory=dict, description="keep rows whose columns equal these values")


Hazard = Annotated[
    Constant | Exponential | LogNormal | Weibull | Gamma | Empirical | Bathtub | AdvisorHazard | LifetimesHazard,
    Field(discriminator="dist"),
]


class AvailabilitySpec(_Section):
    """Replayed spot capacity: how many instances of the cluster's type could be had, over time."""

    trace: str = Field(description="spot-traces JSON (metadata.gap_seconds, data) or CSV (t_s or timestamp_utc, "
                                   "available)")
    offset: Seconds | None = Field(default=None, description="where every replica starts the replay (none: a "
                                                             "random offset per replica)")


DEADLINE_POLICIES = ("deadline_safety_net", "uniform_progress")


class SpotSpec(_Section):
    hazard: Hazard | None = Field(default=None, description="lifetime law of each spot node, from its boot")
    max_lifetime: Seconds | None = Field(default=None, gt=0, description="every spot node is reclaimed by this age")
    availability: AvailabilitySpec | None = None
    correlated_rate_per_hour: Number = Field(default=0.0, ge=0, description="zone-wide reclaims of every spot node")
    notice: Seconds = 120.0
    replacement_delay: Distribution | None = None
    recovery: Literal["restart", "elastic", "fallback_on_demand", "deadline_safety_net", "uniform_progress"] = \
        "restart"
    fallback_after: Count | None = Field(default=None, ge=1, description="interruptions before moving to on-demand")
    fallback_wait_limit: Seconds | None = Field(default=None, description="capacity wait that triggers on-demand")
    hysteresis: Seconds | None = Field(default=None, description="uniform_progress: work ahead of the line "
                                                                 "before returning to spot")
    bill_survivors: Flag = Field(default=True, description="surviving nodes stay billed while the job waits")

    @model_validator(mode="after")
    def _fallback(self) -> SpotSpec:
        if self.recovery == "fallback_on_demand" and self.fallback_after is None and self.fallback_wait_limit is None:
            raise ValueError("recovery 'fallback_on_demand' needs 'fallback_after' or 'fallback_wait_limit'")
        h = self.hazard
        if isinstance(h, Constant | Exponential | LogNormal | Weibull | Gamma | Empirical) and not h.mean > 0:
            raise HsisimInputError("a spot node's lifetime must be positive on average (a lifetime of 0 would "
                                   "reclaim every node as it boots)", key="spot.hazard")
        return self


    @model_validator(mode="after")
    def _capacity(self) -> SpotSpec:
        if self.hazard is None and self.availability is None:
            raise HsisimInputError("give a lifetime law ('hazard'), an availability trace ('availability'), or both",
                                   key="spot.hazard")
        if self.availability is not None and self.replacement_delay is not None:
            raise HsisimInputError("with an availability trace a replacement waits until the trace shows capacity; "
                                   "remove replacement_delay", key="spot.replacement_delay")
        if self.hysteresis is not None and self.recovery != "uniform_progress":
            raise HsisimInputError("'hysteresis' only applies to recovery 'uniform_progress'", key="spot.hysteresis")
        return self

class CheckpointSpec(_Section):
    policy: Literal["none", "fixed", "young", "daly", "optimal", "on_notice"] = "none"
    on_notice: Flag = Field(default=False, description="also write an emergency checkpoint on a spot notice")
    interval: Seconds | None = Field(default=None, gt=0, description="training progress between checkpoints")
    every_steps: Count | None = Field(default=None, ge=1)
    storage: Literal["local_nvme", "ebs", "s3", "fsx"] = "s3"
    async_: Flag = Field(default=False, alias="async")
    keep_last: Count = Field(default=2, ge=1)
    write_time: Seconds | None = None
    restore_time: Seconds | None = None

    @model_validator(mode="after")
    def _fixed_needs_interval(self) -> CheckpointSpec:
        if self.policy == "fixed" and (self.interval is None) == (self.every_steps is None):
            raise ValueError("policy 'fixed' needs exactly one of 'interval' or 'every_steps'")
        if self.policy != "fixed" and (self.interval is not None or self.every_steps is not None):
            raise ValueError(f"'interval'/'every_steps' only apply to policy 'fixed', not {self.policy!r}")
        return self


class OverheadSpec(_Section):
    boot: Seconds = 0.0
    image_pull: Seconds = 0.0
    init: Seconds = 0.0
    rendezvous: Seconds = 0.0
    queue: Distribution | None = None


def _price(value: Any) -> Any:
    if isinstance(value, dict | Price):  # already a price (a scenario dumped and read again)
        return value
    if value == "trace":
        return {"trace": True}
    if isinstance(value, bool):
        raise ValueError("expected a fraction of on-demand (0.4) or a price ('1.62 USD/h')")
    if isinstance(value, int | float):
        if not 0 < value <= 1:
            raise ValueError(f"a bare number is a fraction of the on-demand price and must be in (0, 1], "
                             f"got {value}; write a price as '{value} USD/h'")
        return {"fraction_of_on_demand": float(value)}
    return {"usd_per_hour": units.usd_per_hour(value)}


class Price(_Section):
    fraction_of_on_demand: Number | None = None
    usd_per_hour: Number | None = None
    trace: Flag = False


class PriceTraceSpec(_Section):
    """A spot price history (CSV: timestamp_utc, spot_price_usd_per_hour), replayed from a random offset."""

    file: str
    availability_zone: str | None = None
    instance_type: str | None = None
    product_description: str | None = None


class CostSpec(_Section):
    spot_price: Annotated[Price, BeforeValidator(_price, json_schema_input_type=str | float)] | None = None
    on_demand_price: Annotated[Price, BeforeValidator(_price, json_schema_input_type=str | float)] | None = None
    storage_usd_per_gb_month: Number = Field(default=0.023, ge=0)
    price_trace: PriceTraceSpec | None = None
    egress: Bytes = Field(default=0.0, description="bytes leaving the cloud (e.g. the final model)")
    egress_usd_per_gb: Number = Field(default=0.09, ge=0)
    min_billed: Seconds = Field(default=60.0, description="minimum billed time per instance start (AWS Linux: 60 s)")


class MemorySpec(_Section):
    on_oom: Literal["fail", "shrink", "activation_checkpointing"] = "fail"
    fragmentation: Number = Field(default=1.1, ge=1.0, le=4.0, description="reserved / allocated")
    workspace: Bytes = 512 * 2**20
    context: Bytes = 400 * 2**20


class TimingsSpec(_Section):
    """Measured step components that replace the modelled ones (per optimizer step)."""

    compute_per_step: Seconds = Field(gt=0)
    data_wait_per_step: Seconds = 0.0
    comm_per_step: Seconds = 0.0
    cv: Number = Field(default=0.0, ge=0, le=2)


class SimulationSpec(_Section):
    replicas: Count = Field(default=1000, ge=1, le=10_000_000)
    seed: Count = Field(default=0, ge=0)
    deadline: Seconds | None = None
    budget_usd: Number | None = Field(default=None, ge=0)
    fidelity: Literal["two_level", "step"] = "two_level"
    max_wall: Seconds = Field(default=90 * 86400.0, gt=0,
                              description="a replica still running after this is stopped and counted unfinished")
