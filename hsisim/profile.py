"""Calibration profiles (JSON): one pydantic model that ``hsisim calibrate`` writes and scenarios read.

A profile holds a ``device`` block (kind, name, the catalog GPU it corresponds to, core count), a
``compute`` fit t(b) = a + c·b (on the CPU one per training-thread count, because loader workers
and the training process share the cores), optionally ``data`` (the batch build of the real
``DataLoader`` per preprocessing mode), ``checkpoint`` bandwidths (and the storage kind they were
measured on) and ``collectives`` (α per hop and bus bandwidth of an all-reduce between processes of
this machine), and a ``fingerprint``. Fields the reader does not use (the probes' raw points, the
fingerprint) are kept as they are. Reading needs no torch.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from hsisim.analytic.compute import LinearCost, fit_line
from hsisim.errors import HsisimInputError

FORMAT = "hsisim-calibration/1"
NonNegative = Annotated[float, Field(ge=0)]
Positive = Annotated[float, Field(gt=0)]


class _Part(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)


class Point(_Part):
    batch: Positive
    median_s: NonNegative


class LineFit(_Part):
    """t(b) = a + c·b seconds for b samples, with the spread (cv) of single measurements."""

    a_s: NonNegative
    c_s_per_sample: float
    cv: NonNegative = 0.0
    points: list[Point] | None = None

    @model_validator(mode="after")
    def _no_negative_time(self) -> LineFit:
        if self.c_s_per_sample < 0:  # profiles written before fits were kept non-negative: refit their points
            a, c, _ = fit_line([p.batch for p in self.points], [p.median_s for p in self.points]) \
                if self.points else (self.a_s, 0.0, 1.0)
            object.__setattr__(self, "a_s", a)
            object.__setattr__(self, "c_s_per_sample", c)
        if self.a_s + self.c_s_per_sample <= 0:
            raise ValueError("a batch must take some time (a_s + c_s_per_sample > 0)")
        return self

    @property
    def cost(self) -> LinearCost:
        return LinearCost(self.a_s, self.c_s_per_sample, self.cv)


class Contention(_Part):
    """A CPU training step's slowdown beside k busy single-core competitors (index k; [0] = 1)."""

    threads: Annotated[int, Field(ge=1)]
    # bounded as the profile's other ratios are: the probe measures above 100 for a step of a millisecond or
    # less (two spinning competitors beside its two threads on the 2-core VM, micro-batch 8), and a bound of
    # 100 made calibrate and validate fail on their own measurement
    slowdown: list[Annotated[float, Field(ge=1.0, le=1000.0)]] = Field(min_length=2)


class ThreadFits(_Part):
    """Compute on a CPU: one fit per training-thread count, and how a step shares the cores."""

    by_threads: dict[int, LineFit] = Field(min_length=1)
    contention: Contention | None = None
    # training processes that computed at once while the fits were measured (validate's DDP probe
    # times every rank together): their steps already include sharing the cores with each other
    processes: Annotated[int, Field(ge=1)] = 1


class Device(_Part):
    kind: Literal["cpu", "cuda"] = "cuda"
    name: str | None = None
    catalog_gpu: str | None = None
    cores: Annotated[int, Field(ge=1)] | None = None  # logical CPUs (os.cpu_count)
    torch_threads: Annotated[int, Field(ge=1)] | None = None  # PyTorch's default intra-op threads there


Ratio = Annotated[float, Field(gt=0, le=1000.0)]
# the steps a loop's pace is read over, block by block, where a build runs threads of its own: the user's getitem9
# loop held one of two paces for tens of seconds, and its 10-step blocks read 244-479 ms a step where its 300-step
# loops read 313-334 ms (docs/model.md, "A build that runs threads of its own")
BLOCK = 10
# the fastest and the slowest BLOCK-step block of a loop's steps over the rounds (seconds a step, its wait
# included); absent where the loops gave fewer than two blocks, and from profiles written before 0404303
# (2026-12-06)
Blocks = Annotated[list[Positive], Field(min_length=2, max_length=2)]
# how many blocks ``block_step_s`` is the range of (absent from profiles written before 25e447e, 2026-12-06): a
# --quick calibration's loops run one each
BlockCount = Annotated[int, Field(ge=2)]


