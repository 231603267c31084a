"""The resource limits a model is checked against before anything is allocated.

A small file can describe an enormous computation: functions that call each other
twice over (2^30 nodes once inlined), a `ConstantOfShape` of a TiB, an
`--input_shape` of 10^16 elements, 5000 nested modules. Each limit here is checked
where the size is first known, from shapes and counts alone, and refused with a
`LimitError` that states the number found and the limit. The values are far beyond
any real model, so a real model never meets them; they only stop a process from
running out of memory, time or stack.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

from ge.core.errors import ModelError

MAX_NODES = 1_000_000
"""Nodes of a graph once its local functions are inlined. The largest exported
models (LLMs, every layer unrolled) have about 10^5 nodes, and the importer converts
about a thousand nodes a second (BERT-base: 1020 nodes in 2 s), so a million is
already half an hour; 2^30 would be years, and memory long before."""

MAX_TENSOR_BYTES = 1 << 36
"""Bytes of one tensor (64 GiB): the HBM of the largest device we model (Ascend
910B, 64 GB). A larger tensor cannot be placed on any of them, so a model with one
is refused before its shapes are used to size anything."""

MAX_FOLDED_BYTES = 1 << 30
"""Bytes of a constant the compiler computes or expands in host memory (1 GiB): a
folded result, a Range, a sparse initializer made dense, a dense attribute of IR
text (a splat is one value in the text, its full size in memory). Folding still
covers the weight casts of a 500M-parameter model; a larger fold is left to run
time (folding is only an optimisation), anything else is refused. Weights read from
the model's file are not computed, so this does not bound them."""

MAX_NESTING_DEPTH = 100
"""Nesting of regions, attributes and lists in `.mlir` text. xDSL's parser, verifier
and printer recurse once per level (about six Python frames each, against Python's
limit of 1000 frames), so past ~170 levels they die of a RecursionError. Our own IR
nests about five (module, graph or kernel, op, attribute dictionary, list)."""

_HOST_CHECK_FLOOR = 1 << 26
"""Below 64 MiB any host has the memory: the free memory is read only above it."""


class LimitError(ModelError):
    """The model asks for more than a limit allows: names the limit, the number found
    and the limit."""


def tensor_bytes(shape: Sequence[int], itemsize: int) -> int:
    """Bytes of a tensor of `shape`, a dynamic (negative) dim counted as 1: the least
    it can hold. Python integers, so that 10^10 x 10^10 does not wrap."""
    return math.prod(int(d) if d >= 0 else 1 for d in shape) * itemsize


def check_tensor(shape: Sequence[int], itemsize: int, what: str) -> None:
    """Refuse a tensor of `shape` and `itemsize`-byte elements above MAX_TENSOR_BYTES."""
    _check_bytes(shape, itemsize, MAX_TENSOR_BYTES, "a tensor", what)


def check_folded(shape: Sequence[int], itemsize: int, what: str) -> None:
    """Refuse to compute or expand a constant of `shape` above MAX_FOLDED_BYTES."""
    _check_bytes(shape, itemsize, MAX_FOLDED_BYTES, "a constant the compiler computes", what)


def _check_bytes(shape: Sequence[int], itemsize: int, limit: int, kind: str, what: str) -> None:
    size = tensor_bytes(shape, itemsize)
    if size > limit:
        raise LimitError(f"{what} of shape {_dims(shape)} needs {_size(size)}, more than the limit of {kind}, {_size(limit)}")


def check_host_allocation(shape: Sequence[int], itemsize: int, what: str) -> None:
    """`check_tensor`, and refuse to compute the tensor in host memory when the host
    cannot give it: numpy would raise a MemoryError, or the kernel kill the process."""
    check_tensor(shape, itemsize, what)
    size = tensor_bytes(shape, itemsize)
    if size <= _HOST_CHECK_FLOOR:
        return
    available = host_available_bytes()
    if available is not None and size > available:
        raise LimitError(
            f"{what} of shape {_dims(shape)} needs {_size(size)}, more than this host has "
            f"available ({_size(available)})"
        )


def host_available_bytes() -> int | None:
    """The memory this host can still give (Linux's MemAvailable), or None if unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None


def check_nodes(count: int, what: str) -> None:
    if count > MAX_NODES:
        raise LimitError(f"{what} has {count} nodes, more than the limit of {MAX_NODES}")


def check_nesting(depth: int, what: str) -> None:
    if depth > MAX_NESTING_DEPTH:
        raise LimitError(
            f"{what} nests regions, attributes or lists {depth} levels deep, more than the limit "
            f"of {MAX_NESTING_DEPTH}"
        )


def _dims(shape: Sequence[int]) -> str:
    return "[" + ", ".join(str(d) if d >= 0 else "?" for d in shape) + "]"


def _size(size: int) -> str:
    """Bytes, and the same in the largest binary unit below them (`4398046511104 bytes
    (4 TiB)`), in integer arithmetic: a size can exceed what a float holds."""
    units = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
    k = min(max(size.bit_length() - 1, 0) // 10, len(units))
    if k == 0:
        return f"{size} bytes"
    whole = size >> (10 * k)
    human = f"{size / (1 << 10 * k):.3g}" if whole < 1000 else str(whole)
    return f"{size} bytes ({human} {units[k - 1]})"
