"""The Ray backend: each job (or batch of `batch` jobs) is a Ray task.

`address` ("auto" or "HOST:PORT") connects this process to a running cluster (`ray
start --head` on one machine, `ray start --address=HEAD:6379` on the others); without
one, a local instance of `workers` CPUs is started on first use, with this process's
import path, so that any job this process can import its workers can import too.
`close()` disconnects, and stops the instance if it started one; a Ray this process
was already connected to (a test's, a notebook's) is used and left running.

A task whose worker dies (the process exits, its node goes away) is run again by
Ray up to `RETRIES` times (`max_retries`), after which the map fails naming the jobs;
an exception raised by a job is not retried: it stops the map and reaches the caller
as the job raised it. Ray's own logging stays at errors, and its workers' output
stays on the workers, unless this process logs at debug (`--log=debug`).

Batching amortises a task's round trip (about 2 ms here, `benchmarks/distributed.py`)
over several jobs at the price of coarser progress and load balance; a tuning
candidate or a compile costs far more than that, so the default is one job a task.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ge.core.errors import DistributedError, OptionError
from ge.distributed import RETRIES, check_job

if TYPE_CHECKING:
    from types import ModuleType

T = TypeVar("T")
R = TypeVar("R")

log = logging.getLogger("ge")

MISSING = "Ray is an optional extra: pip install '.[ray]'"
ADDRESS = re.compile(r"auto|[A-Za-z0-9.\-\[\]:]+:\d{1,5}")


def _import_ray() -> ModuleType:
    try:
        import ray
    except ImportError:
        raise OptionError(MISSING) from None
    return ray


def _run_batch(fn: Callable[[T], R], batch: list[T]) -> list[R]:
    """One Ray task: the jobs of a batch, one after the other."""
    return [fn(item) for item in batch]


class RayBackend:
    """Jobs as Ray tasks on a local instance or an existing cluster."""

    def __init__(self, workers: int | None = None, address: str | None = None, batch: int = 1) -> None:
        self._ray = _import_ray()
        if address is not None and not ADDRESS.fullmatch(address):
            raise OptionError(f"Ray address {address!r} is neither 'auto' nor HOST:PORT (e.g. 10.0.0.1:6379)")
        if batch < 1:
            raise OptionError(f"batch must be at least 1, got {batch}")
        self._workers = workers
        self._address = address
        self._batch = batch
        self._started = False
        self._task: Any = None

    @property
    def workers(self) -> int:
        """The cluster's CPUs, or `workers` when it bounds them."""
        self._connect()
        cpus = max(1, int(self._ray.cluster_resources().get("CPU", 1)))
        return cpus if self._workers is None else min(cpus, self._workers)

    def map(self, fn: Callable[[T], R], items: Sequence[T], on_done: Callable[[int, R], None] | None = None) -> list[R]:
        check_job(fn, items)
        if not items:
            return []
        self._connect()
        ray = self._ray
        batches = [list(range(start, min(start + self._batch, len(items)))) for start in range(0, len(items), self._batch)]
        window = 2 * self.workers
        queued = iter(batches)
        running: dict[Any, list[int]] = {}
        results: dict[int, R] = {}

        def submit() -> None:
            for indices in queued:
                running[self._remote().remote(fn, [items[i] for i in indices])] = indices
                if len(running) >= window:
                    return

        submit()
        while running:
            done, _ = ray.wait(list(running), num_returns=1)
            indices = running.pop(done[0])
            try:
                values = ray.get(done[0])
            except ray.exceptions.RayTaskError as exc:
                self._cancel(running)
                raise (exc.cause if isinstance(exc.cause, BaseException) else RuntimeError(str(exc))) from exc
            except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError, ray.exceptions.ObjectLostError) as exc:
                self._cancel(running)
                raise DistributedError(f"jobs {indices} lost their worker {RETRIES + 1} times ({type(exc).__name__}); giving up") from exc
            for i, value in zip(indices, values, strict=True):
                results[i] = value
                if on_done is not None:
                    on_done(i, value)
            submit()
        return [results[i] for i in range(len(items))]

    def close(self) -> None:
        """Disconnect, and stop the local instance, if this backend started them."""
        if self._started:
            self._ray.shutdown()
            self._started = False
            self._task = None

    def _remote(self) -> Any:
        if self._task is None:
            self._task = self._ray.remote(_run_batch).options(max_retries=RETRIES, retry_exceptions=False)
        return self._task

    def _cancel(self, running: dict[Any, list[int]]) -> None:
        for ref in running:
            self._ray.cancel(ref)

    def _connect(self) -> None:
        if self._ray.is_initialized():
            return
        debug = log.isEnabledFor(logging.DEBUG)
        quiet: dict[str, Any] = {
            "include_dashboard": False,
            "logging_level": logging.DEBUG if debug else logging.ERROR,
            "log_to_driver": debug,
        }
        if self._address is None:
            path = os.pathsep.join(p for p in sys.path if p)
            self._ray.init(num_cpus=self._workers or os.cpu_count() or 1, runtime_env={"env_vars": {"PYTHONPATH": path}}, **quiet)
        else:
            try:
                self._ray.init(address=self._address, **quiet)
            except ConnectionError as exc:
                raise DistributedError(
                    f"no Ray cluster at {self._address}: {exc}; start one with 'ray start --head', "
                    "or leave the address out to start a local instance"
                ) from None
        self._started = True
