"""Where independent jobs run: one API over this process, a process pool on this
machine's cores, or (in `[aoe]`'s follow-up) a Ray cluster.

Tuning evaluates many candidates and a model zoo compiles many models; each job is
a module-level function applied to plain data (numbers, strings, bytes, dicts of
those), so that it travels to another process or machine without pickling live
compiler state. `Backend.map` keeps the order of its items whatever order the jobs
finish in, and calls `on_done` in the caller's process as each one finishes (a
progress bar). A worker process that dies takes its job with it: the pool is
rebuilt and the jobs it had not finished are run again, up to `RETRIES` times each.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Protocol, TypeVar

from ge.core.errors import OptionError

T = TypeVar("T")
R = TypeVar("R")

RETRIES = 2
"""Times a job is run again after the worker running it died."""


class Backend(Protocol):
    """Runs `fn` over `items` somewhere; the results come back in the items' order."""

    @property
    def workers(self) -> int: ...

    def map(self, fn: Callable[[T], R], items: Sequence[T], on_done: Callable[[int, R], None] | None = None) -> list[R]: ...


class InProcess:
    """Every job in this process, one after the other (the reference for the others)."""

    @property
    def workers(self) -> int:
        return 1

    def map(self, fn: Callable[[T], R], items: Sequence[T], on_done: Callable[[int, R], None] | None = None) -> list[R]:
        results = []
        for i, item in enumerate(items):
            results.append(fn(item))
            if on_done is not None:
                on_done(i, results[-1])
        return results


class LocalPool:
    """A pool of `workers` forked processes on this machine."""

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise OptionError(f"workers must be at least 1, got {workers}")
        self._workers = workers

    @property
    def workers(self) -> int:
        return self._workers

    def map(self, fn: Callable[[T], R], items: Sequence[T], on_done: Callable[[int, R], None] | None = None) -> list[R]:
        results: dict[int, R] = {}
        tries = dict.fromkeys(range(len(items)), 0)
        while len(results) < len(items):
            pending = [i for i in range(len(items)) if i not in results]
            with ProcessPoolExecutor(self._workers, mp_context=multiprocessing.get_context("fork")) as pool:
                running: dict[Future[R], int] = {pool.submit(fn, items[i]): i for i in pending}
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
                                raise RuntimeError(f"job {i} lost its worker {tries[i]} times; giving up") from None
                            continue
                        if on_done is not None:
                            on_done(i, results[i])
        return [results[i] for i in range(len(items))]


def backend(kind: str = "local", workers: int | None = None) -> Backend:
    """The backend named `kind`: `local` (a process pool of `workers`, by default one
    per core; one worker runs in this process) or `inprocess`."""
    if kind == "inprocess":
        return InProcess()
    if kind != "local":
        raise OptionError(f"unknown backend {kind!r}; allowed: local, inprocess")
    count = workers if workers is not None else (os.cpu_count() or 1)
    return InProcess() if count == 1 else LocalPool(count)
