"""Where independent jobs run: one API over this process, a process pool on this
machine's cores, or a Ray cluster (`ge.distributed.cluster`).

Tuning evaluates many candidates and a model zoo compiles many models; each job is
a module-level function applied to plain data (numbers, strings, bytes, and lists,
tuples, dicts and dataclasses of those), so that it travels to another process or
machine without pickling live compiler state. `check_job` refuses anything else on
every backend, so that a job that runs here also runs on a cluster. `Backend.map`
keeps the order of its items whatever order the jobs finish in, and calls `on_done`
in the caller's process as each one finishes (a progress bar). A worker that dies
takes its job with it: the job is run again, up to `RETRIES` times, and the run goes
on. `close()` releases what the backend started (its worker processes, a Ray
instance), nothing else.
"""

from __future__ import annotations

import dataclasses
import inspect
import multiprocessing
import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Protocol, TypeVar

from ge.core.errors import DistributedError, OptionError

T = TypeVar("T")
R = TypeVar("R")

RETRIES = 2
"""Times a job is run again after the worker running it died."""

KINDS = ("local", "inprocess", "ray")
PLAIN = (type(None), bool, int, float, str, bytes)
PLAIN_WORDS = "None, bool, int, float, str, bytes, and lists, tuples, dicts and dataclasses of those"


class Backend(Protocol):
    """Runs `fn` over `items` somewhere; the results come back in the items' order."""

    @property
    def workers(self) -> int: ...

    def map(self, fn: Callable[[T], R], items: Sequence[T], on_done: Callable[[int, R], None] | None = None) -> list[R]: ...

    def close(self) -> None: ...


def check_job(fn: Callable[..., object], items: Sequence[object]) -> None:
    """Refuse a job that could not travel: `fn` must be importable by its module and
    name (no lambda, closure or method), each item plain data."""
    if not _module_level(fn):
        name = getattr(fn, "__qualname__", type(fn).__name__)
        raise OptionError(
            f"a job must be a module-level function (importable as module.name, so that another process or machine can run it); "
            f"got {name!r}: not a lambda, a nested function or a method"
        )
    for i, item in enumerate(items):
        if not _plain(item):
            raise OptionError(f"job item {i} is a {type(item).__name__}, not plain data; items may be {PLAIN_WORDS}")


def _module_level(fn: Callable[..., object]) -> bool:
    if not inspect.isfunction(fn) or "<" in fn.__qualname__ or "." in fn.__qualname__:
        return False
    return getattr(sys.modules.get(fn.__module__), fn.__name__, None) is fn


def _plain(value: object) -> bool:
    if isinstance(value, PLAIN):
        return True
    if isinstance(value, list | tuple):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(_plain(k) and _plain(v) for k, v in value.items())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _module_level_class(type(value)) and all(_plain(getattr(value, f.name)) for f in dataclasses.fields(value))
    return False


def _module_level_class(cls: type) -> bool:
    return getattr(sys.modules.get(cls.__module__), cls.__qualname__, None) is cls


class InProcess:
    """Every job in this process, one after the other (the reference for the others)."""

    @property
    def workers(self) -> int:
        return 1

    def map(self, fn: Callable[[T], R], items: Sequence[T], on_done: Callable[[int, R], None] | None = None) -> list[R]:
        check_job(fn, items)
        results = []
        for i, item in enumerate(items):
            results.append(fn(item))
            if on_done is not None:
                on_done(i, results[-1])
        return results

    def close(self) -> None:
        """Nothing to release: the jobs ran in this process."""


class LocalPool:
    """A pool of `workers` forked processes on this machine, kept from one map to the
    next (a worker's first compile loads what later ones reuse) until `close()`."""

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise OptionError(f"workers must be at least 1, got {workers}")
        self._workers = workers
        self._pool: ProcessPoolExecutor | None = None

    @property
    def workers(self) -> int:
        return self._workers

    def map(self, fn: Callable[[T], R], items: Sequence[T], on_done: Callable[[int, R], None] | None = None) -> list[R]:
        check_job(fn, items)
        results: dict[int, R] = {}
        tries = dict.fromkeys(range(len(items)), 0)
        while len(results) < len(items):
            pool = self._executor()
            running: dict[Future[R], int] = {pool.submit(fn, items[i]): i for i in range(len(items)) if i not in results}
            try:
                broken = self._collect(running, results, tries, on_done)
            except BaseException:
                self.close()  # the jobs still queued would otherwise run on into the next map
                raise
            if broken:
                self.close()  # a dead worker breaks the whole pool: the next round starts a new one
        return [results[i] for i in range(len(items))]

    def close(self) -> None:
        """Stop the workers (the next map starts new ones)."""
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self._workers, mp_context=multiprocessing.get_context("fork"))
        return self._pool

    @staticmethod
    def _collect(
        running: dict[Future[R], int], results: dict[int, R], tries: dict[int, int], on_done: Callable[[int, R], None] | None
    ) -> bool:
        """Take the results as they come; True when a worker died (its job counted a try)."""
        broken = False
        while running and not broken:
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                i = running.pop(future)
                try:
                    results[i] = future.result()
                except BrokenProcessPool:
                    broken = True
                    tries[i] += 1
                    if tries[i] > RETRIES:
                        raise DistributedError(f"job {i} lost its worker {tries[i]} times; giving up") from None
                    continue
                if on_done is not None:
                    on_done(i, results[i])
        return broken


def backend(kind: str = "local", workers: int | None = None, address: str | None = None) -> Backend:
    """The backend named `kind`: `local` (a process pool of `workers`, by default one
    per core; one worker runs in this process), `inprocess`, or `ray` (the cluster at
    `address`, "auto" or "HOST:PORT"; without one, a local Ray instance of `workers`
    CPUs, by default one per core; see `ge.distributed.cluster`)."""
    if kind not in KINDS:
        raise OptionError(f"unknown backend {kind!r}; allowed: {', '.join(KINDS)}")
    if workers is not None and workers < 1:
        raise OptionError(f"workers must be at least 1, got {workers}")
    if kind == "ray":
        from ge.distributed.cluster import RayBackend

        return RayBackend(workers, address)
    if address is not None:
        raise OptionError(f"a Ray address ({address!r}) is for the ray backend; the {kind} backend runs on this machine")
    if kind == "inprocess":
        return InProcess()
    count = workers if workers is not None else (os.cpu_count() or 1)
    return InProcess() if count == 1 else LocalPool(count)
