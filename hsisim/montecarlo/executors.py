"""Where chunks of replicas run: in this process, in local worker processes, or on Dask.

Work goes out as chunks ``[start, stop)`` of replica indices, never one task per replica; each
chunk comes back as its rows as soon as it finishes (in completion order, not submission order).
A replica's random streams depend on the seed and its index alone, so the executor and the number
of workers never change a result.
"""

from __future__ import annotations

import abc
import concurrent.futures as cf
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack
from typing import Any

from hsisim.errors import HsisimInputError

EXECUTORS = ("inline", "local", "dask")
Rows = list[dict[str, float]]
ChunkFn = Callable[[Any, int, int, int], Rows]  # (prepared, seed, start, stop) -> rows


def check_executor(executor: str, scheduler: str | None = None) -> None:
    """Bad ``--executor`` / ``--scheduler`` combinations are input errors."""
    if executor not in EXECUTORS:
        raise HsisimInputError(f"{{executor}} must be one of {', '.join(EXECUTORS)}, got {executor!r}")
    if scheduler is not None:
        if executor != "dask":
            raise HsisimInputError(f"{{scheduler}} needs {{executor=dask}} (got {{executor={executor}}})")
        if "://" not in scheduler:
            raise HsisimInputError(f"{{scheduler}} must be an address like tcp://HOST:PORT, got {scheduler!r}")


class Executor(AbstractContextManager["Executor"], abc.ABC):
    """Runs ``fn(prepared, seed, start, stop)`` over chunks; a context manager that owns its pool."""

    @abc.abstractmethod
    def run(self, fn: ChunkFn, prepared: Any, seed: int, bounds: Sequence[tuple[int, int]]
            ) -> Iterator[tuple[int, int, Rows]]:
        """Yield ``(start, stop, rows)`` for every chunk, in the order they finish."""

    def __exit__(self, *exc: object) -> None:
        return None


class InlineExecutor(Executor):
    def run(self, fn: ChunkFn, prepared: Any, seed: int, bounds: Sequence[tuple[int, int]]
            ) -> Iterator[tuple[int, int, Rows]]:
        for a, b in bounds:
            yield a, b, fn(prepared, seed, a, b)


class LocalExecutor(Executor):
    """A process pool, started on first use and kept for every later wave of chunks."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.pool: cf.ProcessPoolExecutor | None = None

    def run(self, fn: ChunkFn, prepared: Any, seed: int, bounds: Sequence[tuple[int, int]]
            ) -> Iterator[tuple[int, int, Rows]]:
        if len(bounds) <= 1:
            yield from InlineExecutor().run(fn, prepared, seed, bounds)
            return
        if self.pool is None:
            self.pool = cf.ProcessPoolExecutor(max_workers=self.workers)
        futures = {self.pool.submit(fn, prepared, seed, a, b): (a, b) for a, b in bounds}
        try:
            for fut in cf.as_completed(futures):
                a, b = futures[fut]
                yield a, b, fut.result()
        finally:
            for fut in futures:
                fut.cancel()

    def __exit__(self, *exc: object) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)


class DaskExecutor(Executor):
    """Dask distributed: a scheduler at ``address``, or a ``LocalCluster`` of ``workers`` processes.

    The prepared job is scattered once to every worker; a chunk whose worker dies is retried on
    another (``retries``), and chunks already returned are kept by the caller's result store.
    """

    def __init__(self, workers: int, address: str | None, retries: int = 3) -> None:
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise HsisimInputError("{executor=dask} needs the dask extra: pip install 'hsisim[dask]'") from None
        self.stack = ExitStack()
        self.retries = retries
        try:
            if address is None:
                cluster = self.stack.enter_context(LocalCluster(
                    n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                    silence_logs=logging.ERROR))
                self.client = self.stack.enter_context(Client(cluster))
            else:
                self.client = self.stack.enter_context(Client(address, timeout="10s"))
        except OSError as exc:
            self.stack.close()
            raise HsisimInputError(f"{{scheduler}} {address}: cannot reach the Dask scheduler ({exc})") from None
        self._scattered: tuple[int, Any] | None = None

    def run(self, fn: ChunkFn, prepared: Any, seed: int, bounds: Sequence[tuple[int, int]]
            ) -> Iterator[tuple[int, int, Rows]]:
        from distributed import as_completed

        if self._scattered is None or self._scattered[0] != id(prepared):
            self._scattered = (id(prepared), self.client.scatter(prepared, broadcast=True))
        remote = self._scattered[1]
        futures = {self.client.submit(fn, remote, seed, a, b, pure=False, retries=self.retries): (a, b)
                   for a, b in bounds}
        try:
            for fut in as_completed(futures):
                a, b = futures[fut]
                yield a, b, fut.result()
        finally:
            self.client.cancel(list(futures))

    def __exit__(self, *exc: object) -> None:
        self.stack.close()


def processes(executor: str, workers: int | None = None) -> int:
    """The processes an executor runs replicas on (``local`` and ``dask`` default to every core)."""
    if executor == "inline":
        return 1
    return workers or os.cpu_count() or 1


def open_executor(executor: str, workers: int | None = None, scheduler: str | None = None) -> Executor:
    """The executor named by ``--executor`` (``local`` and ``dask`` default to every core)."""
    check_executor(executor, scheduler)
    procs = workers if workers is not None else (os.cpu_count() or 1)
    if procs < 1:
        raise HsisimInputError(f"{{workers}} must be at least 1, got {procs}")
    if executor == "inline" or (executor == "local" and procs == 1):
        return InlineExecutor()
    if executor == "local":
        return LocalExecutor(procs)
    return DaskExecutor(procs, scheduler)
