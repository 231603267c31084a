"""What a `.om` file may declare, and the checks that hold it to that.

The seal proves that a file is whole, not who wrote it: anyone can recompute it. So
every size, count, shape and index read from a file is checked here before anything
is allocated or looped over, and a value out of bounds fails with the field, the
value and what is allowed (as `Malformed`, which `ge.om.read` turns into an
`OmError` naming the file).

The limits are far above what a real model needs (noted beside each: the largest
of the real-model tests' ResNet-50, MobileNetV2 and BERT-base on every SoC) and far
below what would exhaust the host. Memory sizes are bounded by the
SoC's device memory (`SocProfile.device_memory_bytes`), checked in `ge.om.model`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30

MANIFEST_BYTES = 64 * KiB
"""manifest.json: 118 bytes in every model."""
DESCRIPTION_BYTES = 64 * MiB
"""model.json: at most 71 KB for a real model; a model of 100 gears stays under 10 MB."""
KERNELS_BYTES = 256 * MiB
"""kernels.mlir: at most 340 KB for a real model (ResNet-50 on Ascend310), 34 MB for 100 gears."""
COMPRESSION_RATIO = 100
"""An entry's declared size over its compressed size, for entries over `RATIO_FLOOR`
bytes: at most 21 for a real model (kernels.mlir); deflate reaches about 1000 on a
zip bomb."""
RATIO_FLOOR = 1 * MiB
"""Below this, an entry's ratio says nothing (a small repetitive text compresses well)."""
JSON_DEPTH = 32
"""Nesting of model.json's arrays and objects: 5 in every model."""

TASKS = 1 << 20
"""Tasks in the list: at most 104 for a real model."""
TENSORS = 1 << 20
"""Placements in the memory plan: at most 338 for a real model."""
PORTS = 4096
"""Graph inputs, and graph outputs: a handful in a real model."""
ARGS = 4096
"""Arguments of one KERNEL task (inputs, outputs and workspace, each), or of one KERNEL_EX
task (inputs and outputs, each)."""
STREAMS = 1024
"""Streams: at most 3 for a real model (the build's default max_streams is far lower)."""
EVENTS = 1 << 16
"""Event ids: at most 4 for a real model; the backend assigns at most 1024."""
RANK = 32
"""Dims of a tensor: 5 for NC1HWC0, rank + 2 for FRACTAL_NZ."""
BLOCK_DIM = 65535
"""CANN's limit on a kernel launch's block_dim (a 16-bit count); the simulator's work
per launch scales with it (see `ge.sim.runtime.RUN_BLOCKS` for its bound per run)."""
GEARS = 100
"""Gears of a multi-gear model: GE allows 2 to 100."""
TEXT_CHARS = 4096
"""A name, format, SoC version, or the op type of a KERNEL_EX task (never empty)."""

ITEMSIZE = {
    "bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "float16": 2, "bfloat16": 2,
    "int32": 4, "uint32": 4, "float32": 4, "int64": 8, "uint64": 8, "float64": 8,
}
"""The dtypes a graph input or output may have (`ge.core.dtypes.name` of each), and their sizes."""


class Malformed(ValueError):
    """A field of a `.om` description that is missing, of the wrong type, or out of bounds."""


def field(data: Mapping, key: str, where: str) -> object:
    """`data[key]`, or a `Malformed` naming `where.key` when it is missing."""
    if key not in data:
        raise Malformed(f"{_at(where, key)} is missing")
    return data[key]


def mapping(value: object, where: str) -> Mapping:
    if not isinstance(value, Mapping):
        raise Malformed(f"{where} must be an object, not {shown(value)}")
    return value


def items(value: object, where: str, most: int, why: str = "") -> Sequence:
    """A JSON array of at most `most` items."""
    if not isinstance(value, list):
        raise Malformed(f"{where} must be an array, not {shown(value)}")
    if len(value) > most:
        raise Malformed(f"{where} has {len(value)} items; allowed: at most {most}{why}")
    return value


def integer(value: object, where: str, low: int = 0, high: int | None = None, why: str = "") -> int:
    """An int (not a bool, not a float) in [low, high]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise Malformed(f"{where} must be an integer, not {shown(value)}")
    if value < low or (high is not None and value > high):
        allowed = f"{low} to {high}" if high is not None else f"at least {low}"
        raise Malformed(f"{where} is {value}; allowed: {allowed}{why}")
    return value


def text(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise Malformed(f"{where} must be a string, not {shown(value)}")
    if len(value) > TEXT_CHARS:
        raise Malformed(f"{where} has {len(value)} characters; allowed: at most {TEXT_CHARS}")
    return value


def depth(value: object) -> int:
    """How deeply `value`'s arrays and objects nest (walked without recursion)."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        if level > JSON_DEPTH:
            break
        if isinstance(node, Mapping):
            stack.extend((v, level + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, level + 1) for v in node)
    return deepest


def _at(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def shown(value: object) -> str:
    """A value for a message: its type and a repr cut to 40 characters."""
    r = repr(value)
    return f"{type(value).__name__} {r if len(r) <= 40 else r[:37] + '...'}"
