"""Jobs for testing `ge.distributed`'s backends: module-level functions over plain data,
importable by any worker, as every job must be."""

from __future__ import annotations

import os
from pathlib import Path


def square(x: int) -> int:
    return x * x


def die_once(arg: tuple[str, int]) -> int:
    """Job 3 kills its worker the first time (while `marker` does not exist yet)."""
    marker, x = arg
    if x == 3 and not os.path.exists(marker):
        Path(marker).touch()
        os._exit(1)
    return x