def _check_blocks(blocks: list[float] | None, n: int | None) -> None:
    if blocks is not None and blocks[0] > blocks[1]:
        raise ValueError("block_step_s: the fastest block's step, then the slowest's")
    if n is not None and blocks is None:
        raise ValueError("block_n: the count of the blocks block_step_s ranges over, which is missing")


class Pace(_Part):
    """The loop without workers at one of two paces: its mean build and step over the steps that ran at it."""

    build_s: Positive
    step_s: Positive
    steps: Annotated[int, Field(ge=1)]

    @property
    def loop_s(self) -> float:
        """A step of the loop at this pace, its build included."""
        return self.build_s + self.step_s


class InlinePace(_Part):
    """No workers: a batch build and the step after it in a DataLoader loop in one process, as a plain
    training loop runs: their mean times (at the probe's batch) and each over its time alone. ``near`` and
    ``far``: where the loop's steps fell in two paces (``calibration.state.two``; absent from profiles written
    before 2026-12-07), each pace's build and step."""

    build_ratio: Ratio
    step_ratio: Ratio
    build_s: Positive
    step_s: Positive
    block_step_s: Blocks | None = None
    block_n: BlockCount | None = None
    near: Pace | None = None
    far: Pace | None = None

    @model_validator(mode="after")
    def _blocks(self) -> InlinePace:
        _check_blocks(self.block_step_s, self.block_n)
        if (self.near is None) != (self.far is None):
            raise ValueError("near and far: the loop's two paces, both or neither")
        if self.near is not None and self.far is not None and self.near.loop_s >= self.far.loop_s:
            raise ValueError("near and far: the near pace's build and step take less than the far one's")
        return self


class MachineState(_Part):
    """The machine's state for threads that hand each other work, read between calibration's loops
    (``calibration.state.reading``): how many readings over how long, and where they fell in two states, how many
    read the slow (far) one and each state's median; where they did not, ``near_s`` is all readings' median."""

    readings: Annotated[int, Field(ge=2)]
    span_s: NonNegative
    near_s: Positive
    far: Annotated[int, Field(ge=1)] | None = None
    far_s: Positive | None = None

    @model_validator(mode="after")
    def _states(self) -> MachineState:
        if (self.far is None) != (self.far_s is None):
            raise ValueError("far and far_s: how many readings read the slow state and their median, both or neither")
        if self.far is not None and self.far >= self.readings:
            raise ValueError("far: fewer readings than there were in all (else the readings read one state)")
        if self.far_s is not None and self.far_s <= self.near_s:
            raise ValueError("far_s: the slow state's median, over the near state's (near_s)")
        return self

    @property
    def far_share(self) -> float | None:
        """The share of readings in the slow state, where they fell in two states."""
        return None if self.far is None else self.far / self.readings


class WorkerPace(_Part):
    """k workers feeding a training step: each one's slowdown as they meet (see ``interference_probe``)."""

    workers: Annotated[int, Field(ge=1)]
    step_ratio: Ratio
    build_ratio_idle: Ratio
    build_ratio_busy: Ratio
    # the mean wait for a batch a worker had finished before the training process asked (at ``batch``);
    # absent from profiles written before it was measured
    handover_s: NonNegative | None = None
    handover_n: Annotated[int, Field(ge=1)] | None = None  # how many waits it is the mean of
    # the step's slowdown over all of it with k workers, where builds beside it could not explain it
    # (then ``step_ratio`` is 1; under 1 where the machine's pace moved between the loop and the step
    # alone); exactly 1 where they did. See ``Interference._before_step_base`` for profiles without it
    step_base: Annotated[float, Field(gt=0.0, le=1000.0)] = 1.0
    block_step_s: Blocks | None = None
    block_n: BlockCount | None = None

    @model_validator(mode="after")
    def _blocks(self) -> WorkerPace:
        _check_blocks(self.block_step_s, self.block_n)
        return self

    @property
    def explained(self) -> bool:
        """Whether the builds beside the step explained its slowdown (``step_ratio``); else ``step_base``,
        whatever its value, is the step's ratio over all of it."""
        return self.step_base == 1.0


