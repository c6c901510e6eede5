"""The paired probe: a real batch build and a training step, alternated as a training loop alternates them."""

from __future__ import annotations

import functools
import statistics
import time
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from hsisim.analytic.compute import fit_line
from hsisim.calibration.collectives import (
    CommClock,
    after_last_handover,
    compute_difference,
    rank_difference,
    ratio_quantiles,
)
from hsisim.calibration.probes import Net, Timer, forever, make_training, training_step
from hsisim.distributions import gamma_cv_for_mean_difference


class PairedProbe:
    """Alternates a real batch build (``DataLoader``, no workers) and a training step on a fixed batch.

    Each is timed on its own, and each runs with the caches the other leaves behind, as they do in a
    training loop: the per-sample cost "under load" rather than in isolation. Rounds can be spread
    over time (``round``) so that a shared machine's slow and fast moments weigh on the probe and on
    a run measured between the rounds alike.
    """

    def __init__(self, net: Net, device: torch.device, ds: Dataset, batches: list[int],
                 optimizer: str = "adam", amp: bool = True, handover: bool = False, ddp: bool = False) -> None:
        self.device, self.batches = device, batches
        self.model, self.opt, self.scaler, self.dtype = make_training(net, device, optimizer, amp)
        # ddp (CPU processes in an initialised group): the training step synchronises its gradients as
        # the real run's does, and its computation is the step minus the all-reduce it waited for
        self.clock: CommClock | None = None
        if ddp:
            from torch.nn.parallel import DistributedDataParallel

            self.model = DistributedDataParallel(self.model)
            self.clock = CommClock(self.model)
        self.marks: list[tuple[float, float]] = []  # (hand-over, completion) of the largest batch's all-reduces
        self.inputs = {b: net.batch(b, device) for b in batches}
        self.loaders = {b: iter(forever(DataLoader(ds, batch_size=b, shuffle=True, num_workers=0, drop_last=True)))
                        for b in batches}
        self.build: dict[int, list[float]] = {b: [] for b in batches}
        self.step: dict[int, list[float]] = {b: [] for b in batches}
        # one worker per batch size, always ahead: what receiving its finished batch costs
        self.workers = {b: iter(forever(DataLoader(ds, batch_size=b, shuffle=True, num_workers=1, prefetch_factor=2,
                                                    persistent_workers=True, drop_last=True)))
                        for b in batches} if handover else {}
        self.handover: dict[int, list[float]] = {b: [] for b in self.workers}
        self.timer = Timer(device)

    def round(self, pairs: int = 3, warmup: int = 1) -> None:
        for b in self.batches:
            x, y = self.inputs[b]
            for i in range(warmup + pairs):
                t0 = time.perf_counter()
                next(self.loaders[b])
                t_build = time.perf_counter() - t0
                t_step = self.timer(functools.partial(training_step, self.model, self.opt, x, y, self.scaler,
                                                      self.dtype), 1, 0)[0]
                mark = self.clock.take() if self.clock is not None else None
                if mark is not None:
                    t_step -= max(0.0, mark[1] - mark[0])
                t_hand = 0.0
                if self.workers:
                    t0 = time.perf_counter()
                    next(self.workers[b])
                    t_hand = time.perf_counter() - t0
                if i >= warmup:
                    self.build[b].append(t_build)
                    self.step[b].append(t_step)
                    if mark is not None and b == self.batches[-1]:
                        # the all-reduce after the largest batch's computation: the threads that carry
                        # it sleep as long as in training at that micro-batch (after a shorter
                        # computation they are more often still awake, and it is faster)
                        self.marks.append(mark)
                    if self.workers:
                        self.handover[b].append(t_hand)

    def fits(self) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None]:
        """(compute, batch build, hand-over or None) fits a + c·b over the medians per batch size."""
        out: list[dict[str, Any] | None] = []
        for table in (self.step, self.build, self.handover):
            if not table:
                out.append(None)
                continue
            pts = [{"batch": b, "median_s": statistics.median(ts), "n": len(ts)} for b, ts in table.items()]
            a, c, r2 = fit_line([p["batch"] for p in pts], [p["median_s"] for p in pts])
            # the spread as the ranks feel it at a barrier: the standard deviation, tails included (a robust
            # spread would hide the shared machine's stalls that make one rank wait for another)
            cvs = [statistics.stdev(ts) / statistics.fmean(ts) for ts in table.values() if len(ts) > 1]
            out.append({"a_s": a, "c_s_per_sample": c, "r2": r2, "cv": statistics.median(cvs) if cvs else 0.0,
                        "points": pts})
        comp, build = out[0], out[1]
        assert comp is not None and build is not None
        if self.clock is not None:
            # every rank ran the same pairs in step: the difference between ranks is what makes
            # a rank wait at the barrier (what slows all of them at once makes none wait: its
            # typical part is in the medians, its rare long stalls in neither); the
            # simulator draws ranks independently from a gamma, so the cv is the gamma's whose
            # mean absolute difference is the measured one, and its ranks wait as long
            import torch.distributed as dist

            everyone: list[Any] = [None] * dist.get_world_size()
            dist.all_gather_object(everyone, {"step": self.step, "build": self.build,
                                              "handed": [h for h, _ in self.marks]})
            big = self.batches[-1]
            at_micro = comp["a_s"] + comp["c_s_per_sample"] * big
            if self.marks and at_micro > 0:
                # the computation: from the hand-over times at the largest batch (the micro-batch),
                # what the barrier waits for, less the builds before them
                diff = compute_difference([r["handed"] for r in everyone], [r["build"][big] for r in everyone])
                between = gamma_cv_for_mean_difference(diff / at_micro)
            else:
                between = _between_by_batch(self.step, [r["step"] for r in everyone])
            comp["cv_total"], comp["cv"] = comp["cv"], between
            between = _between_by_batch(self.build, [r["build"] for r in everyone])
            build["cv_total"], build["cv"] = build["cv"], between
        return comp, build, out[2]

    def allreduce(self) -> dict[str, Any] | None:
        """The gradients' all-reduce in the probe's DDP steps (every rank calls it): from the last rank's
        hand-over to the completion, its mean, spread and shape (quantiles of time / mean)."""
        if self.clock is None or not self.marks:
            return None
        ts = after_last_handover([h for h, _ in self.marks], [d for _, d in self.marks])[1]
        grad_bytes = sum(4 * p.numel() for p in self.model.parameters() if p.requires_grad)
        mean = float(ts.mean())
        return {"bytes": int(grad_bytes), "mean_s": mean, "median_s": float(np.median(ts)), "n": len(ts),
                "cv": float(ts.std(ddof=1) / mean) if mean > 0 and len(ts) > 1 else 0.0,
                "ratio_quantiles": ratio_quantiles(ts / mean) if mean > 0 else [],
                "method": "DDP training steps of the model on a fixed batch, timed by a communication hook"}


def _between_by_batch(mine: dict[int, list[float]], tables: list[dict[int, list[float]]]) -> float:
    """The between-rank cv from the ranks' times pair by pair (``tables[r][b]``: rank r's times at batch
    b; ``mine``: this rank's, whose mean each difference is taken over), the median over batch sizes."""
    return statistics.median(
        gamma_cv_for_mean_difference(rank_difference([t[b] for t in tables]) / statistics.fmean(ts))
        for b, ts in mine.items() if ts)
