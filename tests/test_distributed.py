"""The job backends: results in the items' order, and a dead worker costs a retry, not the run."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from ge.core.errors import DistributedError, OptionError
from ge.distributed import RETRIES, InProcess, LocalPool, backend, check_job
from ge.testing.jobs import die_once, square


def die_always(x: int) -> int:
    os._exit(1)


def test_a_worker_that_keeps_dying_ends_the_run() -> None:
    with pytest.raises(DistributedError, match=f"job 0 lost its worker {RETRIES + 1} times; giving up"):
        LocalPool(1).map(die_always, [0])


def test_backends_agree_and_keep_order() -> None:
    items = list(range(12))
    seen: list[int] = []
    assert backend("local", 2).map(square, items, on_done=lambda i, r: seen.append(i)) == [x * x for x in items]
    assert sorted(seen) == items
    assert backend("inprocess").map(square, items) == [x * x for x in items]


def test_a_dead_worker_is_retried(tmp_path: Path) -> None:
    marker = str(tmp_path / "died")
    assert LocalPool(2).map(die_once, [(marker, x) for x in range(6)]) == list(range(6))
    assert os.path.exists(marker)


def pid(_: int) -> int:
    return os.getpid()


def test_a_pool_keeps_its_workers_until_closed() -> None:
    """Two maps run on the same two processes (which of them takes tasks depends on
    the load: one may take all six), a map after close on new ones."""
    pool = LocalPool(2)
    first = set(pool.map(pid, list(range(6)))) | set(pool.map(pid, list(range(6))))
    assert len(first) <= 2
    pool.close()
    assert set(pool.map(pid, list(range(2)))).isdisjoint(first)
    pool.close()


@dataclass(frozen=True)
class Tile:
    m: int
    n: int


def tile_area(tile: Tile) -> int:
    return tile.m * tile.n


def test_only_module_level_functions_over_plain_data_travel() -> None:
    def nested(x: int) -> int:
        return x

    runner = InProcess()
    assert runner.map(tile_area, [Tile(2, 3), Tile(4, 5)]) == [6, 20]
    check_job(square, [None, True, 2.0, "s", b"b", [1], (1,), {"k": (1, [2.5])}, Tile(1, 1)])  # plain data passes
    for job in (lambda x: x, nested, Path.exists):
        with pytest.raises(OptionError, match="must be a module-level function"):
            runner.map(job, [1])
    for item in (object(), {1: Path(".")}, [1, {2}]):
        with pytest.raises(OptionError, match=r"job item 0 is a \w+, not plain data; items may be None, bool, int"):
            runner.map(square, [item])


def test_unknown_backend_names_the_allowed_ones() -> None:
    with pytest.raises(OptionError, match="allowed: local, inprocess, ray"):
        backend("mpi")
    assert isinstance(backend("local", 1), InProcess)