# a batch build alone that keeps this many cores busy, torch at one thread as in a worker, runs threads of
# its own (a per-patch PCA at OpenBLAS's 2 threads kept 2.0 busy, at one 1.0, on the 2-core VM)
THREADED_BUILD = 1.3
# where a build runs BLAS threads of its own, calibration also measures its loops with the BLAS limited to this many
# threads (``DataMode.interference_one_blas``): the run ``hsisim run``'s warning advises (``dataset.blas_threads``)
BLAS_LEVER = 1


class WorkerBuild(_Part):
    """A batch build alone as a DataLoader worker runs it (torch at one thread; see ``calibration.threads``)."""

    build_s: Positive  # its time, at the interference probe's batch
    cores: Positive  # the cores it keeps busy: its process's CPU time over its wall time
    # with the BLAS libraries limited to one thread, where one ran more (``blas`` names them)
    one_blas_thread_s: Positive | None = None
    blas: list[str] = Field(default_factory=list)
    # the threads each BLAS library loaded ran, by name and version: empty where none was loaded (absent where
    # none was loaded in profiles written before 2026-12-07, and from every profile written before 520b717)
    blas_threads: dict[str, Annotated[int, Field(ge=1)]] | None = None

    @model_validator(mode="after")
    def _both(self) -> WorkerBuild:
        if (self.one_blas_thread_s is None) != (not self.blas):
            raise ValueError("one_blas_thread_s and blas: both (the BLAS libraries limited to one thread, and the "
                             "build's time then) or neither")
        return self

    @property
    def threaded(self) -> bool:
        """Whether the build runs threads of its own: it kept ``THREADED_BUILD`` cores or more busy."""
        return self.cores >= THREADED_BUILD

    def limited(self, cores: int) -> dict[str, int]:
        """The BLAS libraries that ran fewer threads than ``cores`` (the machine's) as the build was measured."""
        return {name: n for name, n in (self.blas_threads or {}).items() if n < cores}


class Interference(_Part):
    """How the user's batch builds and a training step slow each other on the machine that measured it."""

    threads: Annotated[int, Field(ge=1)]
    cores: Annotated[int, Field(ge=1)]
    batch: Annotated[int, Field(ge=1)]
    step_alone_s: Positive  # a training step alone, at ``batch``
    build_alone_s: Positive  # a batch built alone (back to back, as a worker builds), at ``batch``
    inline: InlinePace
    workers: list[WorkerPace] = Field(min_length=1)
    # the rounds, the seconds from the first's start to the last's, and how far they disagree (the
    # largest standard error of a build, a step or a loop's step over them, relative to its mean);
    # absent from profiles written before calibration recorded them
    rounds: Annotated[int, Field(ge=1)] | None = None
    span_s: NonNegative | None = None
    rounds_se: NonNegative | None = None
    worker_build: WorkerBuild | None = None  # absent from profiles written before f4dfbe6 (2026-12-06)
    # read between the loops where the build runs threads of its own, at the BLAS libraries' own threads
    # (absent from profiles written before 2026-12-07)
    machine_state: MachineState | None = None

    def row(self, workers: int) -> WorkerPace:
        """The paces measured with this many workers (at least 1); beyond the measured counts, the most measured."""
        return self.workers[min(workers, len(self.workers)) - 1]

    @model_validator(mode="after")
    def _counts(self) -> Interference:
        if [w.workers for w in self.workers] != list(range(1, len(self.workers) + 1)):
            raise ValueError("workers: one entry per worker count, 1, 2, 3 ... in order")
        for w in self.workers:
            self._before_step_base(w)
        return self

    def _before_step_base(self, w: WorkerPace) -> None:
        """Profiles written before ``step_base`` stored the loop's whole-step slowdown as ``step_ratio``
        where the builds could not explain it (the ratio then equals the loop's step, less its wait, over
        the step alone, which they kept): read it as the whole-step slowdown it is."""
        loop = w.model_extra or {}
        if "step_base" in w.model_fields_set or not {"loop_step_s", "loop_wait_s"} <= loop.keys():
            return
        whole = max(1.0, (float(loop["loop_step_s"]) - float(loop["loop_wait_s"])) / self.step_alone_s)
        if w.step_ratio > 1.0 and abs(w.step_ratio - whole) <= 1e-9 * whole:
            object.__setattr__(w, "step_base", w.step_ratio)
            object.__setattr__(w, "step_ratio", 1.0)


