"""The ``Executor`` seam: run one picklable stage function over many items, locally or on Ray.

``SyncExecutor`` (``--jobs 1``) runs in-process, in order: easy to debug. ``ProcessExecutor`` uses a
process pool. ``RayExecutor`` submits the same function as Ray tasks to a local instance or a cluster
(``--executor ray [--ray-address ADDR]``). All three yield ``(index, result)`` pairs as results
complete; stage functions must not raise for a bad item (they return a value saying why), but if one
does, the executor yields the exception as the result so one item never aborts the run.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

from taskforge.core.errors import ConfigError

T = TypeVar("T")
R = TypeVar("R")


class Executor(Protocol):
    name: str

    def map_unordered(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[tuple[int, R | BaseException]]:
        """Yield ``(index into items, result or exception)`` as each item completes."""
        ...

    def close(self, wait: bool = True) -> None:
        """Release workers; ``wait=False`` (a stopped run) ends running items instead of waiting for them."""
        ...


class SyncExecutor:
    name = "sync"

    def map_unordered(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[tuple[int, R | BaseException]]:
        for i, item in enumerate(items):
            try:
                yield i, fn(item)
            except Exception as exc:  # one bad item never aborts the run
                yield i, exc

    def close(self, wait: bool = True) -> None:
        return None


class ProcessExecutor:
    name = "process"

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        # "spawn" avoids inheriting threads/locks of the parent (rich live displays, docker clients).
        self._pool = cf.ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"))

    def map_unordered(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[tuple[int, R | BaseException]]:
        futures = {self._pool.submit(fn, item): i for i, item in enumerate(items)}
        for fut in cf.as_completed(futures):
            exc = fut.exception()
            yield futures[fut], (exc if exc is not None else fut.result())

    def close(self, wait: bool = True) -> None:
        """Shut the pool down; ``wait=False`` (a stopped run) kills the workers instead of waiting for them."""
        if not wait:
            for proc in list(getattr(self._pool, "_processes", {}).values()):
                proc.kill()
        self._pool.shutdown(wait=wait, cancel_futures=True)


class RayExecutor:
    name = "ray"

    def __init__(self, address: str = "", num_cpus: int | None = None) -> None:
        try:
            import ray
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ConfigError("executor 'ray' needs ray: pip install 'taskforge[ray]'") from exc
        self._ray = ray
        self._owns = not ray.is_initialized()
        if self._owns:
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if address:
                kwargs["address"] = address
            elif num_cpus:
                kwargs["num_cpus"] = num_cpus
            ray.init(**kwargs)

    def map_unordered(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[tuple[int, R | BaseException]]:
        ray = self._ray
        remote = ray.remote(fn)
        refs = {remote.remote(item): i for i, item in enumerate(items)}
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            ref = done[0]
            try:
                yield refs[ref], ray.get(ref)
            except Exception as exc:  # RayTaskError wraps the worker's exception
                yield refs[ref], exc

    def close(self, wait: bool = True) -> None:
        if self._owns:
            self._ray.shutdown()


def make_executor(kind: str, jobs: int, ray_address: str = "") -> Executor:
    if kind == "ray":
        return RayExecutor(ray_address, num_cpus=jobs if jobs > 0 else None)
    if kind != "process":
        raise ConfigError(f"unknown executor {kind!r}; expected 'process' or 'ray'")
    if jobs <= 1:
        return SyncExecutor()
    return ProcessExecutor(jobs)
