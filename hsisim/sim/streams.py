"""Named random streams of one replica: each source of randomness draws from its own generator.

A replica's ``SeedSequence`` is spawned into the streams in the order of ``NAMES`` (so the same
seed gives the same numbers, and adding a stream at the end changes none of the others).
Lifetimes stay a ``SeedSequence``: every launched node spawns its own generator from it, so
candidates compared with common random numbers see the same lifetimes node for node.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NAMES = ("queue", "steps", "lifetimes", "correlated", "delays", "trace", "availability")


@dataclass(frozen=True)
class Streams:
    queue: np.random.Generator  # the wait for capacity before the job starts
    steps: np.random.Generator  # step-time noise of training segments
    lifetimes: np.random.SeedSequence  # spot node lifetimes, one child per launched node
    correlated: np.random.Generator  # zone-wide reclaim events
    delays: np.random.Generator  # waits for replacement capacity
    trace: np.random.Generator  # the offset at which a price trace is replayed
    availability: np.random.Generator  # the offset at which an availability trace is replayed

    @classmethod
    def spawn(cls, seed: np.random.SeedSequence) -> Streams:
        """The streams of the replica whose seed is ``seed``."""
        queue, steps, lifetimes, correlated, delays, trace, availability = seed.spawn(len(NAMES))
        rng = np.random.default_rng
        return cls(rng(queue), rng(steps), lifetimes, rng(correlated), rng(delays), rng(trace), rng(availability))