class DataMode(_Part):
    batch_build: LineFit
    handover: LineFit | None = None
    patch: Annotated[int, Field(ge=1)] | None = None
    out_bands: Annotated[int, Field(ge=1)] | None = None
    dataset_factory: str | None = None
    per_sample_cv: NonNegative = 0.0
    interference: Interference | None = None
    # the same loops with every BLAS library limited to ``BLAS_LEVER`` thread, in the training process and in each
    # worker: measured where the build ran BLAS threads of its own (absent from profiles written before 2026-12-07)
    interference_one_blas: Interference | None = None

    @model_validator(mode="after")
    def _one_blas(self) -> DataMode:
        one, it = self.interference_one_blas, self.interference
        if one is None:
            return self
        if it is None:
            raise ValueError("interference_one_blas: the loops at one BLAS thread go with the loops at the libraries' "
                             "own (interference)")
        for key in ("threads", "cores", "batch"):
            if getattr(one, key) != getattr(it, key):
                raise ValueError(f"interference_one_blas: {key} {getattr(one, key)}, where interference has "
                                 f"{getattr(it, key)} (one calibration measures both)")
        return self


class DataSection(_Part):
    modes: dict[str, DataMode] = Field(default_factory=dict)


class MemorySection(_Part):
    fragmentation: Annotated[float, Field(ge=1.0, le=4.0)] | None = None  # reserved / allocated, measured


class CheckpointSection(_Part):
    write_bw_bytes_per_s: Positive
    read_bw_bytes_per_s: Positive
    storage: str = "local_nvme"  # the kind of storage the probe wrote to (its folder's disk)


class InTraining(_Part):
    bytes: Positive
    mean_s: Positive
    ratio_quantiles: list[NonNegative] | None = None


class Collectives(_Part):
    alpha_per_hop_s: NonNegative
    bus_bw_bytes_per_s: Positive
    cv: NonNegative = 0.0
    ratio_quantiles: list[NonNegative] | None = None
    in_training: InTraining | None = None
    world_size: Annotated[int, Field(ge=1)] | None = None


