"""Tiling: how a kernel's work splits over the cores and through a core's memories,
and the per-block pipe program that follows from it (`lower-to-kernel` uses it).

Blocks. The work is cut into `block_dim` blocks that run the same program, each on
its share (the program is that of the largest share; shares differ by at most one
unit per split dimension). When the work has at least as many units as the kernel's
cores (AI cores, or vector cores for a vector kernel on a part with split cores),
block_dim is the core count where that gives no block more work than a smaller
split would: a cube kernel splits its batch, M and N fractals (16 rows each) in one
wave over the cores so that the largest block has the fewest fractals, then by the
least cost of the largest block (cube cycles against GM traffic); a vector kernel
splits its rows evenly (a row is what a reduction or normalisation needs whole;
for elementwise work, 32 bytes).

Cube kernels (Conv2D, MatMulV2, BatchMatMulV2, GEMM, FullyConnection, with an
elementwise tail) are fractal matmuls: a convolution in img2col form has M = N * Ho
* Wo, K = C1 * kh * kw * C0, N = Cout rounded up to 16; a grouped convolution packs
`enlarge` groups into one (CANN's rule: enlarge = min(lcm(Cin/g, C0) / (Cin/g),
lcm(Cout/g, 16) / (Cout/g), g)), so a depthwise one runs ceil(C / 16) fractal
matmuls. Every L0A/L0B fractal is 512 bytes (16 rows of 32 bytes), an L0C one 1 KB
(float32 or int32 accumulators). A block's M x N is cut into L0 tiles m0 x n0 and K
into k0 steps that fit L0A, L0B and L0C twice (ping and pong), chosen by a cost of
cube cycles against MTE1 traffic; K is loaded into L1 in panels of k1 (a multiple of
k0), A and B panels twice, and when B's whole K fits beside A it stays in L1
across the M loop. The loop nest is batch > N tiles > M tiles (L0C ping-pong) > K1
panels (L1 ping-pong) > K0 steps (L0A/L0B ping-pong): MTE2 loads GM -> L1 (a
convolution loads the input rows its output rows need, img2col happens on the
L1 -> L0A move), MTE1 moves L1 -> L0A/L0B, M runs mmad. The result leaves L0C:
- on parts with a FIX pipe, FIX writes L0C -> GM (NZ -> ND in flight for an ND
  result; a ReLU tail is FIX's own), the bias goes L1 -> BT before the mmads; a
  longer tail makes a mixed kernel: FIX writes a workspace, the vector unit reads
  it into UB, computes the tail and MTE3 writes the result;
- elsewhere the vector unit moves L0C -> UB (converting to the result dtype),
  adds the bias, computes the tail and MTE3 writes UB -> GM.
An operand left in ND (a matmul on a FIX part, or one format selection did not
reach) is converted to NZ on its way into L1 (an MTE2 copy in nd2nz mode).

Vector kernels tile the Unified Buffer: a tile is a number of whole rows; every
value of the scope gets a UB buffer of its tile (inputs and outputs twice, for
ping-pong), and the tile is the largest whose buffers fit the UB. Per tile: MTE2
loads the inputs, V runs each op's instruction sequence (`RECIPES`), MTE3 stores
the outputs. A vector instruction covers at most 255 repeats of 256 bytes; longer
work is a loop of such instructions.

MultiHeadAttention is one kernel of four phases: the Q/K/V projections, the
scores per head, softmax, and the probabilities times V, with the intermediate
values in the workspace and `sync_all` between phases.

Double buffering is explicit: a loop over tiles holds its ping and its pong
iteration, each with its own buffers and event ids; the consumer primes the
buffer-free events before the loop and the producer drains them after. In a cube
kernel the L1 panels and L0 steps run as streams of slots through all M tiles of
an N tile, so that MTE2 and MTE1 load the next tile's first panel while the cube
finishes the last one. Scalar
work: `SETUP_INSTRS` per block (reading the tiling, base addresses) and per loop
body 4 instructions plus 2 per copy and 1 per vector instruction (addresses,
counters).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute, Operation, SSAValue

from dialects import ascend_graph as ag
from dialects import formats, shapes
from dialects.ascend_kernel import (
    BIAS_TABLE_BYTES,
    AllocOp,
    CopyOp,
    LoopOp,
    MmadOp,
    ScalarOp,
    SetFlagOp,
    SyncAllOp,
    VecOp,
    WaitFlagOp,
    copy_pipe,
)
from ge.core import dtypes
from ge.core.errors import ModelError, OptionError
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

Ops = list[Operation]


# =========================================================== vector instructions

Recipe = list[tuple[str, str, str]]
"""(instruction, dtypes template, basis) per vector instruction of an op. The
template uses {d} (compute dtype), {i}/{o} (input/output dtype) and {u} (an unsigned
integer of the element width); the basis says how many elements it covers in a
tile: "out" (the result), "in" (the first operand), "row" (one per row), "param"
(the second operand), "window" (the result times the pooling window)."""

_U, _B = "{d}_{d}", "{d}_{d}_{d}"
_ERF: Recipe = (
    [("VMINS", _B, "out"), ("VMAXS", _B, "out"), ("VMUL", _B, "out")]
    + [("VMULS", _B, "out"), ("VADDS", _B, "out")] * 4
    + [("VMUL", _B, "out"), ("VMUL", _B, "out"), ("VDIV", _B, "out")]
)
_EXP_FAMILY: dict[type[Operation], Recipe] = {
    ag.SigmoidOp: [("VMULS", _B, "out"), ("VEXP", _U, "out"), ("VADDS", _B, "out"), ("VREC", _U, "out")],
    ag.TanhOp: [
        ("VMULS", _B, "out"), ("VEXP", _U, "out"), ("VADDS", _B, "out"), ("VREC", _U, "out"),
        ("VMULS", _B, "out"), ("VADDS", _B, "out"),
    ],
    ag.SoftplusOp: [
        ("VABS", _U, "out"), ("VMULS", _B, "out"), ("VEXP", _U, "out"), ("VADDS", _B, "out"),
        ("VLN", _U, "out"), ("VMAXS", _B, "out"), ("VADD", _B, "out"),
    ],
    ag.EluOp: [
        ("VMINS", _B, "out"), ("VEXP", _U, "out"), ("VADDS", _B, "out"), ("VMULS", _B, "out"),
        ("VMAXS", _B, "out"), ("VADD", _B, "out"),
    ],
}
_EXP_FAMILY[ag.SeluOp] = _EXP_FAMILY[ag.EluOp] + [("VMULS", _B, "out")]
_TRIG: Recipe = (
    [("VMULS", _B, "out"), ("VCONV", "{d}_INT32", "out"), ("VCONV", "INT32_{d}", "out"), ("VMULS", _B, "out")]
    + [("VSUB", _B, "out"), ("VMUL", _B, "out")]
    + [("VMULS", _B, "out"), ("VADDS", _B, "out"), ("VMUL", _B, "out")] * 3
)
_ROUNDING: Recipe = [("VCONV", "{d}_INT32", "out"), ("VCONV", "INT32_{d}", "out")]

RECIPES: dict[type[Operation], Recipe] = {
    ag.AddOp: [("VADD", _B, "out")],
    ag.SubOp: [("VSUB", _B, "out")],
    ag.MulOp: [("VMUL", _B, "out")],
    ag.DivOp: [("VDIV", _B, "out")],
    ag.MaximumOp: [("VMAX", _B, "out")],
    ag.MinimumOp: [("VMIN", _B, "out")],
    ag.PowOp: [("VLN", _U, "out"), ("VMUL", _B, "out"), ("VEXP", _U, "out")],
    ag.PReluOp: [("VMINS", _B, "out"), ("VMUL", _B, "out"), ("VMAXS", _B, "out"), ("VADD", _B, "out")],
    **{cls: [("VCMPV", _B, "out")] for cls in (ag.EqualOp, ag.LessOp, ag.LessEqualOp, ag.GreaterOp, ag.GreaterEqualOp)},
    ag.LogicalAndOp: [("VAND", _B, "out")],
    ag.LogicalOrOp: [("VOR", _B, "out")],
    ag.LogicalXorOp: [("VOR", _B, "out"), ("VAND", _B, "out"), ("VNOT", _U, "out"), ("VAND", _B, "out")],
    ag.LogicalNotOp: [("VNOT", _U, "out")],
    ag.NegOp: [("VMULS", _B, "out")],
    ag.AbsOp: [("VABS", _U, "out")],
    ag.SignOp: [("VCMPVS", _B, "out"), ("VSEL", _B, "out"), ("VCMPVS", _B, "out"), ("VSEL", _B, "out")],
    ag.ReluOp: [("VRELU", _U, "out")],
    ag.SqrtOp: [("VSQRT", _U, "out")],
    ag.RsqrtOp: [("VRSQRT", _U, "out")],
    ag.ExpOp: [("VEXP", _U, "out")],
    ag.LogOp: [("VLN", _U, "out")],
    ag.ErfOp: _ERF,
    **_EXP_FAMILY,
    ag.SinOp: _TRIG,
    ag.CosOp: _TRIG,
    ag.FloorOp: _ROUNDING,
    ag.CeilOp: _ROUNDING,
    ag.RoundOp: _ROUNDING,
    ag.SoftsignOp: [("VABS", _U, "out"), ("VADDS", _B, "out"), ("VDIV", _B, "out")],
    ag.HardSwishOp: [("VADDS", _B, "out"), ("VMAXS", _B, "out"), ("VMINS", _B, "out"), ("VMUL", _B, "out"), ("VMULS", _B, "out")],
    ag.LeakyReluOp: [("VLRELU", _B, "out")],
    ag.HardSigmoidOp: [("VMULS", _B, "out"), ("VADDS", _B, "out"), ("VMAXS", _B, "out"), ("VMINS", _B, "out")],
    ag.CastOp: [("VCONV", "{i}_{o}", "out")],
    ag.SelectOp: [("VSEL", _B, "out")],
    ag.ExpandOp: [("VCOPY", "{u}_{u}", "out")],
    ag.TileOp: [("VCOPY", "{u}_{u}", "out")],
    ag.PadOp: [("VECTORDUP", _U, "out")],
    ag.SoftmaxOp: [("VCMAX", _U, "in"), ("VSUB", _B, "in"), ("VEXP", _U, "in"), ("VCADD", _U, "in"), ("VDIV", _B, "in")],
    ag.LogSoftmaxOp: [
        ("VCMAX", _U, "in"), ("VSUB", _B, "in"), ("VEXP", _U, "in"), ("VCADD", _U, "in"), ("VLN", _U, "row"),
        ("VSUB", _B, "in"),
    ],
    ag.LayerNormOp: [
        ("VCADD", _U, "in"), ("VMULS", _B, "row"), ("VSUB", _B, "in"), ("VMUL", _B, "in"), ("VCADD", _U, "in"),
        ("VMULS", _B, "row"), ("VADDS", _B, "row"), ("VRSQRT", _U, "row"), ("VMUL", _B, "in"), ("VMUL", _B, "in"),
        ("VADD", _B, "in"),
    ],
    ag.BatchNormOp: [
        ("VADDS", _B, "param"), ("VRSQRT", _U, "param"), ("VMUL", _B, "param"), ("VMUL", _B, "param"),
        ("VSUB", _B, "param"), ("VMUL", _B, "out"), ("VADD", _B, "out"),
    ],
    ag.MaxPoolOp: [("VMAX", _B, "window")],
    ag.AvgPoolOp: [("VADD", _B, "window"), ("VMULS", _B, "out")],
    ag.GlobalAveragePoolOp: [("VADD", _B, "in"), ("VMULS", _B, "out")],
    ag.GlobalMaxPoolOp: [("VMAX", _B, "in")],
    ag.ArgMaxOp: [("VCMAX", _U, "in")],
    ag.ArgMinOp: [("VCMIN", _U, "in")],
    ag.GatherElementsOp: [("VGATHER", "{u}_{u}", "out")],
}
RECIPES[ag.InstanceNormOp] = RECIPES[ag.LayerNormOp]
RECIPES[ag.ClipByValueOp] = [("VMAXS", _B, "out"), ("VMINS", _B, "out")]

MOVES: tuple[type[Operation], ...] = (
    ag.ConcatOp, ag.SplitOp, ag.SplitVOp, ag.StridedSliceOp, ag.DepthToSpaceOp, ag.SpaceToDepthOp, ag.GatherOp,
)
"""Ops that only move data: DMA between GM and UB, no vector instruction."""
PROPORTIONAL: tuple[type[Operation], ...] = (
    ag.ConcatOp, ag.SplitOp, ag.SplitVOp, ag.StridedSliceOp, ag.PadOp, ag.TileOp, ag.DepthToSpaceOp,
    ag.SpaceToDepthOp, ag.ResizeOp, ag.TransposeOp, ag.ConfusionTransposeOp, ag.TransDataOp, ag.GatherOp,
    ag.MaxPoolOp, ag.AvgPoolOp,
)
"""Ops whose operands and results are cut into tiles in proportion to their sizes."""


def recipe(op: Operation) -> Recipe:
    """The vector instructions one tile of the op takes."""
    impl = op.attributes.get("impl_mode")
    precise = getattr(impl, "data", "high_performance") == "high_precision"
    if isinstance(op, ag.GeluOp):
        tanh_form = [
            ("VMUL", _B, "out"), ("VMUL", _B, "out"), ("VMULS", _B, "out"), ("VADD", _B, "out"),
            ("VMULS", _B, "out"), ("VEXP", _U, "out"), ("VADDS", _B, "out"), ("VDIV", _B, "out"),
        ]
        erf_form = _ERF + [("VMULS", _B, "out"), ("VADDS", _B, "out"), ("VMUL", _B, "out")]
        return erf_form if op.props.str("approximate", "none") == "none" else tanh_form
    if isinstance(op, ag.ReciprocalOp):
        return [("VECTORDUP", _U, "out"), ("VDIV", _B, "out")] if precise else [("VREC", _U, "out")]
    if isinstance(op, ag.ClipByValueOp):
        return [r for r, key in zip(RECIPES[ag.ClipByValueOp], ("min", "max")) if op.props.has(key)]
    if isinstance(op, ag.ReduceOp):
        return _reduction(op)
    if isinstance(op, ag.TransDataOp):
        fmts = {op.props.str("src_format"), op.props.str("dst_format")}
        return [] if "FRACTAL_NZ" in fmts else [("VNCHWCONV", "{u}_{u}", "out")]
    if isinstance(op, ag.TransposeOp | ag.ConfusionTransposeOp):
        perm = op.props.ints("perm")
        return [] if perm and perm[-1] == len(perm) - 1 else [("VNCHWCONV", "{u}_{u}", "out")]
    if isinstance(op, ag.ResizeOp):
        steps = {"nearest": 0, "linear": 2, "cubic": 4}[op.props.str("mode")]
        return [("VMUL", _B, "out"), ("VADD", _B, "out")] * steps
    if isinstance(op, MOVES):
        return []
    if type(op) in RECIPES:
        return RECIPES[type(op)]
    raise ModelError(f"{getattr(op, 'OP_TYPE', op.name)}: no vector kernel for {op.name}")


def _reduction(op: ag.ReduceOp) -> Recipe:
    shape = ag.shape_of(op.x.type)
    axes = shapes.norm_axes(op.props.ints("axes"), len(shape)) or tuple(range(len(shape)))
    across = len(shape) - 1 in axes  # the last axis: within a repeat (VC*), else across rows
    instr = {
        ag.ReduceSumOp: ("VCADD", "VADD"), ag.ReduceMeanOp: ("VCADD", "VADD"),
        ag.ReduceMaxOp: ("VCMAX", "VMAX"), ag.ReduceMinOp: ("VCMIN", "VMIN"), ag.ReduceProdOp: ("VMUL", "VMUL"),
    }[type(op)][0 if across else 1]
    steps: Recipe = [(instr, _U if instr.startswith("VC") else _B, "in")]
    return steps + ([("VMULS", _B, "out")] if isinstance(op, ag.ReduceMeanOp) else [])


_DTYPE_NAMES = {"float16": "FP16", "bfloat16": "BF16", "float32": "FP32", "float64": "FP64", "bool": "UINT8"}


def dtype_name(dtype: Attribute) -> str:
    """The calibration tables' spelling: FP16, BF16, FP32, INT8, UINT8, INT32, ..."""
    name = dtypes.name(dtype)
    return _DTYPE_NAMES.get(name, name.upper())


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


