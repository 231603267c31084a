"""Building one block's pipe program: buffers placed in the core's memories, copies,
vector instructions, flags, loops and double buffering (see the package docstring)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue

from dialects import ascend_graph as ag
from dialects import formats, shapes
from dialects.ascend_kernel import (
    AllocOp,
    CopyOp,
    LoopOp,
    ScalarOp,
    SetFlagOp,
    VecOp,
    WaitFlagOp,
    copy_pipe,
)
from ge.core.errors import ModelError
from ge.core.soc import SocProfile

FRACTAL = formats.FRACTAL_ROWS
FRACTAL_BYTES = 512
"""An L0A/L0B fractal: 16 rows of 32 bytes, whatever the dtype."""
ACC_FRACTAL_BYTES = 1024
"""An L0C fractal: 16 x 16 float32 or int32 accumulators."""
REPEAT_BYTES = 256
MAX_REPEAT = 255
SETUP_INSTRS = 32
MMAD_OVERHEAD = 16
"""Cycles of issue and pipeline fill an mmad costs beyond its fractal MACs (tiling cost only)."""
ACC_BYTES = 4
CORE_LOAD_SHARE = 5.0
CORE_STORE_SHARE = 2.0
"""What one core's MTE2 loads and MTE3 stores reach of GM, in multiples of its even
share of the chip's rate (`gm_bytes_per_cycle`), at most the chip's rate: about
what the fitted GM -> L1 and UB -> GM rates of the 310P3, 910A and 910B1 give
(tiling cost only: a kernel of few blocks cannot draw the whole chip's bandwidth)."""
COPY_LATENCY_NS = 100.0
"""Nanoseconds a GM copy holds its pipe before its first byte: the fitted GM -> L1
latencies are 190 cycles at 1.85 GHz (910B1) and 109 at 1.06 GHz (310P3), about
100 ns on both (tiling cost only)."""
ND2NZ_LATENCY_NS = 420.0
ND2NZ_LOAD_SHARE = 3.5
"""An nd2nz GM -> L1 copy: its latency (the fits give 780 cycles on the 910B1, 450
on the 310P3: 420 ns) and its rate in shares of the chip's GM rate (3.5 to 4.5 in
the fits; tiling cost only)."""
L0A_FRACTAL_CYCLES = 2.0
L0B_FRACTAL_CYCLES = 4.0
"""MTE1 cycles per 512-byte fractal moved L1 -> L0A (256 B a cycle) and L1 -> L0B
(128 B a cycle), as the fitted tables give (tiling cost only)."""
VECTOR_REPEAT_CYCLES = 2.0
"""Cycles of one 256-byte vector repeat, on average over the instructions an epilogue
runs (1 for a VRELU, 2 for a VADD in the fitted tables; tiling cost only)."""
VECTOR_ISSUE = 4
"""Cycles a vector instruction costs beyond its repeats (the fitted intercepts are 3 to
6; tiling cost only)."""

Ops = list[Operation]


# ============================================================ program building


class Program:
    """One block's program being built: buffers placed in the core's memories."""

    def __init__(self, profile: SocProfile):
        self.profile = profile
        self.allocs: list[AllocOp] = []
        self.top: dict[str, int] = {}

    def alloc(self, level: str, nbytes: int) -> SSAValue:
        """A buffer of at least `nbytes`, aligned as the level requires."""
        unit = alignment(self.profile, level)
        size = -(-max(nbytes, 1) // unit) * unit
        op = AllocOp(level, self.top.get(level, 0), size)
        self.top[level] = self.top.get(level, 0) + size
        self.allocs.append(op)
        return op.buffer

    def pair(self, level: str, nbytes: int) -> tuple[SSAValue, SSAValue]:
        """Ping and pong buffers."""
        return self.alloc(level, nbytes), self.alloc(level, nbytes)


@cache
def alignment(profile: SocProfile, level: str) -> int:
    """Cached: the tiling searches ask it for every candidate panel."""
    return dict(profile.alignment).get(level.lower(), 32)


def aligned(profile: SocProfile, level: str, nbytes: int) -> int:
    unit = alignment(profile, level)
    return -(-max(nbytes, 1) // unit) * unit


def sync(src: str, dst: str, event: int) -> Ops:
    """`dst` waits until `src` has done what it was given before."""
    return [SetFlagOp(src, dst, event), WaitFlagOp(src, dst, event)]


def copy(profile: SocProfile, src: SSAValue, dst: SSAValue, nbytes: int, mode: str = "normal") -> CopyOp:
    levels = [v.type.level.data for v in (src, dst)]  # type: ignore[attr-defined]
    pipe = copy_pipe(levels[0], levels[1], profile.fix_pipe)
    assert pipe is not None, f"no path {levels[0]} -> {levels[1]} on {profile.name}"
    return CopyOp(src, dst, pipe, max(int(nbytes), 1), mode)


def vec(instr: str, dtypes_: str, elements: int, buffers: Sequence[SSAValue], element_bytes: int) -> Ops:
    """One instruction, or a loop of them where it exceeds 255 repeats."""
    elements = max(int(elements), 1)
    per = MAX_REPEAT * REPEAT_BYTES // max(element_bytes, 1)
    full, rest = divmod(elements, per)
    ops: Ops = []
    if full:
        one = VecOp(instr, buffers, dtypes_, per)
        ops.append(LoopOp(full, [one]) if full > 1 else one)
    if rest:
        ops.append(VecOp(instr, buffers, dtypes_, rest))
    return ops


def scalar_for(ops: Ops) -> ScalarOp:
    """The scalar work of a loop body: 4 + 2 per copy + 1 per vector instruction."""
    copies = sum(isinstance(op, CopyOp) for op in ops)
    vecs = sum(isinstance(op, VecOp) for op in ops)
    return ScalarOp(4 + 2 * copies + vecs)


def body(ops: Ops) -> Ops:
    return [scalar_for(ops), *ops]


def repeat(count: int, ops_for: Callable[[], Ops]) -> Ops:
    """`count` runs of the same body: a loop, or the body itself once."""
    if count < 1:
        return []
    if count == 1:
        return ops_for()
    return [LoopOp(count, ops_for())]


def double_buffered(
    full: int,
    size: int,
    tail: int,
    make: Callable[[int, int], Ops],
    frees: Sequence[tuple[str, str, int]],
    start: int = 0,
) -> Ops:
    """`full` iterations of `size` and one of `tail` (if > 0), alternating ping (slot
    0) and pong (slot 1) from slot `start`. `frees` are the buffer-free events
    (consumer, producer, event of slot 0; slot 1 uses the next id), primed before
    and drained after; without them an outer level primes and drains them, and
    the slots run on across its iterations."""
    return double_buffered_runs([(full, size, tail)], make, frees, start)


def double_buffered_runs(
    runs: Sequence[tuple[int, int, int]],
    make: Callable[[int, int], Ops],
    frees: Sequence[tuple[str, str, int]],
    start: int = 0,
) -> Ops:
    """`double_buffered` over consecutive runs of iterations (each a `split`), the
    slots running on from one run to the next: a loop whose last iteration is cut
    into smaller ones keeps its ping-pong order."""
    slots = range(min(sum(iterations(*run) for run in runs), 2))
    ops: Ops = [SetFlagOp(c, p, e + s) for s in slots for c, p, e in frees]
    slot = start
    for full, size, tail in runs:
        pairs, odd = divmod(full, 2)  # iteration i takes slot (slot + i) % 2
        ops += repeat(pairs, lambda s=slot, n=size: make(s, n) + make(1 - s, n))
        if odd:
            ops += make(slot, size)
        if tail:
            ops += make((slot + full) % 2, tail)
        slot = (slot + iterations(full, size, tail)) % 2
    ops += [WaitFlagOp(c, p, e + s) for s in slots for c, p, e in frees]
    return ops


def batched(count: int, run: tuple[int, int, int], make: Callable[[int, int], Ops]) -> Ops:
    """`count` batches of the iterations of `run`, alternating slots from one batch to
    the next as within one, as one loop: a batch, where it has an even number of
    iterations; else every iteration where they are all alike; else pairs of batches."""
    full, size, tail = run
    if count == 1 or iterations(*run) % 2 == 0:
        return repeat(count, lambda: double_buffered(*run, make, []))
    if not tail:
        return double_buffered(count * full, size, 0, make, [])
    pairs = repeat(count // 2, lambda: double_buffered_runs([run, run], make, []))
    return pairs + (double_buffered(*run, make, []) if count % 2 else [])


def iterations(full: int, size: int, tail: int) -> int:
    """The iterations of a `split`."""
    return full + (tail > 0)


def sequence(full: int, size: int, tail: int, make: Callable[[int], Ops]) -> Ops:
    """`full` iterations of `size` and one of `tail`, without double buffering."""
    return repeat(full, lambda: make(size)) + (make(tail) if tail else [])


def split(total: int, per: int) -> tuple[int, int, int]:
    """(full iterations, size, tail) of `total` cut into pieces of `per`."""
    per = max(1, min(per, total))
    full, tail = divmod(total, per)
    return full, per, tail


# ============================================================== values in UB


def element_bytes(value: SSAValue) -> int:
    return max(1, formats.element_bits(ag.dtype_of(value.type)) // 8)


def numel(value: SSAValue) -> int:
    shape = ag.shape_of(value.type)
    if not shapes.is_static(shape):
        owner = value.owner
        where = f"{owner.OP_TYPE} '{owner.label}'" if isinstance(owner, ag.AscendOp) else "a kernel input"
        raise ModelError(f"{where}: the build needs static shapes, got {shapes.fmt(shape)}")
    return shapes.numel(shape)


def padding(value: SSAValue) -> float:
    """Physical over logical elements: what a device format pads."""
    t = value.type
    assert isinstance(t, TensorType)
    logical = numel(value)
    return shapes.numel(t.get_shape()) / logical if logical else 1.0


@dataclass
class Plan:
    """What tiling decided for one kernel, and how to make its program."""

    block_dim: int
    core_type: str
    tiling: dict[str, int]
    workspace: int
    program: Callable[[dict[SSAValue, SSAValue], SSAValue | None], Ops]
    """The program's ops (allocs first) from the GM buffers of the kernel's values
    (its inputs and outputs) and of its workspace."""