class ProfileData(_Part):
    """The JSON document of a calibration profile (format ``hsisim-calibration/1``)."""

    format: str = FORMAT
    source: Literal["measured", "spec"] = "measured"
    device: Device = Field(default_factory=Device)
    compute: ThreadFits | LineFit
    data: DataSection | None = None
    memory: MemorySection | None = None
    checkpoint: CheckpointSection | None = None
    collectives: Collectives | None = None
    model: dict[str, Any] = Field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The profile as its JSON object."""
        return self.model_dump(mode="json", exclude_none=True)

    def write(self, path: str | Path) -> Path:
        """Write the profile to ``path`` (atomically, creating its folder); returns the path."""
        from hsisim.writer import write_json

        out = Path(path)
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            write_json(out, self.to_json())
        except OSError as exc:
            raise HsisimInputError(f"cannot write the profile to {out}: {exc.strerror or exc}") from None
        return out

    @model_validator(mode="after")
    def _quantiles(self) -> ProfileData:
        c = self.collectives
        for q in (c.ratio_quantiles if c else None, c.in_training.ratio_quantiles if c and c.in_training else None):
            if q is not None:
                normalised(q)
        return self


def normalised(q: list[float]) -> tuple[float, ...]:
    """Quantiles of time / mean rescaled so that drawing them (linear interpolation) keeps the mean."""
    if len(q) < 2 or any(b < a for a, b in itertools.pairwise(q)):
        raise ValueError("ratio_quantiles: need two or more non-decreasing values >= 0")
    mean = sum((a + b) / 2 for a, b in itertools.pairwise(q)) / (len(q) - 1)
    if mean <= 0:
        raise ValueError("ratio_quantiles: all zero")
    return tuple(v / mean for v in q)


class Profile:
    """A profile as the resolver uses it: fits as ``LinearCost``, measured parts by name."""

    def __init__(self, path: str, doc: ProfileData) -> None:
        self.path, self.doc = path, doc
        self.source, self.model = doc.source, doc.model
        self.device_kind, self.catalog_gpu, self.cores = doc.device.kind, doc.device.catalog_gpu, doc.device.cores
        self.torch_threads = doc.device.torch_threads
        comp = doc.compute
        self.compute = {t: f.cost for t, f in comp.by_threads.items()} if isinstance(comp, ThreadFits) \
            else {0: comp.cost}
        self.contention = comp.contention if isinstance(comp, ThreadFits) else None
        self.compute_processes = comp.processes if isinstance(comp, ThreadFits) else 1
        self.data = {mode: {"build": d.batch_build.cost, "handover": d.handover.cost if d.handover else None,
                            "patch": d.patch, "out_bands": d.out_bands, "dataset_factory": d.dataset_factory,
                            "per_sample_cv": d.per_sample_cv, "interference": d.interference,
                            "interference_one_blas": d.interference_one_blas}
                     for mode, d in (doc.data.modes if doc.data else {}).items()}
        ck, coll = doc.checkpoint, doc.collectives
        self.checkpoint = {"write_bw_bytes_per_s": ck.write_bw_bytes_per_s,
                           "read_bw_bytes_per_s": ck.read_bw_bytes_per_s} if ck else None
        self.checkpoint_storage = ck.storage if ck else None
        self.collectives = {"alpha_per_hop_s": coll.alpha_per_hop_s, "bus_bw_bytes_per_s": coll.bus_bw_bytes_per_s,
                            "cv": coll.cv} if coll else None
        self.allreduce_quantiles = normalised(coll.ratio_quantiles) if coll and coll.ratio_quantiles else ()
        own = coll.in_training if coll else None
        # the model's own gradient all-reduce measured in DDP training steps: (bytes, mean seconds, quantiles)
        self.allreduce_in_training = (own.bytes, own.mean_s, normalised(own.ratio_quantiles)
                                      if own.ratio_quantiles else ()) if own else None
        self.allreduce_world = coll.world_size if coll else None
        self.fragmentation = doc.memory.fragmentation if doc.memory else None

    def compute_fit(self, threads: int | None) -> tuple[LinearCost, int]:
        """The compute fit for ``threads`` training threads (nearest measured), and the count used."""
        if threads is None or list(self.compute) == [0]:
            key = max(self.compute)
            return self.compute[key], key
        key = nearest_count(self.compute, threads)
        return self.compute[key], key


def nearest_count(counts: Iterable[int], threads: int) -> int:
    """The measured thread count nearest ``threads`` (the larger on a tie)."""
    return min(counts, key=lambda t: (abs(t - threads), -t))


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a profile can hold")


def document(data: dict[str, Any], where: str = "profile") -> ProfileData:
    """Validate a profile's JSON object (as written, or as read back)."""
    try:
        return ProfileData.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"] if not str(p).startswith(("function-", "ThreadFits", "LineFit")))
        raise ValueError(f"{where}: {field}: {err['msg'].removeprefix('Value error, ')}") from None


def load_profile(path: str | Path) -> Profile:
    """Read and check a profile; bad files are input errors naming the ``calibration`` key."""
    p = Path(path)
    if not p.is_file():
        raise HsisimInputError(f"calibration profile not found: {p}", key="calibration")
    try:
        raw = json.loads(p.read_text(encoding="utf-8"), parse_constant=_no_constant)
        if not isinstance(raw, dict):
            raise ValueError("not a JSON object")
        return Profile(str(p), document(raw, "calibration profile"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise HsisimInputError(f"calibration profile {p} is not a valid profile: {exc}", key="calibration") from None
    except OSError as exc:
        raise HsisimInputError(f"calibration profile {p} cannot be read: {exc.strerror or exc}",
                               key="calibration") from None
