"""Inputs for a model the user gave none for, as Ascend's inference benchmark tool makes them.

`generated` makes one array per graph input: zeros (`seed=None`), or seeded random
values that every input accepts: standard normal floats, and integers and bools 0
or 1 (valid indices, masks and token ids for any model). A dynamic dimension cannot
be generated; the caller names the input and what to give instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from dialects.shapes import fmt
from ge.core.errors import InputError
from ge.core.limits import check_host_allocation


def generated(specs: Iterable[tuple[str, np.dtype, Sequence[int]]], seed: int | None) -> dict[str, np.ndarray]:
    """{name: array} for each (name, dtype, shape): zeros, or seeded values (see the module)."""
    rng = np.random.default_rng(seed) if seed is not None else None
    feeds = {}
    for name, dtype, shape in specs:
        dtype = np.dtype(dtype)
        if any(d < 0 for d in shape):
            raise InputError(f"input '{name}' has a dynamic shape {fmt(shape)}; give its value or a static --input_shape")
        drawn = dtype.itemsize if rng is None else max(dtype.itemsize, 8)  # numpy draws in 64 bits
        check_host_allocation(shape, drawn, f"generated input '{name}'")
        if rng is None:
            feeds[name] = np.zeros(shape, dtype)
        elif dtype.kind == "f" or dtype.name == "bfloat16":
            feeds[name] = rng.standard_normal(shape).astype(dtype)
        else:
            feeds[name] = rng.integers(0, 2, shape).astype(dtype)
    return feeds


def describe(seed: int | None) -> str:
    """How `generated` made the inputs, for the user to read."""
    return "zeros" if seed is None else f"seeded random values (seed {seed}: standard normal floats, integers 0 or 1)"
