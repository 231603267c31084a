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
import re
from collections.abc import Sequence

from ge.core.errors import ModelError

MAX_NODES = 1_000_000
"""Nodes of a graph once its local functions are inlined. The largest exported
models (LLMs, with every layer unrolled) have about 10^5 nodes, and the importer
converts a few thousand nodes per second: a million is already most of an hour."""

MAX_TENSOR_BYTES = 1 << 36
"""Bytes of one tensor (64 GiB): the HBM of the largest device we model (Ascend
910B, 64 GB). A larger tensor cannot be placed on any of them, so a model with one
is refused before its shapes are used to size anything."""

MAX_FOLDED_BYTES = 1 << 30
"""Bytes of a constant computed at compile time (1 GiB). Folding holds operands and
result in host memory; a GiB still folds the weight casts of a 500M-parameter model,
and a larger result is left to compute at run time (folding is only an optimisation)."""

MAX_NESTING_DEPTH = 100
"""Nesting of regions, attributes and lists in `.mlir` text. xDSL's parser, verifier
and printer recurse once per level (about six Python frames each, against Python's
limit of 1000 frames), so past ~170 levels they die of a RecursionError. Our IR nests
about six levels (module, graph, kernel, loops)."""


class LimitError(ModelError):
    """The model asks for more than a limit allows: names the limit, the number found
    and the limit."""


def numel(shape: Sequence[int]) -> int:
    """Elements of a static shape, in Python integers (so 10^10 x 10^10 does not wrap)."""
    return math.prod(int(d) for d in shape)


def tensor_bytes(shape: Sequence[int], itemsize: int) -> int:
    return numel(shape) * itemsize


def check_tensor(shape: Sequence[int], itemsize: int, what: str) -> None:
    """Refuse a static `shape` of `itemsize`-byte elements larger than MAX_TENSOR_BYTES."""
    size = tensor_bytes(shape, itemsize)
    if size > MAX_TENSOR_BYTES:
        raise LimitError(
            f"{what} has shape {list(shape)}: {size} bytes, more than the limit of a tensor, "
            f"{MAX_TENSOR_BYTES} bytes ({_gib(MAX_TENSOR_BYTES)})"
        )


def check_nodes(count: int, what: str) -> None:
    if count > MAX_NODES:
        raise LimitError(f"{what} has {count} nodes, more than the limit of {MAX_NODES}")


def host_available_bytes() -> int | None:
    """The memory this host can still give (Linux's MemAvailable), or None if unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None


def check_host_allocation(size: int, what: str) -> None:
    """Refuse to compute `size` bytes in host memory when the host cannot give them:
    numpy would raise a MemoryError, or the kernel would kill the process."""
    check_tensor_bytes(size, what)
    available = host_available_bytes()
    if available is not None and size > available:
        raise LimitError(
            f"{what} needs {size} bytes ({_gib(size)}), more than this host has available "
            f"({available} bytes, {_gib(available)})"
        )


def check_tensor_bytes(size: int, what: str) -> None:
    if size > MAX_TENSOR_BYTES:
        raise LimitError(
            f"{what} needs {size} bytes, more than the limit of a tensor, "
            f"{MAX_TENSOR_BYTES} bytes ({_gib(MAX_TENSOR_BYTES)})"
        )


_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]()]')


def nesting_depth(text: str) -> int:
    """The deepest nesting of `{`, `[` and `(` in IR text, string literals skipped."""
    depth = deepest = 0
    for match in _BRACKETS.finditer(text):
        token = match.group()
        if token in "{[(":
            depth += 1
            deepest = max(deepest, depth)
        elif token in "}])":
            depth -= 1
    return deepest


def check_nesting(text: str, what: str) -> None:
    """Refuse IR text nested deeper than MAX_NESTING_DEPTH, before a parser recurses into it."""
    depth = nesting_depth(text)
    if depth > MAX_NESTING_DEPTH:
        raise LimitError(
            f"{what} nests regions, attributes or lists {depth} levels deep, more than the limit "
            f"of {MAX_NESTING_DEPTH}"
        )


def _gib(size: int) -> str:
    return f"{size / (1 << 30):.3g} GiB"