def alignment(profile: SocProfile, level: str) -> int:
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
    slots = range(min(iterations(full, size, tail), 2))
    ops: Ops = [SetFlagOp(c, p, e + s) for s in slots for c, p, e in frees]
    pairs, odd = divmod(full, 2)  # iteration i takes slot (start + i) % 2
    ops += repeat(pairs, lambda: make(start, size) + make(1 - start, size))
    if odd:
        ops += make(start, size)
    if tail:
        ops += make((start + full) % 2, tail)
    ops += [WaitFlagOp(c, p, e + s) for s in slots for c, p, e in frees]
    return ops


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


def emit_recipes(
    ops: Sequence[Operation], buffers: dict[SSAValue, SSAValue], elements_of: Callable[[SSAValue], int], rows: int
) -> Ops:
    """The vector instructions of `ops` over one tile: `buffers` holds each value's UB
    buffer, `elements_of` its elements in the tile, `rows` the tile's rows."""
    out: Ops = []
    for op in ops:
        steps = recipe(op)
        if not steps:
            continue
        first, result = op.operands[1 if isinstance(op, ag.SelectOp) else 0], op.results[0]  # a select's values, not its mask
        din, dout = ag.dtype_of(first.type), ag.dtype_of(result.type)
        widen = dtype_name(din) == "BF16" and not isinstance(op, ag.CastOp)  # no bfloat16 arithmetic
        compute = "FP32" if widen else dtype_name(din)
        width = formats.element_bits(din)
        size = 4 if widen else max(1, width // 8, formats.element_bits(dout) // 8)
        basis = {
            "out": elements_of(result),
            "in": elements_of(first),
            "row": max(rows, 1),
            "param": elements_of(op.operands[1]) if len(op.operands) > 1 else 1,
            "window": elements_of(result) * _window(op),
        }
        buffers_ = [buffers[result], *(buffers[v] for v in op.operands if v in buffers)]
        if widen:
            out += vec("VCONV", "BF16_FP32", basis["in"], buffers_, 4)
        for instr, template, base in steps:
            names = template.format(d=compute, i=dtype_name(din), o=dtype_name(dout), u=f"UINT{max(width, 16)}")
            out += vec(instr, names, basis[base], buffers_, size)
        if widen and dtype_name(dout) == "BF16":
            out += vec("VCONV", "FP32_BF16", basis["out"], buffers_[:1], 4)
    return out


def _window(op: Operation) -> int:
    return shapes.numel(op.props.ints("ksize")) if isinstance(op, ag.PoolOp) else 1


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



# ----------------------------------------------------------------- cube kernels


@dataclass(frozen=True)
class Gemm:
    """One fractal matmul problem: `batch` x ([m, k] x [k, n]), in elements."""

    batch: int
    m: int
    k: int
    n: int
    in_dtype: Attribute
    out_dtype: Attribute
    a_nd: bool = False
    """A is ND in GM and MTE2 converts it to NZ on the way to L1 (FIX parts)."""
    b_nd: bool = False
    out_nd: bool = False
    """The result is ND in GM: FIX converts NZ to ND on the way out."""
    conv: tuple[int, int, int, int, int] | None = None
    """For a convolution: (input height and width incl. padding, output width, stride
    along H, dilated kernel height); A is then the input's rows, not an NZ matrix."""
    window: int = 1
    """kh * kw of a convolution: its K holds C1 slices of `window` fractal columns."""

    @property
    def in_bytes(self) -> int:
        return max(1, formats.element_bits(self.in_dtype) // 8)

    @property
    def out_bytes(self) -> int:
        return max(1, formats.element_bits(self.out_dtype) // 8)

    @property
    def img2col(self) -> bool:
        return self.conv is not None and (self.window > 1 or self.conv[3] > 1)

    def a_l1_bytes(self, rows: int, k: int, kc: int) -> int:
        """L1 bytes of an A panel of `rows` x `k`: its fractals or, for a convolution
        if fewer, the input rows its output pixels read (at worst they start at the
        end of an output row: ceil((rows - 1) / Wo) + 1 output rows)."""
        kfrac = -(-k // kc)
        fractals = -(-rows // FRACTAL) * kfrac * FRACTAL_BYTES
        if self.conv is None:
            return fractals
        hi, wi, wo, stride, kh = self.conv
        rows_in = min(hi, -(-(rows - 1) // wo) * stride + kh)
        return min(fractals, -(-kfrac // self.window) * rows_in * wi * kc * self.in_bytes)

    def a_gm_bytes(self, rows: int, k: int, kc: int) -> int:
        """GM bytes an A panel reads: exactly its elements when ND, else what L1 holds."""
        return rows * k * self.in_bytes if self.a_nd else self.a_l1_bytes(rows, k, kc)

    def b_gm_bytes(self, k: int, cols: int, kc: int) -> int:
        """GM bytes of a B panel: exactly its elements when ND, else whole fractals."""
        if self.b_nd:
            return k * cols * self.in_bytes
        return _align(k, kc) * _align(cols, FRACTAL) * self.in_bytes


@dataclass(frozen=True)
class CubeTiling:
    """Blocks and tiles of a Gemm, in elements (m0, n0 multiples of 16; k0, k1 of kc)."""

    batch_dim: int
    m_dim: int
    n_dim: int
    bb: int
    mb: int
    nb: int
    m0: int
    n0: int
    k0: int
    k1: int
    b_resident: bool
    kc: int
    """The cube's k: elements per fractal column (16 for float16, 32 for int8)."""

    @property
    def block_dim(self) -> int:
        return self.batch_dim * self.m_dim * self.n_dim

    def params(self, gemm: Gemm, prefix: str = "") -> dict[str, int]:
        values = {
            "batch": gemm.batch, "m": gemm.m, "k": gemm.k, "n": gemm.n, "batch_dim": self.batch_dim,
            "m_dim": self.m_dim, "n_dim": self.n_dim, "block_batch": self.bb, "block_m": self.mb,
            "block_n": self.nb, "m0": self.m0, "n0": self.n0, "k0": self.k0, "k1": self.k1,
            "b_resident": int(self.b_resident),
        }
        return {f"{prefix}{k}": v for k, v in values.items()}


def cube_k(profile: SocProfile, dtype: Attribute) -> int:
    """Elements of the cube's k for the input dtype (16 for float16, 32 for int8)."""
    try:
        return profile.cube_shape(dtypes.name(dtype)).k
    except OptionError as e:
        raise ModelError(f"{e}; choose the cube's dtypes first (precision-selection)") from e


def block_split(units: Sequence[int], cores: int, cost: Callable[[tuple[int, ...]], float]) -> tuple[int, ...]:
    """Blocks per dimension, at most `cores` in all (one wave): the split whose
    largest block has the fewest units, then the least `cost` of the largest
    block, then the most blocks. It fills the cores whenever some split does
    without giving a block more work."""
    best: tuple[int, float, int, tuple[int, ...]] | None = None

    def visit(prefix: tuple[int, ...]) -> None:
        nonlocal best
        used = math.prod(prefix)
        if len(prefix) == len(units):
            per = tuple(-(-u // d) for u, d in zip(units, prefix))
            score = (math.prod(per), cost(per), -used)
            if best is None or score < best[:3]:
                best = (*score, prefix)
            return
        for d in range(1, min(units[len(prefix)], cores // used) + 1):
            visit(prefix + (d,))

    visit(())
    assert best is not None
    return best[3]


def tile_gemm(
    profile: SocProfile, gemm: Gemm, cores: int, epilogue_ub: Callable[[int, int], int], bias_table: bool = False
) -> CubeTiling:
    """Blocks, L0 tiles and L1 panels of a Gemm. `epilogue_ub(m0, n0)` is the UB the
    epilogue of an m0 x n0 tile needs; with `bias_table`, an n0 tile's float32 bias
    must fit the bias table."""
    kc = cube_k(profile, gemm.in_dtype)
    mf, nf, kf = -(-gemm.m // FRACTAL), -(-gemm.n // FRACTAL), -(-gemm.k // kc)
    gm_rate = max(profile.gm_bytes_per_cycle, 1.0)

    def block_cost(per: tuple[int, ...]) -> float:
        bb, mb, nb = per
        compute = bb * mb * nb * kf
        traffic = bb * ((mb + nb) * kf * FRACTAL_BYTES + mb * nb * FRACTAL * FRACTAL * gemm.out_bytes) / gm_rate
        return max(compute, traffic) + 100

    batch_dim, m_dim, n_dim = block_split((gemm.batch, mf, nf), cores, block_cost)
    bb, mbf, nbf = -(-gemm.batch // batch_dim), -(-mf // m_dim), -(-nf // n_dim)
    cap_a = profile.l0a_bytes // FRACTAL_BYTES // 2
    cap_b = profile.l0b_bytes // FRACTAL_BYTES // 2
    cap_c = profile.l0c_bytes // ACC_FRACTAL_BYTES // 2
    cap_n = BIAS_TABLE_BYTES // (FRACTAL * ACC_BYTES) if bias_table else cap_b
    l1 = profile.l1_bytes - (BIAS_TABLE_BYTES if bias_table else 0)

    def panels(m0f: int, n0f: int, k1f: int, b_k: int) -> int:
        """L1 for two A panels of k1f fractal columns and two B panels of b_k."""
        a = aligned(profile, "L1", gemm.a_l1_bytes(m0f * FRACTAL, k1f * kc, kc))
        return 2 * a + 2 * b_k * n0f * FRACTAL_BYTES

    best: tuple[float, int, int, int] | None = None
    for m0f in range(1, min(mbf, cap_a) + 1):
        for n0f in range(1, min(nbf, cap_c // m0f, cap_b, cap_n) + 1):
            k0f = min(kf, cap_a // m0f, cap_b // n0f)
            while k0f > 1 and panels(m0f, n0f, k0f, k0f) > l1:  # a convolution's input rows fill L1 fast
                k0f //= 2
            if k0f < 1 or panels(m0f, n0f, k0f, k0f) > l1 or epilogue_ub(m0f * FRACTAL, n0f * FRACTAL) > profile.ub_bytes:
                continue
            steps = -(-mbf // m0f) * -(-nbf // n0f) * -(-kf // k0f)
            cost = steps * max(m0f * n0f * k0f + MMAD_OVERHEAD, (m0f + n0f) * k0f * FRACTAL_BYTES / 128)
            if best is None or cost < best[0] - 1e-9:
                best = (cost, m0f, n0f, k0f)
    if best is None:
        raise ModelError(f"no cube tile of a {gemm.m}x{gemm.k}x{gemm.n} matmul fits {profile.name}'s buffers")
    _, m0f, n0f, k0f = best
    m0, n0 = m0f * FRACTAL, n0f * FRACTAL
    b_resident = panels(m0f, n0f, k0f, kf) <= l1 // 2  # B's whole K beside A, with room to spare

    def fits(k1f: int) -> bool:
        return panels(m0f, n0f, k1f, kf if b_resident else k1f) <= l1

    k1f = k0f
    while k1f + k0f <= kf and fits(k1f + k0f):
        k1f += k0f
    mb = min(mbf * FRACTAL, gemm.m)
    return CubeTiling(batch_dim, m_dim, n_dim, bb, mb, nbf * FRACTAL, min(m0, _align(mb, FRACTAL)), n0, k0f * kc, k1f * kc, b_resident, kc)


def _align(x: int, unit: int) -> int:
    return -(-x // unit) * unit


@dataclass(frozen=True)
class EpiValue:
    """A value of a cube kernel's epilogue in UB: a whole tile ("tile"), one row of
    the tile's columns ("col": a bias or per-channel operand) or one element. The
    value is a graph value, or a name for one in the workspace."""

    value: Hashable
    kind: str
    element_bytes: int
    double: bool
    """Two buffers: it is loaded or stored while the other tile computes."""

    def elements(self, m: int, n: int) -> int:
        return {"tile": m * n, "col": n, "one": 1}[self.kind]

    def nbytes(self, m: int, n: int) -> int:
        return self.elements(m, n) * self.element_bytes


@dataclass
class Epilogue:
    """What happens to an m x n result tile after its mmads (see `cube_program`)."""

    kind: str
    """"fix": FIX writes GM; "vector": V drains L0C into UB; "mixed": FIX writes
    the workspace and V reads it back into UB."""
    result: Hashable
    """The cube op's result."""
    tail: Sequence[Operation] = ()
    values: list[EpiValue] = field(default_factory=list)
    loads: list[Hashable] = field(default_factory=list)
    stores: list[Hashable] = field(default_factory=list)
    bias: Hashable | None = None
    """Added in UB (a "col" load) where there is no FIX pipe, else through the bias table."""
    scale: bool = False
    """A GEMM's alpha other than 1: one VMULS per tile."""
    addend: Hashable | None = None
    """A GEMM's c that is no bias: added per tile (after a VMULS by beta if `addend_scaled`)."""
    addend_scaled: bool = False
    nd_store: bool = False
    """The scope ends in a TransData FRACTAL_NZ -> ND that FIX does on its way out."""
    aliases: dict[Hashable, Hashable] = field(default_factory=dict)
    """Values whose tile is another value's buffer (a TransData to ND that MTE3 does as it stores)."""

    def ub_bytes(self, profile: SocProfile, m: int, n: int) -> int:
        if self.kind == "fix":
            return 0
        return sum(aligned(profile, "UB", v.nbytes(m, n)) * (2 if v.double else 1) for v in self.values)

    def workspace(self, m: int, n: int, out_bytes: int) -> int:
        """GM bytes one block needs (two tiles) when FIX hands the tile to V through GM."""
        return 2 * m * n * out_bytes if self.kind == "mixed" else 0


def cube_program(
    prog: Program, gemm: Gemm, t: CubeTiling, e: Epilogue, gm: dict[Hashable, SSAValue],
    a: SSAValue, b: SSAValue, workspace: SSAValue | None,
) -> Ops:
    """One block's program for a Gemm: `gm` maps graph values to their GM buffers,
    `a` and `b` are the GM buffers of the operands."""
    p, kc, in_b = prog.profile, t.kc, gemm.in_bytes
    l1_a = prog.pair("L1", gemm.a_l1_bytes(t.m0, t.k1, kc))
    l1_b = prog.pair("L1", (_align(gemm.k, kc) if t.b_resident else t.k1) * t.n0 * in_b)
    l0a = prog.pair("L0A", t.m0 * t.k0 * in_b)
    l0b = prog.pair("L0B", t.k0 * t.n0 * in_b)
    l0c = prog.pair("L0C", t.m0 * t.n0 * ACC_BYTES)
    table = None
    if e.bias is not None and p.fix_pipe:
        table = (prog.alloc("L1", t.n0 * in_b), prog.alloc("BT", t.n0 * ACC_BYTES))
    ub = {v.value: prog.pair("UB", v.nbytes(t.m0, t.n0)) if v.double else (prog.alloc("UB", v.nbytes(t.m0, t.n0)),) * 2 for v in e.values}
    ub.update({alias: ub[of] for alias, of in e.aliases.items()})
    drain = "FIX" if e.kind in ("fix", "mixed") else "V"
    a_mode = "nd2nz" if gemm.a_nd else "normal"
    b_mode = "nd2nz" if gemm.b_nd else "normal"

    def k0_steps(sa: int, sb: int, sc: int, m: int, n: int) -> Ops:
        def make(sz: int, k: int) -> Ops:
            ops: Ops = [WaitFlagOp("M", "MTE1", sz)]
            ops.append(copy(p, l1_a[sa], l0a[sz], _align(m, FRACTAL) * k * in_b, "img2col" if gemm.img2col else "normal"))
            ops.append(copy(p, l1_b[sb], l0b[sz], k * n * in_b))
            ops += sync("MTE1", "M", sz)
            ops.append(MmadOp(l0a[sz], l0b[sz], l0c[sc], _align(m, FRACTAL), _align(k, kc), n, gemm.in_dtype))
            ops.append(SetFlagOp("M", "MTE1", sz))
            return body(ops)

        return make

    # The L1 panels and the L0 steps run as two streams of ping-pong slots through
    # all M tiles of an N tile (primed and drained around them, so that MTE2 and MTE1
    # load ahead across tile and panel boundaries). A tile's first panel and step
    # then take the parity of the panels and steps before it: with an odd count per
    # tile that is the tile's own L0C slot, with an even one always slot 0.
    panels = split(gemm.k, t.k1)
    steps = iterations(*split(t.k1, t.k0))
    steps_per_tile = panels[0] * steps + (iterations(*split(panels[2], t.k0)) if panels[2] else 0)

    def k1_panels(sc: int, m: int, n: int, sb: int) -> Ops:
        first_panel = sc if iterations(*panels) % 2 else 0
        first_step = sc if steps_per_tile % 2 else 0

        def make(sa: int, k1: int) -> Ops:
            ops: Ops = [WaitFlagOp("MTE1", "MTE2", sa), copy(p, a, l1_a[sa], gemm.a_gm_bytes(m, k1, kc), a_mode)]
            if not t.b_resident:
                ops.append(copy(p, b, l1_b[sa], gemm.b_gm_bytes(k1, n, kc), b_mode))
            ops += sync("MTE2", "MTE1", sa)
            start = (first_step + (sa - first_panel) % 2 * steps) % 2
            ops += double_buffered(*split(k1, t.k0), k0_steps(sa, sb if t.b_resident else sa, sc, m, n), [], start)
            ops.append(SetFlagOp("MTE1", "MTE2", sa))
            return body(ops)

        return double_buffered(*panels, make, [], first_panel)

    def m_tiles(n: int, sb: int) -> Ops:
        streams = [SetFlagOp(c, d, s) for c, d in (("MTE1", "MTE2"), ("M", "MTE1")) for s in (0, 1)]
        frees = [(drain, "M", 0)]
        if e.kind != "fix":
            frees.append(("MTE3", "V", 0))
            if e.loads or e.kind == "mixed":
                frees.append(("V", "MTE2", 0))

        def make(sc: int, m: int) -> Ops:
            ops: Ops = [WaitFlagOp(drain, "M", sc), *k1_panels(sc, m, n, sb), *sync("M", drain, sc)]
            return body(ops + _drain(p, gemm, e, gm, l0c[sc], ub, sc, m, n, workspace))

        tiles = double_buffered(*split(t.mb, t.m0), make, frees)
        return [*streams, *tiles, *(WaitFlagOp(*op.key) for op in streams)]

    def bias_table(n: int) -> Ops:
        if table is None or e.bias is None:
            return []
        ops = [*sync("MTE1", "MTE2", 4), copy(p, gm[e.bias], table[0], n * in_b)]
        ops += [*sync("MTE2", "MTE1", 4), *sync("M", "MTE1", 4), copy(p, table[0], table[1], n * ACC_BYTES)]
        return ops + sync("MTE1", "M", 4)

    def n_tiles() -> Ops:
        if not t.b_resident:
            return sequence(*split(t.nb, t.n0), lambda n: body(bias_table(n) + m_tiles(n, 0)))

        def make(sb: int, n: int) -> Ops:
            ops: Ops = [WaitFlagOp("MTE1", "MTE2", 2 + sb), copy(p, b, l1_b[sb], gemm.b_gm_bytes(gemm.k, n, kc), b_mode)]
            ops += [*sync("MTE2", "MTE1", 2 + sb), *bias_table(n), *m_tiles(n, sb)]
            return body(ops + [SetFlagOp("MTE1", "MTE2", 2 + sb)])

        return double_buffered(*split(t.nb, t.n0), make, [("MTE1", "MTE2", 2)])

    return repeat(t.bb, n_tiles)


def _drain(
    p: SocProfile, gemm: Gemm, e: Epilogue, gm: dict[Hashable, SSAValue], acc: SSAValue,
    ub: dict[Hashable, tuple[SSAValue, SSAValue]], slot: int, m: int, n: int, workspace: SSAValue | None,
) -> Ops:
    """An m x n result tile out of L0C, through the epilogue, into GM."""
    tile_bytes = m * n * gemm.out_bytes
    if e.kind == "fix":
        return [copy(p, acc, gm[e.stores[0]], tile_bytes, "nz2nd" if gemm.out_nd else "normal"), SetFlagOp("FIX", "M", slot)]
    buffers = {v: pair[slot] for v, pair in ub.items()}
    sizes = {v.value: v.elements(m, n) for v in e.values}
    nbytes = {v.value: v.nbytes(m, n) for v in e.values}
    for alias, of in e.aliases.items():
        sizes[alias], nbytes[alias] = sizes[of], nbytes[of]
    reads = bool(e.loads) or e.kind == "mixed"
    ops: Ops = []
    if e.kind == "mixed":
        assert workspace is not None
        ops += [copy(p, acc, workspace, tile_bytes), SetFlagOp("FIX", "M", slot), *sync("FIX", "MTE2", slot)]
    if reads:
        ops.append(WaitFlagOp("V", "MTE2", slot))
    if e.kind == "mixed":
        ops.append(copy(p, workspace, buffers[e.result], tile_bytes))  # type: ignore[arg-type]
    ops += [copy(p, gm[v], buffers[v], nbytes[v]) for v in e.loads]
    if reads:
        ops += sync("MTE2", "V", slot)
    ops.append(WaitFlagOp("MTE3", "V", slot))
    if e.kind == "vector":
        ops += [copy(p, acc, buffers[e.result], tile_bytes), SetFlagOp("V", "M", slot)]
    out = dtype_name(gemm.out_dtype)
    if e.scale:
        ops += vec("VMULS", f"{out}_{out}_{out}", m * n, [buffers[e.result]], gemm.out_bytes)
    if e.bias is not None and not p.fix_pipe:
        ops += vec("VADD", f"{out}_{out}_{out}", m * n, [buffers[e.result], buffers[e.bias]], gemm.out_bytes)
    if e.addend is not None:
        if e.addend_scaled:
            ops += vec("VMULS", f"{out}_{out}_{out}", sizes[e.addend], [buffers[e.addend]], gemm.out_bytes)
        ops += vec("VADD", f"{out}_{out}_{out}", m * n, [buffers[e.result], buffers[e.addend]], gemm.out_bytes)
    ops += emit_recipes(e.tail, buffers, lambda v: sizes[v], m)  # type: ignore[arg-type]
    if reads:
        ops.append(SetFlagOp("V", "MTE2", slot))
    ops += sync("V", "MTE3", slot)
    ops += [copy(p, buffers[v], gm[v], nbytes[v]) for v in e.stores]
    return ops + [SetFlagOp("MTE3", "V", slot)]



# --------------------------------------------------------------- vector kernels


@dataclass(frozen=True)
class Space:
    """The iteration space of a vector scope: `rows` of `row` elements."""

    rows: int
    row: int
    total: int


@dataclass(frozen=True)
class UbValue:
    """A value of a vector scope with its UB buffer: elements per row of the space,
    at most `cap` (a broadcast operand is read whole, once per tile), as laid out
    (`padding`: physical over logical elements), and whether GM reads or writes it."""

    value: SSAValue
    per_row: float
    cap: int
    element_bytes: int
    crosses_gm: bool
    padding: float

    def elements(self, rows: float) -> int:
        return max(1, math.ceil(min(self.cap, self.per_row * rows) * self.padding))

    def nbytes(self, rows: float) -> int:
        return self.elements(rows) * self.element_bytes


def ub_bytes(profile: SocProfile, values: Iterable[UbValue], rows: float) -> int:
    """UB for a tile of `rows`: every value its buffer, two for those GM reads or writes."""
    return sum(aligned(profile, "UB", v.nbytes(rows)) * (2 if v.crosses_gm else 1) for v in values)


def row_length(op: Operation) -> int:
    """Elements one row of the op needs whole (1 for elementwise work)."""
    x = ag.shape_of(op.operands[0].type) if op.operands else ()
    if isinstance(op, ag.ReduceOp):
        axes = shapes.norm_axes(op.props.ints("axes"), len(x)) or tuple(range(len(x)))
        return shapes.numel([x[a] for a in axes])
    if isinstance(op, ag.SoftmaxOp | ag.LogSoftmaxOp):
        return shapes.numel([x[a] for a in shapes.norm_axes(op.props.ints("axes"), len(x))])
    if isinstance(op, ag.LayerNormOp):
        return shapes.numel(x[shapes.norm_axis(op.props.int("begin_norm_axis"), len(x)) :])
    if isinstance(op, ag.InstanceNormOp | ag.GlobalPoolOp):
        return shapes.numel(x[2:])
    if isinstance(op, ag.ArgOp):
        return x[shapes.norm_axis(op.props.int("axis"), len(x))]
    return 1


def _gathered(ops: Sequence[Operation]) -> dict[SSAValue, SSAValue]:
    """The tables gathers index (read row by row), with what each gathers from them."""
    return {op.operands[0]: op.results[0] for op in ops if isinstance(op, ag.GatherOp | ag.GatherElementsOp)}


def vector_space(ops: Sequence[Operation]) -> Space:
    tables = _gathered(ops)
    total = max(numel(v) for op in ops for v in (*op.operands, *op.results) if v not in tables)
    row = max(row_length(op) for op in ops)
    return Space(max(1, total // row), row, total)


def vector_values(ops: Sequence[Operation], crossing: set[SSAValue], space: Space, rows: int) -> list[UbValue]:
    """Every value of the scope, with its share of a tile of `space`'s rows (pieces
    of the scope's `rows` when a whole row does not fit)."""
    partitioned = {v for op in ops if isinstance(op, PROPORTIONAL) for v in (*op.operands, *op.results)}
    tables = _gathered(ops)
    found: dict[SSAValue, UbValue] = {}
    for v in (v for op in ops for v in (*op.operands, *op.results)):
        if v in found:
            continue
        n = numel(tables.get(v, v))
        if v in tables or n == space.total or v in partitioned:
            per = n / space.rows  # streamed with the rows
        elif n == rows and space.total > rows:
            per = n / space.rows  # one per row: a reduction's result
        else:
            per = float(space.row)  # broadcast along the rows: whole, up to a tile's worth
        found[v] = UbValue(v, per, n, element_bytes(v), v in crossing, padding(v))
    return list(found.values())


def vector_plan(
    profile: SocProfile, ops: Sequence[Operation], inputs: Sequence[SSAValue], outputs: Sequence[SSAValue],
    cores: int, core_type: str,
) -> Plan:
    """Blocks and UB tiles of a vector scope, and its program. A row too long for
    the UB is cut into pieces that are: a reduction accumulates piece by piece, a
    normalisation (softmax, layer or instance norm) reads its pieces twice, once
    for the row's statistics and once to normalise."""
    space = vector_space(ops)
    crossing = set(inputs) | set(outputs)
    values = vector_values(ops, crossing, space, space.rows)
    narrowest = min(v.element_bytes for v in values)
    unit = 32 // narrowest if space.row == 1 else 1  # rows of a 32-byte block of the narrowest value
    units = -(-space.rows // unit)
    block_dim = min(cores, units)
    block_rows = min(space.rows, -(-units // block_dim) * unit)
    if ub_bytes(profile, values, min(unit, block_rows)) > profile.ub_bytes:
        if space.row == 1:
            raise ModelError(f"{_label(ops)}: one 32-byte block of each value does not fit {profile.name}'s UB")
        return _row_pieces(profile, ops, inputs, outputs, space, block_dim, block_rows, core_type)
    lo, hi = 1, max(1, -(-block_rows // unit))
    while lo < hi:  # the largest tile, in units, that fits
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if ub_bytes(profile, values, mid * unit) <= profile.ub_bytes else (lo, mid - 1)
    tile = min(lo * unit, block_rows)
    computes = any(recipe(op) for op in ops)
    tiling = {
        "rows": space.rows, "row": space.row, "elements": space.total, "block_rows": block_rows,
        "tile_rows": tile, "tiles": -(-block_rows // tile), "ub_bytes": ub_bytes(profile, values, tile),
    }

    def program(gm: dict[SSAValue, SSAValue], workspace: SSAValue | None) -> Ops:
        prog = Program(profile)
        ub = {v.value: prog.pair("UB", v.nbytes(tile)) if v.crosses_gm else (prog.alloc("UB", v.nbytes(tile)),) * 2 for v in values}
        share = {v.value: v for v in values}

        def make(slot: int, rows: int) -> Ops:
            buffers = {v: pair[slot] for v, pair in ub.items()}
            size = {v: share[v].elements(rows) for v in share}
            loads = [copy(profile, gm[v], buffers[v], size[v] * share[v].element_bytes) for v in inputs]
            stores = [copy(profile, buffers[v], gm[v], size[v] * share[v].element_bytes) for v in outputs]
            if not computes:
                return body([WaitFlagOp("MTE3", "MTE2", slot), *loads, *sync("MTE2", "MTE3", slot), *stores, SetFlagOp("MTE3", "MTE2", slot)])
            ops_: Ops = [WaitFlagOp("V", "MTE2", slot), *loads, *sync("MTE2", "V", slot), WaitFlagOp("MTE3", "V", slot)]
            ops_ += emit_recipes(ops, buffers, size.__getitem__, rows)
            ops_ += [SetFlagOp("V", "MTE2", slot), *sync("V", "MTE3", slot), *stores, SetFlagOp("MTE3", "V", slot)]
            return body(ops_)

        frees = [("V", "MTE2", 0), ("MTE3", "V", 0)] if computes else [("MTE3", "MTE2", 0)]
        gathers = sum(isinstance(op, ag.GatherOp) for op in ops)
        setup = [ScalarOp(SETUP_INSTRS + 4 * gathers * block_rows)]  # a gather's source address per row
        ops_ = double_buffered(*split(block_rows, tile), make, frees)
        return [*prog.allocs, *setup, *ops_]

    return Plan(block_dim, core_type, tiling, 0, program)


NORMALISING = (ag.SoftmaxOp, ag.LogSoftmaxOp, ag.LayerNormOp, ag.InstanceNormOp)


def _row_pieces(
    profile: SocProfile, ops: Sequence[Operation], inputs: Sequence[SSAValue], outputs: Sequence[SSAValue],
    space: Space, block_dim: int, block_rows: int, core_type: str,
) -> Plan:
    """A vector scope whose rows are cut into the largest pieces that fit the UB."""
    crossing = set(inputs) | set(outputs)
    pieces = 2
    while True:
        part = Space(space.rows * pieces, -(-space.row // pieces), space.total)
        values = vector_values(ops, crossing, part, space.rows)
        if ub_bytes(profile, values, 1) <= profile.ub_bytes:
            break
        if part.row == 1:
            raise ModelError(f"{_label(ops)}: not even one element of each value fits {profile.name}'s UB")
        pieces *= 2
    piece = part.row
    passes = 2 if any(isinstance(op, NORMALISING) for op in ops) else 1
    tiling = {
        "rows": space.rows, "row": space.row, "elements": space.total, "block_rows": block_rows,
        "row_pieces": -(-space.row // piece), "piece": piece, "passes": passes, "ub_bytes": ub_bytes(profile, values, 1),
    }

    def program(gm: dict[SSAValue, SSAValue], workspace: SSAValue | None) -> Ops:
        prog = Program(profile)
        ub = {v.value: prog.pair("UB", v.nbytes(1)) if v.crosses_gm else (prog.alloc("UB", v.nbytes(1)),) * 2 for v in values}
        share = {v.value: v for v in values}

        def make(slot: int, elements: int) -> Ops:
            buffers = {v: pair[slot] for v, pair in ub.items()}
            size = {v: share[v].elements(elements / piece) for v in share}
            loads = [copy(profile, gm[v], buffers[v], size[v] * share[v].element_bytes) for _ in range(passes) for v in inputs]
            stores = [copy(profile, buffers[v], gm[v], size[v] * share[v].element_bytes) for v in outputs]
            ops_: Ops = [WaitFlagOp("V", "MTE2", slot), *loads, *sync("MTE2", "V", slot), WaitFlagOp("MTE3", "V", slot)]
            ops_ += emit_recipes(ops, buffers, size.__getitem__, 1)
            ops_ += [SetFlagOp("V", "MTE2", slot), *sync("V", "MTE3", slot), *stores, SetFlagOp("MTE3", "V", slot)]
            return body(ops_)

        row = lambda: body(double_buffered(*split(space.row, piece), make, [("V", "MTE2", 0), ("MTE3", "V", 0)]))  # noqa: E731
        return [*prog.allocs, ScalarOp(SETUP_INSTRS), *repeat(block_rows, row)]

    return Plan(block_dim, core_type, tiling, 0, program)


def _label(ops: Sequence[Operation]) -> str:
    op = ops[0]
    return f"{op.OP_TYPE} '{op.label}'" if isinstance(op, ag.AscendOp) else op.name


# ----------------------------------------------------------- planning a scope


def plan(profile: SocProfile, ops: Sequence[Operation], inputs: Sequence[SSAValue], outputs: Sequence[SSAValue]) -> Plan:
    """The plan of one kernel scope: `ops` in program order, read `inputs` and
    written `outputs` (the values crossing the scope's boundary)."""
    cubes = [op for op in ops if isinstance(op, ag.CubeOp)]
    if not cubes:
        if profile.split_cores:
            return vector_plan(profile, ops, inputs, outputs, profile.vector_cores, "VectorCore")
        return vector_plan(profile, ops, inputs, outputs, profile.ai_cores, "AiCore")
    cube = cubes[0]
    if len(cubes) > 1 or ops[0] is not cube:
        raise ModelError(f"{_label(ops)}: a kernel holds one cube op, its first; this scope has {len(cubes)}, after {ops[0].name}")
    if isinstance(cube, ag.MultiHeadAttentionOp):
        return attention_plan(profile, cube, inputs, outputs)
    gemm, n_logical = gemm_of(profile, cube)
    e = epilogue_of(profile, cube, list(ops[1:]), outputs, n_logical)
    if e.nd_store:
        gemm = replace(gemm, out_nd=True)
    t = tile_gemm(profile, gemm, profile.ai_cores, lambda m, n: e.ub_bytes(profile, m, n), bias_table=e.bias is not None and profile.fix_pipe)
    workspace = t.block_dim * e.workspace(t.m0, t.n0, gemm.out_bytes)

    def program(gm: dict[SSAValue, SSAValue], ws: SSAValue | None) -> Ops:
        prog = Program(profile)
        ops_ = cube_program(prog, gemm, t, e, gm, gm[cube.operands[0]], gm[cube.operands[1]], ws)
        return [*prog.allocs, ScalarOp(SETUP_INSTRS), *ops_]

    return Plan(t.block_dim, "AiCore", {**t.params(gemm), "epilogue": EPILOGUES.index(e.kind)}, workspace, program)


EPILOGUES = ("fix", "vector", "mixed")
"""The `epilogue` tiling parameter indexes these (see `Epilogue.kind`)."""


def _matrix(shape: tuple[int, ...], transposed: bool, vector_rows: bool) -> tuple[int, int]:
    """(rows, cols) of a matmul operand; a 1-D one is a row (A) or a column (B)."""
    if len(shape) == 1:
        return (1, shape[0]) if vector_rows else (shape[0], 1)
    rows, cols = shape[-2:]
    return (cols, rows) if transposed else (rows, cols)


def gemm_of(profile: SocProfile, op: ag.CubeOp) -> tuple[Gemm, int]:
    """The fractal matmul of a cube op, and its result's logical N (channels or columns)."""
    x, w, y = op.operands[0], op.operands[1], op.results[0]
    din, dout = ag.dtype_of(x.type), ag.dtype_of(y.type)
    c0, kc = formats.c0(din), cube_k(profile, din)
    out = ag.shape_of(y.type)
    nd = {v: ag.format_of(v.type) is None for v in (x, w, y)}
    if isinstance(op, ag.Conv2DOp) or isinstance(op, ag.FullyConnectionOp) and len(ag.shape_of(x.type)) == 4 == len(ag.shape_of(w.type)):
        if nd[x]:
            raise ModelError(f"{op.OP_TYPE} '{op.label}': its input must be in NC1HWC0 (run format-selection first)")
        n, cin, h, wd = ag.shape_of(x.type)
        cout, cin_g, kh, kw = ag.shape_of(w.type)
        if isinstance(op, ag.FullyConnectionOp):
            return Gemm(1, n, _align(cin, c0) * h * wd, _align(cout, FRACTAL), din, dout), cout
        groups = op.props.int("groups", 1)
        if groups == 1:
            batch, cin_opt, cout_opt = 1, _align(cin, c0), _align(cout, FRACTAL)
        else:
            cout_g = cout // groups
            enlarge = min(math.lcm(cin_g, c0) // cin_g, math.lcm(cout_g, FRACTAL) // cout_g, groups)
            batch, cin_opt, cout_opt = -(-groups // enlarge), _align(cin_g * enlarge, c0), _align(cout_g * enlarge, FRACTAL)
        strides, pads, dil = op.props.ints("strides"), op.props.ints("pads"), op.props.ints("dilations")
        conv = (h + pads[0] + pads[1], wd + pads[2] + pads[3], out[3], strides[2], (kh - 1) * dil[2] + 1)
        return Gemm(batch, n * out[2] * out[3], cin_opt * kh * kw, cout_opt, din, dout, conv=conv, window=kh * kw), cout
    if isinstance(op, ag.FullyConnectionOp):
        axis = op.props.int("axis", 1)
        rows, k = math.prod(ag.shape_of(x.type)[:axis]), math.prod(ag.shape_of(x.type)[axis:])
        cols = op.props.int("num_output")
    else:
        ta, tb = {
            ag.MatMulV2Op: ("transpose_x1", "transpose_x2"), ag.BatchMatMulOp: ("adj_x1", "adj_x2"), ag.GemmOp: ("trans_a", "trans_b"),
        }[type(op)]
        rows, k = _matrix(ag.shape_of(x.type), op.props.bool(ta), True)
        _, cols = _matrix(ag.shape_of(w.type), op.props.bool(tb), False)
    batch = max(1, numel(y) // max(1, rows * cols))
    gemm = Gemm(batch, rows, k, cols, din, dout, a_nd=nd[x], b_nd=nd[w], out_nd=nd[y] and profile.fix_pipe)
    return gemm, cols


def _bias_of(op: ag.CubeOp, n_logical: int) -> SSAValue | None:
    """The per-column bias a cube op adds (a GEMM's c when it is one, times 1)."""
    if isinstance(op, ag.GemmOp):
        c = op.operands[2] if len(op.operands) > 2 else None
        if c is None or op.props.float("beta") != 1.0 or numel(c) != n_logical:
            return None
        return c
    return op.operands[2] if len(op.operands) > 2 else None


def epilogue_of(
    profile: SocProfile, cube: ag.CubeOp, tail: list[Operation], outputs: Sequence[SSAValue], n_logical: int
) -> Epilogue:
    """How the tiles of a cube op leave L0C (see `Epilogue`)."""
    result = cube.results[0]
    bias = _bias_of(cube, n_logical)
    scale = isinstance(cube, ag.GemmOp) and cube.props.float("alpha") != 1.0
    addend = None
    if isinstance(cube, ag.GemmOp) and len(cube.operands) > 2 and bias is None:
        addend = cube.operands[2]
    to_nd = bool(tail) and isinstance(tail[-1], ag.TransDataOp) and tail[-1].props.str("src_format") == "FRACTAL_NZ"
    compute = tail[:-1] if to_nd else tail
    plain = not compute or (len(compute) == 1 and isinstance(compute[0], ag.ReluOp))
    if profile.fix_pipe and plain and not scale and addend is None and len(outputs) == 1:
        return Epilogue("fix", result, tail, [], [], list(outputs), bias, nd_store=to_nd)
    kind = "mixed" if profile.fix_pipe else "vector"
    inside = {result, *(r for op in tail for r in op.results)}
    stored = set(outputs)
    aliases = {tail[-1].results[0]: tail[-1].operands[0]} if to_nd else {}
    values = [EpiValue(result, "tile", element_bytes(result), kind == "mixed" or result in stored)]
    values += [EpiValue(r, "tile", element_bytes(r), r in stored) for op in compute for r in op.results]
    if to_nd:  # MTE3 writes the NZ tile's rows in ND: the tile is its input's buffer
        values = [replace(v, double=True) if v.value in aliases.values() else v for v in values]
    loads: list[SSAValue] = []
    extra = [v for op in tail for v in op.operands if v not in inside]
    if bias is not None and not profile.fix_pipe:
        extra.insert(0, bias)
    if addend is not None:
        extra.insert(0, addend)
    for v in extra:
        if v in loads:
            continue
        loads.append(v)
        n = numel(v)
        kind_ = "one" if n == 1 else "col" if n == n_logical else "tile"
        values.append(EpiValue(v, kind_, element_bytes(v), True))
    beta = cube.props.float("beta") if isinstance(cube, ag.GemmOp) else 1.0
    return Epilogue(kind, result, compute, values, loads, list(outputs), bias, scale, addend, beta != 1.0, aliases=aliases)


# -------------------------------------------------------- multi-head attention


def attention_plan(
    profile: SocProfile, op: ag.MultiHeadAttentionOp, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue]
) -> Plan:
    """MultiHeadAttention as four phases of one kernel, joined by `sync_all`: the
    Q/K/V projections (bias added as by a matmul), the scores of every head, their
    softmax (times `scale`, plus the mask), and the probabilities times V. q, k, v
    and the scores and probabilities live in the workspace (in the input dtype)."""
    query, key, value = op.operands[:3]
    bsh = op.props.str("input_layout") == "BSH"
    (b, sq, kq), (_, sk, kk), (_, _, kv) = (
        (s[0], s[1], s[2]) if bsh else (s[1], s[0], s[2]) for s in (ag.shape_of(v.type) for v in (query, key, value))
    )
    heads = op.props.int("head_num")
    e, ev = ag.shape_of(op.operands[3].type)[1], ag.shape_of(op.operands[5].type)[1]
    din, dout = ag.dtype_of(query.type), ag.dtype_of(op.results[0].type)
    nd = ag.format_of(query.type) is None
    biases = op.operands[6:9] if len(op.operands) >= 9 else [None, None, None]
    mask = op.operands[-1] if len(op.operands) in (7, 10) else None
    gemms = [
        Gemm(1, b * sq, kq, e, din, din, a_nd=nd, b_nd=ag.format_of(op.operands[3].type) is None),
        Gemm(1, b * sk, kk, e, din, din, a_nd=nd, b_nd=ag.format_of(op.operands[4].type) is None),
        Gemm(1, b * sk, kv, ev, din, din, a_nd=nd, b_nd=ag.format_of(op.operands[5].type) is None),
        Gemm(b * heads, sq, e // heads, sk, din, din),
        Gemm(b * heads, sq, sk, ev // heads, din, dout, out_nd=ag.format_of(op.results[0].type) is None and profile.fix_pipe),
    ]
    names = ["q", "k", "v", "s", op.results[0]]
    cores = profile.ai_cores
    units = max(max(g.batch * -(-g.m // FRACTAL) * -(-g.n // FRACTAL) for g in gemms), b * heads * sq)
    block_dim = min(cores, units)
    in_b = max(1, formats.element_bits(din) // 8)

    def epilogue(stored: Hashable, bias: SSAValue | None, n: int, out_b: int) -> Epilogue:
        if profile.fix_pipe:
            return Epilogue("fix", stored, (), [], [], [stored], bias)
        values = [EpiValue(stored, "tile", out_b, True)]
        if bias is not None:
            values.append(EpiValue(bias, "col", element_bytes(bias), True))
        return Epilogue("vector", stored, (), values, [bias] if bias is not None else [], [stored], bias)

    epilogues = [epilogue(name, bias, g.n, g.out_bytes) for name, bias, g in zip(names, [*biases, None, None], gemms)]
    tilings = [
        tile_gemm(profile, g, block_dim, lambda m, n, e=ep: e.ub_bytes(profile, m, n), ep.bias is not None and profile.fix_pipe)
        for g, ep in zip(gemms, epilogues)
    ]
    rows = b * heads * sq
    soft_dim = min(block_dim, rows)
    block_rows = -(-rows // soft_dim)
    mask_elements = numel(mask) if mask is not None else 0

    def softmax_ub(r: int) -> int:
        row_bytes = aligned(profile, "UB", r * sk * in_b)
        stats = aligned(profile, "UB", r * ACC_BYTES) * 2
        masked = aligned(profile, "UB", min(mask_elements, r * sk) * in_b) if mask is not None else 0
        return 4 * row_bytes + stats + masked

    if softmax_ub(1) > profile.ub_bytes:
        raise ModelError(f"MultiHeadAttention '{op.label}': a row of {sk} scores does not fit {profile.name}'s UB")
    tile_rows = max(r for r in range(1, block_rows + 1) if softmax_ub(r) <= profile.ub_bytes)
    workspace = (b * sq * e + b * sk * (e + ev) + 2 * rows * sk) * in_b
    tiling: dict[str, int] = {"heads": heads, "softmax_rows": rows, "softmax_row": sk, "softmax_tile_rows": tile_rows}
    for prefix, g, t in zip(("q_", "k_", "v_", "score_", "context_"), gemms, tilings):
        tiling.update(t.params(g, prefix))

    def softmax(prog: Program, gm: dict[Hashable, SSAValue]) -> Ops:
        s_ub, p_ub = prog.pair("UB", tile_rows * sk * in_b), prog.pair("UB", tile_rows * sk * in_b)
        stats = prog.alloc("UB", tile_rows * ACC_BYTES), prog.alloc("UB", tile_rows * ACC_BYTES)
        m_ub = prog.alloc("UB", min(mask_elements, tile_rows * sk) * in_b) if mask is not None else None
        d = dtype_name(din)

        def make(slot: int, r: int) -> Ops:
            ops: Ops = [WaitFlagOp("V", "MTE2", slot), copy(profile, gm["s"], s_ub[slot], r * sk * in_b)]
            if m_ub is not None and mask is not None:
                ops.append(copy(profile, gm[mask], m_ub, min(mask_elements, r * sk) * in_b))
            ops += [*sync("MTE2", "V", slot), WaitFlagOp("MTE3", "V", slot)]
            ops += vec("VMULS", f"{d}_{d}_{d}", r * sk, [s_ub[slot]], in_b)
            if m_ub is not None:
                ops += vec("VADD", f"{d}_{d}_{d}", r * sk, [s_ub[slot], m_ub], in_b)
            for instr, template in (("VCMAX", _U), ("VSUB", _B), ("VEXP", _U), ("VCADD", _U), ("VDIV", _B)):
                ops += vec(instr, template.format(d=d), r * sk, [p_ub[slot], s_ub[slot], stats[0]], in_b)
            ops += [SetFlagOp("V", "MTE2", slot), *sync("V", "MTE3", slot), copy(profile, p_ub[slot], gm["p"], r * sk * in_b)]
            return body(ops + [SetFlagOp("MTE3", "V", slot)])

        return double_buffered(*split(block_rows, tile_rows), make, [("V", "MTE2", 0), ("MTE3", "V", 0)])

    def program(gm: dict[SSAValue, SSAValue], ws: SSAValue | None) -> Ops:
        assert ws is not None
        where: dict[Hashable, SSAValue] = {**gm, "q": ws, "k": ws, "v": ws, "s": ws, "p": ws}
        operands = [(gm[query], gm[op.operands[3]]), (gm[key], gm[op.operands[4]]), (gm[value], gm[op.operands[5]]), (ws, ws), (ws, ws)]

        def phase(make: Callable[[Program], Ops]) -> LoopOp:
            """A phase holds its own buffers: a loop of one trip, so they end with it."""
            prog = Program(profile)
            ops = make(prog)
            return LoopOp(1, [*prog.allocs, *ops])

        def matmul(i: int) -> LoopOp:
            return phase(lambda prog: cube_program(prog, gemms[i], tilings[i], epilogues[i], where, *operands[i], None))

        return [
            ScalarOp(SETUP_INSTRS), matmul(0), matmul(1), matmul(2), SyncAllOp(), matmul(3), SyncAllOp(),
            phase(lambda prog: softmax(prog, where)), SyncAllOp(), matmul(4),
        ]

    return Plan(block_dim, "AiCore", tiling, workspace, program)
