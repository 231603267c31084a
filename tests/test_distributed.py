"""The job backends: results in the items' order, and a dead worker costs a retry, not the run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ge.core.errors import OptionError
from ge.distributed import InProcess, LocalPool, backend


def square(x: int) -> int:
    return x * x


def die_once(arg: tuple[str, int]) -> int:
    marker, x = arg
    if x == 3 and not os.path.exists(marker):
        Path(marker).touch()
        os._exit(1)
    return x


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


def test_unknown_backend_names_the_allowed_ones() -> None:
    with pytest.raises(OptionError, match="allowed: local, inprocess"):
        backend("mpi")
    assert isinstance(backend("local", 1), InProcess)
